"""`import`: other tools' results (importers/registry.IMPORTERS) as records beside mpiwrite's
own."""

from __future__ import annotations

import errno
import os
import stat
import sys

import click

from mpiwrite.errors import ConfigError, RunError, why
from mpiwrite.importers import registry
from mpiwrite.text import printable

# What the man page and `mpiwrite help` show under EXAMPLES (cli/manpage.py)
EXAMPLES = {
    "import": ["mpiwrite import ior-*.json --results results/ --tag site=a --fact checksums=on",
              "mpiwrite import lmdd.txt --results results/ --command 'lmdd of=/lustre/f "
              "bs=1M count=512 fsync=1' --fact lustre=1.6.5"],
}


@click.command("import")
@click.argument("files", nargs=-1, required=True)
@click.option("--results", required=True, help="Folder for the records (made if missing).")
@click.option("--tag", "tags", multiple=True, metavar="KEY=VALUE",
              help="A tag on every record made (repeatable), as `run --tag`.")
@click.option("--fact", "facts", multiple=True, metavar="KEY=VALUE",
              help="A node fact the output cannot show, e.g. checksums=on or lustre=1.6.5: "
                   "recorded as stated by you, not measured; usable as a key in report --by "
                   "(repeatable). Facts not given are recorded as unknown.")
@click.option("--node-facts", default=None, metavar="FILE",
              help="`mpiwrite env --json` taken on the client that ran the tool: its facts "
                   "become the record's one node row (--fact still wins).")
@click.option("--from", "tool", type=click.Choice(registry.names()), default=None,
              help="The tool that wrote FILES [default: told from each file's content, which "
                   "must agree with --from when given].")
@click.option("--command", default="",
              help="The command that produced FILES, where the output does not say it (lmdd, "
                   "dd, IOR's CSV, fio): its block size, count and fsync/direct flags are "
                   "read from it.")
def import_(files, results, tags, facts, node_facts, tool, command):
    """Turn IOR (JSON, text, CSV), fio (JSON, json+), elbencho (--csvfile, --jsonfile), IO500
    (a result folder or its result.txt), Darshan logs (the `darshan` extra), lmdd and dd
    output, and mpiwrite's own run --json, into records.

    One record per IOR test, fio group, elbencho WRITE phase (with the READ after it), IO500
    write phase (ior-easy-write, ior-hard-write), Darshan log (an observed job) or lmdd/dd
    summary line; its run id comes from the
    file's sha256, so importing the same file again adds nothing. A file that is not what it
    claims (cut short, another tool's, errors printed into it) is refused with one line and
    nothing is written (exit 2); text IOR or fio printed into their output is removed with a
    warning when what remains is whole. See docs/import.md."""
    from mpiwrite.importers.base import build, parse_facts, read_node_facts, run_id
    from mpiwrite.records import h5 as records
    from mpiwrite.records.store import FolderStore
    from mpiwrite.run.config import parse_tags

    tag_map = parse_tags(tags)
    fact_map = parse_facts(facts)
    node = read_node_facts(node_facts) if node_facts else None
    both = sorted(set(tag_map) & set(fact_map))
    if both:
        raise ConfigError(f"--tag and --fact both name {', '.join(both)}; give each key once")
    if "\n" in command or len(command) > 65536:
        raise ConfigError("--command: one line of at most 64 KiB")
    parsed = []  # every file is read and checked before any record is written
    for path in files:
        src, tests = registry.read_tests(path, tool, command)
        parsed.append((src, tests))
    kept = {id(t) for t in registry.combine([t for _s, ts in parsed for t in ts])}
    parsed = [(src, [t for t in tests if id(t) in kept]) for src, tests in parsed]
    folder = _open_results(results)
    made = skipped = 0
    try:
        for src, tests in parsed:  # a name taken by anything but a file: refused before writing
            for test in tests:
                _not_planted(folder, results,
                             records.record_path("", run_id(src, test.tool, test.index, test)))
        for src, tests in parsed:
            for w in src.repairs:
                sys.stderr.write(printable(f"mpiwrite: warning: {src.path}: {w}") + "\n")
            for test in tests:
                if test.per_rank_note:
                    sys.stderr.write(printable(f"mpiwrite: warning: {src.path}: {test.label}: "
                                               f"{test.per_rank_note}") + "\n")
                rec = build(test, src, tag_map, fact_map, node=node)
                name = records.record_path("", rec.run_id)
                try:
                    created = FolderStore().put_new(rec, folder, name)
                except OSError as exc:
                    raise RunError(f"{os.path.join(results, name)}: cannot write: "
                                   f"{why(exc)}") from None
                shown = printable(f"{src.path}: {test.label}")
                if not created:
                    _not_planted(folder, results, name)
                if created:
                    made += 1
                    click.echo(f"{shown}: {test.tool} -> {printable(os.path.join(results, name))}")
                else:
                    skipped += 1
                    same = "a record of this run" if test.run_id else "same file content"
                    sys.stderr.write(f"mpiwrite: {shown}: already imported as {rec.run_id} "
                                     f"({same}): skipped, its record unchanged\n")
    finally:
        folder.close()
    click.echo(f"{made} record(s) made, {skipped} already there")


def _open_results(results: str):
    """The results folder, opened (records/h5.open_results); exit 2 when the name is not a folder
    (a file, a FIFO, a dangling symlink) or is another user's symlink (docs/security.md)."""
    from mpiwrite.records import h5 as records

    shown = printable(repr(results))
    try:
        return records.open_results(results)
    except OSError as exc:
        if exc.errno in (errno.EEXIST, errno.ENOTDIR) and not os.path.isdir(results):
            raise ConfigError(f"--results: {shown} is not a folder") from None
        if exc.errno == errno.ELOOP:
            raise ConfigError(f"--results: {shown}: {why(exc)}") from None
        raise RunError(f"--results: cannot write records in {shown}: {why(exc)}") from None


def _not_planted(folder, results: str, name: str) -> None:
    """A record's name may hold an earlier import's record (a regular file): anything else
    there (a symlink, a FIFO, a folder) was planted and is named, never followed (exit 2)."""
    try:
        st = os.stat(name, dir_fd=folder.fd, follow_symlinks=False)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise RunError(f"{printable(os.path.join(results, name))}: {why(exc)}") from None
    if not stat.S_ISREG(st.st_mode):
        what = "a symbolic link" if stat.S_ISLNK(st.st_mode) else "not a regular file"
        raise ConfigError(f"{printable(os.path.join(results, name))} is {what} (uid "
                          f"{st.st_uid}) where this import's record goes: not followed; "
                          "remove it and import again")
