"""GNU dd: its `a+b records in/out` and `N bytes (...) copied, S s, R MB/s` lines, one record
per summary line (ddlines.py reads them)."""

from __future__ import annotations

import re

from mpiwrite.importers import ddlines
from mpiwrite.importers.base import Importer

_SUMMARY = re.compile(r"^\d+ bytes (?:\([^)]*\) )?copied, ", re.M)
_RECORDS = re.compile(r"^\d+\+\d+ records (?:in|out)$", re.M)


def detect(text: str) -> bool:
    return bool(_SUMMARY.search(text) or _RECORDS.search(text))


IMPORTER = Importer(name="dd", title="dd", detect=detect, parse=ddlines.parse_dd)
