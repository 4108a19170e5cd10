"""Tables over many runs (`report`) and a verdict between two sets (`compare`); one run's
text (`show`) is in show.py."""

from __future__ import annotations

import csv
import io
import math
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from mpiwrite import stats
from mpiwrite.answers import limits as limit_verdicts
from mpiwrite.answers.differences import DIFFERENCES_SHOWN, differing_facts
from mpiwrite.answers.results import (
    INVALID,
    Store,
    metric_info,
    metric_values,
    parse_filter,
    rate_key,
    rate_scale,
    resolve_unit,
    sample_values,
)
from mpiwrite.answers.window import window_notes
from mpiwrite.errors import ConfigError
from mpiwrite.formats import contract
from mpiwrite.records.runlevel import pooled, stats_of
from mpiwrite.text import csv_cell, markdown_cell, printable
from mpiwrite.units import format_number as _num
from mpiwrite.units import plural as _count
from mpiwrite.vocab import keys
from mpiwrite.vocab.status import RunStatus, Status


class Sampling(NamedTuple):
    """What one sample is: the metric, the unit (run or iteration), the warm-up dropped."""
    metric: str = "aggregate"
    unit: str = "auto"
    warmup: int = 0
    confidence: float = 0.95
    units: str = "MB"  # rates in MB/s (10^6 B/s) or MiB/s (2^20 B/s)


DEFAULT_SAMPLING = Sampling()
_OK = int(Status.OK)


def unit_text(unit: str, asked: str, warmup: int) -> str:
    """The sample unit in words (under 90 characters), as every report says it."""
    what = "one per run (its mean)" if unit == "run" else "one per iteration"
    why = (" (auto: several iterations per run)" if unit == "run" else
           " (auto: one iteration per run)") if asked == "auto" else ""
    drop = f"first {warmup} dropped" if warmup else "none dropped"
    return f"{what}{why}; warm-up {drop}"


# Settings that decide what a figure means: runs that differ in one are different questions
# (1,251.6 +-1,218 MB/s was fsync'd runs pooled with --no-fsync ones), never pooled silently.
# Declared once, with every key's kind, in vocab/keys.py.
DURABILITY_KEYS = keys.DURABILITY_KEYS


# Run keys that differ between any two groups of runs and say nothing about the setup.
def check_pooling(groups: Dict[str, list], keys_of, by: Sequence[str], option: str) -> None:
    """ConfigError naming `option` when a group pools runs whose durability settings differ."""
    for label, members in groups.items():
        for dk in DURABILITY_KEYS:
            if dk in by:
                continue
            # a key only of the runs that used it (--ramp) is '-' where absent, as --by says
            seen = sorted({str(keys_of(r).get(dk, "-")) for r in members})
            if len(seen) > 1:
                one = next((v for v in seen if v != "-"), seen[0])  # a value --where takes
                advice = (f"add {dk} to --by (or select one value: --where {dk}={one})"
                          if option == "--by"
                          else f"select one value, e.g. {dk}={one} in each side")
                raise ConfigError(
                    f"{option}: {printable(label)} would pool runs with {dk} "
                    f"{' and '.join(seen)}, which measure different things; {advice}")


def lacking_keys(store: Store, by: Sequence[str]) -> Dict[str, int]:
    """How many complete runs lack each --by key (they are grouped under '-')."""
    runs = store.select()
    return {key: n for key in by
            if (n := sum(1 for r in runs if key not in store.keys(r)))}


IMPORTED_NO_FIRST_DONE = "imported: the tool reports none"


def first_done_why(members) -> str:
    """Why a group of runs has no first-done figure, in a few words (from each record's
    first_done_note; an imported record's tool reports none)."""
    from mpiwrite.formats.summary import FIRST_DONE_NO_FSYNC, first_done_short

    why = set()
    for r in members:
        note = r.attrs.get("first_done_note", "")
        note = note.decode() if isinstance(note, bytes) else str(note or "")
        if note and r.params().get("fsync") is False and not r.params().get("direct"):
            note = FIRST_DONE_NO_FSYNC  # a record written before the note said so
        why.add(first_done_short(note) if note else
                IMPORTED_NO_FIRST_DONE if r.imported() else "no figure recorded")
    return "; ".join(sorted(why))


def report_rows(store: Store, by: Sequence[str], sampling: Sampling = DEFAULT_SAMPLING,
                baseline: Optional[str] = None, limits: bool = False):
    """(rows, unit used): one row per group of complete runs, with the contract's names."""
    runs = store.select()
    unit = resolve_unit(runs, sampling.unit, sampling.warmup)
    conf, warm = sampling.confidence, sampling.warmup
    groups: Dict[tuple, list] = {}
    nowhere = [key for key in by if runs and not any(key in store.keys(r) for r in runs)]
    if nowhere:
        invalid = store.not_complete().get(INVALID, 0)
        raise ConfigError(f"--by: no run has the key(s) {', '.join(nowhere)}" + (
            f" ({invalid} run(s) not valid were left out: --include-invalid counts them)"
            if invalid else ""))
    for r in runs:  # a run without a key is grouped under '-' (lacking_keys says how many)
        k = store.keys(r)
        groups.setdefault(tuple(str(k.get(key, "-")) for key in by), []).append(r)
    check_pooling({",".join(f"{b}={v}" for b, v in zip(by, key)) or "all runs": m
                   for key, m in groups.items()}, store.keys, by, "--by")
    units = sampling.units
    suffix = metric_info(sampling.metric, units).suffix
    scale = rate_scale("aggregate", units)  # of the write and read rates of every row
    rows = []
    for key, members in sorted(groups.items(), key=lambda kv: value_order(kv[0])):
        # a run without the figure (no read phase, a record from before it) is no sample
        members = [r for r in members if metric_values(r, sampling.metric, warm)]
        if not members:
            continue
        values = sample_values(members, sampling.metric, unit, warm, units)
        reading = sampling.metric == "read"
        # every rank's rate in the good iterations after the warm-up, pooled from each
        # iteration's count, mean and squared deviations (runlevel: no per-rank table read)
        _n, rank_mean, rank_sd = pooled([_good(stats_of(r), r.iterations, warm)
                                         for r in members], read=reading)
        windowed = bool(getattr(store, "window", None))
        if windowed:  # the ranks' rates are whole iterations'
            rank_mean = rank_sd = math.nan
        first = [] if reading else [v for v in sample_values(members, "first-done", unit, warm,
                                                             units) if v == v]
        last = sample_values(members, "read" if reading else "aggregate", unit, warm, units)
        row: Dict[str, Any] = {"keys": dict(zip(by, key)), "runs": len(members)}
        row.update(contract.stat_block(values, conf, suffix))
        row.update({rate_key("rank_mean", units): rank_mean * scale,
                    rate_key("rank_std", units): rank_sd * scale,
                    rate_key("first_done", units): float(np.mean(first)) if first else math.nan,
                    rate_key("last_done", units): float(np.mean(last))
                    if last and not windowed else math.nan},
                   _values=values,
                   # each sample's run, for the answers that pair runs (a study's repetitions)
                   _runs=[r for r in members
                          for _ in sample_values([r], sampling.metric, unit, warm, units)])
        if windowed:  # what the figures are: say it in every format
            row["_window"] = list(store.window)
        elif not first and not reading:
            row["_first_done_why"] = first_done_why(members)
        if sampling.metric == "cpu-per-GB":  # the share outside the ranks, for the note
            from mpiwrite.answers import clientcpu

            row["_own"] = clientcpu.own_share(members, warm, unit)
        if limits:  # report --limits: each run's verdict (answers/limits.py)
            row["limits"] = limit_verdicts.row_verdicts(members)
        rows.append(row)
    if baseline:
        flt = parse_filter(baseline, "--baseline")
        unknown = [k for k in flt if k not in by]
        if unknown:
            raise ConfigError(f"--baseline: {', '.join(unknown)} is not among --by keys")
        base = [r for r in rows if all(str(r["keys"][k]) == v for k, v in flt.items())]
        if len(base) != 1:
            raise ConfigError(f"--baseline: {baseline!r} matches {len(base)} rows, expected 1")
        for r in rows:
            c = stats.compare(base[0]["_values"], r["_values"], conf)
            r.update(change_pct=c.pct, change_ci_lo_pct=c.pct_lo, change_ci_hi_pct=c.pct_hi,
                     p_value=c.p_value, _scale=c.scale,
                     verdict="base" if r is base[0] else ("real" if c.real else "noise"))
        mark_confounded(rows, by, sampling, unit)
    return rows, unit


def mark_confounded(rows: List[Dict[str, Any]], by: Sequence[str], sampling: Sampling,
                    unit: str) -> None:
    """Each row with a change against the base row: the other keys whose values are mixed
    unevenly over the two rows' runs (answers/confounding.py; a key with one value a row is
    what tells the rows apart, as the grouping made them, not another cause):
    `confounded_with` (the keys) and `within_confounders` (the change within their values,
    or None)."""
    base = next((r for r in rows if r.get("verdict") == "base"), None)
    if base is None:
        return
    for r in rows:
        if r is base or "change_pct" not in r:
            continue
        mixed, inside = _confounded(_distinct(base.get("_runs", ())),
                                    _distinct(r.get("_runs", ())), None, sampling, unit,
                                    set(by), partial=True)
        if mixed:
            r["confounded_with"] = [m["key"] for m in mixed]
            r["within_confounders"] = inside


def _distinct(runs) -> list:
    out, seen = [], set()
    for r in runs:
        if id(r) not in seen:
            seen.add(id(r))
            out.append(r)
    return out


def confounded_notes(rows: List[Dict[str, Any]], by: Sequence[str]) -> List[str]:
    """A note for each row whose change against the base row is confounded."""
    base = next((r for r in rows if r.get("verdict") == "base"), None)
    out = []
    for r in rows:
        if not r.get("confounded_with"):
            continue
        keys_ = ", ".join(r["confounded_with"])
        inside = r.get("within_confounders")
        name = " ".join(printable(str(r["keys"][k])) for k in by)
        against = " ".join(printable(str(base["keys"][k])) for k in by) if base else "base"
        out.append(f"confounded: {name} vs {against}, runs also differ in {keys_}; " + (
            f"within it: {inside['change_pct']:+.1f}% "
            f"[{inside['change_ci_lo_pct']:+.1f}, {inside['change_ci_hi_pct']:+.1f}]"
            if inside else "no value holds both"))
    return out


def _good(stats: np.ndarray, its: np.ndarray, warmup: int) -> np.ndarray:
    """The rank statistics of a run's good iterations after the warm-up (row for row with
    the iterations table: runlevel.rank_stats)."""
    return stats[(its["status"] == _OK) & (its["iteration"] >= warmup)]


def value_order(key: tuple):
    """Numbers and sizes by value (64KiB before 1MiB before 4MiB), then text."""
    from mpiwrite.units import parse_size

    def one(k: str):
        if _isnum(k):
            return (0, float(k), "")
        try:
            return (0, float(parse_size(k)), "")
        except (ValueError, TypeError):
            return (1, 0.0, k)
    return tuple(one(k) for k in key)


def _isnum(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


class Column(NamedTuple):
    """One column of the report: its table header (`{unit}`: the metric's; None: in the CSV
    and JSON only), its fields in the row (the CSV's columns and the JSON's names, in that
    order), and its table cell.  The table, the CSV and the page read this one list; the JSON
    row holds every field (formats/schemas/report-json.schema.json names them)."""
    header: Optional[str]
    fields: Callable[[Any, str], List[str]]  # (the metric's info, units) -> field names
    cell: Callable[[Dict[str, Any], Any, str], str]  # (row, info, units) -> table cell


def _stat(info, name: str) -> str:
    return f"{name}_{info.suffix}"


def _extreme(r: Dict[str, Any], info, units: str, name: str) -> str:
    # MB/s: whole numbers for min and max; 0.004 CPU s/GB is not 0
    return _num(r[_stat(info, name)], 0 if info.unit == f"{units}/s" else info.digits)


COLUMNS: Tuple[Column, ...] = (
    Column("runs", lambda info, units: ["runs"], lambda r, info, units: str(r["runs"])),
    Column("n", lambda info, units: ["n"], lambda r, info, units: str(r["n"])),
    Column("{unit} mean ±95%",
           lambda info, units: [_stat(info, s) for s in ("mean", "std", "ci_lo", "ci_hi",
                                                         "gmean", "gmean_ci_lo",
                                                         "gmean_ci_hi")],
           lambda r, info, units: mean_cell(r[_stat(info, "mean")], r[_stat(info, "ci_lo")],
                                            r[_stat(info, "ci_hi")], r["n"], info.digits)),
    Column("min", lambda info, units: [_stat(info, "min")],
           lambda r, info, units: _extreme(r, info, units, "min")),
    Column("max", lambda info, units: [_stat(info, "max")],
           lambda r, info, units: _extreme(r, info, units, "max")),
    Column("rank mean±sd", lambda info, units: [rate_key("rank_mean", units),
                                                 rate_key("rank_std", units)],
           lambda r, info, units: f"{_num(r[rate_key('rank_mean', units)], 0)}±"
                                  f"{_num(r[rate_key('rank_std', units)], 0)}"),
    Column("first-done", lambda info, units: [rate_key("first_done", units)],
           lambda r, info, units: _num(r[rate_key("first_done", units)])),
    Column(None, lambda info, units: [rate_key("last_done", units)],
           lambda r, info, units: ""),
)
CHANGE_FIELDS = ["change_pct", "change_ci_lo_pct", "change_ci_hi_pct", "p_value", "verdict"]


def columns(metric: str, units: str = "MB") -> List[str]:
    """The report table's columns: a metric's own unit in the header of its figures."""
    header = metric_info(metric, units).header
    return [c.header.replace("{unit}", header) for c in COLUMNS if c.header]


def csv_fields(metric: str, units: str = "MB") -> List[str]:
    """The CSV columns after the --by keys: the stat block in the metric's unit, then the
    write rates (MB/s, or MiB/s) that every report row carries."""
    info = metric_info(metric, units)
    return [f for c in COLUMNS for f in c.fields(info, units)]


def metric_fields(metric: str, units: str = "MB") -> Dict[str, Any]:
    """What the numbers of a metric are, for the JSON documents: `metric_unit` and
    `higher_is_better` (MB/s: true; client CPU: false, more CPU is the regression), and the
    `units` of every rate (MB or MiB)."""
    info = metric_info(metric, units)
    return {"metric_unit": info.unit, "higher_is_better": info.higher_is_better,
            "units": units}


def report_doc(rows, by: Sequence[str], sampling: Sampling, unit: str,
               duplicates: int = 0) -> Dict[str, Any]:
    """The `report --format json` document (schema: report-json.schema.json)."""
    doc = contract.header("report")
    doc.update(metric=sampling.metric, **metric_fields(sampling.metric, sampling.units),
               unit=unit,
               unit_requested=sampling.unit,
               warmup=sampling.warmup, confidence=sampling.confidence, by=list(by),
               duplicate_records=duplicates,
               rows=[{k: v for k, v in r.items() if not k.startswith("_")} for r in rows])
    window = next((r["_window"] for r in rows if r.get("_window")), None)
    if window:  # report --window: the aggregate over this part of each iteration only
        doc["window_seconds"] = window
    return contract.finite(doc)


def format_rows(rows: List[Dict[str, Any]], by: Sequence[str], fmt: str,
                sampling: Sampling = DEFAULT_SAMPLING, unit: str = "iteration",
                duplicates: int = 0) -> str:
    confidence = sampling.confidence
    if fmt == "json":
        return contract.dumps(report_doc(rows, by, sampling, unit, duplicates))
    has_change = any("change_pct" in r for r in rows)
    has_limits = any("limits" in r for r in rows)
    if fmt == "csv":
        out = io.StringIO()
        w = csv.writer(out)
        fields = csv_fields(sampling.metric, sampling.units) + (CHANGE_FIELDS if has_change
                                                                else [])
        w.writerow(list(by) + fields + ["metric", "unit", "warmup", "confidence",
                                        "schema_version"] + (["limit"] if has_limits else []))
        for r in contract.finite(rows):
            w.writerow([csv_cell(r["keys"][k]) for k in by]
                       + ["" if r.get(f) is None else r.get(f) for f in fields]
                       + [sampling.metric, unit, sampling.warmup, confidence,
                          contract.OUTPUT_VERSION]
                       + ([csv_cell(limit_verdicts.cell(r))] if has_limits else []))
        return out.getvalue().rstrip("\n")
    head = list(by) + columns(sampling.metric, sampling.units) + (["change % ±95%"]
                                                                   if has_change else []) \
        + (["limit"] if has_limits else [])
    head = [h.replace("95%", f"{confidence * 100:g}%") for h in head]
    body = [[printable(r["keys"][k]) for k in by]
            + _figure_cells(r, sampling.metric, sampling.units)
            + ([_change_cell(r)] if has_change else [])
            + ([limit_verdicts.cell(r)] if has_limits else []) for r in rows]
    head = [printable(h) for h in head]
    widths = [max(len(h), *(len(b[i]) for b in body)) if body else len(h)
              for i, h in enumerate(head)]
    notes = [f"samples: {unit_text(unit, sampling.unit, sampling.warmup)}"]
    if metric_info(sampling.metric).unit != "MB/s":
        notes.append(f"rank mean±sd and first-done: write {sampling.units}/s")
    if has_change:
        ratio = any(r.get("_scale") == "ratio" for r in rows)
        notes.append(f"change: to the base row, {confidence * 100:g}% interval, "
                     + ("ratio of geometric means (Welch, on logs)" if ratio
                        else "difference of means (Welch)") + "; ~ = within noise")
    if duplicates:
        notes.append(_duplicate_note(duplicates))
    window = next((r["_window"] for r in rows if r.get("_window")), None)
    if window:
        notes.append(f"window: the aggregate of {window[0]:g}s to {window[1]:g}s of each "
                     "iteration from its first write, from the samples; the per-rank and "
                     "first-done columns are whole iterations' figures and are left out")
    why = sorted({r["_first_done_why"] for r in rows if r.get("_first_done_why")})
    if why:
        said = "; ".join(why)
        advice = "" if all(w == IMPORTED_NO_FIRST_DONE for w in why) else (
            " (fsyncs during the writes, --fsync-every N, or --direct give the figure; "
            "`mpiwrite show RUN` says more)")
        notes.append(f"first-done -: {said}{advice}")
    notes += window_notes(rows, steady=False)  # reportcmd says it on stderr, every format
    notes += own_notes(rows, by)
    notes += confounded_notes(rows, by)
    notes += [limit_verdicts.NOTE] if has_limits else []
    if fmt == "markdown":
        lines = ["| " + " | ".join(_md(h) for h in head) + " |",
                 "|" + "|".join("---" for _ in head) + "|"]
        lines += ["| " + " | ".join(_md(c) for c in b) + " |" for b in body]
        return "\n".join(lines + [""] + notes)
    if fmt != "table":
        raise ConfigError(f"--format: {fmt!r} is not one of table, markdown, csv, json")
    right = set(range(len(by), len(head)))
    lines = ["  ".join(h.rjust(w) if i in right else h.ljust(w)
                       for i, (h, w) in enumerate(zip(head, widths))).rstrip()]
    for b in body:
        lines.append("  ".join(c.rjust(w) if i in right else c.ljust(w)
                               for i, (c, w) in enumerate(zip(b, widths))).rstrip())
    return "\n".join(lines + notes)


def own_notes(rows: List[Dict[str, Any]], by: Sequence[str]) -> List[str]:
    """cpu-per-GB: each row's share of the client's own processes (a FUSE daemon, kernel
    threads), the rest being the ranks'."""
    out = []
    for r in rows:
        if "_own" not in r:
            continue
        own, names = r["_own"]
        group = " ".join(printable(r["keys"][k]) for k in by) or "all runs"
        out.append(f"  {group}: " + (f"{_num(own, 3)} CPU s/GB "
                                     f"({printable(', '.join(names[:8]))})" if names
                                     else "none measured (the ranks' alone)"))
    if out:
        out.insert(0, "cpu-per-GB counts the ranks and the client's own processes (a FUSE "
                      "daemon, kernel threads); the latter's share of each mean:")
    return out


def _figure_cells(r: Dict[str, Any], metric: str, units: str = "MB") -> List[str]:
    """A report row's figures as table cells: the metric with the decimals its unit needs,
    then the rates."""
    info = metric_info(metric, units)
    return [c.cell(r, info, units) for c in COLUMNS if c.header]


def mean_cell(mean: float, lo: float, hi: float, n: int, digits: int = 1) -> str:
    """`mean ±half`: the arithmetic mean and the half-width of its Student t interval (the
    interval the header names, symmetric around the mean it belongs to)."""
    if n < 2 or lo is None or lo != lo:
        return f"{_num(mean, digits)} ±{_num(float('nan'), digits)}"
    return f"{_num(mean, digits)} ±{_num((hi - lo) / 2, digits)}"


def _duplicate_note(n: int) -> str:
    return (f"note: {n} record{'s' * (n != 1)} repeated a run already read (same run id) "
            "and counted once")


def interval(lo: float, hi: float, digits: int = 1) -> str:
    """An interval as [lo, hi]."""
    return f"[{_num(lo, digits)}, {_num(hi, digits)}]"


def _md(cell: str) -> str:
    """A markdown table cell: | ` * _ [ ] < > escaped (text.markdown_cell)."""
    return markdown_cell(cell)


def _change_cell(r: Dict[str, Any]) -> str:
    if r.get("verdict") == "base":
        return "base"
    if r["change_ci_lo_pct"] != r["change_ci_lo_pct"]:
        return f"{r['change_pct']:+.1f} ±?"
    lo, hi, pct = r["change_ci_lo_pct"], r["change_ci_hi_pct"], r["change_pct"]
    half = (hi - lo) / 2  # a ratio's interval (from the logs) is not symmetric around it
    span = f"±{half:.1f}" if abs((hi - pct) - (pct - lo)) <= 0.1 * half else \
        f"[{lo:+.1f}, {hi:+.1f}]"
    return f"{pct:+.1f} {span}{'' if r['verdict'] == 'real' else ' ~'}"


def _say_invalid(store: Store, flt: Dict[str, str], name: str) -> None:
    """One line on stderr for the complete runs of a side left out as not valid."""
    import sys

    left = [r for r in store.select(flt, complete_only=False)
            if r.status == RunStatus.COMPLETE and not store.counted(r)]
    if left:
        sys.stderr.write(f"mpiwrite: {name}: {len(left)} run(s) not valid were left out "
                         f"(e.g. {printable(left[0].run_id)}: `mpiwrite show` says why; "
                         "--include-invalid counts them)\n")


def select_side(spec: str, store_in: Optional[Store], name: str = "A", level: str = "full",
                cache=None, where: Optional[Dict[str, str]] = None,
                include_invalid: bool = False):
    """A compare side: a record path or folder, or KEY=VALUE filters over --in; only the
    runs `where` (compare --where: every condition holds) also matches.  A complete run
    whose record says it is not valid is left out unless `include_invalid` (and named on
    stderr): an invalid run is never pooled with valid ones unasked.

    Returns (complete runs, number of unreadable records met, records repeating a run)."""
    import os

    if os.path.lexists(spec):
        store = Store([spec], option=name, level=level, cache=cache)
        store.include_invalid = include_invalid
        _say_invalid(store, dict(where or {}), name)
        return store.select(dict(where or {})), len(store.bad), len(store.duplicates)
    if "=" in spec and store_in is not None:
        own = parse_filter(spec, name)
        for key, value in (where or {}).items():
            if key in own and own[key] != value:
                raise ConfigError(f"{name}: {key}={own[key]} and --where {key}={value} "
                                  "cannot both hold")
        store_in.include_invalid = include_invalid
        _say_invalid(store_in, {**(where or {}), **own}, name)
        return store_in.select({**(where or {}), **own}), 0, len(store_in.duplicates)
    raise ConfigError(f"{name}: {printable(spec)!r} is neither a record path nor a KEY=VALUE "
                      "filter")


def compare_text(a_runs, b_runs, a_name: str, b_name: str, sampling: Sampling = DEFAULT_SAMPLING,
                 fail_if_slower: Optional[float] = None, duplicates: int = 0):
    """(text, JSON document, whether the --fail-if-slower gate failed)."""
    metric, confidence, units = sampling.metric, sampling.confidence, sampling.units
    info = metric_info(metric, units)
    from mpiwrite.answers.results import run_keys

    check_pooling({f"side {a_name}": list(a_runs), f"side {b_name}": list(b_runs)}, run_keys,
                  (), "compare")
    unit = resolve_unit(list(a_runs) + list(b_runs), sampling.unit, sampling.warmup)
    differing = differing_facts(a_runs, b_runs, run_keys)
    # a key both sides select on differs by design (config=A against config=B); a key only
    # one side names (config=A,block_size=1MiB against config=B) is a difference to show
    chosen = []
    for name in (a_name, b_name):
        try:
            chosen.append(set(parse_filter(name, "compare")) if "=" in name else set())
        except ConfigError:
            chosen.append(set())
    for k in chosen[0] & chosen[1]:
        differing.pop(k, None)
    va = sample_values(a_runs, metric, unit, sampling.warmup, units)
    vb = sample_values(b_runs, metric, unit, sampling.warmup, units)
    if not va or not vb:
        side, runs = (a_name, a_runs) if not va else (b_name, b_runs)
        raise ConfigError(no_figure_text(printable(side), len(runs), metric, sampling.warmup,
                                         within_warmup(runs, metric, sampling.warmup)))
    c = stats.compare(va, vb, confidence)
    mixed, inside = _confounded(a_runs, b_runs, differing, sampling, unit,
                                chosen[0] | chosen[1])
    carry = _carried(a_runs, b_runs, sampling, confidence)
    withheld = carry is not None and carry["flagged"]
    pct, d = f"{confidence * 100:g}%", info.digits
    lines = [f"{_metric_words(metric, units)}; test: Welch's t-test, {pct} confidence",
             f"samples: {unit_text(unit, sampling.unit, sampling.warmup)}"]
    from mpiwrite.answers import method

    methods = method.differences(a_runs, b_runs, run_keys, metric)  # two tools: their ways
    lines += method.text(methods)
    for name, s, runs in ((a_name, c.a, a_runs), (b_name, c.b, b_runs)):
        ci = f"{pct} CI {interval(s.lo, s.hi, d)}" if s.n > 1 else "no interval (n=1)"
        geo = ""
        if s.ratio:  # the scale of the verdict: the geometric mean with its own interval
            geo = f"; geometric mean {_num(s.gmean, d)}" + (
                f", {pct} CI {interval(s.glo, s.ghi, d)}" if s.n > 1 else "")
        lines.append(f"  A={name}" if name == a_name else f"  B={name}")
        lines.append(f"     {_count(len(runs), 'run')}, n={s.n}: mean {_num(s.mean, d)} "
                     f"{info.unit}, {ci}, sd {_num(s.std, d)}{geo}")
    verdict = verdict_text(c, metric)
    if withheld:
        c = c._replace(real=False)
        verdict = ("no verdict: the run before moved the figure as much as the side did "
                   "(carry-over, above)")
    elif mixed:
        named = ", ".join(m["key"] for m in mixed)
        verdict += (f"; confounded with {named}: the difference may be "
                    + (f"{named}'s" if len(mixed) == 1 else "theirs"))
    from mpiwrite.answers import carryover, confounding

    if mixed:
        found = [dict(m, v=m["association"]) for m in mixed]
        lines += ["  " + ln for ln in confounding.text("the sides", found, inside, confidence,
                                                        subject="the sides")]
    if carry is not None:
        lines.append("  " + carryover.text("", carry, confidence))
    if c.scale == "ratio":  # the test on the log of the rates: a ratio, never below -100%
        lines.append(f"  B / A{' over all runs, confounded' if mixed else ''}: {c.pct:+.1f}%, "
                     f"{pct} CI {interval(c.pct_lo, c.pct_hi)} (ratio "
                     f"of geometric means); B - A: {c.diff:+.{d}f} "
                     f"{info.diff_unit or info.unit}, {pct} CI "
                     f"{interval(c.diff_lo, c.diff_hi, d)} (of the geometric means)")
    else:
        lines.append(f"  B - A: {c.diff:+.{d}f} {info.diff_unit or info.unit}, {pct} CI "
                     f"{interval(c.diff_lo, c.diff_hi, d)}; "
                     f"{c.pct:+.1f}%, {pct} CI {interval(c.pct_lo, c.pct_hi)}")
    lines.append(f"  verdict: {verdict}")
    if differing:  # what else differs between the two groups, settings first
        lines.append("  also different between A and B:")
        for k, v in list(differing.items())[:DIFFERENCES_SHOWN]:
            lines.append(f"     {k}: {', '.join(v['a'])} -> {', '.join(v['b'])}")
        if len(differing) > DIFFERENCES_SHOWN:
            lines.append(f"     ... {len(differing) - DIFFERENCES_SHOWN} more in --json "
                         "(differing_facts)")
    failed = False
    if fail_if_slower is not None:
        failed, gate = _gate(c, metric, fail_if_slower)
        lines.append(gate)
    if duplicates:
        lines.append(_duplicate_note(duplicates))
    sfx = info.suffix
    doc = contract.header("compare")
    doc.update(metric=metric, **metric_fields(metric, units), unit=unit,
               unit_requested=sampling.unit,
               warmup=sampling.warmup, test="welch", scale=c.scale, confidence=confidence,
               a=dict(contract.summary_block(c.a, sfx), name=a_name, runs=len(a_runs)),
               b=dict(contract.summary_block(c.b, sfx), name=b_name, runs=len(b_runs)),
               **{f"diff_{sfx}": c.diff, f"diff_ci_lo_{sfx}": c.diff_lo,
                  f"diff_ci_hi_{sfx}": c.diff_hi},
               change_pct=c.pct, change_ci_lo_pct=c.pct_lo,
               change_ci_hi_pct=c.pct_hi, p_value=c.p_value, df=c.df, real=c.real,
               needed_per_side=c.needed_per_side, more_per_side=c.more_per_side,
               verdict=verdict, fail_if_slower_pct=fail_if_slower, gate_failed=failed,
               duplicate_records=duplicates, differing_facts=differing,
               confounded_with=mixed, within_confounders=inside, carryover=carry,
               method_differences=methods)
    return "\n".join(printable(ln) for ln in lines), contract.finite(doc), failed


UNKNOWN_VALUES = ("-", "unknown", "", "?", "n/a", "None")


def _restates(value: str, chosen: Sequence[str]) -> bool:
    """Whether a key's value says again what a chosen key's value says (the one holds the
    other): a restatement of the sides, not another cause."""
    v = value.lower()
    return any(min(len(v), len(c)) >= 2 and (v in c.lower() or c.lower() in v)
               for c in chosen)


def _confounded(a_runs, b_runs, differing, sampling: Sampling, unit: str, chosen: set,
                partial: bool = False):
    """The keys the sides also differ in (answers/confounding.py): ([{key, association,
    split}], the difference within their values, or None).  Sides chosen by a filter
    (checksums=on against checksums=off) are confounded by any other key whose values
    differ between them; sides given as folders by any, once two or more differ."""
    from mpiwrite.answers import confounding
    from mpiwrite.answers.differences import NOT_DIFFERENCES
    from mpiwrite.answers.results import run_keys

    runs = list(a_runs) + list(b_runs)
    sides = ["A"] * len(a_runs) + ["B"] * len(b_runs)
    of = [run_keys(r) for r in runs]
    outcomes = {k for ks in of for k in keys.outcome_keys(ks)}
    cands: Dict[str, List[str]] = {}
    by_split: Dict[tuple, str] = {}
    for k in sorted(set().union(*of), key=keys.relevance):
        if (k in NOT_DIFFERENCES and k != "host") or k in outcomes or k in chosen \
                or keys.kind(k) not in (keys.SETTING, keys.DURABILITY, keys.FACT) \
                or keys.volatile(k) or k.startswith("software."):
            continue
        if any(k.startswith((c + "_", c + ".")) for c in chosen):
            continue  # tool_version beside tool=ior: the chosen key's own detail
        if k.startswith("tag.") and (k[4:] in chosen or any(k[4:] in ks for ks in of)):
            continue  # tag.NAME: the tag NAME itself, under its other name
        col = [printable(str(ks.get(k, "-"))) for ks in of]
        if chosen and all(_restates(v, [str(ks.get(c, "")) for c in chosen])
                          for v, ks in zip(col, of)):
            continue  # client "lustre 1.6.5", a build tag "1.6.5-on" beside lustre=1.6.5
        known = [v not in UNKNOWN_VALUES for v in col]
        if not any(known[:len(a_runs)]) or not any(known[len(a_runs):]):
            continue  # a side that does not say (an import without node facts) differs in nothing
        if partial and len(set(col[:len(a_runs)])) == 1 and len(set(col[len(a_runs):])) == 1:
            continue  # one value a row: what tells the rows apart, as the grouping made them
        if len(set(col)) > 1 and tuple(col) not in by_split:  # fstype, fs.fstype: once
            by_split[tuple(col)] = k
            cands[k] = col
    if not chosen and len(cands) < 2:
        return [], None  # two folders that differ in one key: that key is the question
    found = confounding.confounders(sides, cands, aliases=True)
    if not found:
        return [], None
    strat = confounding.strata_keys(found, sides, cands)
    vals, labels, strata = [], [], []
    for r, side in zip(runs, sides):
        got = sample_values([r], sampling.metric, unit, sampling.warmup, sampling.units)
        vals += got
        labels += [side] * len(got)
        strata += [" / ".join(cands[k][runs.index(r)] for k in strat)] * len(got)
    inside = confounding.within(vals, labels, strata, "A", "B", sampling.confidence)
    return ([{"key": f["key"], "association": f["v"], "split": f["split"]} for f in found],
            dict(inside, keys=strat) if inside else None)


def _carried(a_runs, b_runs, sampling: Sampling, confidence: float):
    """The sides' carry-over where they are one study's runs with their order: a run after a
    B run against one after an A run (answers/carryover.py); None otherwise."""
    from mpiwrite.answers import carryover

    runs = list(a_runs) + list(b_runs)
    if not any(r.tags().get("study_prev_key") for r in runs):
        return None
    side_of = {}
    for r, side in zip(runs, ["A"] * len(a_runs) + ["B"] * len(b_runs)):
        side_of.setdefault((r.tags().get("study"), r.tags().get("study_key")), side)
    own, prev, vals = [], [], []
    for r, side in zip(runs, ["A"] * len(a_runs) + ["B"] * len(b_runs)):
        got = [v for v in metric_values(r, sampling.metric, sampling.warmup) if v == v]
        if not got:
            continue
        before = r.tags().get("study_prev_key")
        own.append(side)
        # a run before at another point of the study (neither side's): known, at neither
        prev.append(None if not before or before == carryover.NONE else
                    side_of.get((r.tags().get("study"), before), carryover.OTHER))
        vals.append(float(np.mean(got)))
    randomized = all(r.tags().get("study_order") in ("balanced", "random") for r in runs)
    found = carryover.two_levels(vals, own, prev, ["A", "B"], confidence=confidence,
                                 randomized=randomized)
    return carryover.as_json(found)


def within_warmup(runs, metric: str, warmup: int) -> int:
    """How many runs have the metric's figure but no iteration after the first `warmup`."""
    from mpiwrite.answers.results import metric_values

    return sum(1 for r in runs if warmup and metric_values(r, metric, 0)
               and not metric_values(r, metric, warmup))


def no_figure_text(what: str, runs: int, metric: str, warmup: int = 0,
                   short: int = 0) -> str:
    """Why a side or a report has no sample: no run at all, runs whose iterations are all
    within --warmup (`short` of them), or runs without the figure (a record from before
    client CPU was measured must say so, not look like a missing run)."""
    from mpiwrite.answers.results import CPU_METRICS, CPU_MISSING, a_figure

    if not runs:
        return f"{what}: no complete runs match"
    if short == runs:
        return (f"{what}: {_count(runs, 'complete run')}, but --warmup {warmup} leaves out "
                f"every iteration they have (give more iterations, -i, or a smaller --warmup)")
    after = f" after --warmup {warmup}" if warmup else ""
    why = f" ({CPU_MISSING})" if metric in CPU_METRICS else ""
    return f"{what}: {_count(runs, 'complete run')}, but none has {a_figure(metric)}{after}{why}"


def _metric_words(metric: str, units: str = "MB") -> str:
    """The compare header: MB/s as ever; a CPU metric names its unit and that less is better."""
    info = metric_info(metric, units)
    if info.higher_is_better:
        return f"metric: {metric} {info.unit}"
    return f"metric: {metric} in {info.unit} (less is better)"


def direction(metric: str, diff: float, b: str = "B") -> str:
    """Which way B (named `b`) differs from A, in the metric's words: faster or slower for
    MB/s, more or less CPU for the client CPU metrics (where more is the regression)."""
    up = diff > 0
    if metric == "cpu-per-GB":
        return f"{b} uses {'more' if up else 'less'} CPU per GB written"
    if metric == "client-cpu":
        return f"{b}'s busiest client uses {'more' if up else 'less'} CPU"
    return f"{b} is {'faster' if up else 'slower'}"


def verdict_text(c, metric: str, b: str = "B", p_note: str = "", pooled: bool = False) -> str:
    """compare's verdict on a stats.Comparison, with how many more repetitions would settle
    it; `study report` says the same sentence of each level (B named `b`; `p_note` after
    the p: how it was corrected; `pooled`: the test's noise is a whole study's, so a side of
    one sample is no reason to say nothing)."""
    if not pooled and (c.a.n < 2 or c.b.n < 2):
        return (f"cannot tell: each side needs at least 2 samples; about "
                f"{_count(c.more_per_side, 'more repetition')} per side")
    p = f"p = {c.p_value:.2g}{p_note}"
    if c.real:
        return f"a real difference ({p}): {direction(metric, c.diff, b)}"
    if c.more_per_side:
        return (f"within noise ({p}); about "
                f"{_count(c.more_per_side, 'more repetition')} per side ({c.needed_per_side}"
                " in all) would settle a difference of this size")
    return f"within noise ({p}); the means are identical"


def _gate(c, metric: str, allowed_pct: float):
    """(failed, text) of --fail-if-slower: B worse than A by more than allowed_pct percent
    and a real difference.  Worse is lower for MB/s and higher for client CPU."""
    info = metric_info(metric)
    worse = -c.pct if info.higher_is_better else c.pct
    if worse != worse and c.diff == c.diff:  # A's mean is 0: any real change is infinite
        worse = math.copysign(math.inf, -c.diff if info.higher_is_better else c.diff)
    failed = bool(c.real and worse == worse and worse > allowed_pct)
    what = f"B is {worse:.1f}% slower" if info.higher_is_better else \
        f"B uses {worse:.1f}% more CPU"
    if math.isinf(worse):
        what = "B's mean is 0" if info.higher_is_better else "B uses CPU where A's mean is 0"
    return failed, (f"  gate --fail-if-slower {allowed_pct:g}: "
                    + (f"FAIL ({what}, a real difference)" if failed else "pass"))
