"""The null engine (IOR's DUMMY): the same plan, time limit, samples and polls as the POSIX
stream, but no file and no I/O, so tests of the coordination need no storage."""

from __future__ import annotations

import time
from typing import Optional

from mpiwrite.engines.base import (
    UNBOUNDED,
    Engine,
    Poll,
    ReadPlan,
    ReadResult,
    StreamPlan,
    StreamResult,
    end_stream,
    ends_with_fsync,
)
from mpiwrite.engines.writeloop import clock


def null_stream(plan: StreamPlan, buf, poll: Optional[Poll] = None) -> StreamResult:
    """The null engine (IOR's DUMMY): the same plan, time limit, samples and polls as the
    POSIX stream, but no file and no I/O, so tests of the coordination need no storage."""
    res = StreamResult(path=plan.path)
    res.t_open_start = res.t_write_start = t0 = clock()
    bs = plan.block_size
    total = plan.nbytes if plan.nbytes is not None else UNBOUNDED
    deadline = t0 + plan.time_limit if plan.time_limit else float("inf")
    done = 0
    while done < total:
        now = clock()
        if now >= deadline:
            res.stopped_by = "time"
            break
        if poll is not None and poll(now, done):
            res.stopped_by = "abort"
            break
        done = min(total, done + 64 * bs)  # a burst of blocks between polls
        if plan.nbytes is None:
            time.sleep(0.01)
    if plan.wear_out is not None:  # the stonewall's agreement; the wear-out costs no time
        res.stonewall_bytes, res.stonewall_seconds = done, clock() - t0
        blocks = plan.wear_out(done // bs, res.stopped_by in ("", "time"))
        if res.stopped_by != "abort" and blocks * bs > done:
            done, res.stopped_by = min(total, blocks * bs), ""
    res.bytes = done
    res.blocks = -(-done // bs)
    res.fsyncs = 1 if ends_with_fsync(plan, res) else 0
    end_stream(res)
    return res


def null_read(plan: ReadPlan, buf, poll: Optional[Poll] = None) -> ReadResult:
    """The null engine's read: the plan's bytes, no I/O."""
    res = ReadResult(path=plan.path)
    res.t_open_start = res.t_write_start = clock()
    res.bytes, res.blocks = plan.nbytes, -(-plan.nbytes // plan.block_size)
    end_stream(res)
    return res


ENGINE = Engine("null", null_stream, null_read, frozenset(),
                "no file and no I/O: the coordination alone (IOR's DUMMY)")
