"""`mpiwrite clean TARGET`: the data files that runs which are over left behind
(answers/clean.py decides what is whose, answers/state.py whether a run is over)."""

from __future__ import annotations

import os
import sys

import click

from mpiwrite.cli.lookup import open_store
from mpiwrite.errors import ConfigError
from mpiwrite.text import printable

# What the man page and `mpiwrite help` show under EXAMPLES (cli/manpage.py)
EXAMPLES = {
    "clean": ["mpiwrite clean /lustre/scratch/$USER/mpiwrite --results results/",
             "mpiwrite clean /lustre/scratch/$USER/mpiwrite --results results/ --yes"],
}


@click.command()
@click.argument("target")
@click.option("--results", "results", multiple=True, default=["results"], show_default=True,
              help="Folder(s) of the runs' records: only runs recorded there are cleaned.")
@click.option("--yes", is_flag=True, help="Remove the files (without it: say what would go).")
@click.option("--force", is_flag=True,
              help="Also remove the files of runs whose end cannot be proven (no lock file, "
                   "locks that do not work there, a node on another host) and of run ids "
                   "that differing records claim.  A run whose lock is held is never removed.")
def clean(target, results, yes, force):
    """Remove the data files that runs which are over left in TARGET (a run killed for good,
    by SIGKILL, the OOM killer or a crashed node, cannot remove its own).

    Only files and run folders whose names carry the run id of a record in --results whose
    run is proven over are removed: its record is final (complete, failed, interrupted,
    timeout), or it says running and every node's lock file is free on this host
    (abandoned).  A run whose lock is held is live and left alone; a run that cannot be
    proven over, or whose run id two differing records claim, is named and left alone
    unless --force.  Nothing else is touched.  A dry run unless --yes."""
    from mpiwrite.answers.clean import plan, remove
    from mpiwrite.units import format_size

    for r in results:
        if not os.path.isdir(r):
            raise ConfigError(f"--results: {r!r} is not a folder of records")
    store, _code = open_store(results, skip_bad=True, option="--results")
    runs = {rec.run_id: [rec] for rec in store.runs}
    runs.update(store.conflicts)
    conflicts = {rid: store.conflict_text(rid) for rid in store.conflicts}
    p = plan(target, runs, force, conflicts)
    for line in sorted(p.refused.values()):
        click.echo(printable(line))
    by_run: dict = {}
    for f in p.files:
        n, size, locks = by_run.get(f.run_id, (0, 0, 0))
        if f.name.endswith(".lock") and not f.folder:
            by_run[f.run_id] = (n, size, locks + 1)
        else:
            by_run[f.run_id] = (n + 1, size + f.size, locks)
    verb = "removed" if yes else "would be removed"
    for rid, (n, size, locks) in sorted(by_run.items()):
        folders = sum(1 for r, _ in p.folders if r == rid)
        what = [f"{n} file{'s' * (n != 1)} ({format_size(size)})"] if n else []
        what += [f"{folders} run folder{'s' * (folders != 1)}"] if folders else []
        what += [f"{locks} lock file{'s' * (locks != 1)}"] if locks else []
        v = p.runs[rid]
        proof = "" if v.proven else ", not proven: --force"
        click.echo(printable(f"run {rid} ({v.state}{proof}): {' and '.join(what)} {verb}"))
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
