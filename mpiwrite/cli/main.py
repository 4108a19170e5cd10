"""Command line: thin click commands over the modules.  Only `run` starts MPI.

Exit codes: 0 success; 1 a run that failed (I/O error, timeout, verify mismatch), or records
that could not be read; 2 bad input (nothing written); 130/143 a run interrupted by
SIGINT/SIGTERM.  Errors are one line on stderr; --debug shows tracebacks.
"""

from __future__ import annotations

import importlib
import sys
from typing import Optional

import click

from mpiwrite import __version__
from mpiwrite.errors import ConfigError, MpiwriteError
from mpiwrite.text import printable


def _show_traceback() -> None:
    """--debug's traceback; traceback is imported only then (every rank would load it)."""
    import traceback

    traceback.print_exc()


def working_folder() -> str:
    """The current folder, or ConfigError when it was removed (every relative path and
    os.path.abspath would raise FileNotFoundError)."""
    import os

    try:
        return os.getcwd()
    except FileNotFoundError:
        raise ConfigError("the current folder was removed; change to an existing folder "
                          "(or give absolute paths from one)") from None


def _say_error(text: str) -> None:
    sys.stderr.write(printable(f"mpiwrite: error: {text}") + "\n")
    sys.stderr.flush()


class LazyGroup(click.Group):
    """Commands load their module when they are used (click's lazy-loading idiom): no import
    cycle between this group and the commands, and `run` starts without loading reports."""

    def __init__(self, *args, lazy=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.lazy = dict(lazy or {})

    def list_commands(self, ctx):
        return sorted(set(super().list_commands(ctx)) | set(self.lazy))

    def get_command(self, ctx, name):
        if name in self.lazy:
            module, attr = self.lazy[name].split(":")
            return getattr(importlib.import_module(module), attr)
        return super().get_command(ctx, name)


LAZY = {"run": "mpiwrite.cli.runcmd:run", "verify": "mpiwrite.cli.commands:verify",
        "report": "mpiwrite.cli.commands:report", "compare": "mpiwrite.cli.commands:compare",
        "show": "mpiwrite.cli.commands:show", "plot": "mpiwrite.cli.commands:plot",
        "jobscript": "mpiwrite.cli.commands:jobscript", "clean": "mpiwrite.cli.clean:clean",
        "study": "mpiwrite.cli.study:study", "explain": "mpiwrite.cli.explaincmd:explain",
        "import": "mpiwrite.cli.importcmd:import_", "tune": "mpiwrite.cli.tuneplan:tune",
        "help": "mpiwrite.cli.helpcmd:help_"}


@click.group(cls=LazyGroup, lazy=LAZY, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="mpiwrite")
@click.option("--debug", is_flag=True, help="Show tracebacks on errors.")
@click.pass_context
def cli(ctx, debug):
    """Parallel fsync'd write test for HPC filesystems, with HDF5 records and statistics.

    Launch `run` under MPI, e.g. `mpiexec -n 16 mpiwrite run /lustre/scratch/me`.
    """
    ctx.obj = {"debug": debug}


@cli.command()
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
        from mpiwrite.cli.commands import _installed_family
        from mpiwrite.cli.jobscript import srun_mpi_for

        click.echo(srun_mpi_for(_installed_family()))
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


def _is_run(args) -> bool:
    words = [a for a in args if not a.startswith("-")]
    return bool(words) and words[0] == "run"


def main(argv: Optional[list] = None) -> None:
    args = argv if argv is not None else sys.argv[1:]
    debug = "--debug" in args
    try:
        if not _is_run(args):  # `run` says so through its ranks (runcmd.config_from)
            working_folder()
        code = cli.main(args=argv, prog_name="mpiwrite", standalone_mode=False)
    except click.exceptions.Exit as exc:
        code = exc.exit_code
    except click.exceptions.Abort:
        code = 130
    except click.ClickException as exc:
        if debug:
            _show_traceback()
        if isinstance(exc, click.NoSuchOption):
            from mpiwrite.cli.options import suggest_for_unknown

            suggest_for_unknown(exc)
        message = exc.format_message().replace("\n", " ")
        from mpiwrite.cli.runcmd import agree_on_usage_error, launcher_size

        if _is_run(args) and launcher_size() > 1:
            code = agree_on_usage_error(message)
        else:
            _say_error(message)
            code = exc.exit_code
    except MpiwriteError as exc:
        if debug:
            _show_traceback()
        _say_error(str(exc).replace("\n", " "))
        code = exc.exit_code
    except BrokenPipeError:
        code = 1
    code = code if isinstance(code, int) else 0
    if _is_run(args) and "mpi4py.MPI" in sys.modules:
        from mpiwrite.cli import ranks

        ranks.leave_run(code)  # never returns
    sys.exit(code)


__all__ = ["cli", "main", "ConfigError"]
