"""`mpiwrite env`: this node's facts, and PATH's filesystem, without starting MPI."""

from __future__ import annotations

import click

from mpiwrite.errors import ConfigError

# What the man page and `mpiwrite help` show under EXAMPLES (cli/manpage.py)
EXAMPLES = {
    "env": ["mpiwrite env /lustre/scratch/$USER"],
}


@click.command()
@click.argument("path", required=False, default=".")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option("--raw", is_flag=True, help="With --json: include the raw text of files read.")
@click.option("--sysroot", default=None, envvar="MPIWRITE_SYSROOT",
              help="Read /proc and /sys under this folder.")
@click.option("--srun-mpi", is_flag=True, help="Print only srun's --mpi plugin for the MPI "
              "that mpi4py loads here (pmix for Open MPI, pmi2 for the MPICH family; empty "
              "when not known): what the shipped jobscripts ask.")
def env(path, as_json, raw, sysroot, srun_mpi):
    """Print this node's facts (and PATH's filesystem) without starting MPI."""
    import json
    import os

    from mpiwrite.facts import nodeinfo

    if srun_mpi:
        from mpiwrite.cli.jobscript import srun_mpi_for
        from mpiwrite.cli.jobscriptcmd import installed_family

        click.echo(srun_mpi_for(installed_family()))
        return 0

    if not sysroot and not os.path.exists(path):  # else it would describe the folder above
        raise ConfigError(f"PATH: {path!r} does not exist")
    facts = nodeinfo.collect(path, sysroot or "/")
    if as_json:
        if not raw:
            facts.pop("raw", None)
        click.echo(json.dumps(facts, indent=1, sort_keys=True))
    else:
        click.echo("\n".join(nodeinfo.describe(facts)))
