"""One rank's timed, single-stream write: open, write loop, fsync, close; and the read phase's
stream.  No MPI here.

The write loop itself (two variants, chosen once per stream) is writeloop.py's; the open, the
tail block, the final fsync, the error mapping and the close are here, shared by every stream
(POSIX write and read, and the null engine's).  The writer alone decides when to fsync.
"""

from __future__ import annotations

import dataclasses
import errno
import os
import resource
import time
from typing import List, Optional, Tuple

from mpiwrite import files
from mpiwrite.errors import why
from mpiwrite.formats import pattern
from mpiwrite.run import defaults, latency, writeloop
from mpiwrite.run.writeloop import POLL_SECONDS, clock

UNBOUNDED = 2**62


@dataclasses.dataclass
class StreamResult:
    """What one rank did in one iteration (times on this rank's monotonic clock)."""

    path: str
    t_open_start: float = float("nan")
    t_write_start: float = float("nan")
    t_write_end: float = float("nan")
    t_fsync_end: float = float("nan")
    t_close_end: float = float("nan")
    bytes: int = 0
    blocks: int = 0
    fsyncs: int = 0
    created: bool = False
    ino: int = 0  # inode of the file written (0: none): a reader checks it is the same file
    stopped_by: str = ""  # "", "time", "abort"
    error_phase: str = ""
    error_errno: int = 0
    error_text: str = ""
    samples: List[Tuple[float, int]] = dataclasses.field(default_factory=list)
    cpu_user: float = float("nan")  # CPU seconds of this process from write start to close
    cpu_system: float = float("nan")
    latency: Optional[object] = None  # latency.Log: write() and fsync() histograms

    @property
    def failed(self) -> bool:
        return bool(self.error_phase)

    def fail(self, phase: str, exc: OSError, hint: str = "") -> None:
        self.error_phase = phase
        self.error_errno = exc.errno or 0
        text = exc.strerror or str(exc)
        if exc.errno == errno.EDQUOT and not hint:
            hint = "a quota: the user's or group's limit on this filesystem is reached"
        self.error_text = f"{text}{' (' + hint + ')' if hint else ''}"


@dataclasses.dataclass(frozen=True)
class StreamPlan:
    path: str
    create: bool  # O_CREAT|O_EXCL: this rank creates the file (never truncates anything)
    offset: int  # where this rank's segment starts in the file
    nbytes: Optional[int]  # None: until the time limit
    block_size: int
    time_limit: Optional[float] = None
    fsync: bool = defaults.FSYNC
    fsync_every: int = defaults.FSYNC_EVERY
    direct: bool = defaults.DIRECT
    sample_interval: float = defaults.SAMPLE_INTERVAL
    expect_inode: Optional[Tuple[int, int]] = None  # (st_dev, st_ino) the file must have
    latency: bool = True  # per-call write()/fsync() latency histograms (latency.py)
    dir_fd: Optional[int] = None  # the open folder of `path` (layout.RankFiles.folder_for)


Poll = writeloop.Poll


def _open_flags(plan: StreamPlan) -> int:
    # O_NOFOLLOW: a symlink planted where a data file goes is never followed.
    flags = os.O_WRONLY | os.O_CLOEXEC | os.O_NOFOLLOW
    if plan.create:
        flags |= os.O_CREAT | os.O_EXCL
    if plan.direct:
        flags |= os.O_DIRECT
    return flags


def open_data_file(path: str, flags: int, dir_fd: Optional[int] = None) -> int:
    """Open (and with O_CREAT, create) a data file.

    With dir_fd, the file name is opened in that folder (opened and checked by
    layout.RankFiles): nothing on the way is a path someone could re-point.  Without it
    (tests, benchmarks), if its folder has vanished, make it again and retry once: only the
    file's folder and that folder's parent, never anything above."""
    if dir_fd is not None:
        return files.open_path(os.path.basename(path), flags, dir_fd)
    try:
        return os.open(path, flags, 0o644)
    except FileNotFoundError:
        if not flags & os.O_CREAT:
            raise
    folder = os.path.dirname(path) or "."
    for attempt in (folder, os.path.dirname(folder), folder):
        try:
            os.mkdir(attempt, 0o755)
        except FileExistsError:
            pass
        except FileNotFoundError:
            continue
    return os.open(path, flags, 0o644)


def _open_for_write(plan: StreamPlan, res: StreamResult) -> int:
    """The data file opened (and with plan.create, created) for writing; -1 and the failure
    in `res` when it cannot be, or is not the file rank 0 created."""
    try:
        fd = open_data_file(plan.path, _open_flags(plan), plan.dir_fd)
    except OSError as exc:
        hint = "the filesystem refuses O_DIRECT (--direct)" if (
            plan.direct and exc.errno == errno.EINVAL) else ""
        res.fail("open", exc, hint)
        return -1
    res.created = plan.create
    st = os.fstat(fd)
    res.ino = st.st_ino
    if plan.expect_inode is not None and (st.st_dev, st.st_ino) != plan.expect_inode:
        os.close(fd)
        res.fail("open", OSError(errno.ESTALE, "the file is not the one rank 0 created "
                                               "(replaced after creation); refusing to write"))
        return -1
    return fd


def write_stream(plan: StreamPlan, buf, poll: Optional[Poll] = None) -> StreamResult:
    """Run one rank's stream; never raises for I/O errors (they are in the result).

    The loop variant (with or without latency readings: writeloop.py) is chosen here, once;
    the tail block, the final fsync, the error mapping and the close are the same for both."""
    res = StreamResult(path=plan.path)
    res.t_open_start = clock()
    fd = _open_for_write(plan, res)
    if fd < 0:
        return res
    cpu0 = _cpu() if plan.latency else None
    t0 = res.t_write_start = clock()
    loop = writeloop.plain
    if plan.latency:
        # Latencies: the loop stores the clock reading it takes anyway (latency.py folds them).
        res.latency = latency.Log(t0, plan.block_size < latency.VECTOR_BELOW)
        loop = writeloop.timed
    total = plan.nbytes if plan.nbytes is not None else UNBOUNDED
    nfull, tail = divmod(total, plan.block_size)
    try:
        done, exc = loop(writeloop.Pace(plan, res, fd, t0, poll), plan, buf, fd, nfull)
        _finish_write(plan, buf, fd, res, done, tail, exc)
    finally:
        _end(res, fd, cpu0)
    return res


def _finish_write(plan: StreamPlan, buf, fd: int, res: StreamResult, done: int, tail: int,
                  exc: Optional[OSError]) -> None:
    """After the loop: the tail block, the final fsync, or the loop's error as the result."""
    bs = plan.block_size
    if exc is None:
        res.bytes = done * bs
        if tail and not res.stopped_by:
            off = plan.offset + done * bs
            pattern.OFFSET.pack_into(buf, pattern.OFFSET_AT, off)
            positional = plan.offset != 0 or not plan.create
            try:
                res.bytes += writeloop.write_all(fd, memoryview(buf)[:tail], off, positional)
                done += 1
            except OSError as err:
                exc = err
    res.blocks = done
    if exc is not None:
        hint = "--direct needs aligned sizes on this filesystem" if (
            plan.direct and exc.errno == errno.EINVAL) else ""
        _failed(res, "write", exc, done * bs, hint)
        return
    res.t_write_end = clock()
    every = plan.fsync_every
    need_fsync = _ends_with_fsync(plan, res) and (not every or done % every != 0 or tail)
    if need_fsync:
        try:
            os.fsync(fd)
        except OSError as err:
            res.fail("fsync", err)
            return
        res.fsyncs += 1
    res.t_fsync_end = clock()
    if res.latency is not None and need_fsync:
        res.latency.add_fsync(res.t_fsync_end - res.t_write_end)


def _ends_with_fsync(plan: StreamPlan, res: StreamResult) -> bool:
    """A stream ends with an fsync (--fsync) unless an abort stopped it."""
    return plan.fsync and res.stopped_by != "abort"


def _failed(res: StreamResult, phase: str, exc: OSError, nbytes: int, hint: str = "") -> None:
    """An I/O error stopped the stream's data phase after `nbytes`: the result says so."""
    res.bytes = max(res.bytes, nbytes)
    res.t_write_end = clock()
    res.fail(phase, exc, hint)


def _cpu() -> Tuple[float, float]:
    """This process's user and system CPU seconds.  getrusage, not times(): times() counts
    10 ms clock ticks, too coarse for a short iteration; getrusage's sum is the scheduler's
    nanosecond runtime (the user/system split is apportioned from ticks)."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime, r.ru_stime


def _end(res: StreamResult, fd: int = -1, cpu0=None) -> None:
    """A stream's end, the same for every engine: the file closed (the close phase's end),
    the CPU spent, the last sample.  Without a file (the null engine) the write, fsync and
    close phases end at one reading."""
    if fd >= 0:
        try:
            os.close(fd)
        except OSError as exc:
            if not res.failed:
                res.fail("close", exc)
        res.t_close_end = clock()
    else:
        res.t_write_end = res.t_fsync_end = res.t_close_end = clock()
    if cpu0 is not None:
        cpu1 = _cpu()
        res.cpu_user, res.cpu_system = cpu1[0] - cpu0[0], cpu1[1] - cpu0[1]
    res.samples.append((res.t_close_end, res.bytes))


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
    res.bytes = done
    res.blocks = -(-done // bs)
    res.fsyncs = 1 if _ends_with_fsync(plan, res) else 0
    _end(res)
    return res


@dataclasses.dataclass(frozen=True)
class ReadPlan:
    """What one rank reads back in the read phase: another rank's segment."""

    path: str
    offset: int
    nbytes: int  # what the writer of that segment wrote
    block_size: int
    sample_interval: float = defaults.SAMPLE_INTERVAL
    direct: bool = defaults.DIRECT
    check: Optional[Tuple[int, int, int]] = None  # (key, writer rank, iteration): verify
    expect: Optional[bytes] = None  # the check's body (from the node leader); None: made here
    dir_fd: Optional[int] = None  # the open folder of `path`
    expect_ino: int = 0  # the inode the writer wrote (0: not known)
    refuse: str = ""  # why this file must not be opened (its folder was replaced): a failure


@dataclasses.dataclass
class ReadResult(StreamResult):
    """A read stream: StreamResult's times (write_* meaning read_*) and the check's findings."""

    mismatches: int = 0
    first: Optional[pattern.Mismatch] = None


def read_stream(plan: ReadPlan, buf, poll: Optional[Poll] = None) -> ReadResult:
    """Read another rank's segment, timed like a write stream (open, read, close), checking
    the pattern of every block as it goes when plan.check is set (one pass, not two).  A
    missing file or one shorter than what was written is a failure (never raises)."""
    res = ReadResult(path=plan.path)
    bs = plan.block_size
    view = memoryview(buf)
    expect = plan.expect or (pattern.body_bytes(bs, *plan.check[:2]) if plan.check else None)
    res.t_open_start = clock()
    if plan.refuse:
        res.fail("open", OSError(errno.ESTALE, plan.refuse))
        return res
    try:  # a regular file only, not followed, never blocking (a FIFO planted at the name)
        fd = open_written(plan.path, plan.dir_fd, plan.expect_ino, plan.check,
                          os.O_DIRECT if plan.direct else 0)
    except OSError as exc:
        res.fail("open", exc)
        return res
    cpu0 = _cpu()
    t0 = res.t_write_start = clock()
    next_event = t0 + POLL_SECONDS
    next_sample = t0 + plan.sample_interval
    done = 0
    try:
        for off, n in pattern.blocks(plan.offset, plan.nbytes, bs):
            got = os.preadv(fd, [view[:n]], off)
            if got < n:
                res.bytes = done + got
                raise OSError(errno.EIO, f"short file: {off - plan.offset + got} of "
                                         f"{plan.nbytes} bytes")
            if expect is not None:
                bad = pattern.check_block(view[:n], off, expect, plan.check[0], plan.check[1],
                                          plan.check[2])
                if bad is not None:
                    res.mismatches += 1
                    res.first = res.first or bad
            done += n
            res.blocks += 1
            now = clock()
            if now >= next_event:
                if now >= next_sample:
                    res.samples.append((now, done))
                    next_sample = now + plan.sample_interval
                next_event = now + POLL_SECONDS
                if poll is not None and poll(now, done):
                    res.stopped_by = "abort"
                    break
        res.bytes = done
        res.t_write_end = res.t_fsync_end = clock()
    except OSError as exc:
        _failed(res, "read", exc, done)
    finally:
        _end(res, fd, cpu0)
    return res


def null_read(plan: ReadPlan, buf, poll: Optional[Poll] = None) -> ReadResult:
    """The null engine's read: the plan's bytes, no I/O."""
    res = ReadResult(path=plan.path)
    res.t_open_start = res.t_write_start = clock()
    res.bytes, res.blocks = plan.nbytes, -(-plan.nbytes // plan.block_size)
    _end(res)
    return res


ENGINES = {"posix": write_stream, "null": null_stream}
READ_ENGINES = {"posix": read_stream, "null": null_read}


def engine(name: str):
    """The stream function for an I/O engine name (see ENGINES)."""
    return ENGINES[name]


def read_engine(name: str):
    return READ_ENGINES[name]


def open_written(path: str, dir_fd: Optional[int], expect_ino: int = 0, check=None,
                 flags: int = 0) -> int:
    """Open a data file written in this run for reading back: a regular file only, a symlink
    not followed, a FIFO refused without blocking (files.open_regular), and, when the
    writer's inode is known, the very file it wrote (else ESTALE: replaced after writing)."""
    name = os.path.basename(path) if dir_fd is not None else path
    fd = files.open_regular(name, follow=False, dir_fd=dir_fd, flags=flags)
    if expect_ino and os.fstat(fd).st_ino != expect_ino:
        os.close(fd)
        who = f"rank {check[1]}" if check else "its writer"
        raise OSError(errno.ESTALE, f"not the file {who} wrote (replaced after it was "
                                    "written); refusing to read it", path)
    return fd


def drop_cache(path: str, offset: int = 0, length: int = 0,
               dir_fd: Optional[int] = None) -> str:
    """Ask the kernel to drop this file's cached pages (after its fsync), so a later read
    comes from the storage: posix_fadvise(POSIX_FADV_DONTNEED).  Returns '' or why not.
    It cannot drop another node's cache, a server's cache, or dirty pages."""
    try:
        fd = open_written(path, dir_fd)
    except OSError as exc:
        return why(exc)
    try:
        os.posix_fadvise(fd, offset, length, os.POSIX_FADV_DONTNEED)
        return ""
    except OSError as exc:
        return why(exc)
    finally:
        os.close(fd)


@dataclasses.dataclass
class VerifyResult:
    path: str
    bytes: int = 0
    seconds: float = 0.0
    mismatches: int = 0
    first: Optional[pattern.Mismatch] = None
    error_text: str = ""


def verify_segment(path: str, offset: int, nbytes: int, block_size: int, key: int, rank: int,
                   iteration: int, dir_fd: Optional[int] = None, expect_ino: int = 0,
                   refuse: str = "", expect: Optional[bytes] = None) -> VerifyResult:
    """Read a segment back and check every block's header and body (open_written: the file
    rank `rank` wrote, a regular file, never a FIFO or a symlink someone put in its place)."""
    res = VerifyResult(path=path)
    if refuse:
        res.error_text = refuse
        return res
    expect = expect or pattern.body_bytes(block_size, key, rank)
    view = memoryview(bytearray(block_size))
    t0 = clock()
    try:
        with os.fdopen(open_written(path, dir_fd, expect_ino, (key, rank, iteration)), "rb",
                       buffering=0) as fh:
            for off, n in pattern.blocks(offset, nbytes, block_size):
                got = os.preadv(fh.fileno(), [view[:n]], off)
                if got < n:
                    res.mismatches += 1
                    res.first = res.first or pattern.Mismatch(off + got, "data", "end of file")
                    break
                bad = pattern.check_block(view[:n], off, expect, key, rank, iteration)
                if bad is not None:
                    res.mismatches += 1
                    res.first = res.first or bad
                res.bytes += n
    except OSError as exc:
        res.error_text = f"{exc.strerror or exc}"
    res.seconds = clock() - t0
    return res
