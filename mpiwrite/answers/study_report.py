"""`study report`: one table over a study's axes, and a verdict for each axis's levels against
its first (docs/study.md).

The table is `report --by AXES` over the study's complete runs (the same sampling rules, so the
two never disagree).  A level's verdict compares its row with the first level's row at the
same values of the other axes, by Welch's t-test as `compare` does, in compare's own words
(with the repetitions that would settle it): one verdict per combination, since pooling over
the other axes would mix runs that measure different things.

A level is spelled one way everywhere: as the records' key says it (the table's spelling:
`on` for a flag the file writes `true`, `1MiB` for `1M`); the levels of an axis of sizes or
numbers are in order of value (64KiB before 1MiB), a setting's values and text in the file's
order (a setting's first value is the baseline the file chose).
"""

from __future__ import annotations

import csv
import io
from typing import Any, Dict, List, NamedTuple, Optional, Sequence

import numpy as np

from mpiwrite import stats
from mpiwrite.answers import carryover
from mpiwrite.answers.report import (
    Sampling,
    csv_fields,
    format_rows,
    metric_fields,
    report_rows,
    value_order,
    verdict_text,
)
from mpiwrite.answers.results import Store
from mpiwrite.errors import ConfigError
from mpiwrite.formats import contract
from mpiwrite.text import csv_cell, markdown_cell, printable
from mpiwrite.units import plural
from mpiwrite.vocab.axes import kind_of


def generation(tags: Dict[str, str]) -> int:
    """A record's generation of its study (`study_generation`; 0 before there were any, or
    for a tag that is no number: a record's tags are anyone's words)."""
    try:
        return max(0, int(tags.get("study_generation", "0")))
    except ValueError:
        return 0


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


def axis_levels(runs: StudyRuns, axes: Dict[str, List[Any]], points: Sequence[Dict[str, Any]],
                point_keys: Sequence[str]) -> Dict[str, List[str]]:
    """Each axis's levels as the records' keys spell them (the table's words), the first
    being the one the others are compared with: sizes and numbers by value, a setting's
    values and text in the file's order.  A level no record has yet is spelled as the file
    writes it."""
    # a record's point by its values (its study_key), not its place in the file
    key_of: Dict[tuple, str] = {}
    where_of = {k: i for i, k in enumerate(point_keys)}
    for rec in runs.select():
        index = where_of.get(str(rec.tags().get("study_key")), -1)
        if 0 <= index < len(points):
            keys = runs.keys(rec)
            for axis in axes:
                if axis in keys:
                    key_of.setdefault((axis, repr(points[index][axis])), str(keys[axis]))
    out: Dict[str, List[str]] = {}
    for axis, levels in axes.items():
        words: List[str] = []
        for level in levels:
            word = key_of.get((axis, repr(level)), _word(level))
            if word not in words:
                words.append(word)
        # a setting's first value is the baseline the file chose (its default, usually); the
        # sizes and counts of `run`'s options and the allocation read best in order of value
        if kind_of(axis).by_value and all(value_order((w,))[0][0] == 0
                                                   for w in words):
            words.sort(key=lambda w: value_order((w,)))
        out[axis] = words
    return out


def order_rows(rows: List[Dict[str, Any]], levels: Dict[str, List[str]]) -> List[Dict[str, Any]]:
    """The table's rows in the study's order of levels (the verdicts' order)."""
    def place(r):
        return tuple(levels[a].index(str(r["keys"][a])) if str(r["keys"][a]) in levels[a]
                     else len(levels[a]) for a in levels)
    return sorted(rows, key=place)


class Model(NamedTuple):
    """A study's fit over its runs (answers/carryover.StudyFit) and each point's index by its
    key, so that a table's row (its runs' study_key) finds its point."""
    fit: Any
    where: Dict[str, int]

    def point_of(self, row: Dict[str, Any]) -> Optional[int]:
        keys = {str(r.tags().get("study_key")) for r in row.get("_runs", ())}
        return self.where.get(keys.pop()) if len(keys) == 1 else None


def axis_verdicts(rows: List[Dict[str, Any]], levels: Dict[str, List[str]],
                  sampling: Sampling, model: Optional[Model] = None) -> List[Dict[str, Any]]:
    """Per axis of two or more levels: each level against the first, at every combination of
    the other axes (`rows`: the table's, grouped by every axis).  Pooling over the other
    axes would mix runs that measure different things (block sizes, durability), which
    `report` refuses; a verdict per combination also shows an effect that depends on another
    axis.

    With the study's fit (`model`: every point, the repetition blocks and each axis's level
    in the previous run, on the log scale) a verdict is the contrast of the two points
    (`test: model`): drift between repetitions and the run before are taken out, and the
    residual's degrees of freedom are the whole study's.  Without one (values not positive,
    a record without its study tags) it is Welch's t-test as `compare` makes it (`welch`).
    The p-values are corrected for the number of verdicts (Holm: a study of null axes says
    "real" of any at most as often as the confidence allows).  An axis whose carry-over is
    aliased with the points, significant, or as large as its real effects gets no verdict
    (`carry-over`)."""
    out, tested = [], []
    for axis, words in levels.items():
        if len(words) < 2:
            continue
        others = [a for a in levels if a != axis]
        cells: Dict[tuple, Dict[str, Dict[str, Any]]] = {}
        for r in rows:
            cell = tuple(str(r["keys"][a]) for a in others)
            cells.setdefault(cell, {})[str(r["keys"][axis])] = r
        for cell, by_level in cells.items():
            base = by_level.get(words[0])
            for level in words[1:]:
                row = by_level.get(level)
                entry: Dict[str, Any] = {"axis": axis, "level": level, "against": words[0],
                                         "where": dict(zip(others, cell))}
                if base is None or row is None:
                    lacking = words[0] if base is None else level
                    entry.update(outcome="no runs",
                                 verdict=f"cannot tell: no complete runs of {axis}={lacking}")
                    out.append(entry)
                    continue
                c = stats.compare(base["_values"], row["_values"], sampling.confidence)
                entry["test"] = "welch"
                got = None
                if model is not None:
                    pa, pb = model.point_of(base), model.point_of(row)
                    if pa is not None and pb is not None:
                        got = model.fit.contrast(pa, pb)
                if got is not None:
                    # the direction is the contrast's, as its percent (the rows' own
                    # geometric means are another, unadjusted estimate)
                    c = c._replace(pct=got["pct"], pct_lo=got["lo"], pct_hi=got["hi"],
                                   p_value=got["p"], df=float(got["df"]),
                                   diff=c.a.gmean * got["pct"] / 100, scale="ratio")
                    entry["test"] = "model"
                    entry["_noise"] = (got["log_diff"], got["sigma"])
                    entry["_stalls"] = got["stalls"]
                else:
                    entry["_noise"] = _noise(base["_values"], row["_values"])
                entry["_c"] = c
                out.append(entry)
                if c.p_value == c.p_value:
                    tested.append(entry)
    for entry, p in zip(tested, stats.holm([e["_c"].p_value for e in tested])):
        entry["_p"], entry["_alone"] = p, entry["_c"].p_value
    flags = {}
    for axis, words in levels.items():
        own = [e["_c"].pct for e in tested if e["axis"] == axis and e["_p"] is not None
               and e["_p"] < 1 - sampling.confidence]
        found = model.fit.axis_carry(axis, words) if model is not None else None
        flags[axis] = carryover.axis_flagged(found, own, sampling.confidence)
    done = []
    for entry in out:
        c = entry.pop("_c", None)
        if c is None:
            done.append(entry)
            continue
        p = entry.pop("_p", c.p_value)
        diff, sd = entry.pop("_noise")
        told = c.a.n >= 2 and c.b.n >= 2 if entry["test"] == "welch" else c.df >= 1
        real = bool(told and p == p and p < 1 - sampling.confidence)
        need, more = (0, 0) if told else (c.needed_per_side, c.more_per_side)
        if told and not real and abs(diff) >= stats.TINY and sd == sd:
            # the repetitions a side that would settle a difference this size, at the
            # confidence the correction asks of it (Bonferroni's: a little more than Holm's)
            need = stats.needed_per_side(diff, sd, 1 - (1 - sampling.confidence) /
                                         max(1, len(tested)))
            more = max(1, need - min(c.a.n, c.b.n))
            need = min(c.a.n, c.b.n) + more
        shown = c._replace(p_value=p, real=real, needed_per_side=need, more_per_side=more)
        c = shown
        outcome = ("real" if real else "noise") if told else "cannot tell"
        alone = f", Holm over {len(tested)}; {c_alone(entry, tested)} alone" \
            if len(tested) > 1 and p == p else ""
        verdict = verdict_text(shown, sampling.metric, f"{entry['axis']}={entry['level']}",
                               alone, pooled=entry["test"] == "model") \
            if told or entry["test"] == "welch" else "cannot tell: too few runs for the fit"
        stalled = entry.pop("_stalls", "")
        if stalled and told:
            outcome, real = "cannot tell", False
            verdict = f"no verdict: {stalled}; they may be the setting's own: look at them"
        if flags.get(entry["axis"]):
            outcome, real = "carry-over", False
            verdict = (f"no verdict: the run before moved the figure as much (carry-over of "
                       f"{entry['axis']}; its line below)")
        entry.update(
            n=[c.a.n, c.b.n], change_pct=c.pct, change_ci_lo_pct=c.pct_lo,
            change_ci_hi_pct=c.pct_hi, p_value=p if p == p else None,
            p_value_uncorrected=entry.pop("_alone", None), real=real,
            needed_per_side=c.needed_per_side, more_per_side=c.more_per_side,
            outcome=outcome, verdict=verdict)
        done.append(contract.finite(entry))
    return done


def c_alone(entry: Dict[str, Any], tested: List[Dict[str, Any]]) -> str:
    """The verdict's own p, before the correction (kept on the entry for the JSON)."""
    return f"{entry['_alone']:.2g}"


def _noise(a: Sequence[float], b: Sequence[float]):
    """(the difference, the sd) a sample-size estimate needs: of the logs where every value
    is positive (the verdict's scale), else of the values."""
    if stats.on_ratio_scale(a, b):
        a, b = np.log(np.asarray(a, float)), np.log(np.asarray(b, float))
    a, b = np.asarray(a, float), np.asarray(b, float)
    if a.size < 2 or b.size < 2:
        return 0.0, float("nan")
    return float(b.mean() - a.mean()), float(np.sqrt((a.var(ddof=1) + b.var(ddof=1)) / 2))


def _word(v: Any) -> str:
    """A level as the study file writes it (true/false, not Python's True/False)."""
    return ("true" if v else "false") if isinstance(v, bool) else str(v)


def verdict_lines(verdicts: List[Dict[str, Any]], confidence: float) -> List[str]:
    lines = []
    for v in verdicts:
        where = ", ".join(f"{a}={x}" for a, x in v["where"].items())
        head = f"{v['axis']} {v['level']} vs {v['against']}{f' at {where}' if where else ''}: "
        pct = v.get("change_pct")
        if "n" not in v:
            lines.append(printable(head + v["verdict"]))
        elif v.get("p_value") is None:
            change = f"{pct:+.1f}% " if pct is not None else ""
            lines.append(printable(f"{head}{change}(n {v['n'][0]} vs {v['n'][1]}): "
                                   f"{v['verdict']}"))
        else:
            lines.append(printable(
                f"{head}{pct:+.1f}% [{v['change_ci_lo_pct']:+.1f}, {v['change_ci_hi_pct']:+.1f}]"
                f" ({confidence * 100:g}% interval"
                f"{' of this verdict alone' if _corrected(v) else ''}, n {v['n'][0]} vs "
                f"{v['n'][1]}): {v['verdict']}"))
    return lines


def _corrected(v: Dict[str, Any]) -> bool:
    """Whether the verdict's p was corrected (its interval is then the uncorrected test's)."""
    alone = v.get("p_value_uncorrected")
    return alone is not None and v.get("p_value") is not None and v["p_value"] != alone


def repeat_advice(rows: List[Dict[str, Any]], verdicts: List[Dict[str, Any]]) -> Optional[int]:
    """The `repeat` that would settle every verdict now within noise or untold (compare's
    count per side, the largest), when a sample is a run; None when none needs more."""
    more = [v for v in verdicts if v.get("more_per_side")]
    if not more or any(r["n"] != r["runs"] for r in rows):
        return None
    return max(v["needed_per_side"] for v in more)


def tests_used(verdicts: List[Dict[str, Any]]) -> str:
    """model, welch, or mixed: the tests the verdicts were made with."""
    used = {v["test"] for v in verdicts if v.get("test")}
    return used.pop() if len(used) == 1 else ("mixed" if used else "welch")


def method_text(verdicts: List[Dict[str, Any]], model: Optional[Model] = None) -> str:
    tested = sum(1 for v in verdicts if v.get("p_value_uncorrected") is not None)
    used = tests_used(verdicts)
    fit = model.fit.method() if model is not None and model.fit.usable else \
        "least squares on log(metric)"
    how = {"model": f"{fit}; each verdict the contrast of its two points",
           "welch": "Welch's t-test over the runs' samples, as compare",
           "mixed": f"{fit} where the runs allow it, else Welch's t-test as compare"}[used]
    return f"{how}; p corrected for the {tested} verdict(s) (Holm)"


def carry_lines(carry: Dict[str, Any], verdicts: List[Dict[str, Any]],
                confidence: float) -> List[str]:
    """A line per axis whose carry-over withholds its verdicts, or is worth saying."""
    out = []
    for axis, found in (carry or {}).items():
        if found is None:
            continue
        withheld = any(v["axis"] == axis and v.get("outcome") == "carry-over" for v in verdicts)
        if withheld:
            text = carryover.axis_text(axis, found, confidence)
            out.append(text if found["aliased"] else f"{text}: no verdict for {axis}; "
                       f"{carryover.ADVICE}")
    return out


def carry_doc(carry: Dict[str, Any], verdicts: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    out = []
    for axis, found in (carry or {}).items():
        if found is None:
            continue
        out.append(dict(axis=axis, withheld=any(v["axis"] == axis and v.get("outcome") ==
                                                "carry-over" for v in verdicts),
                        aliased=found["aliased"], p_value=found["p"], df=found["df"],
                        levels=[{"level": c["level"], "against": c["against"],
                                 "change_pct": c["pct"],
                                 "change_ci_lo_pct": (c["ci_pct"] or [None, None])[0],
                                 "change_ci_hi_pct": (c["ci_pct"] or [None, None])[1],
                                 "p_value": c["p"]} for c in found["levels"]]))
    return out


def study_doc(runs: StudyRuns, levels: Dict[str, List[str]], rows, verdicts, sampling: Sampling,
              unit: str, carry: Optional[Dict[str, Any]] = None,
              model: Optional[Model] = None) -> Dict[str, Any]:
    """The `study report --format json` document (schema: study-report-json.schema.json)."""
    doc = contract.header("study-report")
    doc.update(study=runs.name, fingerprint=runs.fingerprint, generation=runs.generation,
               generations=list(runs.generations), metric=sampling.metric,
               **metric_fields(sampling.metric, sampling.units), unit=unit,
               unit_requested=sampling.unit, warmup=sampling.warmup,
               confidence=sampling.confidence, test=tests_used(verdicts), correction="holm",
               method=method_text(verdicts, model),
               carryover=carry_doc(carry or {}, verdicts),
               duplicate_records=len(getattr(runs.store, "duplicates", ())),
               axes=[{"name": a, "levels": list(w), "base": w[0]} for a, w in levels.items()],
               rows=[{k: v for k, v in r.items() if not k.startswith("_")} for r in rows],
               verdicts=verdicts, repeat_advice=repeat_advice(rows, verdicts))
    return contract.finite(doc)


CSV_VERDICT = ("against", "change_pct", "change_ci_lo_pct", "change_ci_hi_pct", "p_value",
               "more_per_side", "verdict")


def study_csv(levels: Dict[str, List[str]], rows, verdicts, sampling: Sampling,
              unit: str) -> str:
    """One line per point (the table's), then per axis of two or more levels the point
    against that axis's first level, the other axes as in the point: AXIS_against,
    AXIS_change_pct, ..., AXIS_verdict (base, real, noise, cannot tell, no runs)."""
    by = list(levels)
    fields = csv_fields(sampling.metric, sampling.units)
    varied = [a for a in by if len(levels[a]) > 1]
    of = {(v["axis"], v["level"], tuple(sorted(v["where"].items()))): v for v in verdicts}
    out = io.StringIO()
    w = csv.writer(out)
    w.writerow(by + fields + [f"{a}_{f}" for a in varied for f in CSV_VERDICT]
               + ["metric", "unit", "warmup", "confidence", "schema_version"])
    for r in contract.finite(rows):
        cells = [csv_cell(r["keys"][k]) for k in by]
        cells += ["" if r.get(f) is None else r.get(f) for f in fields]
        for a in varied:
            level = str(r["keys"][a])
            where = tuple(sorted((k, str(r["keys"][k])) for k in by if k != a))
            v = of.get((a, level, where))
            if level == levels[a][0]:
                cells += [csv_cell(level), "", "", "", "", "", "base"]
            elif v is None:
                cells += [""] * len(CSV_VERDICT)
            else:
                cells += [csv_cell(v["against"])] + [
                    "" if v.get(f) is None else v[f] for f in CSV_VERDICT[1:-1]] + [v["outcome"]]
        w.writerow(cells + [sampling.metric, unit, sampling.warmup, sampling.confidence,
                            contract.OUTPUT_VERSION])
    return out.getvalue().rstrip("\n")


class Report(NamedTuple):
    """What `study report` found: the levels, the table's rows, the verdicts, and each
    axis's carry-over (None where it cannot be estimated)."""
    levels: Dict[str, List[str]]
    rows: List[Dict[str, Any]]
    verdicts: List[Dict[str, Any]]
    unit: str
    carry: Dict[str, Any] = {}
    model: Optional[Model] = None


def study_answer(runs: StudyRuns, axes: Dict[str, List[Any]],
                 points: Sequence[Dict[str, Any]], point_keys: Sequence[str],
                 sampling: Sampling) -> Report:
    if not runs.select():
        gens = f" generation {runs.generation} of" if runs.generations else ""
        raise ConfigError(f"study {runs.name!r}: no complete runs of{gens} this file in the "
                          "results (run it: mpiwrite study run FILE)")
    levels = axis_levels(runs, axes, points, point_keys)
    rows, unit = report_rows(runs, list(axes), sampling)
    rows = order_rows(rows, levels)
    model = model_of(runs, levels, point_keys, sampling)
    return Report(levels, rows, axis_verdicts(rows, levels, sampling, model), unit,
                  carry_found(model, levels), model)


def model_of(runs: StudyRuns, levels: Dict[str, List[str]], point_keys: Sequence[str],
             sampling: Sampling) -> Optional[Model]:
    """The study's fit over its runs (answers/carryover.StudyFit): a run's value is its
    metric's mean, its point and repetition its tags, the previous run's level of each axis
    that of the point its `study_prev_key` names (as the records of that point spell it);
    None without runs."""
    from mpiwrite.answers.results import metric_values

    where = {k: i for i, k in enumerate(point_keys)}
    recs, vals = [], []
    for rec in runs.select():
        got = [v for v in metric_values(rec, sampling.metric, sampling.warmup) if v == v]
        if got and str(rec.tags().get("study_key")) in where:
            recs.append(rec)
            vals.append(float(np.mean(got)))
    if not recs:
        return None
    words: Dict[str, Dict[str, str]] = {}  # a point's key -> its levels, as its records say
    for rec in recs:
        keys = runs.keys(rec)
        words.setdefault(str(rec.tags().get("study_key")),
                         {a: str(keys.get(a)) for a in levels})
    prev = {axis: [words.get(str(r.tags().get("study_prev_key")), {}).get(axis) for r in recs]
            for axis in levels}
    fit = carryover.StudyFit(vals, [where[str(r.tags()["study_key"])] for r in recs],
                             [r.tags().get("study_repeat") for r in recs], prev, levels,
                             sampling.confidence)
    return Model(fit, where)


def carry_found(model: Optional[Model], levels: Dict[str, List[str]]) -> Dict[str, Any]:
    """Each axis's carry-over from the study's fit (None where it is not in the fit)."""
    if model is None:
        return {}
    return {a: model.fit.axis_carry(a, w) for a, w in levels.items() if len(w) > 1}


def study_report(runs: StudyRuns, answer: Report, sampling: Sampling,
                 fmt: str = "table") -> str:
    """The report in `fmt`: table or markdown (the table, then a verdict a line), csv or
    json (docs/output.md)."""
    levels, rows, verdicts, unit, carry, model = answer
    if fmt == "json":
        return contract.dumps(study_doc(runs, levels, rows, verdicts, sampling, unit, carry,
                                        model))
    if fmt == "csv":
        return study_csv(levels, rows, verdicts, sampling, unit)
    table = format_rows(rows, list(levels), fmt, sampling, unit)
    lines = verdict_lines(verdicts, sampling.confidence)
    lines += carry_lines(carry, verdicts, sampling.confidence)
    advice = repeat_advice(rows, verdicts)
    if advice:
        have = sorted({r["runs"] for r in rows})
        now = plural(have[0], "run") if have[0] == have[-1] else f"{have[0]} to {have[-1]} runs"
        lines.append(f"repeat = {advice} (now {now} a point) would settle every "
                     "difference above of the size seen, as the verdicts count it")
    title = (f"each axis's levels against its first, the other axes fixed ("
             f"{method_text(verdicts, model)}):")
    if len(runs.generations) > 1:  # `study run --new` started it again: say which
        title = (f"(generation {runs.generation} of {', '.join(map(str, runs.generations))}; "
                 "the newest unless --generation)\n" + title)
    if fmt == "markdown":
        # a level is a record's word: no markup of its own in the list
        return "\n".join([table, "", markdown_cell(title), ""]
                         + [f"- {markdown_cell(ln)}" for ln in lines])
    return "\n".join([table, title] + [f"  {ln}" for ln in lines])


SCALING_AXES = ("nodes", "ranks_per_node")  # drawn as scaling curves, with the linear ideal


def draw(runs: StudyRuns, answer: Report, folder: str, sampling: Sampling) -> List[str]:
    """A picture per axis in `folder`, `STUDY-AXIS.png`: the metric against the axis's levels,
    a line per combination of the other axes (the node and rank counts as scaling curves).
    One line per axis: the file drawn, or why none was."""
    import os
    import re

    from mpiwrite import files
    from mpiwrite.answers import plot as plots

    said = []
    for axis, words in answer.levels.items():
        drawn = [w for w in words if any(str(r["keys"][axis]) == w for r in answer.rows)]
        if len(words) < 2:
            said.append(f"no plot of {axis}: it has one level ({words[0]})")
            continue
        if len(drawn) < 2:
            said.append(f"no plot of {axis}: complete runs at one of its levels only "
                        f"({', '.join(drawn) or 'none'})")
            continue
        out = os.path.join(folder, f"{runs.name}-{re.sub(r'[^A-Za-z0-9_.-]', '_', axis)}.png")
        files.check_output("--plot-dir", out)
        others = [a for a in answer.levels if a != axis]
        if axis in SCALING_AXES:
            plots.scaling(runs, out, others, axis, sampling)
        else:
            lines: Dict[str, Dict[str, List[float]]] = {}
            for r in answer.rows:
                label = ", ".join(f"{a}={r['keys'][a]}" for a in others) or "every run"
                lines.setdefault(label, {})[str(r["keys"][axis])] = r["_values"]
            plots.levels(lines, words, axis, out, sampling,
                         f"study {runs.name}: {sampling.metric} against {axis}")
        said.append(out)
    return [printable(s) for s in said]
