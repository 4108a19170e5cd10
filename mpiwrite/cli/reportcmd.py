"""`mpiwrite report`: one row per configuration over the records under PATHS."""

from __future__ import annotations

import sys

import click

from mpiwrite.cli.lookup import key_list, open_store
from mpiwrite.cli.options import (
    FILTER_HELP,
    FORMATS,
    Where,
    cache_choice,
    cache_options,
    invalid_option,
    sampling_from,
    sampling_options,
    units_option,
    where_filter,
    where_option,
)
from mpiwrite.errors import ConfigError, RunError
from mpiwrite.text import printable

# What the man page and `mpiwrite help` show under EXAMPLES (cli/manpage.py)
EXAMPLES = {
    "report": ["mpiwrite report results/ --by lustre,checksums --baseline lustre=1.6.4.3",
               "mpiwrite report results/ --by checksums --limits",
              "mpiwrite report results/ --by nodes --metric first-done --format csv"],
}


@click.command()
@click.argument("paths", nargs=-1, required=True)
@click.option("--by", default="fstype,client,checksums", show_default=True,
              help="Comma-separated run keys or tags to group by.")
@sampling_options
@click.option("--baseline", default=None,
              help=f"The row to compare against: {FILTER_HELP}.")
@click.option("--format", "fmt", type=FORMATS, default="table", show_default=True,
              help="json and csv follow the output contract (docs/output.md).")
@click.option("--skip-bad", is_flag=True, help="Exit 0 even if some records were unreadable.")
@where_option
@click.option("--window", "window", default=None, metavar="START:END",
              help="The aggregate over this part of each iteration only (seconds from its "
                   "first write, e.g. 10:40), from the recorded samples: bytes write() "
                   "accepted, durable ones with --direct or --fsync-every.")
@click.option("--limits", "limits", is_flag=True,
              help="A column naming what limited each row's runs (the link, the client's "
                   "CPU, a target, dirty throttling, the page cache, the writer, the "
                   "storage), as `show` says it with its evidence; JSON: each run's verdict.")
@invalid_option
@units_option
@cache_options
def report(paths, by, metric, unit, warmup, confidence, baseline, fmt, skip_bad, where,
           window, limits, include_invalid, units, cache_dir, no_cache):
    """One row per configuration over the records under PATHS (files, folders, globs).

    To send it: `mpiwrite page PATHS -o FILE.html` writes the table, its verdicts and plots
    into one HTML file."""
    from mpiwrite.answers.report import format_rows, lacking_keys, report_rows
    from mpiwrite.answers.results import level_for, parse_window

    sampling = sampling_from(metric, unit, warmup, confidence, units)
    span = parse_window(window) if window is not None else None
    if span and metric != "aggregate":
        raise ConfigError("--window: takes the aggregate from the samples; give it with "
                          "--metric aggregate")
    store, code = open_store(paths, skip_bad, level="full" if span or limits else level_for(metric),
                         cache=cache_choice(cache_dir, no_cache))
    store.include_invalid, store.window = include_invalid, span
    flt = where_filter(where)
    if flt:
        if store.select() and not store.select(flt):
            raise ConfigError(f"--where: no complete run matches {', '.join(where)}")
        store = Where(store, flt)
    keys = key_list(by)
    rows, used = report_rows(store, keys, sampling, baseline, limits=limits)
    if not rows:
        text = no_rows_text(store, metric, warmup)
        if store.bad:
            raise RunError(f"{text}; {len(store.bad)} unreadable record(s) skipped")
        raise ConfigError(text)
    click.echo(format_rows(rows, keys, fmt, sampling, used, len(store.duplicates)))
    for key, n in lacking_keys(store, keys).items():
        sys.stderr.write(printable(f"mpiwrite: {n} run(s) without {key!r}: grouped under "
                                   f"'-'") + "\n")
    if span and fmt == "csv":  # the table says it under itself, JSON in window_seconds
        sys.stderr.write(f"mpiwrite: the aggregate of {span[0]:g}s to {span[1]:g}s of each "
                         "iteration from its first write, from the samples (an iteration "
                         f"that ended before {span[1]:g}s has none)\n")
    note_runs_without(store, metric, warmup)
    note_never_steady(store)
    say_left_out(store)
    return code


def note_never_steady(store) -> None:
    """On stderr: the counted runs with an iteration that never became steady by its
    --steady criterion (beside the figures they are part of; `show` says more)."""
    from mpiwrite.answers.window import steady_note

    said = steady_note(store.select())
    if said:
        sys.stderr.write(printable(f"mpiwrite: {said}") + "\n")


def say_left_out(store) -> None:
    """On stderr: the runs not counted, by state (report, explain)."""
    from mpiwrite.answers.results import INVALID
    from mpiwrite.answers.state import ABANDONED

    skipped = store.not_complete()
    if not skipped:
        return
    said = ", ".join(f"{n} {state}" for state, n in sorted(skipped.items()))
    sys.stderr.write(printable(f"mpiwrite: {sum(skipped.values())} run(s) that did not "
                               f"complete{' or are not valid' if INVALID in skipped else ''} "
                               f"were left out ({said})") + "\n")
    if INVALID in skipped:
        sys.stderr.write("mpiwrite: `mpiwrite show RUN` says why a run is not valid; "
                         "--include-invalid counts them\n")
    if ABANDONED in skipped:
        sys.stderr.write("mpiwrite: an abandoned run was killed for good; `mpiwrite clean "
                         "TARGET --results DIR` removes the data files it left\n")


def no_rows_text(store, metric: str, warmup: int) -> str:
    """Why a report is empty: no complete run, or complete runs without the metric's figure
    (e.g. client CPU in records from before it was measured)."""
    from mpiwrite.answers.report import no_figure_text, within_warmup

    complete = len(store.select())
    span = getattr(store, "window", None)
    if complete and span:
        return (f"--window: {complete} complete run(s), but no iteration wrote until "
                f"{span[1]:g}s, or none has samples: no aggregate over {span[0]:g}s to "
                f"{span[1]:g}s")
    if complete:
        return no_figure_text("PATHS", complete, metric, warmup,
                              within_warmup(store.select(), metric, warmup))
    others = store.not_complete()
    said = ", ".join(f"{n} {state}" for state, n in sorted(others.items()))
    from mpiwrite.answers.results import INVALID

    if others and set(others) == {INVALID}:
        return (f"PATHS: no valid complete runs found ({others[INVALID]} not valid: `mpiwrite "
                "show RUN` says why; --include-invalid counts them)")
    return "PATHS: no complete runs found" + (
        f" ({sum(others.values())} run(s) that did not complete or are not valid: {said})"
        if others else "")


def note_runs_without(store, metric: str, warmup: int) -> None:
    """Name on stderr the complete runs left out for lack of the figure, so a report over old
    and new records does not silently stand for fewer runs than were given."""
    from mpiwrite.answers.report import within_warmup
    from mpiwrite.answers.results import CPU_METRICS, CPU_MISSING, a_figure, metric_values

    short = within_warmup(store.select(), metric, warmup)
    if short:
        sys.stderr.write(f"mpiwrite: {short} complete run(s) left out: --warmup {warmup} "
                         f"leaves out every iteration they have\n")
    left = sum(1 for r in store.select() if not metric_values(r, metric, warmup)) - short
    if left:
        why = f" ({CPU_MISSING})" if metric in CPU_METRICS else ""
        sys.stderr.write(f"mpiwrite: {left} complete run(s) without {a_figure(metric)} were "
                         f"left out{why}\n")
