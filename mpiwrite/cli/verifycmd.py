"""`mpiwrite verify`: the data files kept with --keep, block by block, against their runs'
records."""

from __future__ import annotations

import os
import sys

import click

from mpiwrite.errors import ConfigError, RecordError, RunError
from mpiwrite.text import printable

# What the man page and `mpiwrite help` show under EXAMPLES (cli/manpage.py)
EXAMPLES = {
    "verify": ["mpiwrite run d -s 1G --keep && mpiwrite verify d/",
               "mpiwrite verify results/mpiwrite-20261206T101500Z-4f2a.h5"],
}


@click.command()
@click.argument("paths", nargs=-1, required=True)
@click.option("--record", "record_paths", multiple=True, default=["results"],
              show_default=True, help="The runs' records (files or folders): block size, "
              "bytes per rank and file lengths come from there (repeatable).")
def verify(paths, record_paths):
    """Check data files kept with --keep (files or folders): every block's header and body;
    or records (.h5 files): their hashes and validity derived again from their contents.

    Run id, iteration and rank come from each file's name; block size and lengths from the
    run's record when one is found (else inferred, and the length is not checked).  A record
    whose figures, settings or verdict were changed after mpiwrite wrote it is named."""
    from mpiwrite.answers.verify import data_files, parse_name, verify_file

    records = [p for p in paths if p.endswith(".h5") and not os.path.isdir(p)]
    if records:
        if len(records) != len(paths):
            raise ConfigError("PATHS: give records (.h5) or data files and folders, not both")
        _verify_records(records)
        return
    bad = 0
    found = list(data_files(paths))
    if not found:  # a results folder: its records
        held = sorted(os.path.join(p, n) for p in paths if os.path.isdir(p)
                      for n in os.listdir(p) if n.endswith(".h5"))
        if held:
            _verify_records(held)
            return
        raise ConfigError("PATHS: no mpiwrite data files or records found")
    recs = _RecordFinder(record_paths)
    for path in found:
        name = parse_name(path)
        rec = recs.get(name.run_id) if name else None
        rep = verify_file(path, rec)
        shown = printable(path)
        if rep.error:
            bad += 1
            click.echo(f"{shown}: error: {printable(rep.error)}")
            continue
        for m in rep.mismatches:
            bad += 1
            click.echo(f"{shown}: mismatch at offset {m.offset} ({rep.where(m.offset)}): "
                       f"expected {m.expected}, found {m.found}")
        if not rep.mismatches:
            note = "" if rep.length_checked else (
                f", length not checked (no record of run {printable(name.run_id)}; "
                "give --record)")
            click.echo(f"{shown}: ok ({rep.blocks} blocks of {rep.block_size} bytes){note}")
    if bad:
        raise RunError(f"verify: {bad} problem(s) in {len(found)} file(s)")


def _verify_records(paths) -> None:
    """Each record read whole (in a worker) and derived again: one line each."""
    from mpiwrite.formats import validity
    from mpiwrite.records.store import FolderStore

    for path in paths:
        if not os.path.lexists(path):
            raise ConfigError(f"PATHS: {printable(path)} does not exist")
    bad = 0
    for path in paths:
        shown = printable(path)
        try:
            rec = FolderStore().whole(path)
        except RecordError as exc:
            bad += 1
            click.echo(f"{shown}: error: {printable(str(exc))}")
            continue
        problems = validity.rederive(rec)
        for line in problems:
            click.echo(f"{shown}: {printable(line)}")
        if problems:
            bad += 1
            continue
        held = validity.stored(rec)
        click.echo(printable(f"{path}: ok: as mpiwrite wrote it; config "
                             f"{rec.attrs['config_hash']}, result {rec.attrs['result_hash']}; "
                             f"{validity.describe(held)}"))
    if bad:
        raise RunError(f"verify: {bad} of {len(paths)} record(s) unreadable or not as mpiwrite "
                       "wrote them")


class _RecordFinder:
    """The record of a run id among the --record files and folders (read once, then cached);
    an unreadable record is named once on stderr and not used."""

    def __init__(self, paths):
        self.paths = [p for p in paths if os.path.lexists(p)]
        self.cache = {}

    def get(self, run_id: str):
        if run_id in self.cache:
            return self.cache[run_id]
        from mpiwrite.records.h5 import record_path
        from mpiwrite.records.store import FolderStore

        rec = None
        for p in self.paths:
            path = p if not os.path.isdir(p) else record_path(p, run_id)
            if not os.path.lexists(path):
                continue
            try:
                got = FolderStore().whole(path)  # libhdf5 on it in a child only
            except RecordError as exc:
                sys.stderr.write(f"mpiwrite: warning: {printable(exc)}\n")
                continue
            if got.run_id == run_id:
                rec = got
                break
        self.cache[run_id] = rec
        return rec
