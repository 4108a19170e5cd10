"""The settings journal: what a study changed on this node, written before it changes it.

A study's `set` changes a client setting on every node (checksums, a cache size); the study
puts each back at its end.  What the ranks cannot do, the next start does: when the launcher
kills the ranks (Hydra on a hang-up, a closed output pipe, a second Ctrl-C; a batch system's
SIGKILL), nothing of the rank is left to restore.  So a node's leader writes, before its first
`set`, the setting's name, its `set` command and the value `get` read, to a journal in a folder
of this user's on this node; it removes the journal once everything is back.  A journal that is
still there is a change not undone:

- `mpiwrite study restore FILE` puts this node's settings of that study back (one process per
  node: `srun -N K --ntasks-per-node=1 mpiwrite study restore FILE` on a cluster);
- the next `study run` of the same study does so on every node before it reads anything;
- every mpiwrite command started on this node says that a journal is pending (one line), but
  the study's own `set` and `get` commands (`mpiwrite tune set`: MPIWRITE_STUDY_RUNNING names
  the study whose journal is live).

The folder is MPIWRITE_STATE when set (used as given, or refused); else the XDG base
directory's, $XDG_STATE_HOME/mpiwrite or ~/.local/state/mpiwrite, its missing parents made
0700 under an existing home; where that cannot be made or written (no home, a read-only home
on the compute nodes), the node-local fallback /tmp/mpiwrite-state-UID.  Each is never a
link, owned by this user, writable by no one else, checked before use; a journal file is
replaced atomically.  A home shared by every node is fine too: each journal is named by its
host.  The fallback is /tmp, not $XDG_RUNTIME_DIR: a journal must outlive the job that was
killed, and a runtime folder goes with the user's last session.  Journals are looked for in
both folders.  A study that changes no setting keeps no journal and takes no lock.
"""

from __future__ import annotations

import json
import os
import stat
from typing import Any, Dict, List, Optional, Tuple

ENV = "MPIWRITE_STATE"
RUNNING = "MPIWRITE_STUDY_RUNNING"  # set for a study's own set/get commands: its name
PREFIX = "settings-"
SUFFIX = ".json"
LIMIT = 64 << 20  # bytes of a journal read back (values are at most VALUE_CHARS each)
VALUE_CHARS = 4096  # the longest value `get` may show that a study will put back


class JournalError(Exception):
    """The journal cannot be kept (its folder is not this user's own): one line."""


FALLBACK = "/tmp/mpiwrite-state-{uid}"
# the folder this process keeps its journals in, once chosen, for the folders() it chose from
_chosen: Dict[Tuple[str, ...], str] = {}


def folders() -> List[str]:
    """Where journals may be: MPIWRITE_STATE alone when set, else the XDG folder and the
    node-local fallback, in that order."""
    given = os.environ.get(ENV)
    if given:
        return [given]
    home = os.path.expanduser("~")
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(home, ".local", "state")
    return [os.path.join(base, "mpiwrite"), FALLBACK.format(uid=os.geteuid())]


def folder() -> str:
    """The folder this process's journals go to (the first usable of folders(), once one
    was opened; else the first)."""
    paths = folders()
    return _chosen.get(tuple(paths), paths[0])


def _safe_name(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in text)[:128]


def name_for(host: str, study: str) -> str:
    """One journal per node and study name: an edited file (another fingerprint) still finds
    what the study of that name left changed."""
    return f"{PREFIX}{_safe_name(host)}--{_safe_name(study)}{SUFFIX}"


def _check(path: str, st: os.stat_result) -> None:
    if stat.S_ISLNK(st.st_mode):
        raise JournalError(f"the settings journal folder {path} is a symbolic link; refused")
    if not stat.S_ISDIR(st.st_mode):
        raise JournalError(f"the settings journal folder {path} is not a folder")
    if st.st_uid != os.geteuid():
        raise JournalError(f"the settings journal folder {path} is not yours "
                           f"(owner uid {st.st_uid}); refused")
    if st.st_mode & 0o022:
        raise JournalError(f"the settings journal folder {path} is writable by other users "
                           f"(mode {stat.S_IMODE(st.st_mode):04o}); refused")


ADVICE = (f"set {ENV} to a folder of yours on this node (made 0700), e.g. "
          f"{ENV}=/tmp/$USER-mpiwrite-state")


def _open_folder(make: bool) -> Optional[int]:
    """The journal folder held open (O_NOFOLLOW), checked: with `make`, the first of
    folders() that is or can be made usable (JournalError naming MPIWRITE_STATE when none
    can); without, the one already chosen, else the first that exists (None: none does)."""
    paths = folders()
    if tuple(paths) in _chosen:
        return _open_one(_chosen[tuple(paths)], make)
    problems = []
    for path in paths:
        try:
            fd = _open_one(path, make)
        except JournalError as exc:
            problems.append(str(exc))
            if not make:
                raise
            continue
        if fd is not None:
            if make:
                _chosen[tuple(paths)] = path
            return fd
    if not make:
        return None
    raise JournalError("cannot keep the settings journal: " + "; ".join(problems)
                       + f"; {ADVICE}")


def _open_one(path: str, make: bool) -> Optional[int]:
    """One folder held open and checked (made, with its missing parents 0700 under an
    existing home, when `make`); None when it does not exist and `make` is false."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        if not make:
            return None
        _make(path)
        try:
            st = os.lstat(path)
        except OSError as exc:
            raise JournalError(f"cannot use {path}: {exc.strerror}") from None
    except OSError as exc:
        raise JournalError(f"cannot use {path}: {exc.strerror}") from None
    _check(path, st)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise JournalError(f"cannot open {path}: {exc.strerror}") from None
    try:
        _check(path, os.fstat(fd))
        if make and not os.access(f"/proc/self/fd/{fd}", os.W_OK):
            raise JournalError(f"{path} cannot be written here (a read-only home?)")
    except BaseException:
        os.close(fd)
        raise
    return fd


def _make(path: str) -> None:
    """The folder made 0700: MPIWRITE_STATE's only where its parent exists (a typo never
    makes a tree); the XDG folder with its missing parents, under an existing home."""
    path = os.path.abspath(path)
    parent = os.path.dirname(path)
    missing = [path]
    if os.environ.get(ENV):
        if not os.path.isdir(parent):
            raise JournalError(f"{parent} does not exist")
    else:
        home = os.path.abspath(os.path.expanduser("~"))
        at = parent
        while not os.path.lexists(at) and os.path.dirname(at) != at:
            missing.append(at)
            at = os.path.dirname(at)
        inside = os.path.commonpath([home, path]) == home
        if inside and not os.path.isdir(home):
            raise JournalError(f"the home folder {home} does not exist")
        if not inside and len(missing) > 1:
            raise JournalError(f"{parent} does not exist")
    for folder_ in reversed(missing):
        try:
            os.mkdir(folder_, 0o700)
        except FileExistsError:
            pass
        except OSError as exc:
            raise JournalError(f"cannot make {folder_}: {exc.strerror}") from None


def write(host: str, study: str, fingerprint: str, file: str,
          entries: List[Dict[str, str]]) -> str:
    """Journal this node's settings before they change: [{name, set, original}].  Returns the
    journal's path.  JournalError when it cannot be kept (then nothing may change)."""
    from mpiwrite import files

    fd = _open_folder(make=True)
    name = name_for(host, study)
    doc = {"version": 1, "host": host, "study": study, "fingerprint": fingerprint,
           "file": os.path.abspath(file), "pid": os.getpid(), "settings": entries}
    try:
        files.write_replacing(name, (json.dumps(doc, sort_keys=True) + "\n").encode(),
                              dir_fd=fd, mode=0o600)
    except OSError as exc:
        raise JournalError(f"cannot write the settings journal {folder()}/{name}: "
                           f"{exc.strerror or exc}") from None
    finally:
        os.close(fd)
    return os.path.join(folder(), name)


def _existing() -> List[Tuple[str, int]]:
    """Every journal folder that exists and may be read, held open: (path, descriptor)."""
    out = []
    for path in folders():
        try:
            fd = _open_one(path, make=False)
        except JournalError:
            continue
        if fd is not None:
            out.append((path, fd))
    return out


def remove(host: str, study: str) -> None:
    """Everything is back on this node: its journal goes (from whichever folder holds it)."""
    for _path, fd in _existing():
        try:
            os.unlink(name_for(host, study), dir_fd=fd)
        except FileNotFoundError:
            pass
        finally:
            os.close(fd)


def _read(fd: int, name: str) -> Optional[Dict[str, Any]]:
    from mpiwrite import files

    try:
        jfd = files.open_regular(name, follow=False, dir_fd=fd)
        try:
            data = os.read(jfd, LIMIT)
        finally:
            os.close(jfd)
        doc = json.loads(data)
    except (OSError, ValueError, RecursionError):  # deep nesting: damaged, named, never a crash
        return None
    ok = (isinstance(doc, dict) and isinstance(doc.get("settings"), list)
          and all(isinstance(e, dict) and all(isinstance(e.get(k), str)
                                              for k in ("name", "set", "original"))
                  for e in doc["settings"])
          and all(isinstance(doc.get(k), str) for k in ("host", "study", "fingerprint")))
    return doc if ok else None


def pending(host: Optional[str] = None) -> List[Tuple[str, Dict[str, Any]]]:
    """(file name, journal) of every journal in the folders (of `host` only, when given);
    unreadable ones are listed with an empty journal.  [] when there is no folder."""
    out = []
    for _path, fd in _existing():
        try:
            for name in sorted(os.listdir(fd)):
                if not (name.startswith(PREFIX) and name.endswith(SUFFIX)):
                    continue
                doc = _read(fd, name) or {}
                if host is None or doc.get("host") in (None, host):
                    out.append((name, doc))
        finally:
            os.close(fd)
    return out


def of_study(host: str, study: str) -> Optional[Dict[str, Any]]:
    """This node's journal of this study, or None; JournalError for one that is there but
    cannot be read (never taken for "nothing to put back")."""
    want = name_for(host, study)
    for name, doc in pending(host):
        if name == want:
            if not doc:
                raise JournalError(f"the settings journal {folder()}/{name} cannot be read: "
                                   "put its settings back by hand, then remove it")
            return doc
    return None


def lock_name(host: str, study: str) -> str:
    """The lock a live launch of the study holds on this node (not a journal's name)."""
    return f"running-{_safe_name(host)}--{_safe_name(study)}.lock"


def claim(host: str, study: str) -> int:
    """The study's settings on this node, held for the life of this process (flock on a lock
    file beside the journal): a second launch of the study, or `study restore`, while this
    one lives is refused instead of putting its settings back under it.  The descriptor;
    JournalError when another live process holds it, or when there is no folder to keep
    it in.  release() removes the file: no lock outlives its study."""
    import fcntl

    for _ in range(8):  # a lock file removed by its holder between our open and flock
        fd = _open_folder(make=True)
        name = lock_name(host, study)
        try:
            lfd = os.open(name, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
                          | os.O_NONBLOCK, 0o600, dir_fd=fd)
        except OSError as exc:
            os.close(fd)
            raise JournalError(f"cannot use the study's lock {folder()}/{name}: "
                               f"{exc.strerror}") from None
        try:
            got = os.fstat(lfd)
            if not stat.S_ISREG(got.st_mode):
                raise JournalError(f"the study's lock {folder()}/{name} is not a regular file")
            fcntl.flock(lfd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            try:
                now = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                now = None
            if now is None or (now.st_ino, now.st_dev) != (got.st_ino, got.st_dev):
                os.close(lfd)
                continue  # locked a file its holder had just removed: take the new one
        except BlockingIOError:
            os.close(lfd)
            raise JournalError(f"study {study} is running on {host} in another launch: its "
                               "settings are its own; nothing is put back while it runs") \
                from None
        except (OSError, JournalError):
            os.close(lfd)
            raise
        finally:
            os.close(fd)
        return lfd
    raise JournalError(f"the study's lock {folder()}/{lock_name(host, study)} keeps changing")


def release(host: str, study: str, lfd: int) -> None:
    """The claim let go: its lock file removed (while still held, and only if it is the
    file this process holds), then closed."""
    if lfd < 0:
        return
    try:
        got = os.fstat(lfd)
        for _path, fd in _existing():
            try:
                now = os.stat(lock_name(host, study), dir_fd=fd, follow_symlinks=False)
                if (now.st_ino, now.st_dev) == (got.st_ino, got.st_dev):
                    os.unlink(lock_name(host, study), dir_fd=fd)
            except OSError:
                pass
            finally:
                os.close(fd)
    finally:
        os.close(lfd)


def live(host: str, study: str) -> bool:
    """Whether a launch of the study holds its lock on this node now (its journal is then
    in use, not left over)."""
    import fcntl

    for _path, fd in _existing():
        try:
            lfd = os.open(lock_name(host, study), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
                          | os.O_NONBLOCK, dir_fd=fd)
        except OSError:
            continue
        finally:
            os.close(fd)
        try:
            fcntl.flock(lfd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            return True
        finally:
            os.close(lfd)
    return False


def warning() -> str:
    """One line when a journal is pending here, else '' (every command's start: one
    directory read, nothing when the folder does not exist)."""
    running = os.environ.get(RUNNING)  # a command the study runs: its own journal is live
    found = [(n, doc) for n, doc in pending() if not running or doc.get("study") != running]
    found = [(n, doc) for n, doc in found  # a study running now: its journal is not left over
             if not live(str(doc.get("host", "")), str(doc.get("study", "")))]
    if not found:
        return ""
    names = sorted({doc.get("study", "?") for _, doc in found})
    files_ = sorted({doc.get("file", "") for _, doc in found if doc.get("file")})
    how = f"`mpiwrite study restore {files_[0]}`" if len(files_) == 1 else \
        "`mpiwrite study restore FILE` (or the study's name)"
    return (f"mpiwrite: warning: a study changed client settings on this node and did not "
            f"put them back (study {', '.join(names)}; journal in {folder()}): {how} "
            "restores them")
