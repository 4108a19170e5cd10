"""Man pages from the click commands' own help: `mpiwrite-man DIR` (or
`python -m mpiwrite.cli.manpage DIR`) writes mpiwrite.1, mpiwrite-COMMAND.1 for each command
and mpiwrite-COMMAND-SUBCOMMAND.1 for each subcommand (study's, tune's).  The source keeps
them in man/man1/, so `MANPATH=man man mpiwrite` reads them there; `mpiwrite help` makes the
same page on the fly (mpiwrite.cli.helpcmd)."""

from __future__ import annotations

import difflib
import inspect
import os
import re
import sys
import textwrap
import time
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

import click

from mpiwrite.errors import ConfigError, why
from mpiwrite.text import printable


def _roff(text: str) -> str:
    lines = []
    for ln in str(text).splitlines():
        ln = ln.replace("\\", "\\\\").replace("-", "\\-")
        lines.append("\\&" + ln if ln.startswith((".", "'")) else ln)
    return "\n".join(lines)


def examples() -> Dict[str, List[str]]:
    """What each command's page shows under EXAMPLES, from the command's own module (its
    EXAMPLES: page name -> commands) and the group's (cli/main.py): read when a page is made."""
    import importlib

    from mpiwrite.cli.main import EXAMPLES as TOP
    from mpiwrite.cli.main import LAZY

    out = dict(TOP)
    for spec in LAZY.values():
        out.update(getattr(importlib.import_module(spec.split(":")[0]), "EXAMPLES", {}))
    return out

EXIT_STATUS = {
    "run": [("0", "the run completed"), ("1", "the run failed (a rank, host, path and error "
                                             "are named) or its record could not be saved"),
            ("2", "bad input, found before any data was written (nothing was created)"),
            ("128+N", "ended by signal N (130 SIGINT, 143 SIGTERM, 129 SIGHUP), answered in "
                      "order: the record says interrupted")],
}
DEFAULT_EXIT = [("0", "success"), ("1", "a failure, or unreadable records without --skip-bad"),
                ("2", "bad input (one line says which)")]


def _default(opt: click.Option, said: str) -> str:
    """' [default: X]' for an option whose help (`said`, as click prints it) does not say its
    default already ('' for none: an unset value, an off flag, an empty list)."""
    value = opt.default
    if "default" in said.lower() or callable(value) \
            or value in (None, False, (), [], "") or repr(value).endswith("UNSET"):
        return ""  # said in the help already, or nothing to say (click 8.2+: Sentinel.UNSET)
    if opt.is_flag:
        if value is not True:
            return ""
        shown = opt.opts[-1]
    elif isinstance(value, (list, tuple)):
        shown = ", ".join(str(v) for v in value)
    else:
        shown = str(value)
    return f" [default: {shown}]"


def _paragraphs(text: str) -> List[str]:
    """A help text as roff: its indentation removed (a docstring's), a blank line a new
    paragraph, and click's \\b paragraphs (kept as written) in no-fill mode."""
    out: List[str] = []
    for para in re.split(r"\n\s*\n", inspect.cleandoc(text or "")):
        lines = para.splitlines()
        if not lines:
            continue
        if out:
            out.append(".PP")
        if lines[0].strip() == "\b":
            out += [".nf", _roff("\n".join(lines[1:])), ".fi"]
        else:
            out.append(_roff(" ".join(ln.strip() for ln in lines)))
    return out


def shell_lines(command: str, width: int = 70) -> str:
    """A long example command as shell lines continued by a backslash (a page's example
    is shown as written, no filling: it must fit 80 columns with the page's indent)."""
    lines = textwrap.wrap(command, width, break_long_words=False, break_on_hyphens=False)
    return " \\\n    ".join(lines)


def page_name(path: Sequence[str]) -> str:
    """The page of a command path: () -> mpiwrite, ("study", "plan") -> mpiwrite-study-plan."""
    return "-".join(("mpiwrite",) + tuple(path))


def _ref(path: Sequence[str]) -> str:
    return f"\\fB{_roff(page_name(path))}\\fR(1)"


class Page(NamedTuple):
    path: Tuple[str, ...]  # the command words after `mpiwrite`
    cmd: click.Command
    ctx: click.Context


def all_pages() -> List[Page]:
    """Every command and subcommand, the group first, each group before its commands."""
    from mpiwrite.cli.main import cli as group

    found: List[Page] = []

    def walk(path: Tuple[str, ...], cmd: click.Command, parent: Optional[click.Context]):
        ctx = click.Context(cmd, info_name=path[-1] if path else "mpiwrite", parent=parent,
                            **(cmd.context_settings if parent is None else {}))
        found.append(Page(path, cmd, ctx))
        if isinstance(cmd, click.Group):
            for sub in cmd.list_commands(ctx):
                walk(path + (sub,), cmd.get_command(ctx, sub), ctx)

    walk((), group, None)
    return found


def find_page(words: Sequence[str]) -> Page:
    """The page of `mpiwrite help WORDS...`, or ConfigError naming the word not known."""
    pages = {p.path: p for p in all_pages()}
    path = tuple(words)
    if path in pages:
        return pages[path]
    for n in range(len(path), 0, -1):
        if path[:n - 1] in pages and path[:n] not in pages:
            known = sorted(p[-1] for p in pages if len(p) == n and p[:n - 1] == path[:n - 1])
            if not known:
                raise ConfigError(f"COMMAND: {' '.join(('mpiwrite',) + path[:n - 1])} has no "
                                  f"subcommands (no page for {' '.join(path)!r})")
            near = difflib.get_close_matches(path[n - 1], known, n=1)
            hint = f"; did you mean {near[0]!r}?" if near else f"; one of: {', '.join(known)}"
            where = " ".join(("mpiwrite",) + path[:n - 1])
            raise ConfigError(f"COMMAND: {where} has no command {path[n - 1]!r}{hint}")
    raise ConfigError(f"COMMAND: no page for {' '.join(path)!r}")  # pragma: no cover


def _see_also(pg: Page, pages: Sequence[Page]) -> List[str]:
    """The group's page, the parent's, the subcommands', and the other commands of the same
    group: pages that exist (a test follows every one)."""
    path = pg.path
    refs = [p.path for p in pages if p.path and p.path[:-1] == path]  # subcommands
    if path:
        refs.insert(0, path[:-1])
        if len(path) > 1:
            refs.insert(0, ())
        refs += [p.path for p in pages if len(p.path) == len(path) > 1
                 and p.path[:-1] == path[:-1] and p.path != path]
    return [", ".join(_ref(r) for r in refs) if refs else "",
            "README.md, docs/output.md and docs/measurement.md in the source."]


def page(pg: Page, version: str, pages: Sequence[Page] = ()) -> str:
    cmd, ctx = pg.cmd, pg.ctx
    name = page_name(pg.path)
    usage = " ".join(cmd.collect_usage_pieces(ctx))
    out = [f'.TH "{name.upper()}" "1" "{time.strftime("%Y-%m-%d")}" "mpiwrite {version}" '
           '"mpiwrite manual"', ".nh", ".ad l",  # no hyphens in option names, ragged right
           ".SH NAME", f"{_roff(name)} \\- {_roff(cmd.get_short_help_str(200))}",
           ".SH SYNOPSIS", f".B {_roff(' '.join(('mpiwrite',) + pg.path))}", _roff(usage),
           ".SH DESCRIPTION"] + _paragraphs(cmd.help or "")
    opts = [p for p in cmd.get_params(ctx) if isinstance(p, click.Option)]
    if opts:
        out.append(".SH OPTIONS")
        for p in opts:
            rec = p.get_help_record(ctx)
            if rec:
                tag = _roff(rec[0]).replace("|", "|\\:")  # a long choice list may break
                out += [".TP", f"\\fB{tag}\\fR",
                        _roff((rec[1] + _default(p, rec[1])).strip())]
    if isinstance(cmd, click.Group):
        out.append(".SH COMMANDS")
        for sub in cmd.list_commands(ctx):
            out += [".TP", f"\\fB{sub}\\fR",
                    _roff(cmd.get_command(ctx, sub).get_short_help_str(200)),
                    f"See {_ref(pg.path + (sub,))}."]
    key = " ".join(pg.path) or "mpiwrite"
    shown = examples().get(key)
    if shown:
        out.append(".SH EXAMPLES")
        for ex in shown:
            out += [".PP", ".nf", _roff(shell_lines(ex)), ".fi"]
    out.append(".SH EXIT STATUS")
    for code, what in EXIT_STATUS.get(key, DEFAULT_EXIT):
        out += [".TP", f"\\fB{code}\\fR", _roff(what)]
    refs, files_line = _see_also(pg, pages or all_pages())
    out += [".SH SEE ALSO"] + ([refs, ".PP"] if refs else []) + [files_line]
    return "\n".join(out) + "\n"


def write_pages(folder: str) -> List[str]:
    """Write every page into folder (made if missing).  Each page is a new file renamed over
    its name, and only where the name is free or holds a regular file of this user: a planted
    symlink, FIFO or someone else's file is refused before any page is written (ConfigError)."""
    from mpiwrite import __version__, files

    os.makedirs(folder, exist_ok=True)
    pages = all_pages()
    paths = [os.path.join(folder, f"{page_name(pg.path)}.1") for pg in pages]
    for path in paths:
        files.check_output("DIR", path)
    held = files.Folder.open(folder)
    try:
        for path, pg in zip(paths, pages):
            try:
                files.replace_file(os.path.basename(path),
                                   page(pg, __version__, pages).encode(), dir_fd=held.fd)
            except OSError as exc:
                raise ConfigError(f"DIR: {files.about(repr(path), exc)}") from None
    finally:
        held.close()
    return paths


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or args[0].startswith("-"):
        sys.stderr.write("usage: mpiwrite-man DIR  (writes mpiwrite.1 and "
                         "mpiwrite-COMMAND[-SUBCOMMAND].1)\n")
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
