"""`study report`: one table over a study's axes, and a verdict for each axis's levels against
its first (docs/study.md).

The table is `report --by AXES` over the study's complete runs (the same sampling rules, so the
two never disagree).  A level's verdict compares its row with the first level's row at the
same values of the other axes, by Welch's t-test as `compare` does: one verdict per
combination, since pooling over the other axes would mix runs that measure different things.
"""

from __future__ import annotations

from typing import Any, Dict, List, Sequence

from mpiwrite import stats
from mpiwrite.answers.report import Sampling, format_rows, report_rows
from mpiwrite.answers.results import Store
from mpiwrite.errors import ConfigError
from mpiwrite.text import printable


class StudyRuns:
    """The runs of one study (name and file fingerprint) among a Store's: what report_rows
    needs of a store, restricted."""

    def __init__(self, store: Store, name: str, fingerprint: str):
        self.store, self.name, self.fingerprint = store, name, fingerprint

    def mine(self, rec) -> bool:
        tags = rec.tags()
        return tags.get("study") == self.name and tags.get("study_hash") == self.fingerprint

    def select(self, flt=None, complete_only: bool = True):
        return [r for r in self.store.select(flt, complete_only) if self.mine(r)]

    def keys(self, rec) -> Dict[str, Any]:
        return self.store.keys(rec)


def axis_verdicts(runs: StudyRuns, rows: List[Dict[str, Any]], axes: Dict[str, List[Any]],
                  sampling: Sampling, points: Sequence[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """Per axis of two or more levels: each level against the first, at every combination of
    the other axes (`rows`: the table's, grouped by every axis).  Pooling over the other axes
    would mix runs that measure different things (block sizes, durability), which `report`
    refuses; a verdict per combination also shows an effect that depends on another axis."""
    # the key each level of the file has in the records (`1M` in the file is `1MiB`)
    key_of: Dict[tuple, str] = {}
    for rec in runs.select():
        index = int(rec.tags().get("study_point", -1))
        if 0 <= index < len(points):
            for axis in axes:
                key_of.setdefault((axis, repr(points[index][axis])),
                                  str(runs.keys(rec).get(axis)))
    out = []
    for axis, levels in axes.items():
        if len(levels) < 2:
            continue
        others = [a for a in axes if a != axis]
        cells: Dict[tuple, Dict[str, Dict[str, Any]]] = {}
        for r in rows:
            cell = tuple(str(r["keys"][a]) for a in others)
            cells.setdefault(cell, {})[str(r["keys"][axis])] = r
        verdicts = []
        for cell, by_level in cells.items():
            where = ", ".join(f"{a}={v}" for a, v in zip(others, cell))
            base = by_level.get(key_of.get((axis, repr(levels[0])), ""))
            for level in levels[1:]:
                row = by_level.get(key_of.get((axis, repr(level)), ""))
                entry: Dict[str, Any] = {"level": _word(level), "against": _word(levels[0]),
                                         "where": where}
                if base is None or row is None:
                    entry["verdict"] = "no complete runs at one of the two levels"
                else:
                    c = stats.compare(base["_values"], row["_values"], sampling.confidence)
                    entry.update(change_pct=c.pct, lo=c.pct_lo, hi=c.pct_hi,
                                 p_value=c.p_value, n=(c.a.n, c.b.n))
                    if c.a.n < 2 or c.b.n < 2:
                        entry["verdict"] = "cannot tell (each side needs 2 samples)"
                    else:
                        entry["verdict"] = "real" if c.real else "within noise"
                verdicts.append(entry)
        out.append({"axis": axis, "levels": verdicts})
    return out


def _word(v: Any) -> str:
    """A level as the study file writes it (true/false, not Python's True/False)."""
    return ("true" if v else "false") if isinstance(v, bool) else str(v)


def verdict_lines(verdicts: List[Dict[str, Any]], confidence: float) -> List[str]:
    lines = []
    for a in verdicts:
        for v in a["levels"]:
            where = f" at {v['where']}" if v["where"] else ""
            head = f"{a['axis']} {v['level']} vs {v['against']}{where}: "
            if "change_pct" not in v:
                lines.append(printable(head + v["verdict"]))
                continue
            lines.append(printable(
                f"{head}{v['change_pct']:+.1f}% [{v['lo']:+.1f}, {v['hi']:+.1f}] "
                f"({confidence * 100:g}% interval, n {v['n'][0]} vs {v['n'][1]}, "
                f"p = {v['p_value']:.2g}): {v['verdict']}"))
    return lines


def study_report(store: Store, name: str, fingerprint: str, axes: Dict[str, List[Any]],
                 points: Sequence[Dict[str, Any]], sampling: Sampling, fmt: str = "table") -> str:
    runs = StudyRuns(store, name, fingerprint)
    if not runs.select():
        raise ConfigError(f"study {name!r}: no complete runs of this file in the results "
                          "(run it: mpiwrite study run FILE)")
    by = list(axes)
    rows, unit = report_rows(runs, by, sampling)
    table = format_rows(rows, by, fmt, sampling, unit)
    verdicts = axis_verdicts(runs, rows, axes, sampling, points)
    lines = verdict_lines(verdicts, sampling.confidence)
    title = ("each axis's levels against its first, the other axes fixed (Welch's t-test "
             "over the runs' samples):")
    if fmt == "markdown":
        return "\n".join([table, "", title, ""] + [f"- {ln}" for ln in lines])
    return "\n".join([table, title] + [f"  {ln}" for ln in lines])
