"""Man pages from the click commands' own help: `mpiwrite-man DIR` (or
`python -m mpiwrite.cli.manpage DIR`) writes mpiwrite.1 and mpiwrite-COMMAND.1 for each command."""

from __future__ import annotations

import os
import sys
import time
from typing import List

import click

from mpiwrite.errors import ConfigError, why
from mpiwrite.text import printable


def _roff(text: str) -> str:
    lines = []
    for ln in str(text).splitlines():
        ln = ln.replace("\\", "\\\\").replace("-", "\\-")
        lines.append("\\&" + ln if ln.startswith((".", "'")) else ln)
    return "\n".join(lines)


# What each command's page shows under EXAMPLES (the group's page: the commands in use).
EXAMPLES = {
    "mpiwrite": ["mpiexec -n 16 mpiwrite run /lustre/scratch/$USER/mpiwrite -t 200 -i 3",
                 "mpiwrite report results/ --by lustre,checksums --baseline lustre=1.6.4.3"],
    "run": ["mpiexec -n 4 mpiwrite run",
            "mpiexec -n 64 mpiwrite run /lustre/scratch/$USER/mpiwrite -t 200 -i 3 "
            "--tag build=1.6.5",
            "srun --mpi=pmix mpiwrite run $SCRATCH/mpiwrite -s 4GiB --fsync-every 64 --json -"],
    "report": ["mpiwrite report results/ --by lustre,checksums --baseline lustre=1.6.4.3",
               "mpiwrite report results/ --by nodes --metric first-done --format csv"],
    "compare": ["mpiwrite compare checksums=on checksums=off --in results/",
                "mpiwrite compare build=main build=$GIT_SHA --in results/ --fail-if-slower 5"],
    "show": ["mpiwrite show results/mpiwrite-20261129T220833Z-524bd3.h5"],
    "plot": ["mpiwrite plot scaling results/ --x nodes --by lustre -o scaling.png",
             "mpiwrite plot ranks results/mpiwrite-RUN.h5 -o ranks.png"],
    "verify": ["mpiwrite run d -s 1G --keep && mpiwrite verify d/"],
    "env": ["mpiwrite env /lustre/scratch/$USER"],
    "jobscript": ["mpiwrite jobscript --nodes 1,2,4,8 --ntasks-per-node 16 -- "
                  "/lustre/scratch/$USER/mpiwrite -t 200",
                  "mpiwrite jobscript --study examples/checksums.toml --submit"],
    "clean": ["mpiwrite clean /lustre/scratch/$USER/mpiwrite --results results/",
              "mpiwrite clean /lustre/scratch/$USER/mpiwrite --results results/ --yes"],
    "study": ["mpiwrite study plan examples/checksums.toml",
              "mpiexec -n 8 mpiwrite study run examples/blocks.toml",
              "mpiwrite study report examples/blocks.toml"],
    "tune": ["mpiwrite tune list /lustre/scratch/$USER/mpiwrite",
             "mpiwrite tune plan /lustre/scratch/$USER/mpiwrite -o tune.toml --budget 30min",
             "mpiwrite tune report tune.toml --format json"],
    "explain": ["mpiwrite explain results/",
                "mpiwrite explain results/ --where fstype=lustre --metric cpu-per-GB "
                "--format json"],
    "page": ["mpiwrite page results/ --by lustre,checksums -o checksums.html",
             "mpiwrite page examples/blocks.toml -o blocks.html",
             "mpiwrite page results/mpiwrite-20261129T220833Z-524bd3.h5 -o run.html"],
    "import": ["mpiwrite import ior-*.json --results results/ --tag site=a --fact checksums=on",
               "mpiwrite import lmdd.txt --results results/ --command 'lmdd of=/lustre/f "
               "bs=1M count=512 fsync=1' --fact lustre=1.6.5"],
}

EXIT_STATUS = {
    "run": [("0", "the run completed"), ("1", "the run failed (a rank, host, path and error "
                                             "are named) or its record could not be saved"),
            ("2", "bad input, found before any data was written (nothing was created)"),
            ("128+N", "ended by signal N (130 SIGINT, 143 SIGTERM, 129 SIGHUP), answered in "
                      "order: the record says interrupted")],
}
DEFAULT_EXIT = [("0", "success"), ("1", "a failure, or unreadable records without --skip-bad"),
                ("2", "bad input (one line says which)")]


def _default(opt: click.Option) -> str:
    """' [default: X]' for an option whose help does not say its default already ('' for
    none: an unset value, an off flag, an empty list)."""
    value = opt.default
    if "default" in (opt.help or "").lower() or callable(value) \
            or value in (None, False, (), [], "") or repr(value).endswith("UNSET"):
        return ""  # said in the help already, or nothing to say (click 8.2+: Sentinel.UNSET)""
    if opt.is_flag:
        if value is not True:
            return ""
        shown = opt.opts[-1]
    elif isinstance(value, (list, tuple)):
        shown = ", ".join(str(v) for v in value)
    else:
        shown = str(value)
    return f" [default: {shown}]"


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
                out += [".TP", f"\\fB{_roff(rec[0])}\\fR", _roff((rec[1] + _default(p)).strip())]
    if isinstance(cmd, click.Group):
        out.append(".SH COMMANDS")
        for sub in cmd.list_commands(ctx):
            out += [".TP", f"\\fB{sub}\\fR",
                    _roff(cmd.get_command(ctx, sub).get_short_help_str(200)),
                    f"See \\fBmpiwrite\\-{sub}\\fR(1)."]
    short = name.split("-", 1)[-1] if parent else name
    if EXAMPLES.get(short):
        out.append(".SH EXAMPLES")
        for ex in EXAMPLES[short]:
            out += [".PP", ".nf", _roff(ex), ".fi"]
    out.append(".SH EXIT STATUS")
    for code, what in EXIT_STATUS.get(short, DEFAULT_EXIT):
        out += [".TP", f"\\fB{code}\\fR", _roff(what)]
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
                                   f"{why(exc)}") + "\n")
        return 2
    for path in written:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
