"""`show`'s line for --netcheck (run/parallel.Team.netcheck): each node's network ceiling,
the fastest it received over the pairings of the node leaders, beside its nominal InfiniBand
rate where the node facts have one.  The record is untrusted: a malformed entry is left out."""

from __future__ import annotations

import math
from typing import Any, Dict, List, Optional

from mpiwrite.units import finite


def _rates(node: Any) -> Optional[Dict[str, Dict[str, float]]]:
    if not isinstance(node, dict):
        return None
    out = {}
    for way in ("in",):
        got = node.get(way)
        if not isinstance(got, dict) or len(got) > 8 or not all(
                isinstance(k, str) and finite(v) is not None for k, v in got.items()):
            return None
        out[way] = {k[:8]: finite(v) for k, v in got.items()}
    return out


def ceilings(rec) -> List[Optional[float]]:
    """Per node (the record's node order), its measured ceiling in MB/s: the fastest it
    received over the pairings (a node's link is no slower than that); None where not
    measured."""
    got = rec._json("netcheck", None)
    if not isinstance(got, dict) or not isinstance(got.get("nodes"), list):
        return []
    out: List[Optional[float]] = []
    for node in got["nodes"][:len(rec.nodes) or 1 << 20]:
        rates = _rates(node)
        vals = [v for way in (rates or {}).values() for v in way.values() if math.isfinite(v)]
        out.append(max(vals) if vals else None)
    return out


def lines(rec) -> List[str]:
    got = rec._json("netcheck", None)
    tops = ceilings(rec)
    seconds = finite(got.get("seconds")) if isinstance(got, dict) else None
    if not tops:
        return []
    hosts = [str(n.get("host")) for n in rec.nodes]
    parts = []
    for i, top in enumerate(tops):
        host = hosts[i] if i < len(hosts) else f"node {i}"
        ib = [p.get("rate") for p in (rec.nodes[i].get("infiniband") or [])
              if isinstance(p, dict)] if i < len(rec.nodes) else []
        nominal = f" (InfiniBand {', '.join(str(r) for r in ib if r)})" if any(ib) else ""
        parts.append(f"{host} {top:.1f}{nominal}" if top is not None else f"{host} -")
    out = [f"network ceiling per node (MPI between the node leaders, "
           f"{'?' if seconds is None else format(seconds, 'g')}s): "
           + ", ".join(parts) + " MB/s"]
    if len(tops) == 2:
        out.append("  two nodes: each measured against the other only, so a slow link shows "
                   "on both")
    return out
