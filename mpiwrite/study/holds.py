"""A node's setting is one resource (docs/study.md, "Settings"): while a study holds a setting
on a node, another study that would change a setting of that name there (any user's, any
shell's) is refused before it reads or changes anything, naming the holder.  Two studies that
interleaved their changes and restores once put back a value the other had set.

The hold is an flock on a lock file per setting name and node in the node's /tmp (sticky:
shared by every user, each file removable only by its maker): `/tmp/.mpiwrite-setting-HASH.lock`
(HASH of the node's name, MPIWRITE_SYSROOT and the setting's name), made
0644 so that every user may open it to lock it.  Opened without following a link, it must be a
regular file with one name; a file of another user's that cannot be opened is refused in one
line naming its owner.  The holder is found from /proc/locks (pid, then its user and command
line), never from what a file says.  A study's own restore is the only one of its values: the
hold lasts from before its first `get` to after its last restore.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import pwd
import stat
from typing import Iterable, List, NamedTuple, Tuple

FOLDER = "/tmp"


class Held(NamedTuple):
    name: str
    fd: int
    path: str


def lock_path(name: str, host: str = "") -> str:
    """The lock of a setting on a node: by its name, the node's name (a /tmp that several
    nodes share, emulated hosts' or a diskless cluster's, still holds one lock a node) and
    the sysroot the node's /proc and /sys are read under (MPIWRITE_SYSROOT: another node's,
    for the tests)."""
    key = "\0".join([host, os.environ.get("MPIWRITE_SYSROOT", "") or "/", name])
    digest = hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()[:16]
    return os.path.join(FOLDER, f".mpiwrite-setting-{digest}.lock")


def _open(path: str) -> int:
    """The lock file opened (made 0644 if missing), checked: OSError or ValueError."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
                     | os.O_NONBLOCK, 0o644)
        if os.fstat(fd).st_uid == os.geteuid():  # whatever the umask: every user opens it
            os.fchmod(fd, 0o644)
    except PermissionError:  # another user's file: read-only is enough for flock
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
        os.close(fd)
        raise ValueError("not a regular file of one name")
    return fd


def holder(path: str) -> str:
    """Who holds the lock on `path`: 'pid P of user U (COMMAND)', from /proc/locks."""
    try:
        st = os.stat(path, follow_symlinks=False)
        with open("/proc/locks") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return "another process"
    for line in lines:
        parts = line.split()
        # 1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF   ("->" marks a waiter)
        if "->" in parts or len(parts) < 6 or parts[1] != "FLOCK":
            continue
        try:
            pid = int(parts[4])
            inode = int(parts[5].rsplit(":", 1)[1])
        except (ValueError, IndexError):
            continue
        if inode != st.st_ino:
            continue
        who = "?"
        try:
            with open(f"/proc/{pid}/status") as fh:
                uid = next(int(ln.split()[1]) for ln in fh if ln.startswith("Uid:"))
            who = pwd.getpwuid(uid).pw_name
        except (OSError, StopIteration, KeyError, ValueError):
            pass
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                cmd = " ".join(w.decode("utf-8", "replace")
                               for w in fh.read(4096).split(b"\0") if w)
        except OSError:
            cmd = ""
        return f"pid {pid} of user {who}" + (f" ({cmd[:160]})" if cmd else "")
    return "another process"


def hold(names: Iterable[str], host: str) -> Tuple[List[Held], str]:
    """Every setting named, held on this node: (the holds, '' or the one-line problem; on a
    problem nothing is held)."""
    held: List[Held] = []
    for name in sorted(set(names)):
        path = lock_path(name, host)
        problem = ""
        for _ in range(8):  # a file removed by its holder between our open and flock
            try:
                fd = _open(path)
            except (OSError, ValueError) as exc:
                owner = ""
                try:
                    owner = pwd.getpwuid(os.stat(path, follow_symlinks=False).st_uid).pw_name
                except (OSError, KeyError):
                    pass
                why = exc.strerror if isinstance(exc, OSError) else str(exc)
                problem = (f"setting {name} on {host}: its lock {path}"
                           f"{' (of user ' + owner + ')' if owner else ''} cannot be used "
                           f"({why}): remove it, or ask its owner to")
                break
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                os.close(fd)
                if exc.errno in (errno.EAGAIN, errno.EWOULDBLOCK, errno.EACCES):
                    problem = (f"setting {name} on {host} is held by another study, "
                               f"{holder(path)}: a node's setting is one study's at a time; "
                               "run this one when it has ended")
                else:
                    problem = f"setting {name} on {host}: cannot lock {path}: {exc.strerror}"
                break
            try:
                now = os.stat(path, follow_symlinks=False)
                same = (now.st_ino, now.st_dev) == (os.fstat(fd).st_ino, os.fstat(fd).st_dev)
            except FileNotFoundError:
                same = False
            if same:
                held.append(Held(name, fd, path))
                break
            os.close(fd)
        else:
            problem = f"setting {name} on {host}: its lock {path} keeps changing"
        if problem:
            release(held)
            return [], problem
    return held, ""


def release(held: List[Held]) -> None:
    """Let go, removing each lock file this user made (while still holding it)."""
    for h in held:
        try:
            st, now = os.fstat(h.fd), os.stat(h.path, follow_symlinks=False)
            if (st.st_ino, st.st_dev) == (now.st_ino, now.st_dev) and st.st_uid == os.geteuid():
                os.unlink(h.path)
        except OSError:
            pass
        finally:
            os.close(h.fd)
    held.clear()
