"""`mpiwrite show`: one run in full."""

from __future__ import annotations

import click

from mpiwrite.cli.lookup import one_run
from mpiwrite.cli.options import (
    INT,
)
from mpiwrite.errors import RunError

# What the man page and `mpiwrite help` show under EXAMPLES (cli/manpage.py)
EXAMPLES = {
    "show": ["mpiwrite show results/mpiwrite-20261129T220833Z-524bd3.h5"],
}


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

    rec, code = one_run(run, where, skip_bad)
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
