"""Commands beyond `run` and `env`, each a thin layer over its module."""

from __future__ import annotations

import click

from mpiwrite.errors import ConfigError, RunError


@click.command()
@click.argument("paths", nargs=-1, required=True)
def verify(paths):
    """Check data files kept with --keep (files or folders): every block's header and body."""
    from mpiwrite.verify import data_files, verify_file

    bad = 0
    files = list(data_files(paths))
    if not files:
        raise ConfigError("PATHS: no mpiwrite data files found")
    for path in files:
        rep = verify_file(path)
        if rep.error:
            bad += 1
            click.echo(f"{path}: error: {rep.error}")
            continue
        for m in rep.mismatches:
            bad += 1
            click.echo(f"{path}: mismatch at offset {m.offset} (block "
                       f"{m.offset // rep.block_size}): expected {m.expected}, found {m.found}")
        if not rep.mismatches:
            click.echo(f"{path}: ok ({rep.blocks} blocks of {rep.block_size} bytes)")
    if bad:
        raise RunError(f"verify: {bad} problem(s) in {len(files)} file(s)")


def register(cli) -> None:
    cli.add_command(verify)
