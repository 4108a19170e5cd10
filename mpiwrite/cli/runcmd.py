"""The `run` command: options, their parsing into a RunConfig, and the hand-over to MPI.

Kept apart from cli.py so that `jobscript` can check run arguments without importing the
command group (no import cycle), and so that starting `mpiwrite run` imports only what a
run needs.
"""

from __future__ import annotations

import os
import sys

import click

from mpiwrite.cli.options import INT
from mpiwrite.cli.presets import apply as apply_preset
from mpiwrite.errors import ConfigError
from mpiwrite.run import config, options
from mpiwrite.run.process import launcher_rank, launcher_size

# What the man page and `mpiwrite help` show under EXAMPLES (cli/manpage.py)
EXAMPLES = {
    "run": ["mpiexec -n 4 mpiwrite run",
           "mpiexec -n 64 mpiwrite run /lustre/scratch/$USER/mpiwrite -t 200 -i 3 "
           "--tag build=1.6.5",
           "srun --mpi=pmix mpiwrite run $SCRATCH/mpiwrite -s 4GiB --fsync-every 64 --json -"],
}


class _Kind(click.ParamType):
    """A click type over one of the table's converters (run/options.py): the command line
    and a study's points read a value the same way."""

    def __init__(self, name: str, convert):
        self.name, self._convert = name, convert

    def convert(self, value, param, ctx):
        try:
            return self._convert(value)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


SIZE, DURATION = _Kind("SIZE", options.size), _Kind("TIME", options.duration)
_TYPES = {"size": SIZE, "duration": DURATION, "int": INT}


def _click_option(opt: options.Opt):
    """The click option of one entry of the table."""
    kw = {"default": opt.default, "help": opt.help}
    if opt.kind in _TYPES:
        kw["type"] = _TYPES[opt.kind]
    elif opt.kind == "choice":
        kw["type"] = click.Choice(list(options.choices_of(opt)))
    elif opt.kind == "flag":
        kw = {"is_flag": True, "help": opt.help}
    elif opt.kind == "texts":
        kw = {"multiple": True, "help": opt.help}
    if opt.metavar:
        kw["metavar"] = opt.metavar
    if opt.envvar:
        kw["envvar"] = opt.envvar
    return click.option(*opt.flags, opt.name, **kw)


def _run_options(f):
    """Every option of `run`, from the table, in its order."""
    for opt in reversed(options.TABLE):
        f = _click_option(opt)(f)
    return f


@click.command(context_settings={"show_default": True})
@click.argument("target", required=False)
@_run_options
@click.pass_context
def run(ctx, **_params):
    """Run the parallel write test into TARGET (a directory; default ./mpiwrite-data)."""
    from mpiwrite.run import guard

    argv = ["mpiwrite"] + sys.argv[1:]
    if ctx.params.get("json_path") == "-":
        json_only_on_stdout()
    ctx.params, words = apply_preset(ctx, ctx.params)
    if words and launcher_rank() == 0:
        click.echo(f"mpiwrite: --preset {ctx.params['preset']}: {' '.join(words)}", err=True)
    screen, params = _screen(ctx.params), shared_params(ctx)
    try:
        cfg = config_from(ctx.params)
    except ConfigError as exc:
        if launcher_size() <= 1:
            raise
        # Under a launcher, a rank with bad input still joins the others to say so: a rank
        # that leaves alone leaves the rest waiting (a node-local --tag-file missing on one).
        return guard.main(None, argv, str(exc), screen=screen, params=params)
    return guard.main(cfg, argv, screen=screen, params=params)


def _screen(params: dict) -> dict:
    """The screen options, for rank 0's console only (the other ranks never load it)."""
    return {"units": params.get("units", "MB"), "ior_summary": bool(params.get("ior_summary")),
            "live": params.get("live")}


def shared_params(ctx) -> dict:
    """The parsed options, as rank 0 sends them to the ranks that take them instead of
    parsing their own (cli/ranks.py): an option click read from the environment, or left at
    its default, is None, for each rank to read from its own environment."""
    params = dict(ctx.params)
    for name in options.FROM_ENVIRONMENT:
        if ctx.get_parameter_source(name) != click.core.ParameterSource.COMMANDLINE:
            params[name] = None
    return params


def parse_own(args: list):
    """This rank's own command line (the words after `mpiwrite run`), parsed after MPI started,
    for a rank that could not take rank 0's options (cli/ranks.py): (RunConfig or None, the
    problem, the parsed options, the screen options)."""
    try:
        with run.make_context("run", list(args)) as ctx:
            params = ctx.params = apply_preset(ctx, ctx.params)[0]
    except click.ClickException as exc:
        return None, exc.format_message().replace("\n", " "), None, None
    except click.exceptions.Exit:  # cli/ranks.quick keeps --help off this path
        return None, "the options end the command before it runs", None, None
    try:
        return config_from(params), "", shared_params(ctx), _screen(params)
    except ConfigError as exc:
        return None, str(exc), shared_params(ctx), _screen(params)


def json_only_on_stdout() -> None:
    """--json -: standard output carries the JSON and nothing else.  Before MPI starts,
    every rank points its file descriptor 1 at standard error, so that what libraries write
    there (UCX logs to stdout: with UCX_LOG_LEVEL=debug, 1,300 lines after the JSON) goes to
    stderr; Python's sys.stdout, which only the JSON is written to (the screen goes to stderr),
    keeps the original stream."""
    try:
        sys.stdout.flush()
        saved = os.dup(1)
        os.dup2(2, 1)
    except OSError:
        return
    sys.stdout = os.fdopen(saved, "w", closefd=True)


config_from = config.from_params  # the name the other commands use


def agree_on_usage_error(message: str) -> int:
    """A usage error in `run` under a launcher: tell the other ranks (exit 2 everywhere)."""
    from mpiwrite.run import guard

    return guard.main(None, ["mpiwrite"] + sys.argv[1:], message)
