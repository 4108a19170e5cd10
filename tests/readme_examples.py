"""The README's example outputs, regenerated from the commands that make them.

    python tests/readme_examples.py            # print each example's output as made now
    python tests/readme_examples.py --check    # exit 1, with a diff, where the README differs
    python tests/readme_examples.py --write    # rewrite those README blocks in place
    python tests/readme_examples.py --check README.md 'report original-study'
                                               # only the examples whose command has this

Each example is a README block that shows a command (in a ```sh block, its last line) and
then, in the next ``` block, exactly what it prints.  The records it reads are made in a
fresh temporary folder by the example's set-up: tests/synth.py for synthetic studies (the
real record writer, fixed seeds), `mpiwrite import` of the real tool outputs in
tests/fixtures/import/, or the README's own ```sh block, run by bash as it stands.
Excerpts (the explain examples, with `...` where lines are left out) are not rewritten
here: tests/mpi/test_explain.py and tests/cli/test_import.py check that their lines are printed,
in order.
"""

from __future__ import annotations

import difflib
import os
import pathlib
import shlex
import subprocess
import sys
import tempfile
from typing import List, NamedTuple

HERE = pathlib.Path(__file__).resolve().parent
README = HERE.parent / "README.md"
SYNTH = [sys.executable, str(HERE / "synth.py")]


class Example(NamedTuple):
    command: str  # as the README shows it (the ```sh block's last line)
    setup: List[List[str]]  # run first, in the folder; "mpiwrite" is this Python's mpiwrite
    block: bool = False  # also run the README's ```sh block before the command, as it stands


EXAMPLES = [
    Example("mpiwrite report original-study --by lustre,checksums --baseline lustre=1.6.4.3",
            [SYNTH + ["original-study"]]),
    Example("mpiwrite report imported --by tool,site,layout,fsync,block_size", [], True),
    Example("mpiwrite compare tool=mpiwrite tool=ior --in site-history --metric ior",
            [["mpiwrite", "import", "tests/fixtures/import/fpp-write-fsync-i3.json",
              "tests/fixtures/import/fpp-write-i2.txt", "--results", "site-history",
              "--tag", "site=a"],
             SYNTH + ["site-history", "ior-site"]]),
]


def _mpiwrite(args: List[str]) -> List[str]:
    return [sys.executable, "-m", "mpiwrite", *args]


def _run(argv: List[str], cwd: str) -> str:
    if argv[0] == "mpiwrite":
        argv = _mpiwrite(argv[1:])
    env = dict(os.environ, MPIWRITE_CACHE="off", COLUMNS="200")
    out = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise SystemExit(f"readme_examples: {' '.join(argv)} failed ({out.returncode}): "
                         f"{out.stderr.strip()}")
    return out.stdout


def _sh_block(text: str, command: str) -> str:
    """The ```sh block's lines before `command`, its last line."""
    head = text[:text.index(f"{command}\n```\n```\n")]
    return head[head.rindex("```sh\n") + len("```sh\n"):]


def output(example: Example, text: str) -> str:
    """What the example's command prints on records its set-up makes."""
    with tempfile.TemporaryDirectory(prefix="mpiwrite-readme-") as tmp:
        os.symlink(HERE, os.path.join(tmp, "tests"))  # the fixtures, as from the repository
        for argv in example.setup:
            _run(argv, tmp)
        if example.block:  # with this Python's mpiwrite first on PATH
            path = f"{os.path.dirname(sys.executable)}:{os.environ.get('PATH', '')}"
            _run(["bash", "-euc", f"export PATH={shlex.quote(path)}\n"
                  + _sh_block(text, example.command)], tmp)
        return _run(shlex.split(example.command), tmp)


def _block(text: str, command: str):
    """(start, end) of the output block that follows the sh block ending with `command`."""
    marker = f"{command}\n```\n```\n"
    at = text.find(marker)
    if at < 0 or text.find(marker, at + 1) >= 0:
        raise SystemExit(f"readme_examples: the README shows {command!r} "
                         f"{'nowhere' if at < 0 else 'twice'} followed by its output")
    start = at + len(marker)
    return start, text.index("```", start)


def main(argv: List[str]) -> int:
    mode = argv[0] if argv else "--print"
    path = pathlib.Path(argv[1]) if len(argv) > 1 else README
    only = argv[2] if len(argv) > 2 else ""
    if mode not in ("--print", "--check", "--write") or len(argv) > 3:
        raise SystemExit("usage: readme_examples.py [--print|--check|--write] [README [TEXT]]")
    text = path.read_text()
    flat = text.replace("\\\n", " ")  # shell continuation lines joined
    for ex in EXAMPLES:  # the README shows the imports that are run here
        for argv in ex.setup:
            if argv[0] == "mpiwrite" and " ".join(argv) not in " ".join(flat.split()):
                raise SystemExit(f"readme_examples: the README does not show {' '.join(argv)!r}")
    new, failed = text, 0
    chosen = [ex for ex in EXAMPLES if only in ex.command]
    if not chosen:
        raise SystemExit(f"readme_examples: no example's command has {only!r}")
    for ex in chosen:
        got = output(ex, text)
        start, end = _block(new, ex.command)
        shown = new[start:end]
        if mode == "--print":
            sys.stdout.write(f"$ {ex.command}\n{got}\n")
        elif shown != got:
            failed += 1
            if mode == "--check":
                sys.stdout.writelines(difflib.unified_diff(
                    shown.splitlines(True), got.splitlines(True), f"README: {ex.command}",
                    "printed now"))
            new = new[:start] + got + new[end:]
    if mode == "--write" and new != text:
        path.write_text(new)
        print(f"readme_examples: {failed} example(s) rewritten in {path}")
    return 1 if failed and mode == "--check" else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
