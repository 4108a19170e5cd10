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

The folder is MPIWRITE_STATE, else $XDG_STATE_HOME/mpiwrite, else ~/.local/state/mpiwrite:
made 0700 if missing (its parent must exist), never a link, owned by this user, writable by
no one else; a journal file is replaced atomically.  Node-local state: a home folder shared by
every node is fine too, as each journal is named by its host.
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


def folder() -> str:
    given = os.environ.get(ENV)
    if given:
        return given
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "state")
    return os.path.join(base, "mpiwrite")


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


def _open_folder(make: bool) -> Optional[int]:
    """The journal folder held open (O_NOFOLLOW), checked; None when it does not exist and
    `make` is false.  JournalError when it cannot be used."""
    path = folder()
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        if not make:
            return None
        parent = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(parent):
            base = os.path.dirname(parent)
            if not os.path.isdir(base):  # never a whole missing HOME made
                raise JournalError(f"cannot keep the settings journal: {parent} does not "
                                   "exist") from None
            try:
                os.mkdir(parent, 0o700)
            except FileExistsError:
                pass
            except OSError as exc:
                raise JournalError(f"cannot make {parent}: {exc.strerror}") from None
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            pass
        except OSError as exc:
            raise JournalError(f"cannot make the settings journal folder {path}: "
                               f"{exc.strerror}") from None
        st = os.lstat(path)
    except OSError as exc:
        raise JournalError(f"cannot use the settings journal folder {path}: "
                           f"{exc.strerror}") from None
    _check(path, st)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise JournalError(f"cannot open the settings journal folder {path}: "
                           f"{exc.strerror}") from None
    _check(path, os.fstat(fd))
    return fd


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


def remove(host: str, study: str) -> None:
    """Everything is back on this node: its journal goes."""
    try:
        fd = _open_folder(make=False)
    except JournalError:
        return
    if fd is None:
        return
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
    except (OSError, ValueError):
        return None
    ok = (isinstance(doc, dict) and isinstance(doc.get("settings"), list)
          and all(isinstance(e, dict) and all(isinstance(e.get(k), str)
                                              for k in ("name", "set", "original"))
                  for e in doc["settings"])
          and all(isinstance(doc.get(k), str) for k in ("host", "study", "fingerprint")))
    return doc if ok else None


def pending(host: Optional[str] = None) -> List[Tuple[str, Dict[str, Any]]]:
    """(file name, journal) of every journal in the folder (of `host` only, when given);
    unreadable ones are listed with an empty journal.  [] when there is no folder."""
    try:
        fd = _open_folder(make=False)
    except JournalError:
        return []
    if fd is None:
        return []
    try:
        out = []
        for name in sorted(os.listdir(fd)):
            if not (name.startswith(PREFIX) and name.endswith(SUFFIX)):
                continue
            doc = _read(fd, name) or {}
            if host is None or doc.get("host") in (None, host):
                out.append((name, doc))
        return out
    finally:
        os.close(fd)


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
    one lives is refused instead of putting its settings back under it.  The descriptor
    (-1 where there is no folder to hold it in and nothing to claim); JournalError when
    another live process holds it."""
    import fcntl

    fd = _open_folder(make=True)
    name = lock_name(host, study)
    try:
        lfd = os.open(name, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
                      | os.O_NONBLOCK, 0o600, dir_fd=fd)
    except OSError as exc:
        raise JournalError(f"cannot use the study's lock {folder()}/{name}: "
                           f"{exc.strerror}") from None
    finally:
        os.close(fd)
    try:
        if not stat.S_ISREG(os.fstat(lfd).st_mode):
            raise JournalError(f"the study's lock {folder()}/{name} is not a regular file")
        fcntl.flock(lfd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(lfd)
        raise JournalError(f"study {study} is running on {host} in another launch: its "
                           "settings are its own; nothing is put back while it runs") from None
    except (OSError, JournalError):
        os.close(lfd)
        raise
    return lfd


def warning() -> str:
    """One line when a journal is pending here, else '' (every command's start: one
    directory read, nothing when the folder does not exist)."""
    running = os.environ.get(RUNNING)  # a command the study runs: its own journal is live
    found = [(n, doc) for n, doc in pending() if not running or doc.get("study") != running]
    if not found:
        return ""
    names = sorted({doc.get("study", "?") for _, doc in found})
    files_ = sorted({doc.get("file", "") for _, doc in found if doc.get("file")})
    how = f"`mpiwrite study restore {files_[0]}`" if len(files_) == 1 else \
        "`mpiwrite study restore FILE` (or the study's name)"
    return (f"mpiwrite: warning: a study changed client settings on this node and did not "
            f"put them back (study {', '.join(names)}; journal in {folder()}): {how} "
            "restores them")
