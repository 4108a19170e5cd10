"""The ceph-fuse client: as any FUSE client, plus what its admin socket answers (clients/ceph.py:
the running client's version, entity, config; `perf dump` counters around the timed phase),
and what `compare` says about it: the size of its OSD write ops, the share of its bytes held
back on its dirty limit, and the time a write() spends inside it."""

from __future__ import annotations

import math
from typing import Any, Dict, List, Optional

from mpiwrite.clients.base import ms, number, per, size_text
from mpiwrite.clients.fuse import Fuse, binary, is_fuse, subtype

OP_SIZE = "client bytes per OSD write op (ceph objecter, from its counters)"
BLOCKED = "client writes blocked on the dirty limit (ceph object cacher, share of bytes)"
WRLAT = "client write() time inside ceph-fuse (mean of its wrlat counter)"


class CephFuse(Fuse):
    name = "ceph-fuse"
    catalogue = ("CEPH_FUSE",)
    kind = "ceph"
    volatile = Fuse.volatile + ("admin_socket", "global_id")  # its socket's path, session id

    def matches(self, fstype: str, source: Optional[str] = None) -> bool:
        return is_fuse(fstype) and binary(subtype(fstype, source)) == "ceph-fuse"

    def snapshot(self, sysroot: str, fs: Dict[str, Any],
                 client: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
        from mpiwrite.clients import ceph

        return {"kind": "ceph", "data": ceph.counters(sysroot, client or {})}

    def counter_delta(self, before: Dict[str, Any], after: Dict[str, Any]) -> Dict[str, Any]:
        from mpiwrite.clients import ceph

        return ceph.counter_delta(before, after)

    def describe(self, client: Dict[str, Any]) -> List[str]:
        lines = super().describe(client)
        if client.get("admin_socket"):  # what its admin socket said
            lines.append(f"  {client.get('entity') or 'client ?'} (global id "
                         f"{client.get('global_id')}) of fs {client.get('fs_name')}, admin "
                         f"socket {client['admin_socket']} ({client.get('admin_socket_source')})")
            config = client.get("config") or {}
            if config:
                lines.append("  config " + ", ".join(f"{k}={v}" for k, v in config.items()))
        return lines

    def counter_text(self, d: Dict[str, Any]) -> str:
        """What it sent in how many OSD write ops, its cache (blocked writes) and its
        write/fsync latency."""
        if number(d.get("write_bytes")) is None:
            return super().counter_text(d)
        obj, oc, cl = (d.get(k) if isinstance(d.get(k), dict) else {}
                       for k in ("objecter", "objectcacher", "client"))
        blocked = number(oc.get("write_ops_blocked"))
        ops = number(obj.get("op_w"))
        from mpiwrite.units import format_number

        return (f"ceph: sent {size_text(d['write_bytes'])} in "
                f"{'?' if ops is None else int(ops)} OSD write ops"
                f"{per(d['write_bytes'], obj.get('op_w'), 'op')}; cache: "
                f"{size_text(oc.get('data_written'))} written, "
                f"{size_text(oc.get('data_flushed'))} flushed, "
                f"{'?' if blocked is None else int(blocked)} writes blocked on the dirty limit "
                f"({size_text(oc.get('write_bytes_blocked'))}, "
                f"{format_number(number(oc.get('write_time_blocked')) or 0.0, 3)} s); "
                f"{_latency(cl.get('wrlat'), 'write()')}, {_latency(cl.get('fsync'), 'fsync')}")

    def differences(self, a_runs, b_runs) -> Dict[str, Dict[str, List[str]]]:
        """Its OSD write op size (write-back cache: whole objects; write-through,
        client_oc_max_dirty 0: each FUSE write), how much it held back on its dirty limit,
        and the time a write() spent inside it."""
        a, b = _sums(a_runs), _sums(b_runs)
        out: Dict[str, Dict[str, List[str]]] = {}
        if a["ops"] and b["ops"]:
            sa, sb = a["sent"] / a["ops"], b["sent"] / b["ops"]
            if sa > 0 and sb > 0 and abs(sa / sb - 1) > 0.1:
                out[OP_SIZE] = {"a": [f"{sa:.0f}"], "b": [f"{sb:.0f}"]}
        if a["written"] and b["written"]:
            fa, fb = a["blocked"] / a["written"], b["blocked"] / b["written"]
            if abs(fa - fb) > 0.05:
                out[BLOCKED] = {"a": [f"{fa:.0%}"], "b": [f"{fb:.0%}"]}
        if a["writes"] and b["writes"]:
            la, lb = a["write_s"] / a["writes"], b["write_s"] / b["writes"]
            if la > 0 and lb > 0 and abs(la / lb - 1) > 0.1:
                out[WRLAT] = {"a": [f"{la * 1e3:.3g} ms"], "b": [f"{lb * 1e3:.3g} ms"]}
        return out

    def targets(self, path: str) -> Optional[Dict[str, Any]]:
        from mpiwrite.clients import targets

        return targets.pool_of(path)


def _latency(row, what: str) -> str:
    """'512 x 2.35 ms' from a ceph {avgcount, sum} delta."""
    row = row if isinstance(row, dict) else {}
    count, total = number(row.get("avgcount")), number(row.get("sum"))
    if not count or total is None:
        return f"{what} -"
    return f"{what} {int(count)} x {ms(total / count)}"


def _sums(runs) -> Dict[str, float]:
    """Sums over the runs' ceph-fuse counter deltas: bytes sent and OSD write ops, bytes into
    the object cacher and those blocked on its dirty limit, write() count and seconds."""
    out = dict.fromkeys(("sent", "ops", "written", "blocked", "writes", "write_s"), 0.0)
    for r in runs:
        for row in getattr(r, "client_counters", None) or []:
            d = row.get("delta") or {}
            if d.get("kind") != CephFuse.kind:
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


CLIENT = CephFuse()
