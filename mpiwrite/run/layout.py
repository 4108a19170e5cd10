"""Where a run's data files go, and the checks made before any data is written.

Every file and directory a run creates carries its run id in its name and is created with
O_EXCL, so a run never truncates, overwrites or deletes anything it did not create itself.
"""

from __future__ import annotations

import errno
import os
import sys
import time
from typing import List, Optional

from mpiwrite.errors import ConfigError
from mpiwrite.formats import names
from mpiwrite.run.config import RunConfig
from mpiwrite.run.writer import StreamPlan, open_data_file
from mpiwrite.text import printable
from mpiwrite.units import format_size


def new_run_id() -> str:
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + os.urandom(3).hex()


def free_space(target: str) -> dict:
    """statvfs of TARGET (or, before it exists, of its nearest existing parent): the bytes an
    unprivileged writer may still use, and what tells one filesystem from another ({} when
    nothing can be asked, when the filesystem states no size, as ramfs and some FUSE
    filesystems do, or when it is read-only: the preflight's probe then says why)."""
    path = os.path.abspath(target)
    while True:
        try:
            st = os.statvfs(path)
            break
        except FileNotFoundError:
            parent = os.path.dirname(path)
            if parent == path:
                return {}
            path = parent
        except OSError:
            return {}
    if st.f_blocks == 0 or st.f_flag & os.ST_RDONLY:
        return {}
    return {"free": st.f_bavail * st.f_frsize, "fs": [st.f_fsid, st.f_blocks, st.f_frsize]}


def check_space(cfg: RunConfig, node_of, spaces) -> None:
    """Refuse (ConfigError) a run whose planned bytes exceed its filesystem's free space.

    `spaces`: free_space() of every node's leader.  Nodes that report the same filesystem
    (the same fsid, size and fragment size: a shared filesystem seen from every client) are
    one filesystem, checked once for all their ranks; every other node is checked for its
    own ranks.  --time runs plan no size and are not checked; --keep keeps every iteration."""
    if cfg.allow_fill or cfg.size is None or cfg.engine != "posix":
        return
    per_rank = cfg.size * (cfg.iterations if cfg.keep else 1)
    groups: dict = {}
    counts = {}
    for node in node_of:
        counts[int(node)] = counts.get(int(node), 0) + 1
    for node, space in enumerate(spaces):
        if not space:
            continue
        key = tuple(space["fs"])
        ranks, free = groups.get(key, (0, float("inf")))
        groups[key] = (ranks + counts.get(node, 0), min(free, space["free"]))
    for ranks, free in groups.values():
        planned = ranks * per_rank
        if planned > free:
            each = f"{ranks} rank{'s' * (ranks != 1)} x {format_size(per_rank)}"
            raise ConfigError(
                f"TARGET: the run would write {format_size(planned)} ({each}"
                f"{', every iteration kept' if cfg.keep and cfg.iterations > 1 else ''}) into "
                f"{cfg.target}, whose filesystem has {format_size(free)} free; give a smaller "
                "--size, or --allow-fill to write anyway (nothing was created)")


def subdir_count(cfg: RunConfig, nranks: int) -> int:
    """0 when all files fit in TARGET itself, else the number of run subdirectories.  A run
    with a Lustre layout always has one: the layout is set on a folder of its own, never on
    the user's TARGET."""
    if cfg.layout == "shared" or nranks <= cfg.files_per_dir:
        return 1 if cfg.striped else 0
    return -(-nranks // cfg.files_per_dir)


def subdir(cfg: RunConfig, run_id: str, index: int) -> str:
    return os.path.join(cfg.target, names.subdir(run_id, index))


def data_path(cfg: RunConfig, run_id: str, nranks: int, rank: int, iteration: int) -> str:
    if cfg.layout == "shared":
        name = names.data_file(run_id, iteration, None)
        return os.path.join(subdir(cfg, run_id, 0) if cfg.striped else cfg.target, name)
    name = names.data_file(run_id, iteration, rank)
    if subdir_count(cfg, nranks):
        return os.path.join(subdir(cfg, run_id, rank // cfg.files_per_dir), name)
    return os.path.join(cfg.target, name)


def plan(cfg: RunConfig, run_id: str, nranks: int, rank: int, iteration: int) -> StreamPlan:
    shared = cfg.layout == "shared"
    return StreamPlan(
        path=data_path(cfg, run_id, nranks, rank, iteration),
        create=not shared,
        offset=rank * cfg.size if shared else 0,
        nbytes=cfg.size,
        block_size=cfg.block_size,
        time_limit=cfg.time_limit,
        fsync=cfg.fsync,
        fsync_every=cfg.fsync_every,
        direct=cfg.direct,
        sample_interval=cfg.sample_interval,
        # a benchmark knob: bench_write.py measures what latency and CPU accounting cost
        latency=os.environ.get("MPIWRITE_NO_ACCOUNTING") != "1",
    )


def preflight(cfg: RunConfig, run_id: str, fstype: str) -> None:
    """Refuse a target we cannot or must not write, before any rank writes data.

    Creates TARGET if only its last component is missing; writes, fsyncs and removes one probe
    block (with O_DIRECT under --direct) so permissions, read-only mounts, a full disk and a
    filesystem that refuses O_DIRECT are found here, with one clear line.
    """
    target = cfg.target
    parent = os.path.dirname(os.path.abspath(target))
    kind = _kind(target)
    if kind not in ("dir", "missing"):
        raise ConfigError(f"TARGET: {target!r} {kind}")
    created = False
    if kind == "missing":
        pkind = _kind(parent)
        if pkind == "missing":
            raise ConfigError(f"TARGET: parent directory {parent!r} does not exist")
        if pkind != "dir":
            raise ConfigError(f"TARGET: parent {parent!r} {pkind}")
        try:
            os.mkdir(target)
            created = True
        except OSError as exc:
            raise ConfigError(f"TARGET: cannot create {target!r}: {exc.strerror}") from None
    try:
        _probe(cfg, run_id, fstype)
    except ConfigError:
        if created:
            try:
                os.rmdir(target)
            except OSError:
                pass
        raise


def _kind(path: str) -> str:
    """'dir', 'missing', or what is wrong with path, for a one-line message."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return "missing"
    except OSError as exc:
        return f"cannot be reached: {exc.strerror}"
    import stat

    return "dir" if stat.S_ISDIR(st.st_mode) else "exists and is not a directory"


def _probe(cfg: RunConfig, run_id: str, fstype: str) -> None:
    target = cfg.target
    probe = os.path.join(target, names.probe(run_id))
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
    if cfg.direct:
        flags |= os.O_DIRECT
    import mmap

    buf = mmap.mmap(-1, max(cfg.block_size if cfg.direct else 4096, 4096))
    fd = -1
    try:
        fd = open_data_file(probe, flags)
        os.write(fd, memoryview(buf)[: (cfg.block_size if cfg.direct else 4096)])
        os.fsync(fd)
    except OSError as exc:
        if cfg.direct and exc.errno == errno.EINVAL:
            raise ConfigError(f"--direct: the {fstype} filesystem at {target!r} refuses O_DIRECT "
                              f"(or block size {cfg.block_size} is not aligned for it)") from None
        raise ConfigError(f"TARGET: cannot write in {target!r}: {exc.strerror} "
                          f"(errno {exc.errno})") from None
    finally:
        if fd >= 0:
            os.close(fd)
        # The kernel may create the file and then refuse O_DIRECT: the name is ours either way.
        try:
            os.unlink(probe)
        except OSError:
            pass


def make_subdirs(cfg: RunConfig, run_id: str, nranks: int, stripe=None) -> float:
    """Create the run's subdirectories before the timed phase, with the Lustre layout
    `stripe` ({'count', 'size', 'ost'}) when given; returns the seconds it took."""
    t0 = time.monotonic()
    for i in range(subdir_count(cfg, nranks)):
        os.mkdir(subdir(cfg, run_id, i))
        if stripe is not None:
            from mpiwrite.facts.lustre_layout import apply_stripe

            stripe["method"] = apply_stripe(subdir(cfg, run_id, i), stripe["count"],
                                            stripe["size"], stripe["ost"])
    return time.monotonic() - t0


def remove_subdirs(cfg: RunConfig, run_id: str, nranks: int) -> List[str]:
    """Remove the run's (now empty) subdirectories; returns those that could not be removed."""
    left = []
    for i in range(subdir_count(cfg, nranks)):
        try:
            os.rmdir(subdir(cfg, run_id, i))
        except FileNotFoundError:
            pass
        except OSError:
            left.append(subdir(cfg, run_id, i))
    return left


def remove_dir_if_empty(path: Optional[str]) -> None:
    """Remove a folder this run created if nothing is left in it.  Another run may be using
    it (the default ./mpiwrite-data is shared by concurrent runs): then it stays."""
    if not path:
        return
    try:
        os.rmdir(path)
    except OSError:
        pass


def remove_at(dir_fd: int, relpath: str, shown: str) -> Optional[str]:
    """Unlink `relpath` (a name this run created) relative to an open folder."""
    try:
        os.unlink(relpath, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"{shown}: {exc.strerror}"
    return None


def remove(path: str) -> Optional[str]:
    """Unlink one file this run created; returns an error text or None."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"{path}: {exc.strerror}"
    return None


class RankFiles:
    """The data files and folders one rank has created, and their removal.

    Files are removed relative to the TARGET folder opened at set-up (if someone renames the
    folder mid-run, the files still go, from wherever it went) and by name (a later
    iteration may have made the folder again).  Only names of this run, created with O_EXCL,
    are ever removed."""

    def __init__(self, cfg: RunConfig, run_id: str, rank: int, nranks: int):
        self.cfg, self.run_id, self.rank, self.nranks = cfg, run_id, rank, nranks
        self.created: List[str] = []  # data files this rank created and has not removed
        self.created_target = False  # rank 0: TARGET did not exist before the run
        self.target_fd: Optional[int] = None  # TARGET, opened once it exists

    def open_target(self) -> None:
        try:
            self.target_fd = os.open(self.cfg.target, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:
            self.target_fd = None  # not visible here yet (a node-local target): by name

    def unlink(self, path: str) -> Optional[str]:
        """Remove one file of this run; 'path: reason' when it could not be removed."""
        problem = None
        if self.target_fd is not None:
            problem = remove_at(self.target_fd, os.path.relpath(path, self.cfg.target), path)
        return remove(path) or problem

    def after_iteration(self, path: str, barrier) -> None:
        """The iteration's file is done with: remove it (a shared file once every rank is
        past it: `barrier()`), unless --keep."""
        if self.cfg.keep:
            self.created.clear()
            return
        problem = None
        if path in self.created and self.cfg.layout != "shared":
            problem = self.unlink(path)
            self.created.remove(path)
        if self.cfg.layout == "shared":
            barrier()
            if path in self.created:
                problem = self.unlink(path)
                self.created.remove(path)
        if problem:
            sys.stderr.write(printable(f"mpiwrite: warning: rank {self.rank} could not "
                                       f"remove {problem}") + "\n")

    def remove_files_of(self, ranks, iteration: int) -> List[str]:
        """Remove other ranks' data files of an iteration, when they cannot (stopped, hung).
        Returns what could not be removed ('path: reason'; a file not there is no problem)."""
        if self.cfg.keep or iteration < 0:
            return []
        problems = []
        for r in ranks:
            problem = self.unlink(data_path(self.cfg, self.run_id, self.nranks, r, iteration))
            if problem:
                problems.append(problem)
        return problems

    def remove_created(self) -> List[str]:
        """Remove the data files this rank created (on the way out of a failed run); returns
        what could not be removed."""
        if self.cfg.keep:
            return []
        problems = [p for p in (self.unlink(path) for path in self.created) if p]
        self.created.clear()
        return problems

    def remove_run_folders(self, warn) -> None:
        """Rank 0 at the end: the run's subdirectories, and TARGET if the run made it and it is
        empty; `warn(text)` when TARGET was renamed or removed meanwhile."""
        if self.target_fd is not None:
            try:
                moved = os.fstat(self.target_fd).st_ino != os.stat(self.cfg.target).st_ino
            except OSError:
                moved = True
            if moved:
                warn(f"TARGET {self.cfg.target} was renamed or removed during the run; the "
                     f"run's files were removed from the folder it wrote in")
        if self.cfg.keep:
            return
        remove_subdirs(self.cfg, self.run_id, self.nranks)
        if self.created_target:
            remove_dir_if_empty(self.cfg.target)
