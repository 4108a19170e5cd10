"""Command line: thin click commands over the modules.  Only `run` starts MPI.

Exit codes: 0 success; 1 a run that failed (I/O error, timeout, verify mismatch), or records
that could not be read; 2 bad input (nothing written); 130/143 a run interrupted by
SIGINT/SIGTERM.  Errors are one line on stderr; --debug shows tracebacks.
"""

from __future__ import annotations

import os
import sys
import traceback
from typing import Optional

import click

from mpiwrite import __version__
from mpiwrite.errors import ConfigError, MpiwriteError
from mpiwrite.units import parse_size, parse_time

RANK_VARS = ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID")


def launcher_rank() -> int:
    """This process's rank as the launcher set it (0 when not under a launcher)."""
    for var in RANK_VARS:
        value = os.environ.get(var)
        if value and value.isdigit():
            return int(value)
    return 0


def _say_error(text: str) -> None:
    if launcher_rank() == 0:
        sys.stderr.write(f"mpiwrite: error: {text}\n")
        sys.stderr.flush()


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


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="mpiwrite")
@click.option("--debug", is_flag=True, help="Show tracebacks on errors.")
@click.pass_context
def cli(ctx, debug):
    """Parallel fsync'd write test for HPC filesystems, with HDF5 records and statistics.

    Launch `run` under MPI, e.g. `mpiexec -n 16 mpiwrite run /lustre/scratch/me`.
    """
    ctx.obj = {"debug": debug}


@cli.command(context_settings={"show_default": True})
@click.argument("target", required=False)
@click.option("--layout", default="fpp", help="fpp: a file per rank; shared: one file, "
              "a contiguous segment per rank (N-to-1).")
@click.option("-b", "--block-size", type=SIZE, default="1MiB", help="Bytes per write call.")
@click.option("-s", "--size", type=SIZE, default=None,
              help="Bytes per rank [default: 256MiB unless --time or --count is given].")
@click.option("--count", type=int, default=None, help="Blocks per rank (instead of --size).")
@click.option("-t", "--time", "time_limit", type=DURATION, default=None,
              help="Stop writing after this long, counting only completed writes (lmdd time=).")
@click.option("--fsync/--no-fsync", default=True,
              help="fsync after the last write, inside the timed interval (lmdd fsync=1).")
@click.option("--fsync-every", type=int, default=0, help="Also fsync after every N blocks.")
@click.option("--direct", is_flag=True, help="O_DIRECT with an aligned buffer.")
@click.option("-i", "--iterations", type=int, default=1, help="Repetitions.")
@click.option("--delay", type=DURATION, default="0", help="Pause between iterations.")
@click.option("--keep", is_flag=True, help="Keep the data files (default: remove them).")
@click.option("--results", default="results", help="Folder for the HDF5 records.")
@click.option("--no-record", is_flag=True, help="Do not write an HDF5 record.")
@click.option("--json", "json_path", default=None,
              help="Write a JSON summary to PATH, or '-' for stdout (then the table goes "
                   "to stderr).")
@click.option("--tag", "tags", multiple=True, help="KEY=VALUE stored with the run (repeatable).")
@click.option("--tag-file", default=None, help="File of KEY=VALUE lines.")
@click.option("--sample-interval", type=DURATION, default="1s",
              help="How often each rank records its bytes written so far.")
@click.option("--progress-interval", type=DURATION, default="5s",
              help="How often rank 0 prints progress (0: never).")
@click.option("--timeout", type=DURATION, default=None,
              help="End the run if a rank has not finished its writes after this long "
                   "[default: 2 x --time + 300s when --time is given, else none; 0: none].")
@click.option("--files-per-dir", type=int, default=1000,
              help="Spread file-per-rank files over subdirectories of at most N files.")
@click.option("--verify", is_flag=True, help="Read every block back and check it (timed "
              "separately).")
@click.option("--verify-shift", type=int, default=0,
              help="Verify the data of the rank N positions away (defeats the client cache).")
@click.option("--sysroot", default=None, envvar="MPIWRITE_SYSROOT",
              help="Read /proc and /sys under this folder (tests, modelling).")
@click.pass_context
def run(ctx, target, layout, block_size, size, count, time_limit, fsync, fsync_every, direct,
        iterations, delay, keep, results, no_record, json_path, tags, tag_file, sample_interval,
        progress_interval, timeout, files_per_dir, verify, verify_shift, sysroot):
    """Run the parallel write test into TARGET (a directory; default ./mpiwrite-data)."""
    cfg = config_from(ctx.params)
    from mpiwrite import runner

    return runner.main(cfg, ["mpiwrite"] + sys.argv[1:])


def config_from(p: dict):
    """A checked RunConfig from the parameters of the `run` command (ConfigError if bad)."""
    from mpiwrite import config

    return config.build(
        target=p["target"], layout=p["layout"], block_size=p["block_size"], size=p["size"],
        count=p["count"], time_limit=p["time_limit"], fsync=p["fsync"],
        fsync_every=p["fsync_every"], direct=p["direct"], iterations=p["iterations"],
        delay=p["delay"], keep=p["keep"], results=None if p["no_record"] else p["results"],
        json_path=p["json_path"], tags=config.parse_tags(p["tags"], p["tag_file"]),
        sample_interval=p["sample_interval"], progress_interval=p["progress_interval"],
        timeout=p["timeout"], files_per_dir=p["files_per_dir"], verify=p["verify"],
        verify_shift=p["verify_shift"], sysroot=p["sysroot"] or "/")


@cli.command()
@click.argument("path", required=False, default=".")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option("--raw", is_flag=True, help="With --json: include the raw text of files read.")
@click.option("--sysroot", default=None, envvar="MPIWRITE_SYSROOT",
              help="Read /proc and /sys under this folder.")
def env(path, as_json, raw, sysroot):
    """Print this node's facts (and PATH's filesystem) without starting MPI."""
    import json

    from mpiwrite import nodeinfo

    facts = nodeinfo.collect(path, sysroot or "/")
    if as_json:
        if not raw:
            facts.pop("raw", None)
        click.echo(json.dumps(facts, indent=1, sort_keys=True))
    else:
        click.echo("\n".join(nodeinfo.describe(facts)))


def _register_optional_commands() -> None:
    """Commands that live in their own modules (reports, plots, jobscripts, verify)."""
    from mpiwrite import commands

    commands.register(cli)


def main(argv: Optional[list] = None) -> None:
    _register_optional_commands()
    debug = "--debug" in (argv if argv is not None else sys.argv[1:])
    try:
        code = cli.main(args=argv, prog_name="mpiwrite", standalone_mode=False)
    except click.exceptions.Exit as exc:
        code = exc.exit_code
    except click.exceptions.Abort:
        code = 130
    except click.ClickException as exc:
        if debug:
            traceback.print_exc()
        _say_error(exc.format_message().replace("\n", " "))
        code = exc.exit_code
    except MpiwriteError as exc:
        if debug:
            traceback.print_exc()
        _say_error(str(exc).replace("\n", " "))
        code = exc.exit_code
    except BrokenPipeError:
        code = 1
    sys.exit(code if isinstance(code, int) else 0)


__all__ = ["cli", "main", "ConfigError"]
