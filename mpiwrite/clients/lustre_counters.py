"""What the Lustre client did during the timed phase: counter snapshots and their differences.

Node leaders call `counters(reader)` right before and right after the timed write phase (outside
the hot loop: one read of a few files per OSC) and store `counter_delta(before, after)`.

Formats (lprocfs_stats_seq_show, osc_rpc_stats_seq_show):
  osc/*/stats, llite/*/stats:
    snapshot_time             1700000000.123456789 secs.nsecs      (1.x-2.14: secs.usecs)
    write_bytes               256 samples [bytes] 1048576 1048576 268435456 281474976710656
    ost_write                 256 samples [usec] 2351 90112 3219200 64401254400
  osc/*/rpc_stats:
    snapshot_time:         1700000000.123456789 secs.nsecs
    write RPCs in flight: 0
    <blank>
    \t\t\tread\t\t\twrite
    pages per rpc         rpcs   % cum % |       rpcs   % cum %
    256:\t\t         0   0   0   |        256 100 100
  osc/*/cur_dirty_bytes, cur_grant_bytes, cur_lost_grant_bytes: one integer each.
"""

from __future__ import annotations

from typing import Any, Dict, Optional

from mpiwrite.clients.lustre import _devices
from mpiwrite.sysroot import Reader, to_int, to_number

GAUGES = ("cur_dirty_bytes", "cur_grant_bytes", "cur_lost_grant_bytes", "cur_dirty_grant_bytes")
STAT_FIELDS = ("min", "max", "sum", "sumsq")


def parse_stats(text: Optional[str]) -> Dict[str, Any]:
    """{'snapshot_time': 1.7e9, name: {'samples': n, 'unit': u, 'sum': s, ...}}."""
    out: Dict[str, Any] = {}
    for line in (text or "").splitlines():
        words = line.split()
        if len(words) < 2:
            continue
        if words[0] in ("snapshot_time", "start_time", "elapsed_time"):
            out[words[0]] = to_number(words[1])
        elif len(words) >= 3 and words[2] == "samples":
            row: Dict[str, Any] = {"samples": to_int(words[1])}
            rest = words[3:]
            if rest and rest[0].startswith("["):
                row["unit"] = rest[0].strip("[]")
                rest = rest[1:]
            row.update({k: to_int(v) for k, v in zip(STAT_FIELDS, rest)})
            out[words[0]] = row
    return out


def parse_rpc_stats(text: Optional[str]) -> Dict[str, Any]:
    """{'snapshot_time': t, 'gauges': {...}, 'pages per rpc': {'read': {'1': n}, 'write': ...},
    'rpcs in flight': ..., 'offset': ...}: the RPC counts of each histogram bucket."""
    out: Dict[str, Any] = {"gauges": {}}
    section: Optional[str] = None
    for line in (text or "").splitlines():
        if not line.strip():
            section = None
            continue
        if "|" in line and ":" in line.split("|")[0] and section:
            left, right = line.split("|", 1)
            key, _, counts = left.partition(":")
            r, w = counts.split(), right.split()
            hist = out.setdefault(section, {"read": {}, "write": {}})
            hist["read"][key.strip()] = to_int(r[0]) if r else None
            hist["write"][key.strip()] = to_int(w[0]) if w else None
        elif "rpcs" in line and "%" in line and "|" in line:
            # 'pages per rpc', 'rpcs in flight', 'offset': what stands before the columns
            section = line.split("|")[0].rsplit("rpcs", 1)[0].strip()
        elif ":" in line and section is None:
            key, _, value = line.partition(":")
            if key.strip() == "snapshot_time":
                out["snapshot_time"] = to_number(value.split()[0]) if value.split() else None
            elif value.strip() and "read" not in value and "write" not in value:
                out["gauges"][key.strip()] = to_int(value)
    return out


def counters(reader: Reader) -> Dict[str, Any]:
    """One snapshot of every OSC's stats, rpc_stats and dirty/grant bytes, and every llite's
    stats.  Not kept raw (it changes; the deltas are what the record stores)."""
    snap: Dict[str, Any] = {"osc": {}, "llite": {}}
    for dev, params in sorted(_devices(reader, "osc").items()):
        row: Dict[str, Any] = {}
        if "stats" in params:
            row["stats"] = parse_stats(reader.read(params["stats"], keep=False)[0])
        if "rpc_stats" in params:
            row["rpc_stats"] = parse_rpc_stats(reader.read(params["rpc_stats"], keep=False)[0])
        row["gauges"] = {g: to_int(reader.read(params[g], keep=False)[0])
                         for g in GAUGES if g in params}
        snap["osc"][dev] = row
    for dev, params in sorted(_devices(reader, "llite").items()):
        if "stats" in params:
            snap["llite"][dev] = {"stats": parse_stats(reader.read(params["stats"],
                                                                   keep=False)[0])}
    return snap


def _diff(a: Optional[int], b: Optional[int]) -> Optional[int]:
    """b - a; None when unknown or when the counter went backwards (reset, remount)."""
    if a is None or b is None or b < a:
        return None
    return b - a


def stats_delta(before: Dict[str, Any], after: Dict[str, Any]) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for name, row in after.items():
        if not isinstance(row, dict):
            continue
        old = before.get(name) or {"samples": 0, "sum": 0}
        d = {"samples": _diff(old.get("samples", 0), row.get("samples"))}
        if row.get("sum") is not None:
            d["sum"] = _diff(old.get("sum", 0), row.get("sum"))
        if row.get("unit"):
            d["unit"] = row["unit"]
        if d["samples"] != 0:
            out[name] = d
    return out


def rpc_delta(before: Dict[str, Any], after: Dict[str, Any]) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for section, hist in after.items():
        if section in ("gauges", "snapshot_time") or not isinstance(hist, dict):
            continue
        old = before.get(section) or {}
        for side in ("read", "write"):
            diffs = {k: _diff((old.get(side) or {}).get(k, 0), v)
                     for k, v in (hist.get(side) or {}).items()}
            diffs = {k: v for k, v in diffs.items() if v != 0}
            if diffs:
                out.setdefault(section, {})[side] = diffs
    return out


def counter_delta(before: Dict[str, Any], after: Dict[str, Any]) -> Dict[str, Any]:
    """What changed between two snapshots: per OSC and llite the stats that moved (samples and
    sum), the RPC histogram buckets that grew, the dirty/grant gauges before and after; and the
    node's totals `write_bytes` (OSC write_bytes, else llite) and `write_rpcs`."""
    out: Dict[str, Any] = {"osc": {}, "llite": {}}
    totals = {"osc": 0, "llite": 0, "rpcs": 0}
    seconds = None
    for kind in ("osc", "llite"):
        for dev, row in (after.get(kind) or {}).items():
            old = (before.get(kind) or {}).get(dev) or {}
            d: Dict[str, Any] = {"stats": stats_delta(old.get("stats") or {},
                                                      row.get("stats") or {})}
            wb = d["stats"].get("write_bytes", {}).get("sum")
            totals[kind] += wb or 0
            t0 = (old.get("stats") or {}).get("snapshot_time")
            t1 = (row.get("stats") or {}).get("snapshot_time")
            if seconds is None and t0 is not None and t1 is not None:
                seconds = t1 - t0
            if kind == "osc":
                d["rpc_stats"] = rpc_delta(old.get("rpc_stats") or {},
                                           row.get("rpc_stats") or {})
                writes = d["rpc_stats"].get("pages per rpc", {}).get("write", {})
                totals["rpcs"] += sum(v for v in writes.values() if v)
                d["gauges"] = {g: [(old.get("gauges") or {}).get(g), v]
                               for g, v in (row.get("gauges") or {}).items()}
            out[kind][dev] = d
    out["write_bytes"] = totals["osc"] if after.get("osc") else totals["llite"]
    out["write_rpcs"] = totals["rpcs"]
    out["seconds"] = seconds
    return out
