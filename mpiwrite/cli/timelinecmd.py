"""`mpiwrite timeline`: a run's throughput over time out of its record, as CSV or JSON lines."""

from __future__ import annotations

import csv
import json
import os
import sys

import click

from mpiwrite.cli.lookup import one_run
from mpiwrite.cli.options import INT
from mpiwrite.errors import ConfigError, RunError, why
from mpiwrite.text import printable

# What the man page and `mpiwrite help` show under EXAMPLES (cli/manpage.py)
EXAMPLES = {
    "timeline": ["mpiwrite timeline results/mpiwrite-20261129T220833Z-524bd3.h5 --by node",
                "mpiwrite timeline 524bd3 --in results/ --format jsonl --interval 0.5s"],
}


@click.command()
@click.argument("run")
@click.option("--in", "where", multiple=True, default=["results"], show_default=True,
              help="Where to look for a run given by its id.")
@click.option("--by", type=click.Choice(["rank", "node"]), default="rank", show_default=True,
              help="A row per rank, or per node (the sum of its ranks), each interval.")
@click.option("--format", "fmt", type=click.Choice(["csv", "jsonl"]), default="csv",
              show_default=True, help="CSV with a header, or one JSON object a line.")
@click.option("--interval", default=None, metavar="DURATION",
              help="The intervals' length (0.5s, 2s) [default: the run's --sample-interval].")
@click.option("--iteration", type=INT, default=None, help="This iteration only.")
@click.option("-o", "--output", default="-", show_default=True, help="File to write, or -.")
@click.option("--skip-bad", is_flag=True, help="Exit 0 even if some records were unreadable.")
def timeline(run, where, by, fmt, interval, iteration, output, skip_bad):
    """Each interval's bytes and MB/s per rank or node, on the run's common timeline.

    RUN is a record file, a folder holding one record, or a run id looked up in --in. Times
    are seconds since the run's first barrier on rank 0's clock (every rank's clock offset
    applied), and `time_start` the interval's start as a UTC date where the record holds
    rank 0's wall clock at that zero (records from 2026-12-06 on). Rows come in time order,
    so that tools that read a stream can plot it as it comes. The write phase only."""
    from mpiwrite import files
    from mpiwrite.answers import timeline as tl
    from mpiwrite.units import parse_time

    seconds = None
    if interval is not None:
        try:
            seconds = parse_time(interval)
        except ValueError as exc:
            raise ConfigError(f"--interval: {exc}") from None
        if not 0.001 <= seconds <= 86400:  # nan fails too
            raise ConfigError(f"--interval: {interval!r} must be from 1ms to 1 day")
    if output != "-":
        files.check_output("-o", output)
    rec, code = one_run(run, where, skip_bad)
    rows = tl.rows(rec, by, seconds, iteration)
    first = next(rows, None)  # a refusal (no samples, no such iteration) before any output
    try:  # a new file (O_EXCL, never through a planted link), or standard output
        out = sys.stdout if output == "-" else open(
            os.open(output, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644),
            "w", encoding="utf-8", newline="")
    except OSError as exc:
        raise RunError(f"-o: cannot write {output!r}: {why(exc)}") from None
    try:
        columns = tl.COLUMNS[by]
        writer = csv.writer(out, lineterminator="\n") if fmt == "csv" else None
        if writer:
            writer.writerow(columns)
        for row in ([first] if first else []):
            _write(out, writer, columns, row)
        for row in rows:
            _write(out, writer, columns, row)
        out.flush()
    except (TypeError, ValueError, KeyError, IndexError) as exc:
        raise RunError(f"{rec.path}: unusable record ({type(exc).__name__}: {exc})") from None
    finally:
        if out is not sys.stdout:
            out.close()
    return code


def _write(out, writer, columns, row) -> None:
    row = {k: printable(v) if isinstance(v, str) else v for k, v in row.items()}
    if writer:
        writer.writerow(["" if row[c] is None else row[c] for c in columns])
    else:
        out.write(json.dumps({c: row[c] for c in columns}, ensure_ascii=False) + "\n")
