"""Opening and creating files that other people can reach, without being tricked.

Shared by the record writer, the record reader, `verify`, tag files and output files:
- open_regular(): open for reading only a regular file, without blocking on a FIFO or device
  (O_NONBLOCK, then fstat of what was actually opened), optionally not following a symlink.
- read_regular(): the bytes of a regular file, at most a given size.
- write_new(): create a file that must not exist (O_EXCL|O_NOFOLLOW), write all of it, fsync.
- replace_file(): write a whole output file atomically: a new file (write_new) renamed over the
  name, only if the name is free or holds a regular file of this user (check_replaceable).
- Folder: a folder opened once and then used by descriptor; can say whether its path still
  leads to it and where it is now.
- check_output(): can a command write its output file here? (ConfigError naming the option).

Each takes an optional dir_fd: the name is then relative to that open folder, so a folder
swapped for a symlink after it was opened is never written through.  docs/security.md lists
what is opened how.
"""

from __future__ import annotations

import errno
import os
import stat
import sys
from typing import List, Optional

from mpiwrite.errors import ConfigError

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def kind(mode: int) -> str:
    """'a FIFO', 'a directory', ... for a message about a file that is not a regular one."""
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISLNK, "a symbolic link")):
        if test(mode):
            return name
    return "not a regular file"


def open_path(path: str, flags: int, dir_fd: Optional[int], mode: int = 0o644) -> int:
    """os.open; with O_NOFOLLOW, a symlink at path is said as such (not 'too many levels')."""
    try:
        return os.open(path, flags, mode, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP and flags & _NOFOLLOW and _is_link(path, dir_fd):
            raise OSError(errno.ELOOP, "a symbolic link, not followed", path) from None
        raise


def _is_link(path: str, dir_fd: Optional[int]) -> bool:
    try:
        return stat.S_ISLNK(os.stat(path, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def open_regular(path: str, follow: bool = True, dir_fd: Optional[int] = None,
                 flags: int = 0) -> int:
    """A read-only descriptor of path, which must be a regular file (OSError otherwise).

    Never blocks: a FIFO is opened with O_NONBLOCK and refused after fstat.  The descriptor is
    switched back to blocking mode for the reads that follow.  follow=False: a symlink is
    refused (ELOOP, "a symbolic link, not followed").  `flags` adds e.g. O_DIRECT."""
    flags |= os.O_RDONLY | os.O_NONBLOCK | _CLOEXEC | (0 if follow else _NOFOLLOW)
    fd = open_path(path, flags, dir_fd)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, f"{kind(st.st_mode)}, not a regular file", path)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_regular(path: str, limit: int, follow: bool = True) -> bytes:
    """The bytes of a regular file; OSError(EFBIG) if it holds more than limit bytes."""
    fd = open_regular(path, follow)
    try:
        chunks, total = [], 0
        while True:
            data = os.read(fd, min(1 << 20, limit + 1 - total))
            if not data:
                break
            chunks.append(data)
            total += len(data)
            if total > limit:
                raise OSError(errno.EFBIG, f"larger than {limit} bytes", path)
        return b"".join(chunks)
    finally:
        os.close(fd)


def write_all(fd: int, data: bytes) -> None:
    """os.write until every byte is written (a short write is not an error)."""
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        if n <= 0:
            raise OSError(errno.EIO, "write returned 0")
        view = view[n:]


def write_new(path: str, data: bytes, mode: int = 0o644, dir_fd: Optional[int] = None) -> None:
    """Create path (it must not exist; a symlink there is not followed), write data, fsync.

    On any failure the partly written file is removed and OSError is raised."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, mode,
                 dir_fd=dir_fd)
    try:
        write_all(fd, data)
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        try:
            os.unlink(path, dir_fd=dir_fd)
        except OSError:
            pass
        raise
    os.close(fd)


TMP_TRIES = 4  # temporary names tried before giving up (a name taken is never reused)


def temp_names(name: str) -> List[str]:
    """The temporary names for writing `name` (a file name, or a path) in its own folder.

    `.<name>.tmp-<pid>`, then `-1`, `-2`, ...: each is created with O_EXCL|O_NOFOLLOW, so a file
    or symlink someone planted there is skipped, never followed or overwritten."""
    folder, base = os.path.split(name)
    first = os.path.join(folder, f".{base}.tmp-{os.getpid()}")
    return [first] + [f"{first}-{i}" for i in range(1, TMP_TRIES)]


def write_replacing(name: str, data: bytes, dir_fd: Optional[int] = None, mode: int = 0o644,
                    check=None) -> None:
    """Write data to a new temporary file beside name (O_EXCL|O_NOFOLLOW, fsync'd), then
    rename it over name and fsync the folder.  `check(name)` (raising OSError) is called just
    before the rename.  rename() replaces whatever is at name itself, never what a symlink
    there points to.  On failure no temporary file is left and name is untouched (a folder
    made append-only or immutable is refused before anything is written in it; a temporary
    file that still cannot be removed is named in the error)."""
    locked = _no_renames(dir_fd, os.path.dirname(os.path.abspath(name)))
    if locked:
        raise OSError(errno.EPERM, f"its folder is {locked}: nothing there can be renamed or "
                      "removed, so the file is not replaced", name)
    last: Optional[OSError] = None
    for tmp in temp_names(name):
        try:
            write_new(tmp, data, mode, dir_fd)
        except FileExistsError as exc:
            last = exc
            continue
        try:
            if check is not None:
                check(name)
            os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException as exc:
            try:
                os.unlink(tmp, dir_fd=dir_fd)
            except OSError as stuck:
                if isinstance(exc, OSError):
                    raise OSError(exc.errno, f"{exc.strerror or exc}; the temporary file {tmp} "
                                  f"is left: {stuck.strerror}", name) from exc
            raise
        if dir_fd is not None:
            _fsync_fd(dir_fd)
        else:
            fsync_dir(os.path.dirname(os.path.abspath(name)))
        return
    raise OSError(errno.EEXIST, "every temporary name is taken (planted files or symlinks?): "
                  f"{last.filename if last else name}", name)


FS_IOC_GETFLAGS = 0x80086601  # linux/fs.h; the kernel writes an int
LOCKED_FLAGS = ((0x10, "immutable (chattr +i)"), (0x20, "append-only (chattr +a)"))


def _no_renames(dir_fd: Optional[int], folder: str) -> str:
    """'append-only (chattr +a)' or 'immutable (chattr +i)' when the folder's inode flags
    forbid renaming and removing its entries; '' otherwise, or where the filesystem cannot
    say (a temporary file written there could be neither renamed nor removed)."""
    import fcntl

    fd = dir_fd
    try:
        if fd is None:
            fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | _CLOEXEC)
        flags = int.from_bytes(fcntl.ioctl(fd, FS_IOC_GETFLAGS, bytes(8))[:4], sys.byteorder)
    except OSError:
        return ""
    finally:
        if dir_fd is None and fd is not None:
            os.close(fd)
    return next((what for bit, what in LOCKED_FLAGS if flags & bit), "")


def check_replaceable(name: str, dir_fd: Optional[int] = None) -> None:
    """OSError unless name is free or holds a regular file of this user (not a symlink).

    What an output file may replace: never a symlink (someone else's planted link would make
    the victim's name ours), a FIFO or device, a folder, or another user's file."""
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(st.st_mode):
        raise OSError(errno.ELOOP, "is a symbolic link (not followed)", name)
    if stat.S_ISDIR(st.st_mode):
        raise OSError(errno.EISDIR, "is a directory; expected a file name", name)
    if not stat.S_ISREG(st.st_mode):
        raise OSError(errno.EINVAL, f"is {kind(st.st_mode)}, not a regular file", name)
    if st.st_uid != os.geteuid():
        raise OSError(errno.EPERM, f"belongs to another user (uid {st.st_uid}); not replaced",
                      name)


def about(shown: str, exc: OSError) -> str:
    """'PATH is a symbolic link (not followed)' for check_replaceable's refusals, else
    'PATH: No space left on device'."""
    text = exc.strerror or str(exc)
    return f"{shown} {text}" if text.startswith(("is ", "belongs ")) else f"{shown}: {text}"


def replace_file(path: str, data: bytes, mode: int = 0o644, dir_fd: Optional[int] = None) -> None:
    """Write an output file (plot, job script, man page, --json) atomically and safely.

    A new file is written beside path and renamed over it, only if path is free or holds a
    regular file of this user (check_replaceable, before writing and again just before the
    rename); OSError otherwise.  The folder is opened once (or given as dir_fd), so the new
    file lands in the folder that was checked."""
    own = dir_fd is None
    if own:
        folder = Folder.open(os.path.dirname(os.path.abspath(path)))
        dir_fd = folder.fd
        name = os.path.basename(path)
    else:
        name = path
    try:
        try:
            check_replaceable(name, dir_fd)
            write_replacing(name, data, dir_fd, mode, check=lambda n: check_replaceable(n, dir_fd))
        except OSError as exc:
            if exc.filename == name and name != path:
                raise OSError(exc.errno, exc.strerror, path) from None
            raise
    finally:
        if own:
            folder.close()


def _fsync_fd(fd: int) -> None:
    try:
        os.fsync(fd)
    except OSError:
        pass


def fsync_dir(folder: str) -> None:
    """fsync a folder so a rename in it is durable (ignored where unsupported)."""
    try:
        dfd = os.open(folder, os.O_RDONLY | _CLOEXEC)
    except OSError:
        return
    try:
        _fsync_fd(dfd)
    finally:
        os.close(dfd)


def _check_link_owner(path: str, dir_fd: Optional[int] = None) -> None:
    """A folder the user named may be a symlink (/scratch -> /lustre/...), but only one of
    this user's or root's: a link someone else planted in a shared folder is not followed
    (OSError ELOOP), as the kernel's protected_symlinks does in sticky folders."""
    try:
        st = os.stat(path.rstrip("/") or "/", dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return  # the open says what is wrong
    if stat.S_ISLNK(st.st_mode) and st.st_uid not in (0, os.geteuid()):
        raise OSError(errno.ELOOP, f"a symbolic link of another user (uid {st.st_uid}), not "
                                   "followed", path)


class Folder:
    """A folder opened once and used by descriptor from then on (dir_fd= of every call).

    `path` is how the user named it.  The descriptor keeps meaning the folder that was opened
    when its path is renamed or replaced by a symlink; `leads_here()` tells whether the path
    still reaches it (device and inode), `gone()` whether it was removed, `now_at()` where it
    is now."""

    def __init__(self, path: str, fd: int):
        self.path, self.fd = path, fd
        st = os.fstat(fd)
        self.ident = (st.st_dev, st.st_ino)

    @classmethod
    def open(cls, path: str, dir_fd: Optional[int] = None, follow: bool = True,
             name: Optional[str] = None) -> Folder:
        """Open path (relative to dir_fd when given as `name`) as a folder; follow=False
        refuses a symlink there (OSError ELOOP)."""
        flags = (os.O_RDONLY | os.O_DIRECTORY | os.O_NONBLOCK | _CLOEXEC
                 | (0 if follow else _NOFOLLOW))
        where = name if name is not None else path
        if follow:
            _check_link_owner(where, dir_fd)
        return cls(path, open_path(where, flags, dir_fd))

    def matches(self, st: os.stat_result) -> bool:
        return (st.st_dev, st.st_ino) == self.ident

    def leads_here(self, st: Optional[os.stat_result] = None) -> bool:
        """Whether the path (following links, as when it was opened) still reaches it."""
        try:
            return self.matches(st if st is not None else os.stat(self.path))
        except OSError:
            return False

    def gone(self) -> bool:
        """Removed (rmdir'd by someone) since it was opened."""
        try:
            return os.fstat(self.fd).st_nlink == 0
        except OSError:
            return True

    def now_at(self) -> str:
        """Where the folder is now ('' if unknown or removed): Linux's /proc/self/fd link."""
        try:
            where = os.readlink(f"/proc/self/fd/{self.fd}")
        except OSError:
            return ""
        return "" if where.endswith(" (deleted)") or not where.startswith("/") else where

    def close(self) -> None:
        if self.fd >= 0:
            try:
                os.close(self.fd)
            except OSError:
                pass
            self.fd = -1


def require_directory(what: str, path: str, noun: str = "") -> None:
    """ConfigError (exit 2, naming `what`) unless path is an existing directory."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise ConfigError(f"{what}: {noun}{path!r} does not exist") from None
    except OSError as exc:
        raise ConfigError(f"{what}: {noun}{path!r}: {exc.strerror}") from None
    if not stat.S_ISDIR(st.st_mode):
        raise ConfigError(f"{what}: {path!r} is not a directory")


def check_output(option: str, path: str) -> None:
    """ConfigError (exit 2, naming the option) unless a file can be written at path: its folder
    exists and is a writable directory, and path is free or a regular file of this user (not
    a symlink, FIFO, folder or another user's file: check_replaceable)."""
    folder = os.path.dirname(os.path.abspath(path))
    require_directory(option, folder, "folder ")
    try:
        _check_link_owner(folder)
        check_replaceable(path)
    except OSError as exc:
        raise ConfigError(f"{option}: {about(repr(exc.filename or path), exc)}") from None
    if not os.access(folder, os.W_OK | os.X_OK) or _pseudo_fs(folder):
        raise ConfigError(f"{option}: cannot write in {folder!r}: permission denied")


def _pseudo_fs(folder: str) -> bool:
    """True for /proc and /sys, where root's access() says yes but creating files fails."""
    real = os.path.realpath(folder)
    return any(real == p or real.startswith(p + "/") for p in ("/proc", "/sys"))


def _name_of(uid: int) -> str:
    import pwd

    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def _group_is_private(gid: int, uid: int) -> bool:
    """A user-private group: named as the user, with no other members listed."""
    import grp
    import pwd

    try:
        group, user = grp.getgrgid(gid), pwd.getpwuid(uid)
    except KeyError:
        return False
    return group.gr_name == user.pw_name and set(group.gr_mem) <= {user.pw_name}


def _others_can_write(st: os.stat_result) -> bool:
    return bool(st.st_mode & 0o002) or bool(
        st.st_mode & 0o020 and st.st_gid != 0 and not _group_is_private(st.st_gid, st.st_uid))


def untrusted(path: str, st: os.stat_result) -> str:
    """'' when only this user or root can change the file (`st`: its fstat) and what its
    path leads through: the file, a symlink at path, and their folders; else what another
    user could change, with owner and mode.  A sticky folder (/tmp) is fine for a file of
    this user's own.  For input that is run as code: a study file's commands."""
    me = os.geteuid()
    mine = (0, me)

    def said(what: str, s: os.stat_result) -> str:
        return (f"{what} is owned by {_name_of(s.st_uid)} with mode "
                f"{stat.S_IMODE(s.st_mode):04o}")

    if st.st_uid not in mine:
        return said("the file", st)
    if _others_can_write(st):
        return said("the file", st) + ": writable by other users"
    places = [os.path.dirname(os.path.realpath(path))]
    try:
        link = os.lstat(path)
    except OSError:
        link = None
    if link is not None and stat.S_ISLNK(link.st_mode):
        if link.st_uid not in mine:
            return said("the symbolic link", link)
        places.insert(0, os.path.dirname(os.path.abspath(path)))
    for folder in places:
        try:
            fst = os.stat(folder)
        except OSError:
            continue
        if fst.st_uid not in mine:
            return said(f"its folder {folder}", fst)
        if _others_can_write(fst) and not (fst.st_mode & stat.S_ISVTX and st.st_uid == me):
            return said(f"its folder {folder}", fst) + ": other users can replace the file"
    return ""


def same_bytes(a: str, b: str) -> bool:
    """Whether two regular files hold the same bytes (False when either cannot be read)."""
    try:
        fa = open_regular(a)
    except OSError:
        return False
    try:
        fb = open_regular(b)
    except OSError:
        os.close(fa)
        return False
    try:
        if os.fstat(fa).st_size != os.fstat(fb).st_size:
            return False
        while True:
            x, y = os.read(fa, 1 << 20), os.read(fb, 1 << 20)
            if x != y:
                return False
            if not x:
                return True
    except OSError:
        return False
    finally:
        os.close(fa)
        os.close(fb)
