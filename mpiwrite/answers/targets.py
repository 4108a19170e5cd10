"""`show RUN --by target`: which storage target is slow (Lustre OSTs, GlusterFS bricks, a CephFS
pool), from each rank's rate and the targets that hold its file (facts/targets.py).

Ranks differ because their files land on different servers.  A rank whose file lies on one
target is that target's sample; per target: the ranks, bytes and rate min/mean/max, and a
verdict against all the other attributed ranks (Welch's t-test, as `compare`): a target whose
ranks are slower beyond noise is named slow.  What cannot be attributed is said: a file
striped over several targets (its rate is theirs together), one shared file, a target with a
single rank (no spread to test against), a record without layouts.  Targets are recorded for
the first iteration's files (later iterations' files may land elsewhere), so the figures are
that iteration's.
"""

from __future__ import annotations

from typing import Any, Dict, List, Tuple

import numpy as np

from mpiwrite import stats
from mpiwrite.facts.targets import targets_of
from mpiwrite.text import printable
from mpiwrite.units import format_size

ITERATION = 0  # the iteration whose files' targets are recorded


def by_target(rec, confidence: float = 0.95) -> Tuple[List[Dict[str, Any]], List[str]]:
    """(one row per target: target, ranks, bytes, min/mean/max MB/s, verdict), and notes on
    what could not be attributed."""
    notes: List[str] = []
    per_rank = {int(r["rank"]): targets_of(r.get("layout")) for r in rec.layouts
                if int(r.get("iteration", -1)) == ITERATION}
    if not per_rank or not any(per_rank.values()):
        return [], ["no storage targets recorded for this run (the client does not tell "
                    "which servers hold a file, or the record predates it)"]
    rows = rec.ranks[rec.ranks["iteration"] == ITERATION]
    rate = {int(r["rank"]): float(r["MB_per_s"]) for r in rows}
    size = {int(r["rank"]): int(r["bytes"]) for r in rows}
    if str(rec.params().get("layout")) == "shared":
        return [], [f"one shared file over {len(next(iter(per_rank.values())))} target(s): "
                    "every rank writes to all of them, so no rank's rate is one target's"]
    groups: Dict[str, List[int]] = {}
    striped = []
    for rank, names in sorted(per_rank.items()):
        if len(names) == 1 and np.isfinite(rate.get(rank, np.nan)):
            groups.setdefault(names[0], []).append(rank)
        elif len(names) > 1:
            striped.append(rank)
    if striped:
        notes.append(f"{len(striped)} rank(s) have files striped over several targets: their "
                     "rates are those targets' together and are left out")
    out = []
    for name, ranks in sorted(groups.items()):
        mine = [rate[r] for r in ranks]
        others = [rate[r] for n, rs in groups.items() if n != name for r in rs]
        row = {"target": name, "ranks": ranks, "bytes": sum(size.get(r, 0) for r in ranks),
               "min_MB_per_s": min(mine), "mean_MB_per_s": float(np.mean(mine)),
               "max_MB_per_s": max(mine)}
        if len(mine) < 2 or len(others) < 2:
            row["verdict"] = "cannot tell (needs 2 ranks here and 2 elsewhere)"
        else:
            c = stats.compare(others, mine, confidence)
            row.update(change_pct=c.pct, lo=c.pct_lo, hi=c.pct_hi, p_value=c.p_value)
            row["verdict"] = ("slow" if c.real and c.diff < 0 else
                              "fast" if c.real else "within noise")
        out.append(row)
    if len(out) == 1:
        notes.append("every attributed rank's file is on one target: nothing to compare")
    return out, notes


def target_lines(rec, confidence: float = 0.95) -> List[str]:
    rows, notes = by_target(rec, confidence)
    lines = [f"per storage target, iteration {ITERATION} (the targets that hold each rank's "
             "file, as its client says):"]
    if rows:
        width = max(len(printable(r["target"])) for r in rows)
        lines.append(f"  {'target':<{width}} {'ranks':>5} {'bytes':>9} {'min':>8} "
                     f"{'mean':>8} {'max':>8}  MB/s; against the other targets' ranks")
        for r in rows:
            verdict = r["verdict"]
            if "change_pct" in r:
                verdict = (f"{r['change_pct']:+.1f}% [{r['lo']:+.1f}, {r['hi']:+.1f}] "
                           f"p = {r['p_value']:.2g}: {verdict}")
            lines.append(f"  {printable(r['target']):<{width}} {len(r['ranks']):>5} "
                         f"{format_size(r['bytes']):>9} {r['min_MB_per_s']:>8.1f} "
                         f"{r['mean_MB_per_s']:>8.1f} {r['max_MB_per_s']:>8.1f}  {verdict}")
        slow = [printable(r["target"]) for r in rows if r["verdict"] == "slow"]
        lines.append(f"  slow: {', '.join(slow)}" if slow else
                     "  no target is slower than the others beyond noise")
    lines += [f"  note: {n}" for n in notes]
    return lines
