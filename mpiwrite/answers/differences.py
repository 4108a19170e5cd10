"""What else differs between two groups of runs: every run key and node fact whose values
differ, then what the clients did differently, from their counters (Lustre's write RPC size,
ceph-fuse's OSD ops, blocked writes and write() time) and the nodes' CPUs.  `compare` lists
them under "also different between A and B"; they answer "is there some other parameter?".
"""

from __future__ import annotations

import math
from typing import Dict, List

import numpy as np

from mpiwrite.vocab.keys import IDENTITY, LABEL, kind, outcome_keys, relevance

NOT_DIFFERENCES = ("run_id", "status", "start_time", "host", "iterations", "size", "time_limit")
DIFFERENCES_SHOWN = 12


def differing_facts(a_runs, b_runs, keys_of) -> Dict[str, Dict[str, List[str]]]:
    """Every run key and node fact whose values differ between the two sides ({key: {"a":
    values, "b": values}}), settings before what the client did: the answer to "is there
    some other parameter to play with?"."""
    def values(runs):
        out: Dict[str, set] = {}
        for r in runs:
            for k, v in keys_of(r).items():
                out.setdefault(k, set()).add(str(v))
        return out

    va, vb = values(a_runs), values(b_runs)
    diff = {}
    # what plausibly changes a write rate first, volatile identifiers last; outcomes (a
    # time-limited run's bytes) and labels (a study's point, a job id) are no difference
    outcomes = {k for r in list(a_runs) + list(b_runs) for k in outcome_keys(keys_of(r))}
    for k in sorted(set(va) | set(vb), key=relevance):
        if k in NOT_DIFFERENCES or k.startswith("software.") and k != "software.mpiwrite":
            continue
        if k in outcomes or kind(k) in (LABEL, IDENTITY):
            continue
        a, b = va.get(k, {"-"}), vb.get(k, {"-"})
        if a != b:
            diff[k] = {"a": sorted(a)[:8], "b": sorted(b)[:8]}
    for k in [k for k in diff if k.startswith("tag.") and diff.get(k[4:]) == diff[k]]:
        del diff[k]  # tag.NAME, the alias of tag NAME: said once
    rpc = {"a": _rpc_size(a_runs), "b": _rpc_size(b_runs)}  # what the client did
    if all(v == v and v > 0 for v in rpc.values()) and abs(rpc["a"] / rpc["b"] - 1) > 0.1:
        diff["client write RPC size (bytes per RPC, from its counters)"] = {
            "a": [f"{rpc['a']:.0f}"], "b": [f"{rpc['b']:.0f}"]}
    diff.update(_ceph_differences(_ceph_sums(a_runs), _ceph_sums(b_runs)))
    cpu = {"a": _busy(a_runs), "b": _busy(b_runs)}
    if all(v == v for v in cpu.values()) and abs(cpu["a"] - cpu["b"]) > 0.1:
        diff["client CPU busy (mean of iterations' node maximum)"] = {
            "a": [f"{cpu['a']:.0%}"], "b": [f"{cpu['b']:.0%}"]}
    return diff


def _rpc_size(runs) -> float:
    """Bytes per write RPC over the client counter deltas of the runs (Lustre osc, NFS
    WRITE ops), or NaN when the client does not count RPCs (ceph-fuse's OSD write ops are
    named in words of their own: _ceph_differences)."""
    nbytes = rpcs = 0
    for r in runs:
        for row in getattr(r, "client_counters", None) or []:
            d = row.get("delta") or {}
            if d.get("kind") == "ceph":
                continue
            b, n = d.get("write_bytes"), d.get("write_rpcs")
            if isinstance(b, (int, float)) and isinstance(n, (int, float)) and n > 0:
                nbytes, rpcs = nbytes + b, rpcs + n
    return nbytes / rpcs if rpcs else float("nan")


CEPH_OP_SIZE = "client bytes per OSD write op (ceph objecter, from its counters)"
CEPH_BLOCKED = "client writes blocked on the dirty limit (ceph object cacher, share of bytes)"
CEPH_WRLAT = "client write() time inside ceph-fuse (mean of its wrlat counter)"


def _ceph_sums(runs) -> Dict[str, float]:
    """Sums over the runs' ceph-fuse counter deltas: bytes sent and OSD write ops, bytes into
    the object cacher and those blocked on its dirty limit, write() count and seconds."""
    out = dict.fromkeys(("sent", "ops", "written", "blocked", "writes", "write_s"), 0.0)
    for r in runs:
        for row in getattr(r, "client_counters", None) or []:
            d = row.get("delta") or {}
            if d.get("kind") != "ceph":
                continue
            obj, oc, cl = (d.get(k) if isinstance(d.get(k), dict) else {}
                           for k in ("objecter", "objectcacher", "client"))
            wrlat = cl.get("wrlat") if isinstance(cl.get("wrlat"), dict) else {}
            for key, v in (("sent", obj.get("op_send_bytes")), ("ops", obj.get("op_w")),
                           ("written", oc.get("data_written")),
                           ("blocked", oc.get("write_bytes_blocked")),
                           ("writes", wrlat.get("avgcount")), ("write_s", wrlat.get("sum"))):
                if isinstance(v, (int, float)) and not isinstance(v, bool) and v == v \
                        and 0 <= v < math.inf:
                    out[key] += v
    return out


def _ceph_differences(a: Dict[str, float], b: Dict[str, float]) -> Dict[str, Dict]:
    """What ceph-fuse did differently between the sides: the size of its OSD write ops
    (write-back cache: whole objects; write-through, client_oc_max_dirty 0: each FUSE write),
    how much it held back on its dirty limit, and the time a write() spent inside it."""
    out: Dict[str, Dict] = {}
    if a["ops"] and b["ops"]:
        sa, sb = a["sent"] / a["ops"], b["sent"] / b["ops"]
        if sa > 0 and sb > 0 and abs(sa / sb - 1) > 0.1:
            out[CEPH_OP_SIZE] = {"a": [f"{sa:.0f}"], "b": [f"{sb:.0f}"]}
    if a["written"] and b["written"]:
        fa, fb = a["blocked"] / a["written"], b["blocked"] / b["written"]
        if abs(fa - fb) > 0.05:
            out[CEPH_BLOCKED] = {"a": [f"{fa:.0%}"], "b": [f"{fb:.0%}"]}
    if a["writes"] and b["writes"]:
        la, lb = a["write_s"] / a["writes"], b["write_s"] / b["writes"]
        if la > 0 and lb > 0 and abs(la / lb - 1) > 0.1:
            out[CEPH_WRLAT] = {"a": [f"{la * 1e3:.3g} ms"], "b": [f"{lb * 1e3:.3g} ms"]}
    return out


def _busy(runs) -> float:
    vals = [float(v) for r in runs if "node_cpu_busy_max" in (r.iterations.dtype.names or ())
            for v in r.iterations["node_cpu_busy_max"] if v == v]
    return float(np.mean(vals)) if vals else float("nan")
