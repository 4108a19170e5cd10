"""`explain`: which keys account for a metric's variation over the records under PATHS, or
between the ranks of one run (PATHS one record file)."""

from __future__ import annotations

import os

import click

from mpiwrite.cli.lookup import open_store
from mpiwrite.cli.options import (
    invalid_option,
    sampling_from,
    sampling_options,
    where_filter,
    where_option,
)
from mpiwrite.cli.reportcmd import no_rows_text, note_runs_without, say_left_out
from mpiwrite.errors import ConfigError, RunError

# What the man page and `mpiwrite help` show under EXAMPLES (cli/manpage.py)
EXAMPLES = {
    "explain": ["mpiwrite explain results/",
               "mpiwrite explain results/ --where fstype=lustre --metric cpu-per-GB "
               "--format json"],
}


@click.command()
@click.argument("paths", nargs=-1, required=True)
@where_option
@sampling_options
@click.option("--format", "fmt", type=click.Choice(["table", "markdown", "json"]),
              default="table", show_default=True,
              help="json follows the output contract (docs/output.md).")
@click.option("--skip-bad", is_flag=True, help="Exit 0 even if some records were unreadable.")
@invalid_option
def explain(paths, where, metric, unit, warmup, confidence, fmt, skip_bad, include_invalid):
    """Which node facts, run parameters and tags explain the metric's variation over the
    complete runs under PATHS: each key's share of the variance with a permutation p, keys
    that change together named as confounded, effects within each other's levels
    (docs/explain.md).  PATHS one record file: the variation between that run's ranks, per
    storage target, host and node fact.

    To send it: `mpiwrite page PATHS -o FILE.html` puts this answer, the table and the plots
    into one HTML file."""
    from mpiwrite.answers.explain import explain as explain_runs
    from mpiwrite.answers.explain_text import format_explain

    sampling = sampling_from(metric, unit, warmup, confidence)
    if len(paths) == 1 and os.path.isfile(paths[0]):
        return _one_run(paths[0], where, sampling, fmt)
    store, code = open_store(paths, skip_bad)
    store.include_invalid = include_invalid
    flt = where_filter(where)
    runs = store.select(flt)
    if not runs:
        text = (f"--where: no complete run matches {', '.join(where)}" if flt and
                store.select() else no_rows_text(store, metric, warmup))
        if store.bad:
            raise RunError(f"{text}; {len(store.bad)} unreadable record(s) skipped")
        raise ConfigError(text)
    doc = explain_runs(runs, store.keys, sampling)
    doc["duplicate_records"] = len(store.duplicates)
    doc["where"] = flt
    click.echo(format_explain(doc, fmt))
    note_runs_without(store, metric, warmup)
    say_left_out(store)
    return code


def _one_run(path, where, sampling, fmt):
    """`explain RECORD`: the ranks of one run (answers/explain_run.py)."""
    from mpiwrite.answers.explain_run import explain_run
    from mpiwrite.answers.explain_text import format_explain
    from mpiwrite.records.store import FolderStore

    if where:
        raise ConfigError("--where: selects runs; PATHS is one record, whose ranks are "
                          "explained (give a folder to select runs in it)")
    # read whole in a worker (never by libhdf5 in this process): RecordError, named, exit 1
    rec = FolderStore().whole(path)
    try:
        doc = explain_run(rec, sampling)
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise RunError(f"{path}: unusable record ({type(exc).__name__}: {exc})") from None
    click.echo(format_explain(doc, fmt))
    return 0
