"""Where a run's data files go, and the checks made before any data is written.

Every file and directory a run creates carries its run id in its name and is created with
O_EXCL, so a run never truncates, overwrites or deletes anything it did not create itself.
"""

from __future__ import annotations

import errno
import functools
import os
import sys
import time
from typing import Dict, List, Optional, Tuple

from mpiwrite import files
from mpiwrite.engines import base as engines
from mpiwrite.engines.base import StreamPlan
from mpiwrite.engines.posix import open_data_file
from mpiwrite.errors import ConfigError, why
from mpiwrite.run.config import RunConfig
from mpiwrite.text import printable
from mpiwrite.units import format_size
from mpiwrite.vocab import keys as keytable
from mpiwrite.vocab import names, offsets
from mpiwrite.vocab.offsets import PATTERNS


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
    if cfg.allow_fill or cfg.size is None \
            or not engines.get(cfg.engine).has(engines.SPACE_CHECK):
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


def block_offsets(cfg: RunConfig, nranks: int, rank: int):
    """The offsets of a rank's whole blocks in the order written (vocab/offsets.py), or
    None for the sequential pattern (one after another, a tail block allowed)."""
    if cfg.pattern == PATTERNS[0]:
        return None
    first = rank * cfg.size if cfg.layout == "shared" else 0
    return _offsets(cfg.pattern, rank, nranks, first, cfg.size // cfg.block_size,
                    cfg.block_size, cfg.seed)


_offsets = functools.lru_cache(maxsize=4)(offsets.offsets)  # the same each iteration


def plan(cfg: RunConfig, run_id: str, nranks: int, rank: int, iteration: int) -> StreamPlan:
    shared = cfg.layout == "shared"
    stonewall = cfg.stonewall
    return StreamPlan(
        path=data_path(cfg, run_id, nranks, rank, iteration),
        create=not shared,
        offset=rank * cfg.size if shared else 0,
        nbytes=cfg.size,
        block_size=cfg.block_size,
        time_limit=stonewall if stonewall is not None else cfg.time_limit,
        wear_limit=cfg.time_limit - stonewall if stonewall is not None and cfg.time_limit
        else None,
        offsets=block_offsets(cfg, nranks, rank),
        shared=shared,
        options={k.name: getattr(cfg, k.name) for k in keytable.own_options(cfg.engine)},
        fsync=cfg.fsync,
        fsync_every=cfg.fsync_every,
        direct=cfg.direct,
        sample_interval=cfg.sample_interval,
        # a benchmark knob: bench_write.py measures what latency and CPU accounting cost
        latency=os.environ.get("MPIWRITE_NO_ACCOUNTING") != "1",
    )


def preflight(cfg: RunConfig, run_id: str, fstype: str) -> files.Folder:
    """Refuse a target we cannot or must not write, before any rank writes data; returns
    TARGET opened (rank 0 uses it by descriptor from here on).

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
        try:  # the user's TARGET may be a symlink; the folder this run made is not followed
            folder = files.Folder.open(target, follow=not created)
        except OSError as exc:
            raise ConfigError(f"TARGET: cannot open {target!r}: {exc.strerror}") from None
        try:
            _probe(cfg, run_id, fstype, folder)
        except ConfigError:
            folder.close()
            raise
    except ConfigError:
        if created:
            try:
                os.rmdir(target)
            except OSError:
                pass
        raise
    return folder


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


def _probe(cfg: RunConfig, run_id: str, fstype: str, folder: files.Folder) -> None:
    target = cfg.target
    probe = names.probe(run_id)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
    if cfg.direct:
        flags |= os.O_DIRECT
    import mmap

    buf = mmap.mmap(-1, max(cfg.block_size if cfg.direct else 4096, 4096))
    fd = -1
    try:
        fd = open_data_file(probe, flags, folder.fd)
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
            os.unlink(probe, dir_fd=folder.fd)
        except OSError:
            pass


def make_subdirs(cfg: RunConfig, run_id: str, nranks: int, stripe=None,
                 target: Optional[files.Folder] = None) -> float:
    """Create the run's subdirectories (in the TARGET folder opened by the preflight) before
    the timed phase, with the Lustre layout `stripe` ({'count', 'size', 'ost'}) when given;
    returns the seconds it took."""
    t0 = time.monotonic()
    for i in range(subdir_count(cfg, nranks)):
        if target is not None:
            os.mkdir(names.subdir(run_id, i), 0o777, dir_fd=target.fd)
        else:
            os.mkdir(subdir(cfg, run_id, i))
        if stripe is not None:
            from mpiwrite.clients.lustre_layout import apply_stripe

            stripe["method"] = apply_stripe(subdir(cfg, run_id, i), stripe["count"],
                                            stripe["size"], stripe["ost"])
    return time.monotonic() - t0


def remove_subdirs(cfg: RunConfig, run_id: str, nranks: int,
                   target: Optional[files.Folder] = None) -> List[str]:
    """Remove the run's (now empty) subdirectories, from the TARGET folder opened at the start
    when given; returns those that could not be removed."""
    left = []
    for i in range(subdir_count(cfg, nranks)):
        try:
            if target is not None:
                os.rmdir(names.subdir(run_id, i), dir_fd=target.fd)
            else:
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


def remove_at(dir_fd: int, name: str, shown: str) -> Optional[str]:
    """Unlink `name` (a name this run created) in an open folder; 'path: reason' or None."""
    try:
        os.unlink(name, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    except OSError as exc:  # not errors.why: EPERM (an immutable file) is not "permission denied"
        return f"{shown}: {exc.strerror}"
    return None


KEEPER_LEAVES = 2.0  # seconds an orderly end waits for the node's keeper to be gone
REPLACED = ("no longer leads to the folder this run opened at the start (renamed, or replaced "
            "by a symbolic link?); refusing to write through it")


class RankFiles:
    """The folders and data files of one rank: where files go, what it created, their removal.

    TARGET is opened once (rank 0's preflight, or set-up) and every run subdirectory in it
    once, without following a symlink; files are created, read and removed relative to those
    descriptors, never by a path that someone may have re-pointed.  Before each use
    (`folder_for`) the names are checked again by device and inode: a folder renamed or
    swapped for a symlink is refused; one removed by a concurrent run that shared TARGET is
    made again (TARGET and the run subdirectory only, nothing above).  Only names of this
    run, created with O_EXCL, are ever removed."""

    def __init__(self, cfg: RunConfig, run_id: str, rank: int, nranks: int):
        self.cfg, self.run_id, self.rank, self.nranks = cfg, run_id, rank, nranks
        self.created: List[str] = []  # data files this rank created and has not removed
        self._made_in: Dict[str, files.Folder] = {}  # ... and the folder each was made in
        self.created_target = False  # rank 0: TARGET did not exist before the run
        self.target: Optional[files.Folder] = None  # TARGET, opened once it exists
        self.subdirs: Dict[str, files.Folder] = {}  # run subdirectories used here, by name
        self._retired: List[files.Folder] = []  # replaced by a newer one; files made there
        # are still removed through them
        self.lock: Optional[Tuple[files.Folder, str, int]] = None  # this node's proof of life
        # a node leader: its node's ranks and their pids, its host (the keeper's, below)
        self.node_ranks: List[int] = []
        self.node_pids: List[int] = []
        self.host = ""
        self._keeper: Optional[tuple] = None  # the write end of the keeper's pipe, its process

    @property
    def target_fd(self) -> Optional[int]:
        return self.target.fd if self.target is not None else None

    def open_target(self) -> None:
        """TARGET as the user named it (a symlink to a folder is followed, once)."""
        if self.target is not None:
            return
        try:
            self.target = files.Folder.open(self.cfg.target)
        except OSError:
            self.target = None  # not visible here yet (a node-local target): made at first use

    def _split(self, path: str) -> Tuple[str, str]:
        """(run subdirectory name or '', file name) of a data file's path."""
        sub, _, name = os.path.relpath(path, self.cfg.target).rpartition(os.sep)
        return sub, name

    def _check_target(self) -> str:
        t = self.target
        if t is not None and t.leads_here():
            return ""
        if t is not None and not t.gone():
            return f"TARGET {self.cfg.target} {REPLACED}"
        # never seen on this node (node-local), or removed by another run sharing it
        try:
            os.mkdir(self.cfg.target, 0o755)
        except FileExistsError:
            pass
        except OSError as exc:
            return f"TARGET {self.cfg.target}: cannot make it again: {why(exc)}"
        try:
            new = files.Folder.open(self.cfg.target, follow=t is None)
        except OSError as exc:
            return f"TARGET {self.cfg.target}: {why(exc)}"
        if t is not None:
            self._retired += [t] + list(self.subdirs.values())
            self.subdirs = {}
        self.target = new
        return ""

    def folder_for(self, path: str, make: bool = True) -> Tuple[Optional[files.Folder], str]:
        """(the open folder that holds `path`, '') before the path is created or opened, or
        (None, why not): TARGET or the run subdirectory renamed or replaced meanwhile."""
        problem = self._check_target()
        if problem:
            return None, problem
        sub, _name = self._split(path)
        if not sub:
            return self.target, ""
        shown = os.path.join(self.cfg.target, sub)
        held = self.subdirs.get(sub)
        try:
            st = os.stat(sub, dir_fd=self.target.fd, follow_symlinks=False)
        except FileNotFoundError:
            st = None
        except OSError as exc:
            return None, f"run subdirectory {shown}: {why(exc)}"
        if held is not None and st is not None and held.matches(st):
            return held, ""
        if held is not None and not held.gone():
            return None, f"run subdirectory {shown} {REPLACED}"
        if st is None and make:  # removed by someone, or never made on this node
            try:
                os.mkdir(sub, 0o755, dir_fd=self.target.fd)
            except FileExistsError:
                pass
            except OSError as exc:
                return None, f"run subdirectory {shown}: cannot make it: {why(exc)}"
        try:
            new = files.Folder.open(shown, dir_fd=self.target.fd, follow=False, name=sub)
        except OSError as exc:
            return None, f"run subdirectory {shown}: {why(exc)}"
        if held is not None:
            self._retired.append(held)
        self.subdirs[sub] = new
        return new, ""

    def take_lock(self, node: int, record: Optional[Tuple[files.Folder, str]] = None) -> str:
        """A node leader: its lock file in TARGET (facts/liveness.py), locked until the run
        ends or this process dies, whatever kills it; '' or why not (then nothing is left).
        With the lock, the node's keeper (run/keeper.py) starts: what a launcher's end leaves
        of this node's part it removes, and on rank 0's node (`record`: the results folder
        and the record's name) it says so in the record."""
        name = names.lock(self.run_id, node)
        folder, problem = self.folder_for(os.path.join(self.cfg.target, name))
        if folder is None:
            return problem
        from mpiwrite.facts import liveness  # node leaders only (start-up: docs/scaling.md)

        # the keeper first: a leader killed between the lock file's creation and the keeper's
        # start (a launcher whose output closed at once, `| true`) left the lock file for good
        self._start_keeper(node, name, folder, record)
        fd, problem = liveness.take(folder.fd, name)
        if fd < 0:
            self._dismiss_keeper()
            return problem
        self.lock = (folder, name, fd)
        if self._keeper is not None:
            liveness.declare_heartbeat(fd)  # the keeper sets its times every second
        return problem

    def _start_keeper(self, node: int, lock: str, folder: files.Folder,
                      record: Optional[Tuple[files.Folder, str]]) -> None:
        import json
        import sys

        from mpiwrite import procs

        if os.environ.get("MPIWRITE_NO_KEEPER"):
            return
        from mpiwrite.host import start_ticks

        pids = self.node_pids or [os.getpid()]
        # each rank's start, read here while every rank is surely alive (a keeper that read
        # them itself found ranks killed during its own start-up gone, -1, and took them for
        # ranks it cannot see); -1 here: another PID namespace, which the keeper leaves alone
        info = {"run_id": self.run_id, "node": node, "lock": lock, "target_fd": folder.fd,
                "ranks": self.node_ranks or [self.rank], "pids": pids,
                "ticks": [start_ticks(p) for p in pids], "first": node == 0, "host": self.host,
                "results_fd": record[0].fd if record else None,
                "record": os.path.basename(record[1]) if record else None,
                "keep": bool(self.cfg.keep)}  # --keep: the data stays, whatever the end
        fds = (folder.fd,) + ((record[0].fd,) if record else ())
        import mpiwrite

        env = dict(os.environ)  # this mpiwrite, wherever the leader imported it from
        top = os.path.dirname(os.path.dirname(os.path.abspath(mpiwrite.__file__)))
        env["PYTHONPATH"] = os.pathsep.join(p for p in (top, env.get("PYTHONPATH")) if p)
        started = procs.start_helper([sys.executable, "-m", "mpiwrite.run.keeper"], fds, env)
        if started is None:
            return
        try:
            os.write(started[0], (json.dumps(info) + "\n").encode())
        except OSError:
            os.close(started[0])
            return
        self._keeper = started

    def _dismiss_keeper(self) -> None:
        """The run ends in order: the keeper leaves, touching nothing."""
        if self._keeper is not None:
            (w, proc), self._keeper = self._keeper, None
            try:
                os.write(w, b"done\n")  # keeper.DONE (not imported: the leader's end)
            except OSError:
                pass
            finally:
                os.close(w)
            try:  # gone before the run is: it holds TARGET open (an unmount waits on it)
                proc.wait(timeout=KEEPER_LEAVES)
            except Exception:  # noqa: BLE001 - subprocess.TimeoutExpired; it leaves anyway
                pass

    def leftovers(self, folder: files.Folder) -> str:
        """Rank 0, before its own lock: '' or one line naming runs that left files in TARGET
        and are proven over (their lock file is free on this kernel): what the ranks of a
        launcher that killed them could not remove, the next start says.  One directory
        read; runs that may live elsewhere are not named (nothing is said on a guess)."""
        from mpiwrite.facts import liveness

        over = []
        try:
            entries = sorted(os.listdir(folder.fd))[:10000]
        except OSError:
            return ""
        for entry in entries:
            got = names.parse_lock(entry)
            if got is None or got[0] == self.run_id:
                continue
            if liveness.check(entry, folder.fd)[0] == liveness.FREE and got[0] not in over:
                over.append(got[0])
        if not over:
            return ""
        shown = ", ".join(over[:3]) + (f" and {len(over) - 3} more" if len(over) > 3 else "")
        return (f"{self.cfg.target} holds files of run(s) {shown} that ended without "
                f"removing them (their lock is free): `mpiwrite clean {self.cfg.target}` "
                "removes them")

    def release_lock(self) -> None:
        """At the run's orderly end, with its other files: the lock file removed, then its
        lock dropped (the file never stays behind unlocked); then the keeper dismissed.  In
        that order: a leader killed in between leaves its keeper to finish the clean-up
        (dismissed first, a kill there left the lock file for good)."""
        if self.lock is not None:
            from mpiwrite.facts import liveness

            (folder, name, fd), self.lock = self.lock, None
            liveness.release(fd, folder.fd, name)
        self._dismiss_keeper()

    def add_created(self, path: str, folder: Optional[files.Folder]) -> None:
        self.created.append(path)
        if folder is not None:
            self._made_in[path] = folder

    def unlink(self, path: str) -> Optional[str]:
        """Remove one file of this run, through the folder it was made in (this rank's) or
        the run's folders as opened here (another rank's); 'path: reason' or None."""
        sub, name = self._split(path)
        folder = self._made_in.pop(path, None)
        if folder is not None:
            return remove_at(folder.fd, name, path)
        if self.target is None:
            return None  # never saw TARGET here: made nothing in it
        if not sub:
            return remove_at(self.target.fd, name, path)
        held = self.subdirs.get(sub)
        if held is not None:
            return remove_at(held.fd, name, path)
        try:  # another rank's subdirectory: opened just for this, never through a symlink
            fd = files.open_path(sub, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
                                 | os.O_CLOEXEC, self.target.fd)
        except FileNotFoundError:
            return None
        except OSError as exc:
            return f"{path}: {why(exc)}"
        try:
            return remove_at(fd, name, path)
        finally:
            os.close(fd)

    def after_iteration(self, path: str, barrier) -> None:
        """The iteration's file is done with: remove it (a shared file once every rank is
        past it: `barrier()`), unless --keep."""
        if self.cfg.keep:
            self.created.clear()
            self._made_in.clear()
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

    def remove_subdirs(self) -> List[str]:
        return remove_subdirs(self.cfg, self.run_id, self.nranks, self.target)

    def remove_run_folders(self, warn) -> None:
        """Rank 0 at the end: the run's subdirectories, and TARGET if the run made it and it is
        empty; `warn(text)` when TARGET was renamed, removed or replaced meanwhile."""
        t = self.target
        moved = t is not None and not t.leads_here()
        if moved:
            where = t.now_at()
            if self.cfg.keep:
                warn(f"TARGET {self.cfg.target} was renamed or removed during the run, or "
                     f"replaced; the kept files are in the folder it opened at the start"
                     f"{', now ' + where if where else ' (no longer reachable by name)'}")
            else:
                warn(f"TARGET {self.cfg.target} was renamed or removed during the run, or "
                     f"replaced; the run's files were removed from the folder it wrote in")
        if self.cfg.keep:
            return
        self.remove_subdirs()
        if self.created_target and not moved:
            remove_dir_if_empty(self.cfg.target)  # rmdir never follows a symlink at the name
