"""`mpiwrite clean TARGET`: the data files that runs which are over left behind
(answers/clean.py decides what is whose)."""

from __future__ import annotations

import os
import sys

import click

from mpiwrite.cli.commands import _store
from mpiwrite.errors import ConfigError
from mpiwrite.text import printable


@click.command()
@click.argument("target")
@click.option("--results", "results", multiple=True, default=["results"], show_default=True,
              help="Folder(s) of the runs' records: only runs recorded there are cleaned.")
@click.option("--yes", is_flag=True, help="Remove the files (without it: say what would go).")
def clean(target, results, yes):
    """Remove the data files that runs which are over left in TARGET (a run killed for good,
    by SIGKILL, the OOM killer or a crashed node, cannot remove its own).

    Only files and run folders whose names carry the run id of a record in --results whose
    run is not running (complete, failed, interrupted, timeout, or abandoned: its processes
    are gone) are removed; nothing else is touched.  A dry run unless --yes."""
    from mpiwrite.answers.clean import plan, remove
    from mpiwrite.answers.state import run_state
    from mpiwrite.units import format_size

    for r in results:
        if not os.path.isdir(r):
            raise ConfigError(f"--results: {r!r} is not a folder of records")
    store, _code = _store(results, skip_bad=True, option="--results")
    states = {rec.run_id: run_state(rec) for rec in store.runs}
    p = plan(target, states)
    by_run: dict = {}
    for f in p.files:
        n, size = by_run.get(f.run_id, (0, 0))
        by_run[f.run_id] = (n + 1, size + f.size)
    verb = "removed" if yes else "would be removed"
    for rid, (n, size) in sorted(by_run.items()):
        folders = sum(1 for r, _ in p.folders if r == rid)
        extra = f" and {folders} run folder{'s' * (folders != 1)}" if folders else ""
        click.echo(printable(f"run {rid} ({states[rid]}): {n} file{'s' * (n != 1)} "
                             f"({format_size(size)}){extra} {verb}"))
    for why_left, n in sorted(p.left.items()):
        click.echo(f"left alone: {n} file{'s' * (n != 1)} or folder{'s' * (n != 1)} {why_left}")
    if not p.files and not p.folders:
        click.echo(f"nothing to remove in {printable(target)}")
        return 0
    if not yes:
        click.echo("dry run: nothing was removed; run again with --yes to remove these")
        return 0
    problems = remove(target, p)
    for line in problems[:10]:
        sys.stderr.write(printable(f"mpiwrite: clean: could not remove {line}") + "\n")
    return 1 if problems else 0
