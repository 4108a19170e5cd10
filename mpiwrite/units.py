"""Size, time and rate syntax.

Sizes: ``4k``, ``1M``, ``1MiB``, ``2G`` are binary (2**10...); ``1kB``, ``1MB``, ``1GB`` are
decimal (10**3...); a bare number is bytes.  Times: ``30``, ``30s``, ``500ms``, ``5min``, ``1h``;
a bare ``m`` is refused as ambiguous (IOR and fio users read ``-t 1m`` as a 1 MiB transfer).
Rates are printed in MB/s = 10**6 bytes per second, as lmdd and the original study did.
"""

from __future__ import annotations

import math
import re

_BINARY = {"": 1, "b": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40, "p": 2**50}
_DECIMAL = {"kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12, "pb": 10**15}
_IEC = {"kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40, "pib": 2**50}

# ASCII digits only: '١٢M' or '１M' are not sizes.
_SIZE_RE = re.compile(r"^\s*([0-9]{1,30}(?:\.[0-9]{1,30})?)\s*([A-Za-z]*)\s*\Z", re.ASCII)
_TIME_RE = re.compile(r"^\s*([0-9]{1,30}(?:\.[0-9]{1,30})?)\s*(ms|s|m|min|h)?\s*\Z",
                      re.IGNORECASE | re.ASCII)
_TIME_UNITS = {None: 1.0, "s": 1.0, "ms": 1e-3, "min": 60.0, "h": 3600.0}

MB = 10**6  # the unit of every stored rate (MB/s), lmdd's
MiB = 2**20  # IOR's MiB/s, on request (--units MiB)
RATE_UNITS = {"MB": MB, "MiB": MiB}  # bytes per unit, for --units
MAX_BYTES = 2**62  # fits a C long and a float64 exactly enough; far beyond any file
MAX_SECONDS = 366 * 86400.0  # a year: longer than any batch job; fits every timer


def shown(text) -> str:
    """An input echoed in a message: quoted, and cut when it is long."""
    s = str(text)
    return repr(s if len(s) <= 40 else s[:37] + "...")


def parse_size(text: str) -> int:
    """Parse a size into bytes; raises ValueError with what is expected."""
    m = _SIZE_RE.match(str(text))
    if not m:
        raise ValueError(f"{shown(text)} is not a size (expected e.g. 4k, 1M, 1MiB, 1MB, 2G)")
    number, suffix = m.group(1), m.group(2)
    low = suffix.lower()
    if low in _IEC:
        mult = _IEC[low]
    elif low in _DECIMAL and suffix not in ("Mb", "Gb", "Tb", "Pb"):
        mult = _DECIMAL[low]
    elif low in _BINARY:
        mult = _BINARY[low]
    else:
        raise ValueError(f"{shown(text)} has an unknown unit {suffix!r} "
                         "(expected k, M, G, MiB, MB, ...)")
    if "." in number:
        whole, frac = number.split(".")
        value = int(whole) * mult + int(frac) * mult // 10 ** len(frac)
        exact = (int(frac) * mult) % 10 ** len(frac) == 0
    else:
        value, exact = int(number) * mult, True
    if not exact:
        raise ValueError(f"{shown(text)} is not a whole number of bytes")
    if value > MAX_BYTES:
        raise ValueError(f"{shown(text)} is too large (at most {MAX_BYTES // 2**50} PiB)")
    return int(value)


def parse_time(text: str) -> float:
    """Parse a duration into seconds; raises ValueError with what is expected."""
    m = _TIME_RE.match(str(text))
    if not m:
        raise ValueError(f"{shown(text)} is not a duration (expected e.g. 30, 30s, 500ms, 5min, "
                         "1h)")
    unit = m.group(2).lower() if m.group(2) else None
    if unit == "m":
        raise ValueError(f"{shown(text)} is ambiguous: 'm' could be minutes or (for IOR and fio "
                         f"users) mebibytes; write {m.group(1)}min or seconds such as "
                         f"{float(m.group(1)) * 60:g}s")
    seconds = float(m.group(1)) * _TIME_UNITS[unit]
    if not seconds <= MAX_SECONDS:
        raise ValueError(f"{shown(text)} is too long (at most {MAX_SECONDS / 86400:.0f} days)")
    return seconds


def format_size(nbytes: float) -> str:
    """Binary size for humans: 1MiB, 256KiB, 1.5GiB, 17B."""
    for unit, mult in (("PiB", 2**50), ("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20),
                       ("KiB", 2**10)):
        if nbytes >= mult:
            value = nbytes / mult
            return f"{value:.0f}{unit}" if value == int(value) else f"{value:.2f}{unit}"
    return f"{int(nbytes)}B"


def mbps(nbytes: float, seconds: float) -> float:
    """MB/s (10**6 B/s); NaN when no time elapsed."""
    return nbytes / seconds / MB if seconds > 0 else float("nan")


def format_seconds(seconds: float) -> str:
    if seconds != seconds:  # NaN
        return "-"
    if seconds >= 3600:
        return f"{int(seconds // 3600)}h{int(seconds % 3600 // 60):02d}m"
    if seconds >= 60:
        return f"{int(seconds // 60)}m{int(seconds % 60):02d}s"
    return f"{seconds:.2f}s" if seconds < 10 else f"{seconds:.1f}s"


def format_number(x, digits: int = 1) -> str:
    """A figure with `digits` decimals; '-' for a missing one (None or NaN)."""
    return "-" if x is None or x != x else f"{x:.{digits}f}"


def plural(n: int, word: str) -> str:
    """1 node, 2 nodes; 1 more repetition, 2 more repetitions."""
    return f"{n} {word}{'s' * (n != 1)}"


def finite(value, most: float = 1e18):
    """A number read from a record (untrusted JSON) as a float: None unless it is an int or
    float (not a bool), finite, and at most `most` in size (a 400-digit integer would
    overflow where it is shown or summed)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        x = float(value)
    except OverflowError:
        return None
    return x if math.isfinite(x) and abs(x) <= most else None
