"""How long a study takes: one estimate for `study plan`, `tune plan` and `jobscript --study`.

A study is one launch (MPI, Python, the nodes' facts) and then its runs, each a run's own
time (its time limit, or its bytes at a rate) plus what a run inside a study costs around it
(barriers, the facts, the record), a settle where the study settles, and a setting's `set`
and `get` where the point changes a setting.  The constants were measured on a 2-core test
machine (docs/study.md, "How long a study takes"); the rate is what decides a size-bound run:

- `--rate` where given (MB/s per rank);
- else a probe: one fsync'd write of PROBE_BYTES into the target (or the folder it will be
  made in), timed, then removed: what this node writes there now;
- else an assumed ASSUMED_RATE MB/s per rank, said so.

Standard library only; the probe's file is created O_EXCL|O_NOFOLLOW and only it is removed.
"""

from __future__ import annotations

import os
import time
from typing import Any, List, NamedTuple, Optional

from mpiwrite.units import MiB

# measured (docs/study.md): the shipped examples' runs on one node, 1 and 2 ranks
STARTUP_SECONDS = 1.2  # one launch: MPI and Python on every rank, the nodes' facts
RUN_SECONDS = 0.15  # a run inside a study: barriers, facts, the record, the journal
SETTLE_SECONDS = 0.5  # a settle before a run (writeback flushed and waited for)
CHANGE_SECONDS = 1.5  # a setting changed before a run: its `set`, then `get` to confirm
# a time-limited buffered run's final fsync: what the page cache holds when the time is up
# (measured: 5 s runs took 5.7 to 6.6 s)
TAIL_SECONDS = 1.0
ASSUMED_RATE = 100.0  # MB/s per rank when nothing better is known
# what `tune plan` counts a round as, against --budget: the Ceph testbed's 3 hosts (FUSE
# settles, `tune set` on every host) took 1.6x the estimate of this machine's constants
BUDGET_MARGIN = 1.6
PROBE_BYTES = 16 * MiB


class Rate(NamedTuple):
    mb_per_s: float
    basis: str  # what the rate rests on, for the estimate's line


def probe(target: str) -> Optional[float]:
    """MB/s of one fsync'd PROBE_BYTES write into `target` (or the folder it will be made
    in), its file removed; None where there is no folder to write to or the write fails."""
    folder = target if os.path.isdir(target) else os.path.dirname(os.path.abspath(target))
    try:
        dir_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    name = f".mpiwrite-probe-{os.getpid()}-{os.urandom(4).hex()}"
    try:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) \
            | getattr(os, "O_CLOEXEC", 0)
        fd = os.open(name, flags, 0o600, dir_fd=dir_fd)
    except OSError:
        os.close(dir_fd)
        return None
    block = os.urandom(MiB)
    try:
        t0 = time.monotonic()
        for _ in range(PROBE_BYTES // MiB):
            view = memoryview(block)
            while view:
                view = view[os.write(fd, view):]
        os.fsync(fd)
        seconds = time.monotonic() - t0
    except OSError:
        return None
    finally:
        os.close(fd)
        try:
            os.unlink(name, dir_fd=dir_fd)
        except OSError:
            pass
        os.close(dir_fd)
    return PROBE_BYTES / 1e6 / max(seconds, 1e-6)


def rate_for(target: str, given: Optional[float]) -> Rate:
    """The rate a size-bound run is estimated at, and what it rests on."""
    if given is not None:
        return Rate(given, f"{given:g} MB/s per rank (--rate)")
    measured = probe(target)
    if measured is not None:
        return Rate(measured, f"{measured:.0f} MB/s per rank, a {PROBE_BYTES // MiB} MiB "
                              f"fsync'd write into the target now (--rate to say otherwise)")
    return Rate(ASSUMED_RATE, f"an assumed {ASSUMED_RATE:g} MB/s per rank (--rate)")


def run_seconds(cfg, mb_per_s: float) -> float:
    """One run's own time: its time limits, or its bytes at the rate; and its delays."""
    gaps = cfg.delay * (cfg.iterations - 1)
    if cfg.time_limit:
        tail = TAIL_SECONDS if cfg.fsync and not cfg.direct else 0.0
        return (cfg.timed_seconds() + tail) * cfg.iterations + gaps
    return cfg.size / (mb_per_s * 1e6) * cfg.iterations + gaps


def point_seconds(cfg, mb_per_s: float, settles: bool, changes: int) -> float:
    """One run inside a study: its own time, the run's cost around it, a settle, and the
    settings changed before it."""
    return run_seconds(cfg, mb_per_s) + RUN_SECONDS + (SETTLE_SECONDS if settles else 0.0) \
        + CHANGE_SECONDS * changes


def study_seconds(st, configs: List[Any], mb_per_s: float, settles: bool) -> float:
    """The whole study, as it will run: one launch, then every run in the study's order,
    a setting's change counted where the point before had another value."""
    total, before, points = STARTUP_SECONDS, None, st.points()
    for i, _r in st.runs():
        point = points[i]
        changes = sum(1 for s in st.settings if before is None
                      or before.get(f"setting.{s.name}") != point.get(f"setting.{s.name}"))
        total += point_seconds(configs[i], mb_per_s, settles, changes)
        before = point
    return total
