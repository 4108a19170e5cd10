"""Text that came from outside (environment, files, records, other users) made safe to show.

Two operations, used everywhere such text is stored or printed:
- clean(): for facts we store (MPI library strings, file contents): NULs dropped, surrounding
  whitespace stripped, other control characters escaped.  HDF5 variable-length strings cannot
  hold NULs (Open MPI's library version string ends with one).
- printable(): for anything that reaches a terminal: every control character (C0, DEL, C1),
  and bytes that were not valid UTF-8, become visible escapes, so a crafted name cannot move
  the cursor, retitle the window or forge a line.
"""

from __future__ import annotations


def _escape_char(ch: str) -> str:
    code = ord(ch)
    if ch == "\n":
        return "\\n"
    if ch == "\t":
        return "\\t"
    if ch == "\r":
        return "\\r"
    if 0xDC80 <= code <= 0xDCFF:  # surrogateescape'd byte that was not UTF-8
        return f"\\x{code - 0xDC00:02x}"
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}"


def _unsafe(ch: str) -> bool:
    code = ord(ch)
    return code < 0x20 or 0x7F <= code <= 0x9F or 0xD800 <= code <= 0xDFFF


def printable(text) -> str:
    """`text` with every control character escaped (\\x1b, \\n, ...); other text unchanged."""
    s = text if isinstance(text, str) else str(text)
    if not any(_unsafe(c) for c in s):
        return s
    return "".join(_escape_char(c) if _unsafe(c) else c for c in s)


def clean(text) -> str:
    """A fact read from outside, fit to store: NULs dropped, trimmed, controls escaped."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "surrogateescape")
    s = str(text).replace("\x00", "").strip()
    return printable(s)


def world_ranks_of(values) -> str:
    """'3' or '3, 7 and 12' or '3, 7, 12 and 40 more' for messages."""
    vals = list(values)
    if len(vals) <= 4:
        return ", ".join(map(str, vals[:-1])) + (" and " if len(vals) > 1 else "") + str(vals[-1])
    return ", ".join(map(str, vals[:3])) + f" and {len(vals) - 3} more"
