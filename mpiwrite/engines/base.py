"""The I/O engine seam: what every engine is and what it is given (IOR's aiori.h, fio's
ioengine_ops with their capability flags).

An engine is one object, `ENGINE` in its module, registered here by module name and loaded only
when asked (a rank imports the one engine it runs).  The run asks an engine's flags, never its
name: a new engine is one module plus one line in ENGINES, and gets the free-space check, the
cache drop, --verify and the communicator by what it declares.

Also here: what a stream is given (StreamPlan, ReadPlan) and what it gives back (StreamResult,
ReadResult), and the end of a stream that every engine shares.  No MPI here.
"""

from __future__ import annotations

import errno
import os
import resource
from typing import Any, Callable, Dict, FrozenSet, List, Optional, Sequence, Tuple

from mpiwrite import structs
from mpiwrite.engines import writeloop
from mpiwrite.engines.writeloop import clock
from mpiwrite.vocab import defaults, pattern

UNBOUNDED = 2**62

# Capability flags (docs/architecture.md, "Engines"): what the run may ask of an engine.
FILES = "files"  # writes real data files: folders made and held, files created and removed
VERIFY = "verify"  # what it wrote can be read back and checked (--verify, --read)
DROP_CACHE = "drop-cache"  # its pages can be dropped before the read phase (--drop-cache)
SPACE_CHECK = "space-check"  # its planned bytes need free space (checked before data)
COLLECTIVE = "collective"  # needs the team's communicator (an MPI-IO engine)

# name -> module holding ENGINE; loaded lazily (a rank's start-up imports one engine)
ENGINES: Dict[str, str] = {
    "posix": "mpiwrite.engines.posix",
    "null": "mpiwrite.engines.null",
    "mpiio": "mpiwrite.engines.mpiio",
}
_LOADED: Dict[str, Engine] = {}


@structs.value(frozen=True)
class Engine:
    """One I/O engine: its streams, its capability flags and its own option checks."""

    name: str
    write: Callable[..., Any]  # (StreamPlan, buf, poll[, team]) -> StreamResult
    read: Callable[..., Any]  # (ReadPlan, buf, poll[, team]) -> ReadResult
    flags: FrozenSet[str]
    summary: str
    # options -> (option, why) of the first option this engine cannot honour, or None
    check: Optional[Callable[[Dict[str, Any]], Optional[Tuple[str, str]]]] = None
    # FILES: rank 0 makes the shared file, (path, dir_fd) -> (st_dev, st_ino), OSError
    create_shared: Optional[Callable[[str, Optional[int]], Tuple[int, int]]] = None
    # VERIFY: read a segment back and check it (posix.verify_segment's arguments)
    verify: Optional[Callable[..., Any]] = None

    def has(self, flag: str) -> bool:
        return flag in self.flags

    def problem(self, options: Dict[str, Any],
                flag_of: Callable[[str, Any], str]) -> Optional[Tuple[str, str]]:
        """(option, why) when this engine cannot run with these options: the checks every
        engine gets by its flags, then its own.  `flag_of(name, value)`: how the option of a
        setting is written (run/options.py: the base knows no option's spelling)."""
        if not self.has(VERIFY) and (options.get("verify") or options.get("verify_shift")):
            return "--verify", (f"the {self.name} engine writes nothing, so there is nothing "
                                "to verify")
        if not self.has(VERIFY) and options.get("read"):  # a read of nothing is no figure
            return "--read", (f"the {self.name} engine writes nothing, so there is nothing "
                              "to read back")
        from mpiwrite.vocab.keys import engine_options

        for key in engine_options(self.name):  # another engine's option: its own, not ours
            value = options.get(key.name)
            if value is None or value == {} or value == "":
                continue
            flag = flag_of(key.name, value)
            return flag, (f"the {self.name} engine does not take {flag}: it is an option of "
                          f"the {key.engine} engine (--engine {key.engine})")
        return self.check(options) if self.check else None


def get(name: str) -> Engine:
    """The registered engine `name` (KeyError for a name not in ENGINES)."""
    eng = _LOADED.get(name)
    if eng is None:
        module = __import__(ENGINES[name], fromlist=["ENGINE"])
        eng = _LOADED[name] = module.ENGINE
        if eng.name != name:
            raise RuntimeError(f"{ENGINES[name]}.ENGINE is named {eng.name!r}, not {name!r}")
    return eng


def names() -> Tuple[str, ...]:
    return tuple(ENGINES)


@structs.value()
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
    samples: List[Tuple[float, int]] = structs.field(list)
    cpu_user: float = float("nan")  # CPU seconds of this process from write start to close
    cpu_system: float = float("nan")
    latency: Optional[object] = None  # latency.Log: write() and fsync() histograms
    ramp_bytes: int = 0  # --ramp: the bytes written (and, with fsync, synced) at its end
    t_ramp: float = float("nan")  # ... and when it ended (NaN: no ramp, or never reached)
    stonewall_bytes: int = -1  # --stonewall: the bytes written when the stonewall fell
    stonewall_seconds: float = float("nan")  # ... and when (from the write's start)
    info: Dict[str, str] = structs.field(dict)  # hints in force (MPI-IO)
    facts: Dict[str, str] = structs.field(dict)  # run keys the engine knows

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


@structs.value(frozen=True)
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
    # (st_dev, st_ino) the file must have (st_dev -1: not compared, on another node)
    expect_inode: Optional[Tuple[int, int]] = None
    latency: bool = True  # per-call write()/fsync() latency histograms (latency.py)
    dir_fd: Optional[int] = None  # the open folder of `path` (layout.RankFiles.folder_for)
    # the offsets of the whole blocks in the order written (vocab/offsets.py); None: one
    # after another from `offset` (and a tail block when nbytes is not a whole number of them)
    offsets: Optional[Sequence[int]] = None
    shared: bool = False  # one file for every rank (an MPI-IO engine opens it on the team)
    # --stonewall: (blocks written at the stonewall, stream still good) -> blocks to reach,
    # one agreement of every rank (writeloop.wear_out); None: time_limit simply stops
    wear_out: Optional[Callable[[int, bool], int]] = None
    wear_limit: Optional[float] = None  # how long the wear-out may go on (None: no limit)
    # the engine's own options by name, as given (vocab/keys.py: the keys it owns); the
    # base knows none of them
    options: Dict[str, Any] = structs.field(dict)
    # an engine that waits for the other ranks inside its stream (MPI-IO's agreements and
    # collective calls) says so: (what it waits in, or '' once through; its bytes; whether
    # its own part is done), so that a watchdog names the rank that never came, not this one
    waiting: Optional[Callable[[str, int, bool], None]] = None


Poll = writeloop.Poll


@structs.value(frozen=True)
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
    offsets: Optional[Sequence[int]] = None  # the blocks' offsets (StreamPlan.offsets)


@structs.value()
class ReadResult(StreamResult):
    """A read stream: StreamResult's times (write_* meaning read_*) and the check's findings."""

    mismatches: int = 0
    first: Optional[pattern.Mismatch] = None


def same_file(st, expect: Tuple[int, int]) -> bool:
    """Whether an open file (its fstat) is the one rank 0 created: the same inode, and the
    same device where the device is known (-1: another node, whose mount of the same
    filesystem has a device number of its own, as every FUSE or NFS client does)."""
    dev, ino = expect
    return st.st_ino == ino and (dev < 0 or st.st_dev == dev)


def ends_with_fsync(plan: StreamPlan, res: StreamResult) -> bool:
    """A stream ends with an fsync (--fsync) unless an abort stopped it."""
    return plan.fsync and res.stopped_by != "abort"


def stream_failed(res: StreamResult, phase: str, exc: OSError, nbytes: int, hint: str = "") -> None:
    """An I/O error stopped the stream's data phase after `nbytes`: the result says so."""
    res.bytes = max(res.bytes, nbytes)
    res.t_write_end = clock()
    res.fail(phase, exc, hint)


def cpu_seconds() -> Tuple[float, float]:
    """This process's user and system CPU seconds.  getrusage, not times(): times() counts
    10 ms clock ticks, too coarse for a short iteration; getrusage's sum is the scheduler's
    nanosecond runtime (the user/system split is apportioned from ticks)."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime, r.ru_stime


def end_stream(res: StreamResult, fd: int = -1, cpu0=None) -> None:
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
        cpu1 = cpu_seconds()
        res.cpu_user, res.cpu_system = cpu1[0] - cpu0[0], cpu1[1] - cpu0[1]
    res.samples.append((res.t_close_end, res.bytes))
