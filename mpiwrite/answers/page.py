"""`page`: one self-contained HTML file to send (docs/page.md): the report's table, the
verdicts with their intervals, the facts that differ between its rows, the plots a person
would look at, the commands that made the records and the records it came from.

The figures are the report's (report_rows) and, for a study, `study report`'s (axis_verdicts),
so a page never disagrees with the terminal.  The page's markup is in htmlout.py.
"""

from __future__ import annotations

import datetime
import math
from typing import Any, Dict, List, NamedTuple, Optional, Sequence

import numpy as np

from mpiwrite import stats
from mpiwrite.answers import htmlout as h
from mpiwrite.answers import limits
from mpiwrite.answers.differences import NOT_DIFFERENCES
from mpiwrite.answers.report import (
    Sampling,
    _change_cell,
    _figure_cells,
    columns,
    mark_confounded,
    report_rows,
    unit_text,
)
from mpiwrite.answers.results import metric_info, metric_values
from mpiwrite.answers.window import window_notes
from mpiwrite.errors import ConfigError
from mpiwrite.vocab.keys import IDENTITY, LABEL, kind, outcome_keys, relevance

RUN_PLOTS = 4  # rows whose representative run gets its per-rank and timeline plots
COLUMNS_PER_ROW = 6  # facts that differ: a column per row up to this many rows


class Study(NamedTuple):
    """What a page of a study needs beyond its runs (cli/pagecmd.py reads the file)."""
    name: str
    file: str
    axes: Dict[str, List[Any]]
    points: Sequence[Dict[str, Any]]
    point_keys: Sequence[str]


class Page(NamedTuple):
    """What the page is made of: the store (answers/results.Store, or a study's StudyRuns),
    the report's grouping and sampling, and how the page was asked for."""
    store: Any
    by: Sequence[str]
    sampling: Sampling
    command: str
    baseline: Optional[str] = None
    study: Optional[Study] = None
    bad: Sequence[tuple] = ()  # (path, why) of records that could not be read
    tune: str = ""  # a tune study's answer (tune report's text): the page leads with it


def render(p: Page, now: Optional[str] = None) -> str:
    """The page as text (UTF-8 HTML); ConfigError when there is nothing to show."""
    runs = p.store.select()
    flt = getattr(p.store, "flt", None)  # --where (cli/options.Where)
    if not runs and flt and p.store.store.select():
        raise ConfigError("--where: no complete run matches "
                          + ", ".join(f"{k}={v}" for k, v in flt.items()))
    if not runs:
        raise ConfigError("PATHS: no complete runs to put on a page"
                          + (f" of study {p.study.name!r}" if p.study else ""))
    by = list(p.by)
    sampling = p.sampling
    rows, unit = report_rows(p.store, by, sampling, p.baseline, limits=True)
    if not rows:
        raise ConfigError(f"PATHS: {len(runs)} complete run(s), but none has the "
                          f"{sampling.metric} figure")
    if not p.baseline and not p.study and len(rows) > 1:
        _against_first(rows, sampling.confidence)
        mark_confounded(rows, by, sampling, unit)
    if p.study:  # a study's table in its levels' order, as `study report` has it: a
        # setting's values as the file lists them (not 1 before 20 before 3)
        from mpiwrite.answers.study_report import order_rows

        rows = order_rows(rows, _study_levels(p))
    groups = _groups(runs, p.store.keys, by)
    now = now or datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    from mpiwrite import __version__

    title = (f"mpiwrite study {p.study.name}" if p.study
             else f"mpiwrite report: {len(runs)} run(s) by {', '.join(by) or 'all'}")
    parts = [("tune", "What to set: tune's answer", h.pre(p.tune))] if p.tune else []
    if not p.study and len(rows) > 1:  # a records page leads with the comparison
        parts.append(("chart", "The configurations side by side",
                      _chart_html(p, rows, by, sampling)))
    parts += [("table", "Table", _table_html(rows, by, sampling, unit) + _left_out(p)),
             ("verdicts", "Verdicts", _verdicts_html(p, rows, by, sampling)),
             ("plots", "Plots", _plots_html(p, rows, groups, sampling)),
             ("differ", "Node facts and settings that differ",
              _differ_html(runs, p.store.keys, by, groups)),
             ("explain", "What explains the variation", _explain_html(p, runs))]
    if len(runs) == 1:
        parts.append(("run", "The run in full", _show_html(p, runs[0])))
    parts += [("commands", "Commands that made the records", _commands_html(p, runs)),
              ("records", "Records", _records_html(p, runs))]
    nav = ("<nav><p>" + " · ".join(f'<a href="#{a}">{h.esc(t)}</a>' for a, t, _b in parts)
           + "</p></nav>")
    body = [h.para(f"Made {now} by mpiwrite {__version__}: {p.command}", "note"), nav]
    return h.document(title, body + [h.section(a, t, b) for a, t, b in parts])


def _first_in_time(row: Dict[str, Any]) -> str:
    """When the row's first run started (ISO text sorts as time; '' when none says)."""
    times = [str(r.attrs.get("start_time") or "") for r in row.get("_runs", ())]
    return min([t for t in times if t] or ["~"])


def _against_first(rows: List[Dict[str, Any]], confidence: float) -> None:
    """Each row against the base row, as `report --baseline` marks them (Welch's t-test).
    With no --baseline the base is the configuration measured first (the one a user
    changed something from), not the first in the table's order (once the alphabet's)."""
    base = min(rows, key=_first_in_time)
    for r in rows:
        c = stats.compare(base["_values"], r["_values"], confidence)
        r.update(change_pct=c.pct, change_ci_lo_pct=c.pct_lo, change_ci_hi_pct=c.pct_hi,
                 p_value=c.p_value, _scale=c.scale,
                 verdict="base" if r is base else ("real" if c.real else "noise"))


def _label(keys: Dict[str, Any], by: Sequence[str]) -> str:
    return ", ".join(f"{k}={keys[k]}" for k in by) or "all runs"


def _groups(runs, keys_of, by: Sequence[str]) -> Dict[tuple, list]:
    """The runs of each table row, by the row's key values (as report_rows groups them)."""
    out: Dict[tuple, list] = {}
    for r in runs:
        k = keys_of(r)
        out.setdefault(tuple(str(k.get(key, "-")) for key in by), []).append(r)
    return out


def _table_html(rows, by, sampling: Sampling, unit: str) -> str:
    has_change = any("change_pct" in r for r in rows)
    pct = f"{sampling.confidence * 100:g}%"
    head = [*by, *columns(sampling.metric, sampling.units)] + (["change % ±95%"]
                                                                if has_change else [])
    head = [x.replace("95%", pct) for x in head] + ["limit"]
    body = [[str(r["keys"][k]) for k in by] + _figure_cells(r, sampling.metric, sampling.units)
            + ([_change_cell(r)] if has_change else []) + [limits.cell(r)] for r in rows]
    notes = [f"metric: {sampling.metric} ({metric_info(sampling.metric, sampling.units).unit}"
             f"); samples: {unit_text(unit, sampling.unit, sampling.warmup)}; mean ±: the "
             f"half-width of the mean's {pct} Student t interval"]
    if has_change:
        ratio = any(r.get("_scale") == "ratio" for r in rows)
        notes.append(f"change: against the base row, {pct} interval; "
                     + ("the ratio of geometric means (Welch's t-test on the logs)" if ratio
                        else "the difference of means (Welch's t-test)")
                     + "; ~ = within noise")
    notes.append("first-done: the rate of the first rank to finish, where the record has "
                 "per-rank times (an imported record has none: blank)")
    notes += window_notes(rows)
    notes.append(limits.NOTE)
    return h.table(head, body, right=range(len(by), len(head))) + "\n" + h.items(notes)


def _left_out(p: Page) -> str:
    """What the table does not count, as `report` says it on its standard error: runs that
    did not complete, and complete runs that are not valid (formats/validity.py), each with
    its reasons."""
    from mpiwrite.answers.results import INVALID

    store = getattr(p.store, "store", p.store)  # under --where: the records it selects from
    skipped = store.not_complete() if hasattr(store, "not_complete") else {}
    if not skipped:
        return ""
    said = ", ".join(f"{n} {state}" for state, n in sorted(skipped.items()))
    lines = [f"left out: {sum(skipped.values())} run(s) ({said})"]
    if INVALID in skipped:
        from mpiwrite.formats import validity

        for r in store.runs:
            if r.status == "complete" and not store.counted(r):
                why = "; ".join(validity.stored(r).get("reasons", [])[:3]) or "not valid"
                lines.append(f"not valid: {r.run_id}: {why}")
        lines.append("--include-invalid counts them (as report's, compare's and explain's)")
    return "\n" + h.items(lines[:20])


def _chart_html(p: Page, rows, by, sampling: Sampling) -> str:
    """Each row's figure with its interval, the table's order, the base row named: drawn
    without a plotting library (every install has it)."""
    from mpiwrite.formats import contract

    info = metric_info(sampling.metric, sampling.units)
    _n, mean, _sd, lo, hi = contract.stat_keys(info.suffix)[:5]
    pct = f"{sampling.confidence * 100:g}%"
    data = [(_label(r["keys"], by), _float(r.get(mean)), _float(r.get(lo)), _float(r.get(hi)),
             str(r.get("verdict") or "")) for r in rows]
    svg = h.dots(data, f"{sampling.metric} ({info.header}): the mean, its {pct} interval",
                 f"{sampling.metric} of each row with its interval")
    base = next((d[0] for d in data if d[4] == "base"), None)
    notes = [f"base: {base} ("
             + ("the --baseline given" if p.baseline else "the configuration measured first")
             + "); orange: a real change against it, grey: within noise"] if base else []
    notes.append(f"dot: the row's mean; whiskers: the mean's {pct} Student t interval (as in "
                 "the table); a row of one sample has none")
    return svg + "\n" + h.items(notes)


def _float(x) -> Optional[float]:
    try:
        return None if x is None else float(x)
    except (TypeError, ValueError):
        return None


def _verdicts_html(p: Page, rows, by, sampling: Sampling) -> str:
    pct = f"{sampling.confidence * 100:g}%"
    if p.study:
        from mpiwrite.answers.study_report import (
            axis_verdicts,
            carry_found,
            carry_lines,
            method_text,
            model_of,
        )

        levels = _study_levels(p)
        model = model_of(p.store, levels, p.study.point_keys, sampling)
        carry = carry_found(model, levels)
        verdicts = axis_verdicts(rows, levels, sampling, model)
        body = []
        for v in verdicts:
            where = ", ".join(f"{a}={x}" for a, x in v["where"].items())
            lo, hi = v.get("change_ci_lo_pct"), v.get("change_ci_hi_pct")
            body.append([v["axis"], f"{v['level']} vs {v['against']}", where or "-",
                         _pct(v.get("change_pct")),
                         f"[{lo:+.1f}, {hi:+.1f}]" if _finite(lo) and _finite(hi) else "-",
                         f"{v['n'][0]} vs {v['n'][1]}" if "n" in v else "-",
                         f"{v['p_value']:.2g}" if _finite(v.get("p_value")) else "-",
                         v["verdict"]])
        if not body:
            return h.para("No axis has two levels: nothing to compare.")
        said = carry_lines(carry, verdicts, sampling.confidence)
        return (h.para(f"Each axis's levels against its first, the other axes fixed "
                       f"({method_text(verdicts, model)}).") +
                h.table(["axis", "level", "at", "change %", f"{pct} interval", "n", "p",
                         "verdict"], body, right=(3, 4, 5, 6))
                + (h.items(said) if said else ""))
    if len(rows) < 2:
        return h.para("One row: nothing to compare (group by another key with --by).")
    body = []
    base = next(r for r in rows if r.get("verdict") == "base")
    for r in rows:
        if r is base:
            continue
        interval = ("-" if not _finite(r.get("change_ci_lo_pct")) else
                    f"[{r['change_ci_lo_pct']:+.1f}, {r['change_ci_hi_pct']:+.1f}]")
        said = {"real": "a real difference", "noise": "within noise"}.get(r["verdict"],
                                                                          r["verdict"])
        if r["n"] < 2 or base["n"] < 2:
            said = "cannot tell (each side needs 2 samples)"
        if r.get("confounded_with"):
            inside = r.get("within_confounders")
            said += (f"; confounded with {', '.join(r['confounded_with'])}" + (
                f" (within it: {inside['change_pct']:+.1f}% [{inside['change_ci_lo_pct']:+.1f}, "
                f"{inside['change_ci_hi_pct']:+.1f}])" if inside else
                ": the change may be theirs"))
        body.append([_label(r["keys"], by), _label(base["keys"], by),
                     _pct(r.get("change_pct")), interval, f"{base['n']} vs {r['n']}",
                     f"{r['p_value']:.2g}" if _finite(r.get("p_value")) else "-", said])
    return (h.para(f"Each row against the base row ({_label(base['keys'], by)}): Welch's "
                   f"t-test, {pct} interval of the change.") +
            h.table(["row", "against", "change %", f"{pct} interval", "n", "p", "verdict"],
                    body, right=(2, 3, 4, 5)))


def _finite(x) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x)


def _pct(x) -> str:
    return f"{x:+.1f}%" if _finite(x) else "-"


def _plots_html(p: Page, rows, groups, sampling: Sampling) -> str:
    """Every plot drawn, or a line saying why it is not (no matplotlib, imported runs)."""
    from mpiwrite.answers import plot as plots

    out, notes = [], []

    def draw(caption: str, fn) -> None:
        drawn = plots.Drawn()
        try:
            fn(drawn)
        except ConfigError as exc:
            notes.append(f"{caption}: not drawn ({exc})")
            return
        out.append(h.figure(drawn.svg, f"plot-{len(out) + 1}", caption))

    runs = p.store.select()
    try:
        plots._pyplot()
    except ConfigError as exc:
        return h.para(f"No plots: {exc}")
    by = list(p.by)
    if p.study:
        for axis, levels in p.study.axes.items():
            if len(levels) < 2:
                continue
            others = [a for a in p.study.axes if a != axis]
            if axis in plots.POOLING:
                draw(f"scaling against {axis}, a line per value of the other axes",
                     lambda out, o=others, a=axis: plots.scaling(p.store, out, o, a, sampling))
            order = _study_levels(p)[axis]
            draw(f"{sampling.metric} against the study's axis {axis}",
                 lambda out, a=axis, v=order, o=others: plots.levels_of_rows(rows, a, v, o, out,
                                                                 sampling))
    elif len({str(p.store.keys(r).get("nodes")) for r in runs}) > 1:
        draw("scaling against nodes, a line per table row",
             lambda out: plots.scaling(p.store, out, [b for b in by if b != "nodes"],
                                       "nodes", sampling))
    for i, (key, members) in enumerate(sorted(groups.items())):
        if i == RUN_PLOTS:
            notes.append(f"per-rank and timeline plots of the first {RUN_PLOTS} rows only "
                         f"({len(groups) - RUN_PLOTS} more rows: `mpiwrite plot ranks|timeline`"
                         " draws any run)")
            break
        rec = _representative(members, sampling)
        if rec is None:
            continue
        row = _label(dict(zip(by, key)), by)
        draw(f"per-rank rates of run {rec.run_id} ({row}; the run nearest the row's "
             "median)", lambda out, r=rec: plots.ranks(r, out, None))
        if not len(getattr(rec, "samples", ())):
            notes.append(f"timeline of run {rec.run_id}: not drawn (its record holds no "
                         "throughput samples)")
            continue
        draw(f"throughput over time, run {rec.run_id} ({row})",
             lambda out, r=rec: plots.timeline(r, out, None))
    return "\n".join(out + ([h.items(notes)] if notes else []))


def _study_levels(p: Page) -> Dict[str, List[str]]:
    """Each axis's levels as `study report` spells and orders them (its first the base)."""
    from mpiwrite.answers.study_report import axis_levels

    return axis_levels(p.store, p.study.axes, p.study.points, p.study.point_keys)


def _representative(members, sampling: Sampling):
    """The run whose mean figure is nearest the median of its row's runs (ties: the older)."""
    means = [(float(np.mean(v)), r) for r in members
             if (v := metric_values(r, sampling.metric, sampling.warmup))]
    if not means:
        return None
    mid = float(np.median([m for m, _r in means]))
    return min(means, key=lambda mr: abs(mr[0] - mid))[1]


def _differ_html(runs, keys_of, by: Sequence[str], groups) -> str:
    """Every run key and node fact with more than one value over the page's runs, its values
    per table row (up to COLUMNS_PER_ROW rows), settings before facts; the keys every run
    shares in a folded list."""
    outcomes = {k for r in runs for k in outcome_keys(keys_of(r))}
    seen: Dict[str, set] = {}
    for r in runs:
        for k, v in keys_of(r).items():
            seen.setdefault(k, set()).add(str(v))
    shown = [k for k in sorted(seen, key=relevance)
             if k not in NOT_DIFFERENCES and k not in outcomes
             and kind(k) not in (LABEL, IDENTITY) and not k.startswith("software.")
             or k == "software.mpiwrite"]
    differ = [k for k in shown if len(seen[k]) > 1 or any(k not in keys_of(r) for r in runs)]
    # tag.NAME, the alias of the tag NAME: said once (as compare's "also different")
    differ = [k for k in differ if not (k.startswith("tag.") and seen.get(k[4:]) == seen[k])]
    same = [k for k in shown if k not in differ]
    keys = sorted(groups)
    if differ and len(keys) <= COLUMNS_PER_ROW:
        head = ["key", *(_label(dict(zip(by, g)), by) for g in keys)]
        body = [[k, *(", ".join(sorted({str(keys_of(r).get(k, "-")) for r in groups[g]}))
                      for g in keys)] for k in differ]
        text = h.table(head, body)
    elif differ:
        text = h.table(["key", "values"], [[k, ", ".join(sorted(seen[k]))] for k in differ])
    else:
        text = h.para("Every run has the same settings and node facts.")
    if len(keys) == 2:  # what the clients did differently, as compare says it
        from mpiwrite.answers.differences import differing_facts

        did = {k: v for k, v in differing_facts(groups[keys[0]], groups[keys[1]],
                                                keys_of).items() if k not in seen}
        if did:
            text += "\n" + h.para("What the clients and CPUs did differently (from their "
                                   "counters, as `compare` says it):") + h.table(
                ["", *(_label(dict(zip(by, g)), by) for g in keys)],
                [[k, ", ".join(v["a"]), ", ".join(v["b"])] for k, v in did.items()])
    hosts = sorted({str(n.get("host")) for r in runs for n in (r.nodes or [])})
    text += "\n" + h.para(f"hosts ({len(hosts)}): {', '.join(hosts[:64])}"
                          + (" ..." if len(hosts) > 64 else ""), "note")
    if same:
        text += ("\n<details><summary>the same on every run</summary>\n"
                 + h.table(["key", "value"], [[k, next(iter(seen[k]))] for k in same])
                 + "\n</details>")
    return text


def _explain_html(p: Page, runs) -> str:
    """`explain`'s answer over the page's runs (over one run: between its ranks), as the
    terminal shows it."""
    from mpiwrite.answers.explain_text import format_explain

    try:
        if len(runs) == 1:
            from mpiwrite.answers.explain_run import explain_run

            doc = explain_run(runs[0], p.sampling)
        else:
            from mpiwrite.answers.explain import explain

            doc = explain(runs, p.store.keys, p.sampling)
    except ConfigError as exc:
        return h.para(f"not explained: {exc}")
    except (KeyError, TypeError, ValueError, IndexError) as exc:  # as `explain RECORD` says
        return h.para(f"not explained: unusable record ({type(exc).__name__}: {exc})")
    return (h.para("Which run keys and node facts account for the differences (as `mpiwrite "
                   "explain` prints it; docs/explain.md).", "note") +
            h.pre(format_explain(doc, "table")))


def _show_html(p: Page, rec) -> str:
    """`show`'s text of the one run on the page."""
    from mpiwrite.answers.show import show_text

    try:
        return h.pre(show_text(rec, p.store.keys(rec)))
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        return h.para(f"unusable record ({type(exc).__name__}: {exc})")


def _commands_html(p: Page, runs) -> str:
    made: Dict[str, List[str]] = {}
    for r in runs:
        made.setdefault(str(r.attrs.get("command_line") or "-"), []).append(r.run_id)
    parts = []
    if p.study:
        parts.append(h.para(f"study file: {p.study.file} (study {p.study.name}; `mpiwrite "
                            f"study run {p.study.file}` made its runs)"))
    parts.append(h.table(["command", "runs", "first run"],
                         [[c, str(len(ids)), ids[0]] for c, ids in made.items()], right=(1,)))
    parts.append(h.para("this page:", "note") + h.pre(p.command))
    return "\n".join(parts)


def _records_html(p: Page, runs) -> str:
    from mpiwrite.answers.state import run_state

    used = {id(r) for r in runs}
    everyone = getattr(p.store, "store", p.store).runs
    body = [[r.path, r.run_id, str(r.attrs.get("start_time") or "-"),
             f"{r.attrs.get('nodes')} x {_per_node(r)}", run_state(r),
             "yes" if id(r) in used else "no (" + ("not complete" if run_state(r) !=
                                                     "complete" else "not of this page")
             + ")"]
            for r in everyone]
    text = h.table(["record", "run id", "started", "nodes x ranks", "status", "on this page"],
                   body)
    if p.bad:
        text += "\n" + h.para(f"{len(p.bad)} record(s) could not be read:") + h.items(
            f"{path}: {why}" for path, why in p.bad)
    return text


def _per_node(rec) -> str:
    try:
        return str(int(rec.attrs.get("ranks")) // max(1, int(rec.attrs.get("nodes"))))
    except (TypeError, ValueError):
        return "-"


__all__ = ["Page", "Study", "render"]
