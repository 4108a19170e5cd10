"""`study report`: one table over a study's axes, and a verdict for each axis's levels against
its first (docs/study.md).

The table is `report --by AXES` over the study's complete runs (the same sampling rules, so the
two never disagree).  A level's verdict compares its row with the first level's row at the
same values of the other axes, by Welch's t-test as `compare` does: one verdict per
combination, since pooling over the other axes would mix runs that measure different things.
"""

from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Sequence

from mpiwrite import stats
from mpiwrite.answers.report import Sampling, format_rows, report_rows
from mpiwrite.answers.results import Store
from mpiwrite.errors import ConfigError
from mpiwrite.text import printable


def generation(tags: Dict[str, str]) -> int:
    """A record's generation of its study (`study_generation`; 0 before there were any)."""
    try:
        return max(0, int(tags.get("study_generation", "0")))
    except ValueError:
        return -1


class StudyRuns:
    """The runs of one study among a Store's: made by `mpiwrite run` (an import's study tags
    are whatever its maker typed), of this file (name and fingerprint), of one generation
    (each `study run --new` starts one; the newest unless told).  What report_rows needs of
    a store, restricted; `fields` names the run parameter of an axis that has no run key of
    its name (`fsync_every`, `delay`): its value is the record's parameter."""

    def __init__(self, store: Store, name: str, fingerprint: str,
                 fields: Optional[Dict[str, str]] = None, generation_: Optional[int] = None):
        self.store, self.name, self.fingerprint = store, name, fingerprint
        self.fields = dict(fields or {})
        gens = [generation(r.tags()) for r in store.select(None, False) if self.ours(r)]
        self.generation = generation_ if generation_ is not None else max(gens, default=0)
        self.generations = sorted(set(gens))

    def ours(self, rec) -> bool:
        tags = rec.tags()
        return (tags.get("study") == self.name and tags.get("study_hash") == self.fingerprint
                and not rec.imported())

    def mine(self, rec) -> bool:
        return self.ours(rec) and generation(rec.tags()) == self.generation

    def select(self, flt=None, complete_only: bool = True):
        return [r for r in self.store.select(flt, complete_only) if self.mine(r)]

    def keys(self, rec) -> Dict[str, Any]:
        keys = self.store.keys(rec)
        missing = [a for a in self.fields if a not in keys]
        if not missing:
            return keys
        keys, params = dict(keys), rec.params()
        for axis in missing:
            if self.fields[axis] in params:
                keys[axis] = _word(params[self.fields[axis]])
        return keys


def axis_verdicts(runs: StudyRuns, rows: List[Dict[str, Any]], axes: Dict[str, List[Any]],
                  sampling: Sampling, points: Sequence[Dict[str, Any]],
                  point_keys: Sequence[str]) -> List[Dict[str, Any]]:
    """Per axis of two or more levels: each level against the first, at every combination of
    the other axes (`rows`: the table's, grouped by every axis).  Pooling over the other axes
    would mix runs that measure different things (block sizes, durability), which `report`
    refuses; a verdict per combination also shows an effect that depends on another axis."""
    # the key each level of the file has in the records (`1M` in the file is `1MiB`); a
    # record's point by its values (its study_key), not its place in the file
    key_of: Dict[tuple, str] = {}
    where_of = {k: i for i, k in enumerate(point_keys)}
    for rec in runs.select():
        index = where_of.get(str(rec.tags().get("study_key")), -1)
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
                    entry.update(change_pct=c.pct, n=(c.a.n, c.b.n))
                    if c.a.n < 2 or c.b.n < 2:  # no interval, no p: no nan printed
                        entry["verdict"] = "cannot tell (each side needs 2 samples)"
                    elif not all(math.isfinite(x) for x in (c.pct, c.pct_lo, c.pct_hi,
                                                               c.p_value)):
                        entry["verdict"] = "cannot tell (no spread or no rate to compare)"
                    else:
                        entry.update(lo=c.pct_lo, hi=c.pct_hi, p_value=c.p_value)
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
            if "lo" not in v:
                pct = f"{v['change_pct']:+.1f}% " if math.isfinite(v["change_pct"]) else ""
                lines.append(printable(f"{head}{pct}(n {v['n'][0]} vs {v['n'][1]}): "
                                       f"{v['verdict']}"))
                continue
            lines.append(printable(
                f"{head}{v['change_pct']:+.1f}% [{v['lo']:+.1f}, {v['hi']:+.1f}] "
                f"({confidence * 100:g}% interval, n {v['n'][0]} vs {v['n'][1]}, "
                f"p = {v['p_value']:.2g}): {v['verdict']}"))
    return lines


def study_report(runs: StudyRuns, axes: Dict[str, List[Any]],
                 points: Sequence[Dict[str, Any]], point_keys: Sequence[str],
                 sampling: Sampling, fmt: str = "table") -> str:
    if not runs.select():
        gens = f" generation {runs.generation} of" if runs.generations else ""
        raise ConfigError(f"study {runs.name!r}: no complete runs of{gens} this file in the "
                          "results (run it: mpiwrite study run FILE)")
    by = list(axes)
    rows, unit = report_rows(runs, by, sampling)
    table = format_rows(rows, by, fmt, sampling, unit)
    verdicts = axis_verdicts(runs, rows, axes, sampling, points, point_keys)
    lines = verdict_lines(verdicts, sampling.confidence)
    title = ("each axis's levels against its first, the other axes fixed (Welch's t-test "
             "over the runs' samples):")
    if len(runs.generations) > 1:  # `study run --new` started it again: say which
        title = (f"(generation {runs.generation} of {', '.join(map(str, runs.generations))}; "
                 "the newest unless --generation)\n" + title)
    if fmt == "markdown":
        return "\n".join([table, "", title, ""] + [f"- {ln}" for ln in lines])
    return "\n".join([table, title] + [f"  {ln}" for ln in lines])
