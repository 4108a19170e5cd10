"""`mpiwrite help [COMMAND [SUBCOMMAND]]`: the command's man page, made from the same help
texts as the shipped pages (mpiwrite.cli.manpage), formatted by `man -l` where man is
installed and paged as click pages; the plain help text where it is not."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from typing import Optional, Tuple

import click

# What the man page and `mpiwrite help` show under EXAMPLES (cli/manpage.py)
EXAMPLES = {
    "help": ["mpiwrite help", "mpiwrite help study run", "mpiwrite help report | less"],
}

MAN_TIMEOUT = 60.0  # seconds for man to format one page (it takes well under one)


def _format_with_man(text: str, width: Optional[int], keep: bool) -> Optional[str]:
    """The page as `man -l` formats it, or None when man is missing or fails."""
    from mpiwrite.procs import run_bounded

    man = shutil.which("man")
    if not man:
        return None
    with tempfile.TemporaryDirectory(prefix="mpiwrite-help-") as folder:
        path = os.path.join(folder, "page.1")
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
        env = dict(os.environ, MANPAGER="cat", PAGER="cat")
        if width:
            env["MANWIDTH"] = str(width)
        if keep:
            env["MAN_KEEP_FORMATTING"] = "1"
        out = run_bounded([man, "-l", path], MAN_TIMEOUT, output_cap=4 << 20, env=env)
    if not out.ok or not out.out.strip():
        return None
    return out.out.decode("utf-8", "replace")


def _plain(words: Tuple[str, ...]) -> str:
    """Without man: click's own help of the command, as `mpiwrite WORDS --help` prints it."""
    from mpiwrite.cli.manpage import examples, find_page

    pg = find_page(words)
    text = pg.cmd.get_help(pg.ctx)
    shown = examples().get(" ".join(words) or "mpiwrite", [])
    if shown:
        text += "\n\nExamples:\n" + "\n".join("  " + ex for ex in shown)
    return text + "\n"


@click.command(name="help")
@click.argument("words", nargs=-1, metavar="[COMMAND [SUBCOMMAND]]")
@click.option("--plain", is_flag=True, help="Print the help text as `--help` does, not the "
              "man page (what is shown where man is not installed).")
def help_(words, plain):
    """Show the man page of mpiwrite or of one of its commands.

    The page is made from the installed mpiwrite's own help texts, so it matches the
    commands you have; `man` formats it (its pager on a terminal). Where man is not
    installed, the plain help text is printed instead.  The same pages are shipped in the
    source's man/ folder: `MANPATH=man man mpiwrite-run` there.
    """
    from mpiwrite import __version__
    from mpiwrite.cli.manpage import find_page, page

    words = tuple(words)
    pg = find_page(words)  # an unknown word: one line, exit 2
    shown = None
    if not plain:
        tty = sys.stdout.isatty()
        width = shutil.get_terminal_size((80, 24)).columns if tty else None
        shown = _format_with_man(page(pg, __version__), width, keep=tty)
    if shown is None:
        shown = _plain(words)
    if sys.stdout.isatty():
        click.echo_via_pager(shown)
    else:
        click.echo(shown, nl=False)
