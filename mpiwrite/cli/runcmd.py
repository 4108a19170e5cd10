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
from mpiwrite.cli.presets import PRESETS
from mpiwrite.cli.presets import apply as apply_preset
from mpiwrite.errors import ConfigError
from mpiwrite.run import config
from mpiwrite.run.process import launcher_rank, launcher_size
from mpiwrite.units import RATE_UNITS, format_size, parse_size, parse_time
from mpiwrite.vocab.offsets import PATTERNS


class Size(click.ParamType):
    name = "SIZE"

    def convert(self, value, param, ctx):
        if isinstance(value, int):
            return value
        try:
            n = parse_size(value)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)
        if n <= 0:
            self.fail(f"{value!r} must be larger than 0", param, ctx)
        return n


class Duration(click.ParamType):
    name = "TIME"

    def convert(self, value, param, ctx):
        if isinstance(value, (int, float)):
            return float(value)
        try:
            return parse_time(value)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


SIZE, DURATION = Size(), Duration()
D = config.DEFAULTS  # every default is RunConfig's; the options show them as a user writes them


def _seconds(value: float) -> str:
    return f"{value:g}s" if value else "0"


def _stripe_options(f):
    """The three options, for `mpiwrite run` (applied bottom-up like any click decorators)."""
    f = click.option("--ost-index", type=INT, default=None, metavar="I",
                     help="Lustre: first OST of each file (-1 any).")(f)
    f = click.option("--stripe-size", default=None, metavar="S",
                     help="Lustre: stripe size, a multiple of 64KiB (e.g. 1M, 4MiB).")(f)
    f = click.option("--stripe-count", type=INT, default=None, metavar="N",
                     help="Lustre: OSTs per file (-1 all).")(f)
    return f


@click.command(context_settings={"show_default": True})
@click.argument("target", required=False)
@click.option("--layout", type=click.Choice(config.LAYOUTS), default=D.layout,
              help="fpp: a file per rank; shared: one file, a contiguous segment per rank "
              "(N-to-1).")
@click.option("-b", "--block-size", type=SIZE, default=format_size(D.block_size),
              help="Bytes per write call. "
              "Sizes: k, M, G and KiB, MiB, GiB are binary (1M = 2^20 bytes); kB, MB, GB are "
              "decimal (1MB = 10^6 bytes, unlike fio).")
@click.option("-s", "--size", type=SIZE, default=None,
              help=f"Bytes per rank [default: {format_size(D.size)} unless --time or --count "
                   "is given].")
@click.option("--count", type=INT, default=None, help="Blocks per rank (instead of --size).")
@click.option("-t", "--time", "time_limit", type=DURATION, default=None,
              help="Stop writing after this long, counting only completed writes (lmdd time=): "
                   "60, 60s, 5min, 1h. A bare 'm' is refused (IOR's -t 1m is a transfer size).")
@click.option("--fsync/--no-fsync", default=D.fsync,
              help="fsync after the last write, inside the timed interval (lmdd fsync=1).")
@click.option("--fsync-every", type=INT, default=D.fsync_every,
              help="Also fsync after every N blocks.")
@click.option("--direct", is_flag=True, help="O_DIRECT with an aligned buffer.")
@click.option("-i", "--iterations", type=INT, default=D.iterations, help="Repetitions.")
@click.option("--delay", type=DURATION, default=_seconds(D.delay),
              help="Pause between iterations.")
@click.option("--keep", is_flag=True, help="Keep the data files (default: remove them).")
@click.option("--results", default=D.results, help="Folder for the HDF5 records.")
@click.option("--no-record", is_flag=True, help="Do not write an HDF5 record.")
@click.option("--json", "json_path", default=None,
              help="Write a JSON summary to PATH, or '-' for stdout (then the table goes "
                   "to stderr).")
@click.option("--tag", "tags", multiple=True, help="KEY=VALUE stored with the run (repeatable).")
@click.option("--tag-file", default=None, help="File of KEY=VALUE lines (# comments; spaces "
              "around KEY and VALUE are dropped).")
@click.option("--sample-interval", type=DURATION, default=_seconds(D.sample_interval),
              help="How often each rank records its bytes written so far.")
@click.option("--progress-interval", type=DURATION, default=_seconds(D.progress_interval),
              help="How often rank 0 prints progress (0: never).")
@click.option("--timeout", type=DURATION, default=None,
              help="End the run if a rank has not finished its writes after this long "
                   "[default: 3 x --time, at least 60s, when --time is given, else none; "
                   "0: none].")
@click.option("--stall", type=DURATION, default=None,
              help="Name a rank whose bytes have not grown for this long, with what it waits "
                   "on [default: 3 progress intervals; 0: never].")
@click.option("--live/--no-live", default=None,
              help="A live table, one row per node, redrawn each progress interval "
                   "[default: on a terminal; else one line per interval].")
@click.option("--files-per-dir", type=INT, default=D.files_per_dir,
              help="Spread file-per-rank files over subdirectories of at most N files.")
@click.option("--verify", is_flag=True, help="Read every block back and check it (timed "
              "separately).")
@click.option("--verify-shift", type=INT, default=D.verify_shift,
              help="Verify the data of the rank N positions away (defeats the client cache).")
@click.option("--read", is_flag=True, help="After writing, every rank reads (and with --verify "
              "checks) a file another rank wrote, timed like the writes.")
@click.option("--read-shift", type=INT, default=None,
              help="Read the file of the rank N positions away [default: the ranks per node, "
                   "so no client reads what its own cache holds].")
@click.option("--drop-cache", is_flag=True, help="Before reading, drop the written pages from "
              "this node's page cache (posix_fadvise DONTNEED; not a server's cache).")
@click.option("--sysroot", default=None, envvar=config.FROM_ENVIRONMENT["sysroot"],
              help="Read /proc and /sys under this folder (tests, modelling).")
@click.option("--engine", type=click.Choice(config.ENGINES), default=D.engine,
              help="posix: write()/pwrite() and fsync(); mpiio: MPI_File_write_at(_all) and "
                   "MPI_File_sync; null: no I/O at all (tests of the coordination).")
@click.option("--pattern", type=click.Choice(PATTERNS), default=D.pattern,
              help="Where each block goes: sequential; strided: the ranks' blocks interleaved "
                   "in one shared file (IOR -s with -t = -b); random: the rank's own blocks in "
                   "a seeded random order, each once (IOR -z).")
@click.option("--seed", type=INT, default=D.seed, help="The order of --pattern random "
              "(recorded; the same seed writes the same offsets).")
@click.option("--collective/--independent", default=None,
              help="MPI-IO: MPI_File_write_at_all or MPI_File_write_at [default: independent "
                   "with --engine mpiio].")
@click.option("--mpiio-hint", "mpiio_hints", multiple=True, metavar="KEY=VALUE",
              help="An MPI_Info hint for MPI_File_open, e.g. romio_cb_write=enable, cb_nodes=2, "
                   "striping_factor=4 (repeatable; the hints in force are recorded).")
@click.option("--stonewall", type=DURATION, default=None,
              help="IO500's stonewall with wear-out: every rank stops issuing writes after this "
                   "long, then the ranks that wrote less go on until they have written as much "
                   "as the most productive one (IOR -D with stoneWallingWearOut=1).")
@click.option("--preset", type=click.Choice(sorted(PRESETS)), default=None,
              help="IO500's write phases: the options it stands for are printed and recorded; "
                   "each can still be given (ior-easy-write: file per rank, 2MiB, stonewall "
                   "300s; ior-hard-write: shared strided 47008-byte blocks, stonewall 300s).")
@_stripe_options
@click.option("--allow-fill", is_flag=True,
              help="Write even when the planned bytes exceed the target filesystem's free "
                   "space (checked before any data is written).")
@click.option("--units", type=click.Choice(list(RATE_UNITS)), default="MB",
              help="Rates on screen in MB/s (10^6 B/s, lmdd's) or MiB/s (2^20 B/s, IOR's); "
                   "records and JSON stay in MB/s.")
@click.option("--ior-summary", is_flag=True,
              help="Also print IOR's summary line, 'Max Write: X MiB/sec (Y MB/sec)' (the best "
                   "iteration, open time included as IOR counts it), for IOR parsers.")
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
    for name in config.FROM_ENVIRONMENT:
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
