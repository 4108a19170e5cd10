"""Reading /proc and /sys files under a sysroot, tolerant of everything odd.

Every read returns the text or None with a reason; nothing here raises for a missing, unreadable
or strange file.  What was read is kept raw so a later reader can re-parse what we misread.
"""

from __future__ import annotations

import glob
import os
from typing import Dict, List, Optional, Tuple

MAX_READ = 256 * 1024


class Reader:
    def __init__(self, root: str = "/"):
        self.root = root or "/"
        self.raw: Dict[str, str] = {}
        self.unknown: Dict[str, str] = {}

    def path(self, rel: str) -> str:
        return os.path.join(self.root, rel.lstrip("/"))

    def read(self, rel: str, keep: bool = True) -> Tuple[Optional[str], str]:
        """(text, "") or (None, reason). Opens non-blocking so a FIFO cannot hang us."""
        full = self.path(rel)
        try:
            fd = os.open(full, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
            try:
                data = os.read(fd, MAX_READ)
            finally:
                os.close(fd)
        except FileNotFoundError:
            return None, "absent"
        except PermissionError:
            return None, "permission denied"
        except IsADirectoryError:
            return None, "is a directory"
        except OSError as exc:
            return None, exc.strerror or str(exc)
        text = data.decode("utf-8", "replace")
        if keep:
            self.raw["/" + rel.lstrip("/")] = text
        return text, ""

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


def first_line(text: Optional[str]) -> Optional[str]:
    if text is None:
        return None
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""


def to_int(text: Optional[str]) -> Optional[int]:
    line = first_line(text)
    if not line:
        return None
    try:
        return int(float(line.split()[0]))
    except (ValueError, IndexError):
        return None


def to_number(text: Optional[str]) -> Optional[float]:
    line = first_line(text)
    if not line:
        return None
    try:
        return float(line.split()[0])
    except (ValueError, IndexError):
        return None


def key_values(text: Optional[str], sep: str = ":") -> Dict[str, str]:
    """'key: value' lines into a dict (first occurrence wins, values stripped)."""
    out: Dict[str, str] = {}
    for line in (text or "").splitlines():
        if sep in line:
            k, v = line.split(sep, 1)
            out.setdefault(k.strip(), v.strip())
    return out
