"""Command line: thin click commands over the modules.  Only `run` starts MPI.

Exit codes: 0 success; 1 a run that failed (I/O error, timeout, verify mismatch), or records
that could not be read; 2 bad input (nothing written); 130/143 a run interrupted by
SIGINT/SIGTERM.  Errors are one line on stderr; --debug shows tracebacks.
"""

from __future__ import annotations

import dataclasses
import importlib
import sys
from typing import Optional

import click

from mpiwrite import __version__
from mpiwrite.errors import ConfigError, MpiwriteError
from mpiwrite.text import printable

# What the man page and `mpiwrite help` show under EXAMPLES (cli/manpage.py)
EXAMPLES = {
    "mpiwrite": ["mpiexec -n 16 mpiwrite run /lustre/scratch/$USER/mpiwrite -t 200 -i 3",
                "mpiwrite report results/ --by lustre,checksums --baseline lustre=1.6.4.3"],
}


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


@dataclasses.dataclass(frozen=True)
class Invocation:
    """What the group's own options say, for every command (click's `ctx.obj`)."""

    debug: bool = False  # --debug: tracebacks on errors


LAZY = {  # one module a command
    "run": "mpiwrite.cli.runcmd:run",
    "env": "mpiwrite.cli.envcmd:env",
    "verify": "mpiwrite.cli.verifycmd:verify",
    "report": "mpiwrite.cli.reportcmd:report",
    "compare": "mpiwrite.cli.comparecmd:compare",
    "show": "mpiwrite.cli.showcmd:show",
    "timeline": "mpiwrite.cli.timelinecmd:timeline",
    "plot": "mpiwrite.cli.plotcmd:plot",
    "jobscript": "mpiwrite.cli.jobscriptcmd:jobscript",
    "clean": "mpiwrite.cli.clean:clean",
    "study": "mpiwrite.cli.study:study",
    "explain": "mpiwrite.cli.explaincmd:explain",
    "import": "mpiwrite.cli.importcmd:import_",
    "tune": "mpiwrite.cli.tuneplan:tune",
    "page": "mpiwrite.cli.pagecmd:page",
    "help": "mpiwrite.cli.helpcmd:help_",
}


@click.group(cls=LazyGroup, lazy=LAZY, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="mpiwrite")
@click.option("--debug", is_flag=True, help="Show tracebacks on errors.")
@click.pass_context
def cli(ctx, debug):
    """Parallel fsync'd write test for HPC filesystems, with HDF5 records and statistics.

    Launch `run` under MPI, e.g. `mpiexec -n 16 mpiwrite run /lustre/scratch/me`.
    """
    ctx.obj = Invocation(debug=debug)


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
