"""Which importer reads a file, and the tests it holds (docs/import.md)."""

from __future__ import annotations

from typing import List, Optional, Tuple

from mpiwrite.formats.imported import (
    Source,
    Test,
    check_test,
    detect,
    read_source,
    refuse,
    what_it_is,
)
from mpiwrite.importers import ddlines as import_dd
from mpiwrite.importers import fio as import_fio
from mpiwrite.importers import ior as import_ior

PARSERS = {"ior": import_ior.parse, "fio": import_fio.parse, "lmdd": import_dd.parse_lmdd,
           "dd": import_dd.parse_dd}


def read_tests(path: str, tool: Optional[str] = None,
               command: str = "") -> Tuple[Source, List[Test]]:
    """The file's tests, by the tool its content shows (or `tool`, which the content must
    agree with); ImportRefused naming the file and why otherwise."""
    src = read_source(path)
    found = detect(src.text)
    if tool is None:
        if found is None:
            raise refuse(path, f"{what_it_is(src.text)}: not the output of IOR, fio, lmdd or dd "
                         "(give --from if it is one)")
        tool = found
    elif found is not None and found != tool:
        raise refuse(path, f"--from {tool}, but the file is {found} output")
    tests = PARSERS[tool](src, command)
    for t in tests:
        check_test(t, path)
    return src, tests
