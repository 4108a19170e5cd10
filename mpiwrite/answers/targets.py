"""`show RUN --by target` and `explain RUN`'s target table: which storage target is slow
(Lustre OSTs, GlusterFS bricks, a CephFS pool), from each rank's rate and the targets that
hold its file (clients/targets.py).

Ranks differ because their files land on different servers.  A file that lies on one target
is that target's sample: one per rank and iteration (each iteration writes new files, which
may land elsewhere: a rank is a sample of every target its files were on).  Per target: the
ranks, files, bytes and rate min/mean/max, and a verdict against all the other attributed
files (Welch's t-test, as `compare`): a target whose files are slower beyond noise is named
slow.  What cannot be attributed is said: a file striped over several targets (its rate is
theirs together), one shared file, a target with a single file (no spread to test against),
a record without layouts, iterations whose targets were not recorded (records made before
mpiwrite read them for every iteration have iteration 0's only).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from mpiwrite import stats
from mpiwrite.clients.targets import targets_of
from mpiwrite.text import printable
from mpiwrite.units import format_size
from mpiwrite.vocab.status import Status

OK = int(Status.OK)


def good_iterations(rec, warmup: int = 0) -> List[int]:
    """The iterations whose status is OK, from `warmup` on: those whose rank rates count."""
    its = rec.iterations
    return [int(i) for i, s in zip(its["iteration"], its["status"])
            if int(s) == OK and int(i) >= warmup]


def file_targets(rec) -> Dict[Tuple[int, int], List[str]]:
    """{(iteration, rank): the targets that hold that rank's file in that iteration}."""
    return {(int(r.get("iteration", -1)), int(r["rank"])): targets_of(r.get("layout"))
            for r in rec.layouts}


def iterations_text(its: Sequence[int]) -> str:
    its = sorted(its)
    if len(its) == 1:
        return f"iteration {its[0]}"
    if its == list(range(its[0], its[-1] + 1)):
        return f"iterations {its[0]}-{its[-1]}"
    return "iterations " + ", ".join(map(str, its))


def by_target(rec, confidence: float = 0.95, iterations: Optional[Sequence[int]] = None
              ) -> Tuple[List[Dict[str, Any]], List[str]]:
    """(one row per target: target, ranks, files, bytes, min/mean/max MB/s, verdict), and
    notes on what could not be attributed.  `iterations`: those to use (default: every
    iteration with status OK)."""
    notes: List[str] = []
    wanted = list(good_iterations(rec) if iterations is None else iterations)
    where = file_targets(rec)
    known = sorted({it for it, _r in where if it in wanted})
    if not any(names for (it, _r), names in where.items() if it in wanted):
        return [], ["no storage targets recorded for this run (the client does not tell "
                    "which servers hold a file, or the record predates it)"]
    if str(rec.params().get("layout")) == "shared":
        some = next(names for (it, _r), names in where.items() if it in wanted and names)
        return [], [f"one shared file over {len(some)} target(s): every rank writes to all of "
                    "them, so no rank's rate is one target's"]
    missing = [it for it in wanted if it not in known]
    if missing:
        notes.append(f"no targets recorded for {iterations_text(missing)} (a record made "
                     "before mpiwrite read them for every iteration): left out")
    rows = rec.ranks[np.isin(rec.ranks["iteration"], known) & (rec.ranks["status"] == OK)]
    rate = {(int(r["iteration"]), int(r["rank"])): float(r["MB_per_s"]) for r in rows}
    size = {(int(r["iteration"]), int(r["rank"])): int(r["bytes"]) for r in rows}
    groups: Dict[str, List[Tuple[int, int]]] = {}
    striped = []
    for f, names in sorted(where.items()):
        if f not in rate:
            continue
        if len(names) == 1 and np.isfinite(rate[f]):
            groups.setdefault(names[0], []).append(f)
        elif len(names) > 1:
            striped.append(f)
    if striped:
        notes.append(f"{len(striped)} file(s) striped over several targets: their rates are "
                     "those targets' together and are left out")
    out = []
    for name, fs in sorted(groups.items()):
        mine = [rate[f] for f in fs]
        others = [rate[f] for n, other in groups.items() if n != name for f in other]
        row = {"target": name, "ranks": sorted({r for _it, r in fs}), "files": len(fs),
               "iterations": sorted({it for it, _r in fs}),
               "bytes": sum(size.get(f, 0) for f in fs),
               "min_MB_per_s": min(mine), "mean_MB_per_s": float(np.mean(mine)),
               "max_MB_per_s": max(mine)}
        if len(mine) < 2 or len(others) < 2:
            row["verdict"] = "cannot tell (needs 2 files here and 2 elsewhere)"
        else:
            c = stats.compare(others, mine, confidence)
            row.update(change_pct=c.pct, lo=c.pct_lo, hi=c.pct_hi, p_value=c.p_value)
            row["verdict"] = ("slow" if c.real and c.diff < 0 else
                              "fast" if c.real else "within noise")
        out.append(row)
    if len(out) == 1:
        notes.append("every attributed file is on one target: nothing to compare")
    return out, notes


def target_lines(rec, confidence: float = 0.95,
                 iterations: Optional[Sequence[int]] = None) -> List[str]:
    """`show --by target`'s section."""
    wanted = good_iterations(rec) if iterations is None else list(iterations)
    rows, notes = by_target(rec, confidence, wanted)
    return format_targets(rows, notes, wanted)


def _p(p) -> str:
    return "= ?" if p is None else "< 0.0001" if p < 1e-4 else f"= {p:.2g}"


def format_targets(rows: List[Dict[str, Any]], notes: List[str], iterations: Sequence[int],
                   md: bool = False) -> List[str]:
    """The per-target table (text, or markdown) and its notes."""
    head = (f"per storage target, {iterations_text(iterations) if iterations else 'no iteration'}"
            " (the targets that hold each rank's file, as its client says)")
    lines = [f"## {head}", ""] if md else [head + ":"]
    cells = []
    for r in rows:
        verdict = r["verdict"]
        if "change_pct" in r:
            verdict = (f"{r['change_pct']:+.1f}% [{r['lo']:+.1f}, {r['hi']:+.1f}] "
                       f"p {_p(r['p_value'])}: {verdict}")
        cells.append([printable(r["target"]), str(len(r["ranks"])), str(r["files"]),
                      format_size(r["bytes"]), f"{r['min_MB_per_s']:.1f}",
                      f"{r['mean_MB_per_s']:.1f}", f"{r['max_MB_per_s']:.1f}", verdict])
    names = ["target", "ranks", "files", "bytes", "min", "mean", "max",
             "MB/s; against the other targets' files"]
    if rows and md:
        esc = [[c.replace("|", "\\|") for c in row] for row in [names] + cells]
        lines += ["| " + " | ".join(row) + " |" for row in esc[:1]]
        lines += ["|" + "---|" * len(names)] + ["| " + " | ".join(r) + " |" for r in esc[1:]]
        lines.append("")
    elif rows:
        width = [max(len(row[i]) for row in [names] + cells) for i in range(7)]
        for row in [names] + cells:
            lines.append("  " + " ".join(c.ljust(w) if i == 0 else c.rjust(w)
                                         for i, (c, w) in enumerate(zip(row, width)))
                         + "  " + row[7])
    if rows:
        slow = [printable(r["target"]) for r in rows if r["verdict"] == "slow"]
        said = (f"slow: {', '.join(slow)}" if slow else
                "no target is slower than the others beyond noise")
        lines.append(("- " if md else "  ") + said)
    lines += [("- " if md else "  ") + f"note: {n}" for n in notes]
    return lines
