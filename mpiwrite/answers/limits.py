"""Why this number: what limited a run, per node, with the evidence in numbers
(docs/measurement.md, "Why this number").

Each node of each good iteration gets one limit (vocab/limits.py), tried in this order; the
first whose evidence holds is the node's:

1. the page cache: a network client's node wrote faster than its link can carry: above 1.15x
   its nominal rate, or 2x what the network check measured (a measured ceiling is what the
   link carried at least: a loaded node measures less); the data did not all leave the node
   in the timed interval;
2. the node's link: its rate is at least 70 % of that ceiling;
3. one storage target: `show --by target` names a target slower than the others beyond noise
   and this node's ranks wrote to it (the ranks on it are named);
4. dirty throttling: the writers spent at least a quarter of their samples in
   balance_dirty_pages, more than in any other wait;
5. the writer: the ranks were running (copying into memory) at least 60 % of their samples:
   their own work is the limit (the client's CPU where it took 3/4 of the node's cores or
   more: ranks that crowd the cores are runnable, not running, part of the time);
6. the client's CPU: the client's own processes (a FUSE daemon, Lustre's threads) waited for
   a CPU at least as long as they ran and for at least a fifth of the timed phase (a
   cgroup's quota, cores taken by others), or the node's cores were at least 90 % busy while
   the writers were on or waiting for a CPU at least 30 % of their samples (busy cores do not
   hold writers asleep on the storage);
7. the storage: the writers waited mostly for the device or the servers (writeback, the
   client's network or FUSE requests), none singled out;
8. no single limit.

A confidence goes with each: high where the evidence is well past its threshold, medium near
it, low where the wait samples are few (fewer than 20 a rank).  The run's limit is the one most
of its nodes met over its good iterations; a node whose limit differs is named.  Records are
untrusted: each figure read is checked (finite, in range) and a missing one makes its test
silent, not wrong.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import Any, Dict, List, Optional

import numpy as np

from mpiwrite.answers import netcheck, targets, waits
from mpiwrite.formats.summary import node_totals
from mpiwrite.text import printable
from mpiwrite.units import finite
from mpiwrite.vocab import limits as L
from mpiwrite.vocab import waits as W
from mpiwrite.vocab.status import Status

OK = int(Status.OK)
# under a table with a limit column (report --limits, the page)
NOTE = ("limit: what limited most of the row's runs, and how many ('?': low confidence); "
        "`mpiwrite show RUN` gives each run's evidence (docs/measurement.md, \"Why this "
        "number\")")
HIGH, MEDIUM, LOW = "high", "medium", "low"
FEW_SAMPLES = 20


def _ib_MB(rate: Any) -> Optional[float]:
    """An InfiniBand port's rate file ("100 Gb/sec (4X EDR)") in MB/s."""
    m = re.match(r"\s*([0-9.]+)\s*Gb/sec", str(rate or ""))
    return float(m.group(1)) * 1e3 / 8 if m and finite(m.group(1)) else None


def ceiling_of(rec, node: int, measured: List[Optional[float]]) -> tuple:
    """(MB/s, how it is known) of a node's link: the network check's measure, else the fastest
    active InfiniBand port of its facts; (None, "") where neither is known."""
    if node < len(measured) and measured[node] is not None and measured[node] > 0:
        return measured[node], "measured"
    facts = rec.nodes[node] if node < len(rec.nodes) else {}
    ports = [_ib_MB(p.get("rate")) for p in (facts.get("infiniband") or [])
             if isinstance(p, dict) and "ACTIVE" in str(p.get("state", "ACTIVE")).upper()]
    ports = [p for p in ports if p]
    return (max(ports), "nominal InfiniBand") if ports else (None, "")


def _client_local(rec, node: int) -> bool:
    from mpiwrite.clients import registry

    facts = rec.nodes[node] if node < len(rec.nodes) else {}
    fs = facts.get("fs") if isinstance(facts.get("fs"), dict) else None
    try:
        client = registry.for_fs(fs) if fs else None
    except (KeyError, TypeError, ValueError):
        client = None
    return bool(getattr(client, "local", False)) if client is not None else False


def _own_cpu(counters, it: int, node: int) -> tuple:
    """(CPU seconds, seconds waiting for a CPU) of the node's client processes in iteration
    `it`; (None, None) where not measured."""
    for row in counters or ():
        if row.get("iteration") != it or row.get("node") != node:
            continue
        own = (row.get("delta") or {}).get("client_cpu")
        if not isinstance(own, dict):
            return None, None
        ran = finite(own.get("seconds"))
        got = own.get("waited")
        waited = (sum(v for v in (finite(x) for x in got.values()) if v is not None and v >= 0)
                  if isinstance(got, dict) else None)
        return (ran if ran is not None and ran >= 0 else None), waited
    return None, None


def _ranks_cores(mine: np.ndarray, span: float) -> Optional[float]:
    """Cores the node's ranks used over its timed span: their CPU seconds over it."""
    cpu = mine["cpu_user_seconds"] + mine["cpu_system_seconds"]
    cpu = cpu[np.isfinite(cpu)]
    return float(cpu.sum()) / span if len(cpu) and span > 0 else None


def _cores(rec, node: int) -> Optional[int]:
    got = (rec.nodes[node] if node < len(rec.nodes) else {}).get("cores")
    return got if type(got) is int and 0 < got < 1 << 20 else None


def _node_verdict(rate: float, span: float, ceiling, how: str, local: bool, buffered: bool,
                  shares: Optional[Dict[str, float]], samples: int, busy: Optional[float],
                  own: tuple, on_slow: List[str], slow_text: str,
                  ranks_cores: Optional[float] = None, cores: Optional[int] = None
                  ) -> Dict[str, Any]:
    def out(limit, confidence, evidence):
        if samples and samples < FEW_SAMPLES and confidence == HIGH:
            confidence = MEDIUM
        return {"limit": limit, "confidence": confidence, "evidence": evidence}

    # a measured ceiling is what the link carried at least (a loaded node measures less):
    # only a rate far above it says the data stayed; a nominal rate is the link's most
    above = 2.0 if how == "measured" else 1.15
    if not local and ceiling and rate > above * ceiling:
        return out(L.CACHE, HIGH if buffered else MEDIUM,
                   f"{rate:.1f} MB/s is {rate / ceiling:.1f}x its link's ceiling of "
                   f"{ceiling:.1f} MB/s ({how}): the data did not all leave the node")
    if not local and ceiling and rate >= 0.7 * ceiling:
        return out(L.LINK, HIGH if rate >= 0.85 * ceiling else MEDIUM,
                   f"{rate:.1f} MB/s, {rate / ceiling:.0%} of its link's ceiling of "
                   f"{ceiling:.1f} MB/s ({how})" + (
                       "; above it: the check measured less than the link carries"
                       if rate > ceiling else ""))
    if on_slow:
        return out(L.TARGET, HIGH, slow_text)
    if shares:
        waiting = {c: v for c, v in shares.items() if c != W.RUNNING}
        main = max(waiting, key=waiting.get)
        if main == W.DIRTY and waiting[main] >= 0.25:
            return out(L.DIRTY, HIGH if waiting[main] >= 0.5 else MEDIUM,
                       f"the writers spent {waiting[main]:.0%} of their time in "
                       f"balance_dirty_pages")
        used = f"; they used {ranks_cores:.2f} of its {cores} cores" if ranks_cores else ""
        # 3/4 of the cores: the writers' share when they crowd them (4 ranks on 2 cores
        # used 1.53, each runnable, not running, part of the time)
        if shares[W.RUNNING] >= 0.6 and ranks_cores and cores and ranks_cores >= 0.75 * cores:
            return out(L.CPU, HIGH if shares[W.RUNNING] >= 0.8 else MEDIUM,
                       f"the writers were running {shares[W.RUNNING]:.0%} of their samples"
                       f"{used}: their own work filled the node's cores")
        if shares[W.RUNNING] >= 0.6:
            return out(L.WRITER, HIGH if shares[W.RUNNING] >= 0.8 else MEDIUM,
                       f"the writers were running {shares[W.RUNNING]:.0%} of their samples "
                       f"(copying into memory){used}")
    ran, waited = own
    if ran is not None and waited is not None and span > 0 and waited >= ran \
            and waited >= 0.2 * span:
        return out(L.CPU, HIGH if waited >= 0.5 * span else MEDIUM,
                   f"the client's own processes' threads waited {waited:.2f} s in all for a "
                   f"CPU and ran {ran:.2f} s, in a {span:.2f} s timed phase (a CPU quota, or "
                   "cores taken by others)")
    # busy cores limit the run only where its writers wanted one: on a CPU or waiting for
    # one (both sampled as R), not while they slept on the storage
    wanted = shares[W.RUNNING] if shares else None
    if busy is not None and busy >= 0.9 and (wanted is None or wanted >= 0.3):
        return out(L.CPU, HIGH if busy >= 0.97 and wanted is not None else MEDIUM,
                   f"the node's cores were {busy:.0%} busy over the timed phase"
                   + (f"; the writers on or waiting for a CPU {wanted:.0%} of their samples"
                      if wanted is not None else ""))
    if shares:
        storage = sum(shares[c] for c in (W.WRITEBACK, W.NETWORK, W.FUSE))
        if storage >= 0.5:
            parts = ", ".join(f"{c} {shares[c]:.0%}" for c in (W.WRITEBACK, W.NETWORK, W.FUSE)
                              if shares[c] >= 0.05)
            return out(L.STORAGE, MEDIUM if storage >= 0.7 else LOW,
                       f"the writers waited for the storage: {parts}")
    return out(L.NONE, LOW, "no test's evidence held" if shares else
               "no wait samples, and no other test's evidence held")


def _slow_targets(rec, good: List[int]) -> tuple:
    """({rank: [slow targets it wrote to]}, the evidence) over the good iterations."""
    try:
        rows, _notes = targets.by_target(rec, iterations=good)
    except (KeyError, TypeError, ValueError, IndexError):
        return {}, ""
    slow = [r for r in rows if r.get("verdict") == "slow"]
    if not slow:
        return {}, ""
    ranks: Dict[int, List[str]] = {}
    for r in slow:
        for rank in r["ranks"]:
            ranks.setdefault(int(rank), []).append(str(r["target"]))
    others = [r["mean_MB_per_s"] for r in rows if r.get("verdict") != "slow"]
    text = "; ".join(
        f"target {printable(r['target'])}: its files {r['mean_MB_per_s']:.1f} MB/s"
        + (f" against {float(np.mean(others)):.1f} for the others" if others else "")
        + (f" ({r['change_pct']:+.0f}%, p {r['p_value']:.2g})" if "p_value" in r else "")
        for r in slow)
    return ranks, text


def of_iteration(rec, it: int, slow_ranks: Dict[int, List[str]], slow_text: str
                 ) -> List[Dict[str, Any]]:
    """One verdict per node of iteration `it` (the record's node order)."""
    rows = rec.ranks[(rec.ranks["iteration"] == it)]
    if not len(rows):
        return []
    p = rec.params()
    buffered = not p.get("direct")
    measured = netcheck.ceilings(rec)
    per_rank = waits.per_rank(rec, it)
    counts = waits.entries(rec, it)
    counters = getattr(rec, "client_counters", None) or []
    out = []
    for n in node_totals(rows):
        node = int(n["node"])
        mine = rows[rows["node"] == node]
        rate = float(n["MB_per_s"])
        if not math.isfinite(rate) or rate <= 0:
            continue
        span = float(n["bytes"]) / (rate * 1e6)
        ceiling, how = ceiling_of(rec, node, measured)
        got = [per_rank[int(r)] for r in mine["rank"] if int(r) < len(per_rank)
               and per_rank[int(r)] is not None]
        shares = ({c: float(np.mean([s[c] for s in got])) for c in W.CLASSES}
                  if got else None)
        samples = min((counts[int(r)]["n"] for r in mine["rank"] if int(r) < len(counts)
                       and counts[int(r)] is not None), default=0)
        busy = finite(mine["node_cpu_busy"][0]) if len(mine) else None
        on_slow = sorted({t for r in mine["rank"] for t in slow_ranks.get(int(r), [])})
        text = (slow_text + "; this node's rank(s) "
                + ", ".join(str(int(r)) for r in mine["rank"] if int(r) in slow_ranks)
                + " wrote to it") if on_slow else ""
        verdict = _node_verdict(rate, span, ceiling, how, _client_local(rec, node), buffered,
                                shares, samples, busy if busy is None or 0 <= busy <= 1.5
                                else None, _own_cpu(counters, it, node), on_slow, text,
                                _ranks_cores(mine, span), _cores(rec, node))
        verdict.update(node=node, iteration=it, MB_per_s=round(rate, 3),
                       ceiling_MB_per_s=None if ceiling is None else round(ceiling, 3))
        out.append(verdict)
    return out


def of_record(rec) -> Optional[Dict[str, Any]]:
    """The run's limit: {limit, confidence, evidence, nodes: [per node], differ: [hosts],
    ranks: [ranks on a slow target], try: [tunables], advice}; None without good iterations
    or per-rank rows (an imported run)."""
    memo = rec.__dict__.get("_limits")
    if memo is not None:
        return memo or None
    its = rec.iterations
    good = [int(i) for i, s in zip(its["iteration"], its["status"]) if int(s) == OK]
    if not good or not len(rec.ranks):
        rec.__dict__["_limits"] = {}
        return None
    slow_ranks, slow_text = _slow_targets(rec, good)
    per_node: Dict[int, List[Dict[str, Any]]] = {}
    for it in good:
        for v in of_iteration(rec, it, slow_ranks, slow_text):
            per_node.setdefault(v["node"], []).append(v)
    if not per_node:
        rec.__dict__["_limits"] = {}
        return None
    hosts = [printable(n.get("host")) for n in rec.nodes]
    nodes = []
    for node, verdicts in sorted(per_node.items()):
        limit = Counter(v["limit"] for v in verdicts).most_common(1)[0][0]
        mine = [v for v in verdicts if v["limit"] == limit]
        last = mine[-1]
        confidence = last["confidence"] if len(mine) == len(verdicts) else (
            MEDIUM if last["confidence"] == HIGH else LOW)
        nodes.append({"node": node, "host": hosts[node] if node < len(hosts) else str(node),
                      "limit": limit, "confidence": confidence,
                      "iterations": f"{len(mine)}/{len(verdicts)}",
                      "evidence": printable(last["evidence"]),
                      "MB_per_s": last["MB_per_s"], "ceiling_MB_per_s": last["ceiling_MB_per_s"]})
    limit = Counter(n["limit"] for n in nodes).most_common(1)[0][0]
    first = next(n for n in nodes if n["limit"] == limit)
    confs = [n["confidence"] for n in nodes if n["limit"] == limit]
    confidence = HIGH if all(c == HIGH for c in confs) else (LOW if LOW in confs else MEDIUM)
    got = {"limit": limit, "confidence": confidence,
           "evidence": f"{first['host']}: {first['evidence']}",
           "nodes": nodes,
           "differ": [n["host"] for n in nodes if n["limit"] != limit],
           "ranks": sorted(slow_ranks),
           "advice": L.ADVICE[limit]}
    got["try"] = tunables_for(rec, limit)
    rec.__dict__["_limits"] = got
    return got


def tunables_for(rec, limit: str) -> List[str]:
    """The run's client's catalogue tunables that act on `limit`."""
    from mpiwrite.clients import registry

    fs = rec.nodes[0].get("fs") if rec.nodes and isinstance(rec.nodes[0].get("fs"), dict) \
        else None
    try:
        client = registry.for_fs(fs) if fs else None
    except (KeyError, TypeError, ValueError):
        return []
    from mpiwrite.clients.tunables import acting_on

    return [t.name for t in acting_on(getattr(client, "tunables", None) or {}, limit)]


def lines(rec) -> List[str]:
    """What `show` says: the run's limit and its evidence, the nodes whose limit differs, and
    what to try."""
    got = of_record(rec)
    if got is None:
        return []
    out = [f"limit: {got['limit']} ({got['confidence']} confidence): {got['evidence']}"]
    if len(got["nodes"]) > 1:
        same = [n["host"] for n in got["nodes"] if n["limit"] == got["limit"]]
        out.append(f"  on {len(same)} of {len(got['nodes'])} nodes"
                   + ("" if not got["differ"] else "; differ: " + "; ".join(
                       f"{n['host']}: {n['limit']} ({n['confidence']}): {n['evidence']}"
                       for n in got["nodes"] if n["limit"] != got["limit"])))
    if got["ranks"]:
        shown = ", ".join(map(str, got["ranks"][:8])) + (" ..." if len(got["ranks"]) > 8 else "")
        out.append(f"  rank(s) on the slow target: {shown}")
    tried = ", ".join(got["try"]) if got["try"] else "none in the client's catalogue"
    out.append(f"  to try: {got['advice']}; tunables: {tried}"
               + (" (`mpiwrite tune plan TARGET --from RECORD`)" if got["try"] else ""))
    return out


def row_verdicts(members) -> List[Dict[str, Any]]:
    """Each run's limit for a report row: its id, limit, confidence, evidence and the hosts
    whose limit differs; a run without a verdict (imported) says none."""
    out = []
    for r in members:
        got = of_record(r)
        out.append({"run_id": str(r.run_id), "limit": got["limit"] if got else None,
                    "confidence": got["confidence"] if got else None,
                    "evidence": got["evidence"] if got else "no per-rank figures",
                    "differ": got["differ"] if got else []})
    return out


def cell(r: Dict[str, Any]) -> str:
    """The most common limit of a row's runs and how many of them met it ("link 3/3"); '?'
    where its runs' confidence was low."""
    named = [x for x in r.get("limits", []) if x["limit"]]
    if not named:
        return "-"
    top, n = Counter(x["limit"] for x in named).most_common(1)[0]
    low = any(x["confidence"] == "low" for x in named if x["limit"] == top)
    return f"{top}{'?' if low else ''} {n}/{len(r['limits'])}"
