"""The MPI-IO engine: a rank's stream through MPI_File_write_at (independent) or
MPI_File_write_at_all (collective), with MPI_File_sync as the fsync, inside the timed
interval as the POSIX engine's (docs/engines.md).

A file per rank is opened on MPI_COMM_SELF (IOR's -F); the shared file on the team's
communicator (a COLLECTIVE engine is given the team: runner.Run._stream), so that collective
buffering, two-phase I/O and the hints (`--mpiio-hint`, an MPI_Info) act across the ranks.
The hints the library holds in force after the open (MPI_File_get_info) are in the result.

Collective calls must be made by every rank of the file's communicator the same number of
times: in collective mode the ranks of a shared file agree every few blocks whether to go on
(one allreduce of a stop flag, as IOR broadcasts rank 0's stonewall each transfer; how many
blocks apart: AGREE_SECONDS), so a time limit or an abort stops them all at the same block.
MPI_File_sync and MPI_File_close are collective in both modes; --fsync-every with --time on
a shared file is refused in independent mode (run/config.py), where the ranks would sync
different numbers of times.

No MPI of its own: the library comes from the team (team.MPI); without a team (the engine
contract's tests) mpi4py's is loaded, and the file is the rank's own (MPI_COMM_SELF).
"""

from __future__ import annotations

import errno
import os
from array import array
from typing import Dict, Optional, Tuple

from mpiwrite.engines import posix, writeloop
from mpiwrite.engines.base import (
    COLLECTIVE,
    DROP_CACHE,
    FILES,
    SPACE_CHECK,
    VERIFY,
    Engine,
    Poll,
    ReadPlan,
    ReadResult,
    StreamPlan,
    StreamResult,
    cpu_seconds,
    ends_with_fsync,
    same_file,
    stream_failed,
)
from mpiwrite.engines.writeloop import clock
from mpiwrite.text import clean
from mpiwrite.vocab import pattern

INFO_LIMIT = 64  # hints kept from MPI_File_get_info (a library lists some 30)


def _mpi(team):
    if team is not None:
        return team.MPI
    from mpi4py import MPI  # the engine contract's tests: no team, the rank's own file

    return MPI


def _as_oserror(exc: BaseException) -> OSError:
    """An MPI error (mpi4py's MPI.Exception, or NotImplementedError of a library built
    without MPI-IO) as an OSError with its text, on one line."""
    if isinstance(exc, OSError):
        return exc
    text = " ".join(str(exc).split()) or type(exc).__name__
    if isinstance(exc, NotImplementedError):
        text = f"this MPI library has no MPI-IO ({text})"
    return OSError(errno.EIO, clean(text)[:300])


def in_force(fh) -> Dict[str, str]:
    """The hints the library holds for an open file (MPI_File_get_info), as clean text."""
    info = fh.Get_info()
    try:
        out = {}
        for i in range(min(info.Get_nkeys(), INFO_LIMIT)):
            key = info.Get_nthkey(i)
            value = info.Get(key)
            out[clean(key)[:64]] = clean(value if value is not None else "")[:256]
        return out
    finally:
        info.Free()


class _Pace(writeloop.Pace):
    """The POSIX loop's pacing, its fsync an MPI_File_sync (`fh` set after construction)."""

    fh = None

    def sync(self) -> None:
        self.fh.Sync()



def io_implementation(hints: Dict[str, str], library_version: str) -> str:
    """The MPI-IO implementation behind a file, from the hints the library holds for it
    (MPI_File_get_info) and the library's version string: ROMIO (MPICH and its derivatives,
    and Open MPI with its romio component) lists `romio_*` hints and names its driver
    (`romio_filesystem_type`: UFS, LUSTRE, NFS, ...); Open MPI's own OMPIO lists none.  The
    same write through the two is not the same measurement (0.895 of IOR's under ROMIO beside
    IOR's OMPIO on tmpfs, 1.016 with the same MPI)."""
    lib = (library_version or "").replace("\x00", "").strip().splitlines()
    lib_text = " ".join(lib[0].split(",")[0].split()) if lib else "unknown"
    if any(str(k).startswith("romio_") for k in hints):
        # "UFS: Generic ROMIO driver for all UNIX-like file systems": its name
        driver = str(hints.get("romio_filesystem_type", "")).split(":")[0].strip()
        return f"ROMIO ({lib_text}" + (f"; driver {driver}" if driver else "") + ")"
    if "open mpi" in (library_version or "").lower():
        return f"OMPIO ({lib_text})"
    return f"unknown ({lib_text})"


class _File:
    """The open file: its handle, its communicator (freed with it), the mode of writing."""

    def __init__(self, MPI, comm, fh, collective: bool):
        self.MPI, self.comm, self.fh, self.collective = MPI, comm, fh, collective
        self.flag = array("i", [0, 0])
        self.out = array("i", [0, 0])

    def write(self, view, off: int) -> int:
        if self.collective:
            self.fh.Write_at_all(off, view)
        else:
            self.fh.Write_at(off, view)
        return len(view)

    def agree(self, state: int, every: int = 1) -> Tuple[int, int]:
        """A shared file: the largest of every rank's state (GO, TIME, ABORT), and the
        fewest blocks any rank proposes to write before the next agreement."""
        self.flag[0], self.flag[1] = state, -every
        self.comm.Allreduce([self.flag, self.MPI.INT], [self.out, self.MPI.INT],
                            op=self.MPI.MAX)
        return self.out[0], -self.out[1]

    def close(self) -> None:
        try:
            self.fh.Close()
        finally:
            if self.comm is not None:
                self.comm.Free()


def _open(plan: StreamPlan, team) -> _File:
    """MPI_File_open on the team's communicator (shared file) or MPI_COMM_SELF; the hints
    as an MPI_Info.  A file this stream creates is made O_EXCL by the library (a planted name,
    a symlink too, is EEXIST); a shared file must be a regular file, not a symlink (MPI-IO has
    no O_NOFOLLOW), and after the open the one rank 0 created (its device and inode)."""
    MPI = _mpi(team)
    if not plan.create and (os.path.islink(plan.path) or not os.path.isfile(plan.path)):
        raise OSError(errno.ELOOP, "not a regular file (a symlink or other file was put in "
                                   "its place); refusing to open it")
    comm = team.comm.Dup() if plan.shared and team is not None else None
    info = MPI.Info.Create()
    try:
        for key, value in sorted((plan.options.get("mpiio_hints") or {}).items()):
            info.Set(key, value)
        amode = MPI.MODE_WRONLY | (MPI.MODE_CREATE | MPI.MODE_EXCL if plan.create else 0)
        try:
            fh = MPI.File.Open(comm if comm is not None else MPI.COMM_SELF, plan.path, amode,
                               info)
        except BaseException:
            if comm is not None:
                comm.Free()
            raise
    finally:
        info.Free()
    return _File(MPI, comm, fh, bool(plan.options.get("collective")))


def write_stream(plan: StreamPlan, buf, poll: Optional[Poll] = None, team=None) -> StreamResult:
    """One rank's stream through MPI-IO; never raises for I/O errors (they are in the result)."""
    res = StreamResult(path=plan.path)
    res.t_open_start = clock()
    try:
        f = _open(plan, team)
    except Exception as exc:  # noqa: BLE001 - OSError, mpi4py's MPI.Exception, no MPI-IO
        res.fail("open", _as_oserror(exc))
        if plan.wear_out is not None:  # every rank takes part in the stonewall's agreement
            plan.wear_out(0, False)
        return res
    cpu0 = cpu_seconds()
    try:
        res.created = plan.create
        st = os.stat(plan.path)
        res.ino = st.st_ino
        if plan.expect_inode is not None and not same_file(st, plan.expect_inode):
            raise OSError(errno.ESTALE, "the file is not the one rank 0 created (replaced "
                                        "after creation); refusing to write")
        res.info = in_force(f.fh)
        res.facts["mpiio"] = io_implementation(res.info, f.MPI.Get_library_version())
    except Exception as exc:  # noqa: BLE001
        res.fail("open", _as_oserror(exc))
    try:
        _write(plan, buf, poll, f, res)  # after a failure too: the collective calls need it
    finally:
        _wait(plan, "MPI_File_close (collective)", res.bytes, True)
        try:
            f.close()
        except Exception as exc:  # noqa: BLE001 - MPI.Exception
            if not res.failed:
                res.fail("close", _as_oserror(exc))
        _wait(plan, "", res.bytes, True)
        res.t_close_end = clock()
        cpu1 = cpu_seconds()
        res.cpu_user, res.cpu_system = cpu1[0] - cpu0[0], cpu1[1] - cpu0[1]
        res.samples.append((res.t_close_end, res.bytes))
    return res


def _wait(plan: StreamPlan, what: str, nbytes: int, done: bool) -> None:
    """Say that this rank now waits for the others in `what` ('' once through): a rank
    stopped elsewhere is then named by the time-out, not this one (run/stuck.py)."""
    if plan.waiting is not None:
        plan.waiting(what, nbytes, done)


def _write(plan: StreamPlan, buf, poll, f: _File, res: StreamResult) -> None:
    t0 = res.t_write_start = clock()
    offs, tail = posix.block_offsets(plan)
    pace = _Pace(plan, res, -1, t0, poll)
    pace.fh = f.fh
    done, exc = _loop(pace, plan, buf, f, offs)
    if plan.wear_out is not None:
        done, exc = writeloop.wear_out(plan, pace, _loop, buf, f, offs, done, exc)
    _finish(plan, buf, f, res, done, tail, exc)


GO, TIME, ABORT = 0, 1, 2  # a collective stream's agreed state at an agreement
# Collective writes on a shared file agree whether to go on every so many blocks, as many
# as the slowest rank writes in AGREE_SECONDS (the loop's own time-check grain): a stop
# lands within that much of its time, and the agreement is one small allreduce per some
# tens of blocks, not per block (at 47,008-byte blocks over a slow link, one per block cost
# 30-40% of the rate).
AGREE_SECONDS = writeloop.POLL_SECONDS
MAX_EVERY = 4096


def _loop(pace, plan, buf, f: _File, offs):
    """The whole blocks at `offs`; (blocks written, the error that stopped them or None)."""
    res = pace.res
    view = memoryview(buf)
    pack, at = pattern.OFFSET.pack_into, pattern.OFFSET_AT
    agree = f.collective and f.comm is not None
    done = 0
    next_event = pace.next_event
    next_fsync = pace.first_fsync
    if res.failed:  # this rank cannot write: the others stop at once, with it
        res.stopped_by = "abort"
        if agree:
            f.agree(ABORT)
        return 0, None
    next_agree, since, t_agreed = 0, 0, clock()
    if f.collective:  # every write and agreement waits for the others (said once)
        _wait(plan, "collective writes and their agreements (MPI_File_write_at_all, "
                    "MPI_Allreduce)", 0, False)
    try:
        for off in offs:
            if agree and done == next_agree:
                now = clock()
                # as many blocks as this rank wrote in AGREE_SECONDS lately (at least one)
                every = max(1, min(MAX_EVERY, int(since * AGREE_SECONDS
                                                  / max(now - t_agreed, 1e-6))))
                state, every = f.agree(ABORT if res.stopped_by == "abort" else
                                       TIME if res.stopped_by else GO, every)
                if state:
                    res.stopped_by = "abort" if state == ABORT else "time"
                    break
                next_agree, since, t_agreed = done + every, 0, now
            elif not agree and res.stopped_by:
                break
            pack(buf, at, off)
            f.write(view, off)
            done += 1
            since += 1
            if done == next_fsync:
                next_fsync = pace.fsync(done, 0)
            now = clock()
            if now >= next_event:
                next_event = pace.due(now, done)
    except Exception as exc:  # noqa: BLE001 - MPI.Exception: an I/O error of the library
        return done, _as_oserror(exc)
    return done, None


def _agreed_end(f: _File, failed: bool) -> bool:
    """A shared file: whether every rank ends well (MPI_File_sync is collective, so either
    every rank syncs or none does).  A file of the rank's own: its own state."""
    if f.comm is None:
        return not failed
    return f.agree(ABORT if failed else GO)[0] == GO


def _finish(plan, buf, f: _File, res: StreamResult, done: int, tail: int, exc) -> None:
    """The tail block, the closing MPI_File_sync, or the loop's error as the result."""
    bs = plan.block_size
    if exc is None:
        res.bytes = done * bs
        if tail and not res.stopped_by:
            off = plan.offset + done * bs
            pattern.OFFSET.pack_into(buf, pattern.OFFSET_AT, off)
            try:
                res.bytes += f.write(memoryview(buf)[:tail], off)
                done += 1
            except Exception as err:  # noqa: BLE001
                exc = _as_oserror(err)
    res.blocks = done
    every = plan.fsync_every
    want = ends_with_fsync(plan, res) and (not every or done % every != 0 or tail)
    _wait(plan, "the closing agreement (MPI_Allreduce)", res.bytes, True)
    try:
        all_well = _agreed_end(f, exc is not None or res.stopped_by == "abort") \
            if plan.fsync else exc is None
    except Exception as err:  # noqa: BLE001 - MPI.Exception
        exc, all_well = exc or _as_oserror(err), False
    if res.failed:
        return
    if exc is not None:
        stream_failed(res, "write", exc, done * bs)
        return
    res.t_write_end = clock()
    if want and all_well:
        _wait(plan, "MPI_File_sync (collective)", res.bytes, True)
        try:
            f.fh.Sync()
        except Exception as err:  # noqa: BLE001
            res.fail("fsync", _as_oserror(err))
            return
        res.fsyncs += 1
    elif want:
        res.stopped_by = "abort"  # another rank failed: no sync, as after an abort
    res.t_fsync_end = clock()


def read_stream(plan: ReadPlan, buf, poll: Optional[Poll] = None, team=None) -> ReadResult:
    """The read phase reads through POSIX (posix.read_stream): the write is what this engine
    measures (docs/engines.md)."""
    return posix.read_stream(plan, buf, poll)


# The reserved hints of MPI-3.1 (section 13.2.8) and ROMIO's, whose values the library parses
# itself: a value it cannot take ends the job in MPI_Abort inside MPI_File_open (ROMIO's
# "cb_buffer_size=-1"), before mpiwrite can say a word or clean up.  Checked here instead.
WHOLE_HINTS = ("cb_buffer_size", "cb_nodes", "ind_rd_buffer_size", "ind_wr_buffer_size",
               "striping_factor", "striping_unit", "cb_block_size", "romio_min_fdomain_size",
               "num_io_nodes")
SWITCH_HINTS = ("romio_cb_read", "romio_cb_write", "romio_ds_read", "romio_ds_write",
                "romio_no_indep_rw", "romio_lustre_ds_in_coll", "romio_cb_fr_types",
                "romio_cb_alltoall", "romio_cb_pfr")
SWITCHES = ("enable", "disable", "automatic", "true", "false")


def _check(options) -> Optional[tuple]:
    """(option, why) for what the library would abort on, else None."""
    if options.get("direct"):
        return ("--direct", "the mpiio engine writes through the MPI library, which has no "
                "O_DIRECT (a hint such as direct_write=true where the library knows one)")
    for key, value in (options.get("mpiio_hints") or {}).items():
        if key in WHOLE_HINTS and not (value.isascii() and value.isdigit()
                                       and 0 < int(value) < 2**31):
            return ("--mpiio-hint", f"{key}={value}: the MPI library takes a whole number "
                    "from 1 to 2^31-1 here (another value ends the job inside MPI_File_open)")
        if key in SWITCH_HINTS and value.lower() not in SWITCHES:
            return ("--mpiio-hint", f"{key}={value}: expected one of {', '.join(SWITCHES)}")
    return None


ENGINE = Engine("mpiio", write_stream, read_stream,
                frozenset({FILES, VERIFY, DROP_CACHE, SPACE_CHECK, COLLECTIVE}),
                "MPI_File_write_at(_all) and MPI_File_sync on a file per rank (MPI_COMM_SELF) "
                "or a shared file (the team's communicator), with MPI_Info hints",
                check=_check,
                create_shared=posix.create_shared, verify=posix.verify_segment)
