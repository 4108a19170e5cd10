"""What else differs between two groups of runs: every run key and node fact whose values
differ, then what the clients did differently, from their counters (Lustre's write RPC size,
ceph-fuse's OSD ops, blocked writes and write() time) and the nodes' CPUs.  `compare` lists
them under "also different between A and B"; they answer "is there some other parameter?".
"""

from __future__ import annotations

from typing import Dict, List

import numpy as np

from mpiwrite.clients import registry
from mpiwrite.vocab.keys import IDENTITY, LABEL, TABLE, kind, outcome_keys, relevance

# a run's own name and state, its hosts, and how much it measured (the key table's)
NOT_DIFFERENCES = tuple(k.name for k in TABLE if k.kind == IDENTITY) + ("host",) + tuple(
    k.name for k in TABLE if k.amount)
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
    for client in registry.every():  # what each client did differently, in its words
        diff.update(client.differences(a_runs, b_runs))
    cpu = {"a": _busy(a_runs), "b": _busy(b_runs)}
    if all(v == v for v in cpu.values()) and abs(cpu["a"] - cpu["b"]) > 0.1:
        diff["client CPU busy (mean of iterations' node maximum)"] = {
            "a": [f"{cpu['a']:.0%}"], "b": [f"{cpu['b']:.0%}"]}
    return diff


def _rpc_size(runs) -> float:
    """Bytes per write RPC over the client counter deltas of the runs (Lustre osc, NFS
    WRITE ops), or NaN when the client does not count RPCs (ceph-fuse's OSD write ops are
    named in words of their own: its Client.differences)."""
    nbytes = rpcs = 0
    for r in runs:
        for row in getattr(r, "client_counters", None) or []:
            d = row.get("delta") or {}
            if not registry.for_kind(d.get("kind")).rpc_counters:
                continue
            b, n = d.get("write_bytes"), d.get("write_rpcs")
            if isinstance(b, (int, float)) and isinstance(n, (int, float)) and n > 0:
                nbytes, rpcs = nbytes + b, rpcs + n
    return nbytes / rpcs if rpcs else float("nan")


def _busy(runs) -> float:
    vals = [float(v) for r in runs if "node_cpu_busy_max" in (r.iterations.dtype.names or ())
            for v in r.iterations["node_cpu_busy_max"] if v == v]
    return float(np.mean(vals)) if vals else float("nan")
