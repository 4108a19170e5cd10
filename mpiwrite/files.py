"""Opening and creating files that other people can reach, without being tricked.

Shared by the record writer, the record reader, `verify`, tag files and output files:
- open_regular(): open for reading only a regular file, without blocking on a FIFO or device
  (O_NONBLOCK, then fstat of what was actually opened).
- read_regular(): the bytes of a regular file, at most a given size.
- write_new(): create a file that must not exist (O_EXCL|O_NOFOLLOW), write all of it, fsync.
- check_output(): can a command write its output file here? (ConfigError naming the option).
"""

from __future__ import annotations

import errno
import os
import stat

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


def open_regular(path: str, follow: bool = True) -> int:
    """A read-only descriptor of path, which must be a regular file (OSError otherwise).

    Never blocks: a FIFO is opened with O_NONBLOCK and refused after fstat.  The descriptor is
    switched back to blocking mode for the reads that follow."""
    flags = os.O_RDONLY | os.O_NONBLOCK | _CLOEXEC | (0 if follow else _NOFOLLOW)
    fd = os.open(path, flags)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, f"{kind(st.st_mode)}, not a regular file", path)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_regular(path: str, limit: int) -> bytes:
    """The bytes of a regular file; OSError(EFBIG) if it holds more than limit bytes."""
    fd = open_regular(path)
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


def write_new(path: str, data: bytes, mode: int = 0o644) -> None:
    """Create path (it must not exist; a symlink there is not followed), write data, fsync.

    On any failure the partly written file is removed and OSError is raised."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, mode)
    try:
        write_all(fd, data)
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        try:
            os.unlink(path)
        except OSError:
            pass
        raise
    os.close(fd)


def fsync_dir(folder: str) -> None:
    """fsync a folder so a rename in it is durable (ignored where unsupported)."""
    try:
        dfd = os.open(folder, os.O_RDONLY | _CLOEXEC)
    except OSError:
        return
    try:
        os.fsync(dfd)
    except OSError:
        pass
    finally:
        os.close(dfd)


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
    exists and is a writable directory, and path is not a directory or other non-file."""
    folder = os.path.dirname(os.path.abspath(path))
    require_directory(option, folder, "folder ")
    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise ConfigError(f"{option}: {path!r}: {exc.strerror}") from None
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise ConfigError(f"{option}: {path!r} is {kind(st.st_mode)}")
    if not os.access(folder, os.W_OK | os.X_OK) or _pseudo_fs(folder):
        raise ConfigError(f"{option}: cannot write in {folder!r}: permission denied")


def _pseudo_fs(folder: str) -> bool:
    """True for /proc and /sys, where root's access() says yes but creating files fails."""
    real = os.path.realpath(folder)
    return any(real == p or real.startswith(p + "/") for p in ("/proc", "/sys"))
