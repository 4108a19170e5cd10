"""lmdd (lmbench): its `X MB in Y secs, Z MB/sec` summary lines, one record each (ddlines.py
reads them)."""

from __future__ import annotations

import re

from mpiwrite.importers import ddlines
from mpiwrite.importers.base import Importer

_LINE = re.compile(r"^\s*\d+(?:\.\d+)? MB in \d+(?:\.\d+)? secs, \d+(?:\.\d+)? MB/sec\s*$",
                   re.M)


def detect(text: str) -> bool:
    return bool(_LINE.search(text))


IMPORTER = Importer(name="lmdd", title="lmdd", detect=detect, parse=ddlines.parse_lmdd)
