"""The POSIX engine: one rank's timed, single-stream write (open, write loop, fsync, close)
and the read phase's stream, with pwrite/preadv on a file of its own or a segment of a shared
one.  No MPI here.

The write loop itself (two variants, chosen once per stream) is writeloop.py's; the open, the
tail block, the final fsync, the error mapping and the close are here.  The writer alone decides
when to fsync.
"""

from __future__ import annotations

import errno
import os
from typing import Optional

from mpiwrite import files, structs
from mpiwrite.engines import latency, writeloop
from mpiwrite.engines.base import (
    DROP_CACHE,
    FILES,
    SPACE_CHECK,
    UNBOUNDED,
    VERIFY,
    Engine,
    Poll,
    ReadPlan,
    ReadResult,
    StreamPlan,
    StreamResult,
    cpu_seconds,
    end_stream,
    ends_with_fsync,
    same_file,
    stream_failed,
)
from mpiwrite.engines.writeloop import POLL_SECONDS, clock
from mpiwrite.errors import why
from mpiwrite.vocab import pattern


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
    if plan.expect_inode is not None and not same_file(st, plan.expect_inode):
        os.close(fd)
        res.fail("open", OSError(errno.ESTALE, "the file is not the one rank 0 created "
                                               "(replaced after creation); refusing to write"))
        return -1
    return fd


def block_offsets(plan: StreamPlan):
    """(the whole blocks' offsets in the order written, the tail's bytes)."""
    total = plan.nbytes if plan.nbytes is not None else UNBOUNDED
    nfull, tail = divmod(total, plan.block_size)
    if plan.offsets is not None:
        return plan.offsets, 0
    return range(plan.offset, plan.offset + nfull * plan.block_size, plan.block_size), tail


def segment_blocks(offset: int, nbytes: int, block_size: int, offsets=None):
    """(offset, length) of each block a segment's writer wrote: its pattern's offsets (the
    first nbytes' worth) or one after another from `offset`."""
    if offsets is None:
        return pattern.blocks(offset, nbytes, block_size)
    return ((off, block_size) for off in offsets[:nbytes // block_size])


def write_stream(plan: StreamPlan, buf, poll: Optional[Poll] = None) -> StreamResult:
    """Run one rank's stream; never raises for I/O errors (they are in the result).

    The loop variant (with or without latency readings: writeloop.py) is chosen here, once;
    the tail block, the final fsync, the error mapping and the close are the same for both."""
    res = StreamResult(path=plan.path)
    res.t_open_start = clock()
    fd = _open_for_write(plan, res)
    if fd < 0:
        if plan.wear_out is not None:  # every rank takes part in the stonewall's agreement
            plan.wear_out(0, False)
        return res
    cpu0 = cpu_seconds() if plan.latency else None
    t0 = res.t_write_start = clock()
    loop = writeloop.plain
    if plan.latency:
        # Latencies: the loop stores the clock reading it takes anyway (latency.py folds them).
        res.latency = latency.Log(t0, plan.block_size < latency.VECTOR_BELOW)
        loop = writeloop.timed
    offs, tail = block_offsets(plan)
    try:
        pace = writeloop.Pace(plan, res, fd, t0, poll)
        done, exc = loop(pace, plan, buf, fd, offs)
        if plan.wear_out is not None:
            done, exc = writeloop.wear_out(plan, pace, loop, buf, fd, offs, done, exc)
        _finish_write(plan, buf, fd, res, done, tail, exc)
    finally:
        end_stream(res, fd, cpu0)
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
        stream_failed(res, "write", exc, done * bs, hint)
        return
    res.t_write_end = clock()
    every = plan.fsync_every
    need_fsync = ends_with_fsync(plan, res) and (not every or done % every != 0 or tail)
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
    cpu0 = cpu_seconds()
    t0 = res.t_write_start = clock()
    next_event = t0 + POLL_SECONDS
    next_sample = t0 + plan.sample_interval
    done = 0
    try:
        for off, n in segment_blocks(plan.offset, plan.nbytes, bs, plan.offsets):
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
        stream_failed(res, "read", exc, done)
    finally:
        end_stream(res, fd, cpu0)
    return res


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


@structs.value()
class VerifyResult:
    path: str
    bytes: int = 0
    seconds: float = 0.0
    mismatches: int = 0
    first: Optional[pattern.Mismatch] = None
    error_text: str = ""


def verify_segment(path: str, offset: int, nbytes: int, block_size: int, key: int, rank: int,
                   iteration: int, dir_fd: Optional[int] = None, expect_ino: int = 0,
                   refuse: str = "", expect: Optional[bytes] = None,
                   offsets=None) -> VerifyResult:
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
            for off, n in segment_blocks(offset, nbytes, block_size, offsets):
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


def create_shared(path: str, dir_fd: Optional[int]):
    """Rank 0 makes the shared file (O_EXCL, never a planted link): its (device, inode), which
    every rank's open must find again."""
    fd = open_data_file(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                        | os.O_CLOEXEC, dir_fd)
    try:
        st = os.fstat(fd)
    finally:
        os.close(fd)
    return st.st_dev, st.st_ino


ENGINE = Engine("posix", write_stream, read_stream,
                frozenset({FILES, VERIFY, DROP_CACHE, SPACE_CHECK}),
                "write()/pwrite() and fsync() on a file per rank or a shared file",
                create_shared=create_shared, verify=verify_segment)
