"""Which importer reads a file, and the tests it holds (docs/import.md).

IMPORTERS is the one list of the tools `import` reads: `--from`'s choices, the order in which
a file's content is matched, and the line that refuses a file of no known tool all come from
it.  An entry names a module of this folder whose `IMPORTER` (base.Importer) is imported when
asked, so the command line lists the names without loading any parser.  A new format is one
module and one line here (docs/architecture.md).
"""

from __future__ import annotations

import importlib
import os
from typing import TYPE_CHECKING, Dict, List, Optional, Tuple

if TYPE_CHECKING:
    from mpiwrite.importers.base import Importer, Source, Test

# In the order the content is matched: the most specific marks first (mpiwrite's own JSON
# names itself; fio's JSON has `fio version`; IO500's result.txt its [run] and config hash
# (its phases name IOR's command lines); IOR's banner, CSV header or JSON keys;
# elbencho's CSV labels), then
# dd's `records in/out` lines before lmdd's bare summary lines.
IMPORTERS: Dict[str, str] = {
    "mpiwrite-json": "mpiwrite.importers.mpiwrite_json",
    "fio": "mpiwrite.importers.fio",
    "io500": "mpiwrite.importers.io500",
    "ior": "mpiwrite.importers.ior",
    "elbencho": "mpiwrite.importers.elbencho",
    "darshan": "mpiwrite.importers.darshan",
    "dd": "mpiwrite.importers.dd",
    "lmdd": "mpiwrite.importers.lmdd",
}


# The one tool whose results are a folder: `import FOLDER` reads this file of it (and the
# importer the files beside it).
FOLDER_FILE = "result.txt"


def names() -> Tuple[str, ...]:
    """--from's choices, without importing any importer."""
    return tuple(IMPORTERS)


def get(name: str) -> Importer:
    imp = importlib.import_module(IMPORTERS[name]).IMPORTER
    assert imp.name == name, (name, imp.name)
    return imp


def every() -> List[Importer]:
    """Every registered importer, in detection order."""
    return [get(n) for n in IMPORTERS]


def detect_binary(data: bytes) -> Optional[str]:
    """The name of the importer whose tool wrote these bytes (a binary log), or None."""
    return next((imp.name for imp in every() if imp.detect_bytes is not None
                 and imp.detect_bytes(data)), None)


def detect(text: str) -> Optional[str]:
    """The name of the importer whose tool wrote this text, or None."""
    return next((imp.name for imp in every() if imp.detect(text)), None)


def known_tools() -> str:
    """"mpiwrite's run --json, fio, IOR, dd or lmdd": for the line that refuses a file."""
    titles = [get(n).title for n in names()]
    return ", ".join(titles[:-1]) + " or " + titles[-1] if len(titles) > 1 else titles[0]


def what_it_is(text: str) -> str:
    """A few words on what a file looks like, for the line that refuses it."""
    tool = detect(text)
    if tool:
        return f"{tool} output"
    stripped = text.lstrip()
    if not stripped:
        return "an empty file"
    if stripped[:1] == "{" or stripped[:1] == "[" and not stripped[1:2].isalpha():
        return "JSON of no tool known here"  # "[run]", "[global]": an INI-like text
    return "text of no tool known here"


def combine(tests: List[Test]) -> List[Test]:
    """The files' tests together: the pieces of a test that another file holds (an elbencho
    service's own share of the master's phase) given to it by their importer, which refuses
    what fits nothing; the tests that are records, in their order."""
    for imp in every():
        if imp.combine is not None:
            imp.combine(tests)
    return [t for t in tests if not t.part_of]


def read_tests(path: str, tool: Optional[str] = None,
               command: str = "") -> Tuple[Source, List[Test]]:
    """The file's tests, by the tool its content shows (or `tool`, which the content must
    agree with); ImportRefused naming the file and why otherwise."""
    from mpiwrite.importers.base import check_test, read_source, refuse

    named = True  # the file named, not one found in a folder named
    if os.path.isdir(path):
        inside = os.path.join(path, FOLDER_FILE)
        if tool not in (None, "io500") or not os.path.lexists(inside):
            raise refuse(path, f"a folder: only an IO500 result folder (with its {FOLDER_FILE}) "
                         "is read as a folder; name the files")
        path, named = inside, False  # read as the files beside it: never through a symlink
    src = read_source(path, binary=lambda data: detect_binary(data) is not None, follow=named)
    found = detect_binary(src.data) if src.data is not None else detect(src.text)
    if tool is None:
        if found is None:
            raise refuse(path, f"{what_it_is(src.text)}: not the output of {known_tools()} "
                         "(give --from if it is one)")
        tool = found
    elif found is not None and found != tool:
        raise refuse(path, f"--from {tool}, but the file is {found} output")
    tests = get(tool).parse(src, command)
    for t in tests:
        check_test(t, path)
    return src, tests
