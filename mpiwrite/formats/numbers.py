"""Numbers from another tool's output, checked where they enter an import (docs/import.md).

A tool's file is untrusted input: where a count or a rate belongs it may hold text, a list,
`true`, NaN, an infinity, thousands of digits (Python's int() refuses more than 4300), or a
finite number no measurement gives (a rate of 10^307 MB/s, which then breaks every report's
statistics).  Every importer takes the numbers it uses through `number()`, which gives an int
or float within the range of its `Kind`, or raises ImportRefused: one line naming the file and
the field, exit 2.  JSON is parsed here too (`parse_json`): nesting bounded, no NaN or infinity
anywhere in it.  `agrees()` checks a printed rate against the amount and time printed beside it.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from typing import Any, Tuple

from mpiwrite.errors import ConfigError
from mpiwrite.text import printable

MAX_BYTES = 2**63 - 1  # the record's byte columns are int64
MAX_RANKS = 10**7
MAX_MB_PER_S = 1e9  # 1 PB/s: beyond every storage system measured, by a factor of 100
MAX_SECONDS = 1e9  # about 31 years
MAX_DIGITS = 40  # characters of a number written as text (2^63 has 19 digits)
MAX_JSON_DEPTH = 32  # IOR's and fio's JSON are 6 levels deep
LAST_EPOCH = 253402300799  # 9999-12-31T23:59:59Z: the last time a record's ISO text can say
MIB_PER_MB = 1e6 / 2**20
MIN_MB_PER_S = 1e-6  # 1 byte a second: a positive rate below it is no measurement


class ImportRefused(ConfigError):
    """A file that is not what it claims: one line naming the file and why (exit 2)."""


def refuse(path: str, why: str) -> ImportRefused:
    return ImportRefused(f"{printable(path)}: {printable(why)}")


@dataclasses.dataclass(frozen=True)
class Kind:
    """What a number must be: its range, whether whole, and how a refusal says it."""
    lo: float
    hi: float
    whole: bool
    words: str


BYTES = Kind(0, MAX_BYTES, True, "a size in bytes (0 to 2^63 - 1)")
KIB = Kind(0, MAX_BYTES / 1024, False, "a size in KiB (at most 2^63 bytes)")
MB_AMOUNT = Kind(0, MAX_BYTES / 1e6, False, "an amount in MB (at most 2^63 bytes)")
COUNT = Kind(0, MAX_BYTES, True, "a count (0 to 2^63 - 1)")
INDEX = Kind(0, 10**9, True, "an index (0 to 10^9)")
RANKS = Kind(1, MAX_RANKS, True, "a count of processes (1 to 10^7)")
NODES = Kind(0, MAX_RANKS, True, "a count of nodes (0 to 10^7)")
RATE = Kind(0, MAX_MB_PER_S, False, "a rate (0 to 10^9 MB/s)")
RATE_MIB = Kind(0, MAX_MB_PER_S * MIB_PER_MB, False, "a rate (0 to 10^9 MB/s)")
SECONDS = Kind(0, MAX_SECONDS, False, "a duration in seconds (0 to 10^9)")
MS = Kind(0, MAX_SECONDS * 1e3, False, "a duration in ms (0 to 10^12)")
EPOCH = Kind(0, LAST_EPOCH, False, "a time in seconds since 1970 (before the year 10000)")

_DECIMAL = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_WHOLE = re.compile(r"\+?\d+")


def shown(value: Any, width: int = 40) -> str:
    """A value as a refusal shows it: printable, and at most about `width` characters."""
    if isinstance(value, float):
        text = f"{value:.6g}"
    elif isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**21:
        text = f"{float(value):.4g}"
    else:
        text = repr(value) if isinstance(value, str) else json.dumps(value, default=str)[:200]
    text = printable(text)
    return text if len(text) <= width else f"{text[:width - 16]}... ({len(text)} characters)"


def number(value: Any, kind: Kind, path: str, field: str):
    """`value` as an int (a whole `kind`) or float within kind's range: from JSON an int or a
    float (not a bool), from text a decimal of at most MAX_DIGITS characters; ImportRefused
    naming the file and `field` otherwise."""
    x = value
    if isinstance(value, str):
        text = value.strip()
        if len(text) <= MAX_DIGITS and (_WHOLE if kind.whole else _DECIMAL).fullmatch(text):
            x = int(text) if kind.whole else float(text)
    if isinstance(x, bool) or not isinstance(x, (int, float)) or (
            isinstance(x, float) and not (math.isfinite(x) and (x.is_integer() or
                                                                 not kind.whole))) or \
            not kind.lo <= x <= kind.hi:
        raise refuse(path, f"{field} is {shown(value)}: not {kind.words}")
    if kind in (RATE, RATE_MIB) and 0 < x < MIN_MB_PER_S:  # 1e-320: a subnormal, no rate
        raise refuse(path, f"{field} is {shown(value)}: below 1 byte a second, not a rate")
    return int(x) if kind.whole else float(x)


def digits(text: str, kind: Kind, path: str, field: str) -> str:
    """The leading digits of `text` ('64K' -> '64'), checked as a number of `kind`: before a
    size with a suffix is computed from them."""
    lead = re.match(r"\s*(\d*)", text).group(1)
    if lead:
        number(lead, kind, path, field)
    return lead


def obj(value: Any, path: str, field: str, default=None) -> Any:
    """A JSON object (dict) where one belongs, `default` for null/absent."""
    if value is None:
        return default
    if not isinstance(value, dict):
        raise refuse(path, f"{field} is {shown(value)}: not an object")
    return value


def parse_json(text: str, path: str, raw: bool = False) -> Tuple[Any, int]:
    """(the value, where it ends) of JSON text (`raw`: text may follow it).  ValueError, as json
    raises it, when the text is not JSON; ImportRefused when it is nested more than
    MAX_JSON_DEPTH deep or holds NaN or an infinity (no tool prints those tokens: C's printf
    writes nan and inf, which are not JSON; 1e400 parses as an infinity)."""
    def pairs(items):
        obj = {}
        for k, v in items:
            if k in obj:  # which one a tool meant cannot be told: json takes the last
                raise refuse(path, f"JSON key {shown(k)} given twice in one object: "
                             "ambiguous")
            obj[k] = v
        return obj

    start = 1 if text.startswith("\ufeff") else 0  # a UTF-8 byte order mark: not the JSON's
    start += len(text[start:]) - len(text[start:].lstrip(" \t\n\r"))  # as json.loads skips
    try:
        doc, end = json.JSONDecoder(object_pairs_hook=pairs).raw_decode(text, start)
        if not raw and text[end:].strip():
            raise ValueError(f"Extra data: line 1 column {end + 1} (char {end})")
    except RecursionError:
        raise refuse(path, f"JSON nested more than {MAX_JSON_DEPTH} levels deep: no tool's "
                     "output is") from None
    stack = [(doc, 1, None)] if isinstance(doc, (dict, list)) else []
    while stack:  # where: (its parent's where, its key), made into text only for a refusal
        value, depth, where = stack.pop()
        if depth > MAX_JSON_DEPTH:
            raise refuse(path, f"JSON nested more than {MAX_JSON_DEPTH} levels deep (at "
                         f"{_where(where)}): no tool's output is")
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, item in items:
            if isinstance(item, (dict, list)):
                stack.append((item, depth + 1, (where, key)))
            elif isinstance(item, float) and not math.isfinite(item):
                raise refuse(path, f"{_where((where, key))} is {item}: not a finite number")
    return doc, end


def _where(where) -> str:
    """'jobs[0].write.io_bytes' from the chain (((None, 'jobs'), 0), 'write'), 'io_bytes')."""
    keys = []
    while where is not None:
        where, key = where
        keys.append(key)
    text = "".join(f"[{k}]" if isinstance(k, int) else f".{k}" for k in reversed(keys))
    text = text[1:] if text.startswith(".") else text
    return text if len(text) <= 80 else f"{text[:40]}...{text[-32:]}"


def half_unit(text: str) -> float:
    """Half a unit in the last digit of a number as printed: '2553.6032' -> 0.00005."""
    mantissa, _e, exponent = text.strip().lower().partition("e")
    decimals = len(mantissa.partition(".")[2])
    return 0.5 * 10.0 ** ((int(exponent) if exponent else 0) - decimals)


def agrees(rate: str, amount: str, seconds: str, scale: float = 1.0,
           slack: float = 1e-6) -> bool:
    """Whether `rate` x `scale` (as printed) is `amount` / `seconds` (as printed), within the
    rounding of the digits printed and a relative `slack`."""
    r, a, s = float(rate) * scale, float(amount), float(seconds)
    dr, da, ds = half_unit(rate) * scale, half_unit(amount), half_unit(seconds)
    lo = (a - da) / (s + ds)
    hi = (a + da) / (s - ds) if s > ds else math.inf
    return lo * (1 - slack) - dr <= r <= hi * (1 + slack) + dr
