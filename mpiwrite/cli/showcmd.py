"""`mpiwrite show`: one run in full."""

from __future__ import annotations

import os

import click

from mpiwrite.cli.lookup import open_store, refuse_missing_in
from mpiwrite.cli.options import (
    INT,
)
from mpiwrite.errors import ConfigError, RunError


@click.command()
@click.argument("run")
@click.option("--in", "where", multiple=True, default=["results"], show_default=True,
              help="Where to look for a run given by its id.")
@click.option("--iteration", type=INT, default=None, help="Per-rank table of this iteration.")
@click.option("--by", "by", type=click.Choice(["rank", "target"]), default="rank",
              show_default=True, help="target: also per storage target (OST, brick, pool), "
              "over every iteration's files (or --iteration's): ranks, bytes, rates, and which "
              "is slower than the others beyond noise.")
@click.option("--skip-bad", is_flag=True, help="Exit 0 even if some records were unreadable.")
def show(run, where, iteration, by, skip_bad):
    """One run in full: parameters, nodes, per-node and per-rank figures, warnings.

    RUN is a record file, a folder holding one record, or a run id, its start or its
    random suffix (the last part, e.g. 524bd3) looked up in --in.

    To send it: `mpiwrite page RECORD -o FILE.html` writes it with its plots into one HTML
    file."""
    from mpiwrite.answers.results import run_keys
    from mpiwrite.answers.show import show_text

    code = 0
    if os.path.isdir(run):
        store, code = open_store([run], skip_bad, "RUN")
        if store.conflicts:
            raise ConfigError(f"RUN: {store.conflict_text(next(iter(store.conflicts)))}")
        if len(store.runs) != 1:
            raise ConfigError(f"RUN: {run!r} is a folder with {len(store.runs)} readable "
                              "records, not one; give one record file, or a run id with --in "
                              "FOLDER")
        rec = store.runs[0]
    elif os.path.lexists(run):
        from mpiwrite.records.store import FolderStore

        rec = FolderStore().whole(run)  # RecordError: named, exit 1 (libhdf5 in a child only)
    else:
        refuse_missing_in(where, f"RUN: {run!r} is not a file")
        store, code = open_store(where, skip_bad, "--in")
        rec = store.find_run(run)
    try:
        keys = run_keys(rec)
        text = show_text(rec, keys, iteration)
        if by == "target":
            from mpiwrite.answers.targets import target_lines

            text += "\n" + "\n".join(target_lines(
                rec, iterations=None if iteration is None else [iteration]))
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise RunError(f"{rec.path}: unusable record ({type(exc).__name__}: {exc})") from None
    click.echo(text)
    return code
