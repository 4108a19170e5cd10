"""Man pages from the click commands' own help: `mpiwrite-man DIR` (or
`python -m mpiwrite.cli.manpage DIR`) writes mpiwrite.1 and mpiwrite-COMMAND.1 for each command."""

from __future__ import annotations

import os
import sys
import time
from typing import List

import click

from mpiwrite.errors import ConfigError
from mpiwrite.text import printable


def _roff(text: str) -> str:
    lines = []
    for ln in str(text).splitlines():
        ln = ln.replace("\\", "\\\\").replace("-", "\\-")
        lines.append("\\&" + ln if ln.startswith((".", "'")) else ln)
    return "\n".join(lines)


def page(name: str, cmd: click.Command, parent: click.Context, version: str) -> str:
    ctx = click.Context(cmd, info_name=name.split("-", 1)[-1] if parent else name,
                        parent=parent)
    usage = " ".join(cmd.collect_usage_pieces(ctx))
    out = [f'.TH "{name.upper()}" "1" "{time.strftime("%Y-%m-%d")}" "mpiwrite {version}" '
           '"mpiwrite manual"',
           ".SH NAME", f"{name} \\- {_roff(cmd.get_short_help_str(200))}",
           ".SH SYNOPSIS", f".B {name.replace('-', ' ', 1)}", _roff(usage),
           ".SH DESCRIPTION", _roff(cmd.help or "")]
    opts = [p for p in cmd.get_params(ctx) if isinstance(p, click.Option)]
    if opts:
        out.append(".SH OPTIONS")
        for p in opts:
            rec = p.get_help_record(ctx)
            if rec:
                out += [".TP", f"\\fB{_roff(rec[0])}\\fR", _roff(rec[1])]
    if isinstance(cmd, click.Group):
        out.append(".SH COMMANDS")
        for sub in cmd.list_commands(ctx):
            out += [".TP", f"\\fB{sub}\\fR",
                    _roff(cmd.get_command(ctx, sub).get_short_help_str(200)),
                    f"See \\fBmpiwrite\\-{sub}\\fR(1)."]
    out += [".SH SEE ALSO", "README.md, docs/output.md, docs/measurement.md"]
    return "\n".join(out) + "\n"


def write_pages(folder: str) -> List[str]:
    """Write every page into folder (made if missing).  Each page is a new file renamed over
    its name, and only where the name is free or holds a regular file of this user: a planted
    symlink, FIFO or someone else's file is refused before any page is written (ConfigError)."""
    from mpiwrite import __version__, files
    from mpiwrite.cli.main import cli as group

    os.makedirs(folder, exist_ok=True)
    root = click.Context(group, info_name="mpiwrite")
    pages = [("mpiwrite", group, None)] + [
        (f"mpiwrite-{n}", group.get_command(root, n), root) for n in group.list_commands(root)]
    paths = [os.path.join(folder, f"{name}.1") for name, _cmd, _parent in pages]
    for path in paths:
        files.check_output("DIR", path)
    held = files.Folder.open(folder)
    try:
        for path, (name, cmd, parent) in zip(paths, pages):
            try:
                files.replace_file(os.path.basename(path), page(name, cmd, parent,
                                                                __version__).encode(),
                                   dir_fd=held.fd)
            except OSError as exc:
                raise ConfigError(f"DIR: {files.about(repr(path), exc)}") from None
    finally:
        held.close()
    return paths


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or args[0].startswith("-"):
        sys.stderr.write("usage: mpiwrite-man DIR  (writes mpiwrite.1 and mpiwrite-COMMAND.1)\n")
        return 2
    try:
        written = write_pages(args[0])
    except ConfigError as exc:
        sys.stderr.write(printable(f"mpiwrite-man: error: {exc}") + "\n")
        return 2
    except OSError as exc:
        sys.stderr.write(printable(f"mpiwrite-man: error: DIR: {args[0]!r}: "
                                   f"{exc.strerror or exc}") + "\n")
        return 2
    for path in written:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
