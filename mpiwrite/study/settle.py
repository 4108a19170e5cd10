"""Settling between a study's runs (`[study] settle`, docs/study.md "Settle").

A buffered run ends with its data still in the page cache; the kernel writes it back while the
next run writes, and that run is slower for it: the previous run's setting then moves the
figure as much as the run's own (docs/verdicts.md).  Before each run, one rank per node
settles:

- `writeback[:BOUND]`: flush the target's filesystem (syncfs on the target folder, or the
  nearest folder above it that exists), then wait until the node's Dirty + Writeback
  (/proc/meminfo) is at most DIRTY_LEFT, for at most BOUND (default 120 s);
- `sleep:DURATION`: wait;
- `drop-caches`: the writeback step, then drop the page cache, dentries and inodes
  (/proc/sys/vm/drop_caches: root only, checked before the first run);
- `none`.

The default is `writeback` when the runs are buffered (no fsync, no O_DIRECT) or a setting
acts on writeback or a cache (its name says so: CACHE_WORDS), else `none`.  Each node's
seconds and the dirty bytes it left are the run's record's notes; the largest are its tags
`settle_seconds` and `settle_dirty_bytes` (outcomes, never factors).  A bound reached is said
in the notes, not a failure: the run goes on, and its record shows what was left.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import threading
import time
from typing import Any, Dict, NamedTuple, Optional, Sequence

MODES = ("writeback", "sleep", "drop-caches", "none")
BOUND = 120.0  # seconds a writeback settle waits at most, unless told
DIRTY_LEFT = 16 << 20  # bytes of Dirty + Writeback a settled node may still have
NAP = 0.05
MEMINFO = "/proc/meminfo"
DROP_CACHES = "/proc/sys/vm/drop_caches"
# a setting whose name holds one of these acts on writeback or a client cache
CACHE_WORDS = ("dirty", "writeback", "write-behind", "write_behind", "cache", "oc_max",
               "flush", "expire", "readahead", "read-ahead", "sync")


class Settle(NamedTuple):
    mode: str  # one of MODES
    seconds: float = BOUND  # the bound (writeback, drop-caches) or the sleep

    def text(self) -> str:
        """As the file may write it, and parse() reads back (never 1e-05s)."""
        how = f"{self.seconds:.3f}".rstrip("0").rstrip(".") + "s"
        if self.mode == "sleep":
            return f"sleep:{how}"
        if self.mode in ("writeback", "drop-caches") and self.seconds != BOUND:
            return f"{self.mode}:{how}"
        return self.mode


def parse(text: Any) -> Settle:
    """`settle`'s value; ValueError saying what is wrong."""
    from mpiwrite.units import parse_time

    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"must be one of {', '.join(MODES)} (writeback:BOUND and "
                         "sleep:DURATION take a duration)")
    mode, sep, rest = text.strip().partition(":")
    if mode not in MODES:
        raise ValueError(f"{text!r}: must be one of {', '.join(MODES)}")
    if mode == "none":
        if sep:
            raise ValueError("none takes no duration")
        return Settle("none")
    if mode == "sleep" and not sep:
        raise ValueError("sleep needs a duration: sleep:10s")
    seconds = BOUND
    if sep:
        try:
            seconds = float(parse_time(rest))
        except (ValueError, TypeError) as exc:
            raise ValueError(f"{text!r}: {exc}") from None
        if not 0.01 <= seconds <= 3600:
            raise ValueError(f"{text!r}: the duration must be 10 ms to 1 hour")
    return Settle(mode, seconds)


def default(setting_names: Sequence[str], buffered: bool) -> Settle:
    """writeback for buffered runs or a setting that acts on writeback or a cache."""
    cache = any(w in name.lower() for name in setting_names for w in CACHE_WORDS)
    return Settle("writeback") if buffered or cache else Settle("none")


def buffered(cfg: Any) -> bool:
    """Whether a run's data may still be in the page cache when it ends."""
    return not getattr(cfg, "fsync", True) and not getattr(cfg, "direct", False)


def dirty_bytes(path: str = MEMINFO) -> Optional[int]:
    """Dirty + Writeback of this node, in bytes (None: not readable)."""
    try:
        with open(path, "rb") as fh:
            text = fh.read(1 << 16).decode("ascii", "replace")
    except OSError:
        return None
    total, seen = 0, 0
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if name in ("Dirty", "Writeback"):
            parts = value.split()
            if parts and parts[0].isdigit():
                total += int(parts[0]) * 1024
                seen += 1
    return total if seen else None


def _syncfs(folder: str, bound: float) -> str:
    """syncfs on the filesystem of `folder` (or the nearest folder above it that exists),
    in a thread so that a hung filesystem costs at most `bound`: '' or what went wrong."""
    path = os.path.abspath(folder)
    while not os.path.isdir(path) and path != os.path.dirname(path):
        path = os.path.dirname(path)
    result: Dict[str, str] = {}

    def work() -> None:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except OSError as exc:
            result["error"] = f"cannot open {path}: {exc.strerror}"
            return
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
            if libc.syncfs(fd) != 0:
                result["error"] = f"syncfs {path}: {os.strerror(ctypes.get_errno())}"
        except (AttributeError, OSError):
            os.sync()
        finally:
            os.close(fd)

    t = threading.Thread(target=work, name="mpiwrite-settle", daemon=True)
    t.start()
    t.join(bound)
    if t.is_alive():
        return f"syncfs {path} still running after {bound:g} s"
    return result.get("error", "")


def settle(spec: Settle, target: str) -> Dict[str, Any]:
    """One node's settle before a run: {mode, seconds, dirty_bytes, note}."""
    t0 = time.monotonic()
    note = ""
    if spec.mode == "sleep":
        time.sleep(spec.seconds)
    elif spec.mode in ("writeback", "drop-caches"):
        end = t0 + spec.seconds
        problem = _syncfs(target, spec.seconds)
        if problem:
            note = problem
        while not note:
            left = dirty_bytes()
            if left is None or left <= DIRTY_LEFT:
                break
            if time.monotonic() >= end:
                note = f"the {spec.seconds:g} s bound reached"
                break
            time.sleep(NAP)
        if spec.mode == "drop-caches" and not note:
            try:
                with open(DROP_CACHES, "w") as fh:
                    fh.write("3\n")
            except OSError as exc:
                note = f"cannot write {DROP_CACHES}: {exc.strerror}"
    left = dirty_bytes()
    return {"mode": spec.text(), "seconds": round(time.monotonic() - t0, 3),
            "dirty_bytes": left, "note": note}


def refusal(spec: Settle) -> str:
    """What makes a settle impossible here, before any run ('' when nothing)."""
    if spec.mode == "drop-caches" and os.geteuid() != 0:
        return (f"settle = \"drop-caches\" writes {DROP_CACHES}, which needs root; "
                "\"writeback\" waits for the page cache to be written back instead")
    return ""


def for_study(text: str, setting_names: Sequence[str], configs: Sequence[Any]) -> Settle:
    """The settle a study runs with: its file's, or the default for its runs and settings."""
    if text:
        return parse(text)
    return default(setting_names, any(buffered(c) for c in configs))
