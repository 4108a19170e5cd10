"""The write loop of one rank's stream, in two variants chosen once per stream (writer.py).

The loop is the hot path: one preallocated buffer, one 8-byte header patch, one write call and
one clock read per block.  `plain` does only that; `timed` also stores the clock reading for
the latency histograms (latency.py).  Which one runs is decided before the first block, as
elbencho binds its phase functions once, so no block asks whether latency is on.  Everything
else (time limit, samples, polling the other ranks for an abort, an fsync every N blocks)
happens in `Pace`, only when the clock passes the next event (a few times per second) or at
an fsync: one shared place, off the per-block path.

Both variants return (blocks written, the OSError that stopped them or None); writer.py maps
the error and writes the tail, the final fsync and the close, the same for both.
"""

from __future__ import annotations

import errno
import os
import time
from typing import Callable, Optional, Sequence, Tuple

from mpiwrite import structs
from mpiwrite.engines import latency
from mpiwrite.vocab import pattern

POLL_SECONDS = 0.1  # how often the loop looks up from writing

clock = time.monotonic

Poll = Callable[[float, int], bool]  # (now, bytes so far) -> stop?


def write_all(fd: int, view: memoryview, offset: int, positional: bool) -> int:
    """Write the whole view; a short write is retried, and a write of 0 is an error."""
    done = 0
    n = len(view)
    while done < n:
        part = view[done:]
        w = os.pwrite(fd, part, offset + done) if positional else os.write(fd, part)
        if w <= 0:
            raise OSError(errno.EIO, "short write: 0 bytes written")
        done += w
    return done


class Pace:
    """What the loop does between blocks, off the per-block path: the time limit, samples,
    polls, and the fsync every N blocks (with its latency when `res.latency` is kept)."""

    def __init__(self, plan, res, fd: int, t0: float, poll: Optional[Poll]):
        self.res, self.fd, self.poll = res, fd, poll
        self.bs = plan.block_size
        self.interval = plan.sample_interval
        self.deadline = t0 + plan.time_limit if plan.time_limit else float("inf")
        self.next_sample = t0 + plan.sample_interval
        self.next_event = min(t0 + POLL_SECONDS, self.deadline)
        self.every = plan.fsync_every
        self.first_fsync = self.every if self.every else -1
        # Samples count bytes known to be durable where the run knows them: every completed
        # write under O_DIRECT, the last fsync'd block under --fsync-every.  Otherwise they
        # count bytes write() accepted, and first-done is not computed from them (summary.py).
        self.durable_every = bool(self.every) and not plan.direct
        self.synced = 0
        self.last_sync_sample = float("-inf")
        self.base = 0  # blocks written before this loop began (a wear-out's continuation)
        self.t0 = t0
        # --ramp (the posix engine's option): when it ends; a time limit counts after it
        ramp = (plan.options or {}).get("ramp")
        self.ramp_at = t0 + ramp if ramp else float("inf")
        self.ramp_sync = bool(ramp) and (plan.fsync or bool(self.every)) and not plan.direct
        self.limit = plan.time_limit
        if ramp and plan.time_limit:  # the time limit counts from the ramp's end (end_ramp)
            self.deadline = float("inf")
            self.next_event = t0 + POLL_SECONDS

    def fsync(self, done: int, k: int) -> int:
        """The fsync after every N blocks (k: the block's reading index); the next one's
        block count.  An OSError goes to the loop's caller, as a write error."""
        res = self.res
        t_pre = clock()
        self.sync()
        res.fsyncs += 1
        done += self.base
        self.synced = done
        t_sync = clock()  # a durable point, at most every 10 ms: first-done's grain
        lat = res.latency
        if lat is not None:
            lat.add_fsync(t_sync - t_pre)
            lat.marks.append((k, t_sync - t_pre))
        if t_sync - self.last_sync_sample >= 0.01:
            res.samples.append((t_sync, done * self.bs))
            self.last_sync_sample = t_sync
        return done - self.base + self.every

    def sync(self) -> None:
        """The fsync itself (an MPI-IO stream's is MPI_File_sync)."""
        os.fsync(self.fd)

    def end_ramp(self, done: int) -> float:
        """The ramp ends: with fsync, an fsync first, so that every byte counted after it was
        written after it; the bytes and the time are the result's.  Returns the clock."""
        self.ramp_at = float("inf")
        if self.ramp_sync:
            self.sync()
            self.res.fsyncs += 1
            self.synced = done
        self.res.t_ramp = clock()
        self.res.ramp_bytes = done * self.bs
        if self.limit:  # --time counts after the ramp, its fsync included
            self.deadline = self.res.t_ramp + self.limit
        return self.res.t_ramp

    def due(self, now: float, done: int) -> float:
        """The clock passed the next event: stop at the time limit, take a sample, poll the
        other ranks.  Returns the next event's time; a stop is in res.stopped_by."""
        res = self.res
        done += self.base
        if now >= self.ramp_at:
            now = self.end_ramp(done)
        if now >= self.deadline:
            res.stopped_by = "time"
            return self.deadline
        if now >= self.next_sample:
            res.samples.append((now, (self.synced if self.durable_every else done) * self.bs))
            self.next_sample += self.interval * max(
                1, int((now - self.next_sample) / self.interval) + 1)
        self.next_event = min(now + POLL_SECONDS, self.deadline)
        if self.poll is not None and self.poll(now, done * self.bs):
            res.stopped_by = "abort"
        return self.next_event


def _bind(plan, buf):
    """What both loops hold in locals (one look-up each, before the first block): the block
    size, a view of the buffer, the header patch and where it goes, whether writes carry
    their offset (a shared file, one not created by this stream, or a pattern other than
    sequential), the write call."""
    positional = plan.offset != 0 or not plan.create or plan.offsets is not None
    return (plan.block_size, memoryview(buf), pattern.OFFSET.pack_into, pattern.OFFSET_AT,
            positional, os.pwrite if positional else os.write)


def plain(pace: Pace, plan, buf, fd: int, offs: Sequence[int]) -> Tuple[int, Optional[OSError]]:
    """The whole blocks at offsets `offs` (vocab/offsets.py), nothing kept per block."""
    res = pace.res
    bs, view, pack, at, positional, write = _bind(plan, buf)
    done = 0
    next_event = pace.next_event
    next_fsync = pace.first_fsync
    try:
        for off in offs:
            pack(buf, at, off)
            w = write(fd, view, off) if positional else write(fd, view)
            if w != bs:
                res.bytes = done * bs + w
                write_all(fd, view[w:], off + w, positional)
            done += 1
            if done == next_fsync:
                next_fsync = pace.fsync(done, 0)
            now = clock()
            if now >= next_event:
                next_event = pace.due(now, done)
                if res.stopped_by:
                    break
    except OSError as exc:
        return done, exc
    return done, None


def timed(pace: Pace, plan, buf, fd: int, offs: Sequence[int]) -> Tuple[int, Optional[OSError]]:
    """The whole blocks at offsets `offs`, each block's clock reading stored for res.latency.

    The blocks run in chunks that fill the readings list, so its index is the for loop's own
    counter (k) and storing a reading costs one list store."""
    res = pace.res
    lat = res.latency
    stamps = lat.stamps
    room = latency.CAPACITY
    bs, view, pack, at, positional, write = _bind(plan, buf)
    nfull = len(offs)
    done = 0
    next_event = pace.next_event
    next_fsync = pace.first_fsync
    k = 0  # readings stored since the last fold
    try:
        while done < nfull and not res.stopped_by:
            if k == room:
                t_fold = clock()
                lat.fold(k)
                lat.marks.append((0, clock() - t_fold))  # the next write's latency leaves it out
                k = 0
            first = k
            for k in range(first, first + min(nfull - done, room - first)):
                off = offs[done]
                pack(buf, at, off)
                w = write(fd, view, off) if positional else write(fd, view)
                if w != bs:
                    res.bytes = done * bs + w
                    write_all(fd, view[w:], off + w, positional)
                done += 1
                if done == next_fsync:
                    next_fsync = pace.fsync(done, k)
                now = clock()
                stamps[k] = now
                if now >= next_event:
                    next_event = pace.due(now, done)
                    if res.stopped_by:
                        break
                    # the next write's latency does not include this bookkeeping
                    lat.marks.append((k + 1, clock() - now))
            k += 1  # stamps[:k] hold readings (the for loop ends on the last one it stored)
        lat.fold(k)
    except OSError as exc:
        return done, exc
    return done, None


def wear_out(plan, pace: Pace, loop, buf, fd, offs: Sequence[int], done: int,
             exc: Optional[OSError]) -> Tuple[int, Optional[OSError]]:
    """IO500's stonewall with wear-out (IOR -D T -O stoneWallingWearOut=1): the loop stopped
    at the stonewall (plan.time_limit); every rank says how many blocks it wrote
    (plan.wear_out, one agreement of all ranks, made by every rank exactly once, also by one
    that failed or was stopped) and those that wrote fewer than the most productive rank go
    on until they have written as many.  The stonewall's bytes and time stay in the result."""
    res = pace.res
    res.stonewall_bytes = done * plan.block_size
    res.stonewall_seconds = clock() - pace.t0
    ok = exc is None and res.stopped_by in ("", "time")
    target = plan.wear_out(done, ok)
    if not ok or target <= done:
        return done, exc
    res.stopped_by = ""
    cont = type(pace)(structs.replace(plan, time_limit=plan.wear_limit), res, fd, clock(),
                      pace.poll)
    cont.base = done
    for name in ("synced", "last_sync_sample", "fh"):
        if hasattr(pace, name):
            setattr(cont, name, getattr(pace, name))
    if cont.every:
        cont.first_fsync = cont.every - done % cont.every
    if res.latency is not None:
        res.latency.base = clock()  # the agreement's wait is not a write's latency
    more, exc = loop(cont, plan, buf, fd, offs[done:target])
    return done + more, exc
