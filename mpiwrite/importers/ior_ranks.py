"""IOR's per-rank CSV (`-O saveRankPerformanceDetailsCSV=FILE`) as an imported test's rank
rows (docs/import.md).

IOR (ior.c StoreRankInformation) truncates the file and writes its header when it parses the
option, then appends, after every repetition of every test and for each access (the write, then
the read), one row per rank in rank order: `access,rank,runtime-with-openclose,runtime,
throughput-withopenclose,throughput`.  The times are the rank's own: from its open to its close,
and its access (its writes and, with -e, the fsync after them; not the open, not the close).
The throughputs are the test's bytes over the ranks (IOR gives every rank the mean: its
aggregate / tasks) over those times, in B/s.  There is no test or repetition column: the rows
are matched to the output's tests and repetitions by their order, and must all be accounted
for.  The file is found by the name the command line gave it, beside the output imported (a
regular file, never through a symlink).

A CSV that does not fit its output (another run's, cut short, another count of rows or ranks,
rates that are not the output's bytes over the times, a rank that took longer than IOR's own
total) is not read: the test is imported without rank rows, and says why.
"""

from __future__ import annotations

import dataclasses
import errno
import hashlib
import math
import os
import re
from typing import Any, Dict, List, Optional, Tuple

from mpiwrite.errors import why
from mpiwrite.formats.numbers import MAX_MB_PER_S
from mpiwrite.importers.base import MAX_INPUT_BYTES, RankTimes, Test, beside, read_beside
from mpiwrite.text import printable
from mpiwrite.units import MB

HEADER = "access,rank,runtime-with-openclose,runtime,throughput-withopenclose,throughput"
_RANK = re.compile(r"[0-9]{1,8}")  # ASCII digits: str.isdigit() takes '²', int() does not
_NUMBER = re.compile(r"[0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?")  # as IOR's %.10e prints
LATER = ("to add them: remove this run's record from the results folder, then import the "
         "output again with the CSV beside it")


@dataclasses.dataclass
class _Row:
    access: str
    rank: int
    with_open: float
    access_seconds: float
    rate_with_open: float
    rate: float


class Misfit(ValueError):
    """The CSV does not fit the output: why, in a few words."""


def named(command_flags) -> str:
    """The file the command line told IOR to write its per-rank figures to ('' for none)."""
    return str(command_flags.get("rank_csv") or "")


def rows(text: str) -> List[_Row]:
    """IOR's rows, each checked (Misfit: the text is not IOR's per-rank CSV)."""
    lines = text.splitlines()
    if not lines or lines[0].strip() != HEADER:
        raise Misfit("its first line is not IOR's header")
    out = []
    for n, line in enumerate(lines[1:], 2):
        if not line.strip():
            continue
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != 6 or cells[0] not in ("write", "read") or not _RANK.fullmatch(cells[1]):
            raise Misfit(f"line {n} is not a row of IOR's")
        if not all(_NUMBER.fullmatch(c) for c in cells[2:]):
            raise Misfit(f"line {n}: a time or a rate that is not a number")
        values = [float(c) for c in cells[2:]]
        if not all(math.isfinite(v) and 0 < v < 1e15 for v in values):
            raise Misfit(f"line {n}: a time or a rate out of range")
        if values[1] > values[0] * (1 + 1e-9):  # its access is inside its open to close
            raise Misfit(f"line {n}: its runtime is longer than its runtime with open and "
                         "close")
        if values[3] / MB > MAX_MB_PER_S:
            raise Misfit(f"line {n}: a rank's rate above 10^9 MB/s")
        out.append(_Row(cells[0], int(cells[1]), *values))
    return out


def _take(test: Test, rows: List[_Row], at: int,
          total_seconds: List[Tuple[str, List[float]]]) -> int:
    """Give `test` its rank rows from rows[at:], in IOR's order; the index after them."""
    n = test.ranks
    phases = [(name, ph) for name, ph in (("write", test.write), ("read", test.read)) if ph]
    reps = max(len(ph.bytes) for _n, ph in phases)
    times = dict(total_seconds)
    got = {name: [] for name, _ph in phases}
    for rep in range(reps):
        for name, ph in phases:
            mine = rows[at:at + n]
            if len(mine) < n:
                raise Misfit(f"repetition {rep}: {name}: {len(mine)} rows for {n} ranks")
            if [r.rank for r in mine] != list(range(n)) or any(r.access != name for r in mine):
                raise Misfit(f"repetition {rep}: {name}: not ranks 0 to {n - 1} of a {name}, "
                             "in order")
            if rep >= len(ph.bytes):
                raise Misfit(f"repetition {rep}: {name}: not in the output")
            share = ph.bytes[rep] / n
            for r in mine:
                for rate, secs in ((r.rate, r.access_seconds), (r.rate_with_open, r.with_open)):
                    if abs(rate * secs - share) > 1e-6 * share + 1:  # IOR prints 11 digits
                        raise Misfit(f"repetition {rep}: {name}: rank {r.rank}'s rate x time "
                                     f"is {rate * secs:.6g} bytes, the output's {share:.6g} a "
                                     "rank")
            total = times.get(name, [])
            longest = max(r.with_open for r in mine)
            if rep < len(total) and not 0.9 * total[rep] - 0.01 <= longest \
                    <= total[rep] * 1.001 + 0.001:
                raise Misfit(f"repetition {rep}: {name}: its longest rank took "
                             f"{longest:.4g} s from open to close, IOR's total is "
                             f"{total[rep]:.4g} s")
            got[name].append(RankTimes(bytes=[round(share)] * n,
                                       seconds=[r.access_seconds for r in mine]))
            at += n
    for name, per_rep in got.items():
        test.rank_times[name] = per_rep
    return at


def read_for(tests: List[Test], path: str, command_flags) -> None:
    """Give the tests of the IOR output at `path` (in its order) their rank rows from the
    per-rank CSV its command line names, found beside it; or none, each test saying why
    (`per_rank_note`: the record's `per_rank`, and a warning at the import)."""
    name = named(command_flags)
    if not name or not tests:
        return
    found, where = found_beside(path, name)
    said = where if found is None else attach(tests, found["text"], where)
    for test in tests:
        test.per_rank_note = f"{said}; {LATER}" if said else ""
        if found is not None and not said:
            test.rank_csv = {"file": found["file"], "sha256": found["sha256"]}


def attach(tests: List[Test], text: str, where: str) -> Optional[str]:
    """Give `tests` (one IOR output's, in its order) their rank rows from the CSV's text, or
    none at all and say why."""
    try:
        got = rows(text)
        at = 0
        for test in tests:
            at = _take(test, got, at, _totals(test))
        if at != len(got):
            raise Misfit(f"{len(got)} rows where the output's tests and repetitions make {at}")
    except Misfit as exc:
        for test in tests:
            test.rank_times.clear()
        return f"IOR's per-rank CSV {printable(where)} does not fit this output ({exc}): " \
               "imported without rank rows"
    for test in tests:
        test.derived["ranks table"] = (
            f"IOR's per-rank CSV ({printable(os.path.basename(where))}): each rank's bytes "
            "IOR's mean (its bytes / tasks: a stonewall without wear-out leaves ranks with "
            "other amounts), its rate that over its access time (its writes and -e's fsync; "
            "IOR counts neither its open nor its close there)")
    return None


def _totals(test: Test) -> List[Tuple[str, List[float]]]:
    """Per phase, IOR's own total time of each repetition (its bandwidth is bytes over it)."""
    out = []
    for name, ph in (("write", test.write), ("read", test.read)):
        if ph and ph.open_included:
            out.append((name, [b / (r * 1e6) if r > 0 else math.inf
                               for b, r in zip(ph.bytes, ph.MB_per_s)]))
    return out


def found_beside(path: str, name: str) -> Tuple[Optional[Dict[str, Any]], str]:
    """({text, file, sha256} of the file `name` names, found by its base name beside `path`,
    and where; or None, and why not)."""
    base = os.path.basename(name.rstrip("/"))
    if not base or base in (".", ".."):
        return None, f"the command names {printable(name)!r} for IOR's per-rank CSV: no file"
    near = beside(path, base)
    try:
        data = read_beside(path, base)[1]
    except OSError as exc:
        if not os.path.lexists(near):
            return None, (f"IOR wrote per-rank figures to {printable(name)} "
                          "(-O saveRankPerformanceDetailsCSV), which is not beside the output")
        said = f"over {MAX_INPUT_BYTES >> 20} MiB" if exc.errno == errno.EFBIG else (
            "a symlink (never followed)" if os.path.islink(near) else why(exc))
        return None, (f"IOR's per-rank CSV {printable(near)} is not read: {said} (a regular "
                      f"file of at most {MAX_INPUT_BYTES >> 20} MiB is)")
    return {"text": data.decode("utf-8", "replace"), "file": near,
            "sha256": hashlib.sha256(data).hexdigest()}, near
