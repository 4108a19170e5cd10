"""A run's proof of life: each node's leader holds an exclusive flock(2) on a lock file of its
own in TARGET (formats/names.lock) from before its `running` record exists to its end.  The
kernel drops a flock when the last descriptor of it closes, so process death of any kind
(SIGKILL and the OOM killer included) releases it; nothing else can.

What another process learns by asking for a shared lock without waiting (`check`):
- held: some process holds it: the run lives (on this kernel, or wherever the filesystem's
  locks reach).  Its files are never removed.
- free: nobody holds it.  On the kernel that ran that node's part (the same boot id) this
  proves that part over; on another host it proves nothing (NFS and Lustre may keep flocks
  local to each client: `local_lock=flock`, `localflock`).
- missing, or `unknown` (locks refused there: Lustre without `flock`, some FUSE): nothing is
  proven either way.

A couple of system calls on the node leaders only; the other ranks never import this.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import time
from typing import Optional, Tuple

HELD, FREE, MISSING, UNKNOWN = "held", "free", "missing", "unknown"
# A heartbeat no mount can hide: the node's keeper (run/keeper.py) sets the lock file's times
# every BEAT seconds while the run lives, and the file's mode says so (HEARTBEAT_MODE: no
# byte is written into TARGET for it, so a client's byte counters stay the run's own).
# A flock lives on the inode one path reached (a FUSE inode, one client of NFS without
# locks); the file's times are seen through every path to it.  A declared heartbeat younger
# than FRESH seconds (either way: a server's clock may be ahead) is a live run.
HEARTBEAT_MODE = 0o604  # a lock file's mode no umask makes of 0o644 but 060
BEAT = 1.0
FRESH = 5.0
_BUSY = (errno.EWOULDBLOCK, errno.EAGAIN)


def take(dir_fd: Optional[int], name: str, tries: int = 100) -> Tuple[int, str]:
    """Create `name` in the folder `dir_fd` (O_EXCL, never through a link) and lock it for
    the life of this process: (descriptor, '') or (-1, why not; nothing is left)."""
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(name, flags, 0o644, dir_fd=dir_fd)
    except OSError as exc:
        return -1, f"cannot create the lock file {name}: {exc.strerror}"
    problem = ""
    for attempt in range(tries):
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd, ""
        except OSError as exc:
            # a `clean` or `show` may hold a shared lock for a moment while it looks
            if exc.errno in _BUSY and attempt + 1 < tries:
                time.sleep(0.01)
                continue
            problem = f"cannot lock {name}: {exc.strerror} (errno {exc.errno})"
            break
    release(fd, dir_fd, name)
    return -1, problem


def release(fd: int, dir_fd: Optional[int], name: str) -> None:
    """The run's orderly end: the lock file removed, then its lock dropped."""
    try:
        os.unlink(name, dir_fd=dir_fd)
    except OSError:
        pass
    try:
        os.close(fd)
    except OSError:
        pass


def check(name: str, dir_fd: Optional[int] = None) -> Tuple[str, str]:
    """(HELD, FREE, MISSING or UNKNOWN, why) for the lock file `name` (in `dir_fd`, or a
    path).  Never follows a link at the name, never blocks, never waits for the lock."""
    try:  # a record may name any path: nothing but a regular file is even opened
        if not stat.S_ISREG(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode):
            return UNKNOWN, "its lock file is not a regular file"
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK,
                     dir_fd=dir_fd)
    except FileNotFoundError:
        return MISSING, "no lock file"
    except OSError as exc:
        return UNKNOWN, f"its lock file cannot be opened ({exc.strerror})"
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return UNKNOWN, "its lock file is not a regular file"
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno in _BUSY:
                return HELD, "its lock is held"
            beat = _heartbeat(fd)
            if beat is not None:
                return HELD, beat
            return UNKNOWN, f"locks do not work on its filesystem ({exc.strerror})"
        beat = _heartbeat(fd)
        return (HELD, beat) if beat is not None else (FREE, "its lock is free")
    finally:
        os.close(fd)  # drops the shared lock, if taken


def _heartbeat(fd: int) -> Optional[str]:
    """Why the lock file's heartbeat says the run lives, or None (no heartbeat declared, or
    one older than FRESH seconds)."""
    try:
        st = os.fstat(fd)
    except OSError:
        return None
    age = time.time() - st.st_mtime
    if stat.S_IMODE(st.st_mode) != HEARTBEAT_MODE or abs(age) >= FRESH:
        return None
    return f"its heartbeat is {max(age, 0.0):.0f} s old (the lock file's times, set every " \
           f"{BEAT:g} s while it lives)"


def declare_heartbeat(fd: int) -> None:
    """The lock file (open, locked) says by its mode that its times are a heartbeat (the
    keeper beats): metadata only, no byte written into TARGET."""
    try:
        os.fchmod(fd, HEARTBEAT_MODE)
    except OSError:
        pass
