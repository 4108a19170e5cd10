"""Reading /proc and /sys files under a sysroot, tolerant of everything odd.

Every read returns the text or None with a reason; nothing here raises for a missing, unreadable
or strange file.  What was read is kept raw so a later reader can re-parse what we misread.

A sysroot is someone else's tree: every path is resolved and refused when it leaves the sysroot
(a symlink to /etc/shadow is not read; the real `/` is exempt), only regular files are read
(never FIFOs, devices or sockets, and without blocking), and at most MAX_READ bytes of each.
Numbers that do not fit (inf, 20 digits) are unknown, not errors.
"""

from __future__ import annotations

import errno
import glob
import math
import os
import stat
from typing import Dict, List, Optional, Tuple

from mpiwrite import errors
from mpiwrite.files import require_directory
from mpiwrite.units import MiB

MAX_READ = 256 * 1024
MAX_LIST = 8 * MiB  # a package database (dpkg status) read to find one package, not kept
MAX_INT = 2**62
_FLAGS = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0)


def check(path: str) -> str:
    """The sysroot's real path; ConfigError (exit 2) unless it is an existing directory."""
    require_directory("--sysroot (or MPIWRITE_SYSROOT)", path)
    return os.path.realpath(path)


class Reader:
    def __init__(self, root: str = "/"):
        self.root = root or "/"
        self.real = os.path.realpath(self.root)
        self.raw: Dict[str, str] = {}
        self.unknown: Dict[str, str] = {}

    def path(self, rel: str) -> str:
        return os.path.join(self.root, rel.lstrip("/"))

    def resolve(self, rel: str) -> Tuple[Optional[str], str]:
        """(real path, "") of rel under the root, or (None, reason) when it leaves the root."""
        try:
            real = os.path.realpath(self.path(rel))
        except (OSError, ValueError) as exc:  # a NUL, a loop the resolver gave up on
            return None, f"cannot be resolved ({exc})"
        if self.real == "/" or real == self.real or real.startswith(self.real + os.sep):
            return real, ""
        return None, "leaves the sysroot (a symlink out of it), not read"

    def open_write(self, rel: str) -> Tuple[Optional[int], str]:
        """A descriptor open for writing (truncated) on the regular file `rel` names under
        the root, or (None, why).  Its links are resolved first, each inside the root; the
        resolved path is then walked folder by folder without following a link, so a link
        swapped in after the resolve is refused, not written through; and what is not a
        regular file (a FIFO, a socket, a device) is refused before it is opened, never
        waited on."""
        real, why = self.resolve(rel)
        if real is None:
            return None, why
        parts = [p for p in real.split(os.sep) if p]
        if not parts:
            return None, "is the root, not a file"
        folder = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            fd = os.open("/", folder)
        except OSError as exc:
            return None, f"cannot open / ({exc.strerror})"
        try:
            for name in parts[:-1]:
                nfd = os.open(name, folder, dir_fd=fd)
                os.close(fd)
                fd = nfd
            st = os.stat(parts[-1], dir_fd=fd, follow_symlinks=False)
            if not stat.S_ISREG(st.st_mode):
                return None, "not a regular file, not written"
            wfd = os.open(parts[-1], os.O_WRONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                          dir_fd=fd)
            try:
                now = os.fstat(wfd)
                if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino) or not stat.S_ISREG(
                        now.st_mode):
                    os.close(wfd)
                    return None, "changed while it was opened, not written"
                os.set_blocking(wfd, True)
            except OSError:
                os.close(wfd)
                raise
            if now.st_size:  # a plain file (a sysroot's); /proc/sys and sysfs take a write
                try:
                    os.ftruncate(wfd, 0)
                except OSError:
                    pass
            return wfd, ""
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                return None, "a link appeared on its path after it was resolved, not written"
            return None, exc.strerror or str(exc)
        finally:
            os.close(fd)

    def read(self, rel: str, keep: bool = True, limit: int = MAX_READ,
             tail: bool = False) -> Tuple[Optional[str], str]:
        """(text, "") or (None, reason).  Regular files only, opened non-blocking, at most
        `limit` bytes (MAX_READ; a package list may ask for up to MAX_LIST); with `tail`, the
        last `limit` bytes (a log that only grows)."""
        full, why = self.resolve(rel)
        if full is None:
            return None, why
        try:
            fd = os.open(full, _FLAGS)
            try:
                st = os.fstat(fd)
                if stat.S_ISDIR(st.st_mode):
                    return None, "is a directory"
                if not stat.S_ISREG(st.st_mode):
                    return None, "not a regular file, not read"
                os.set_blocking(fd, True)
                if tail and st.st_size > min(limit, MAX_LIST):
                    os.lseek(fd, st.st_size - min(limit, MAX_LIST), os.SEEK_SET)
                data = _read_upto(fd, min(limit, MAX_LIST))
            finally:
                os.close(fd)
        except FileNotFoundError:
            return None, "absent"
        except PermissionError:
            return None, "permission denied"
        except IsADirectoryError:
            return None, "is a directory"
        except OSError as exc:
            return None, errors.why(exc)
        text = data.decode("utf-8", "replace")
        if keep:
            self.raw["/" + rel.lstrip("/")] = text
        return text, ""

    def readlink(self, rel: str) -> Tuple[Optional[str], str]:
        """(target, "") of a symbolic link under the root, not followed (`/proc/PID/ns/mnt`
        reads `mnt:[4026531840]`), or (None, reason); its folder must not leave the root."""
        folder, why = self.resolve(os.path.dirname("/" + rel.strip("/")))
        if folder is None:
            return None, why
        try:
            target = os.readlink(os.path.join(folder, os.path.basename(rel.rstrip("/"))))
        except FileNotFoundError:
            return None, "absent"
        except PermissionError:
            return None, "permission denied"
        except OSError as exc:
            return None, errors.why(exc)  # EINVAL: not a link
        return target[:4096], ""

    def fact(self, key: str, rel: str) -> Optional[str]:
        """Read a file; on failure note `key` as unknown with the reason."""
        text, why = self.read(rel)
        if text is None:
            self.unknown[key] = f"{'/' + rel.lstrip('/')}: {why}"
        return text

    def glob(self, pattern: str) -> List[str]:
        """Relative paths (with a leading /) matching a pattern under the root."""
        base = self.path("")
        found = sorted(glob.glob(self.path(pattern)))
        return ["/" + os.path.relpath(p, base) for p in found]


def _read_upto(fd: int, limit: int) -> bytes:
    """Up to limit bytes (os.read returns at most one page of a /proc file per call)."""
    parts = []
    left = limit
    while left > 0:
        chunk = os.read(fd, min(left, MiB))
        if not chunk:
            break
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)


def first_line(text: Optional[str]) -> Optional[str]:
    if text is None:
        return None
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""


def to_int(text: Optional[str]) -> Optional[int]:
    """The first number of the first line as an int; None if absent, not finite or too big."""
    token = _token(text)
    if token is None:
        return None
    if token.isascii() and token.lstrip("+-").isdigit():
        value = int(token) if len(token) < 30 else MAX_INT + 1
        return value if abs(value) <= MAX_INT else None
    value = to_number(text)
    return int(value) if value is not None else None


def to_number(text: Optional[str]) -> Optional[float]:
    """The first number of the first line; None if absent, inf, NaN or beyond 2**62."""
    token = _token(text)
    if token is None or not token.isascii():  # float() would take '١٢' as 12
        return None
    try:
        value = float(token)
    except ValueError:
        return None
    return value if math.isfinite(value) and abs(value) <= MAX_INT else None


def _token(text: Optional[str]) -> Optional[str]:
    line = first_line(text)
    return line.split()[0] if line else None


def key_values(text: Optional[str], sep: str = ":") -> Dict[str, str]:
    """'key: value' lines into a dict (first occurrence wins, values stripped)."""
    out: Dict[str, str] = {}
    for line in (text or "").splitlines():
        if sep in line:
            k, v = line.split(sep, 1)
            out.setdefault(k.strip(), v.strip())
    return out
