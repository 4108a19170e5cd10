"""Text that came from outside (environment, files, records, other users) made safe to show.

Two operations, used everywhere such text is stored or printed:
- clean(): for facts we store (MPI library strings, file contents): NULs dropped, surrounding
  whitespace stripped, other control characters escaped.  HDF5 variable-length strings cannot
  hold NULs (Open MPI's library version string ends with one).
- printable(): for anything that reaches a terminal: every control character (C0, DEL, C1),
  and bytes that were not valid UTF-8, become visible escapes, so a crafted name cannot move
  the cursor, retitle the window or forge a line; so do the invisible characters that reorder
  or hide text (bidi controls, zero-width characters, line/paragraph separators, BOM): a name
  "run \u202egnp.exe" must not show as "run exe.png".
And two for rendered tables: csv_cell() (no formula for a spreadsheet) and markdown_cell().
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


# Invisible characters that reorder or hide what is shown: zero-width space/joiners and the
# LRM/RLM marks (U+200B-U+200F), line and paragraph separators and the bidi embeddings and
# overrides (U+2028-U+202E), the bidi isolates (U+2066-U+2069), the Arabic letter mark, the BOM.
_INVISIBLE = ((0x200B, 0x200F), (0x2028, 0x202E), (0x2066, 0x2069), (0x061C, 0x061C),
              (0xFEFF, 0xFEFF))


def _unsafe(ch: str) -> bool:
    code = ord(ch)
    if code < 0x20 or 0x7F <= code <= 0x9F or 0xD800 <= code <= 0xDFFF:
        return True
    return code >= 0x61C and any(lo <= code <= hi for lo, hi in _INVISIBLE)


def printable(text) -> str:
    """`text` with every control character escaped (\\x1b, \\n, ...); other text unchanged."""
    s = text if isinstance(text, str) else str(text)
    if not any(_unsafe(c) for c in s):
        return s
    return "".join(_escape_char(c) if _unsafe(c) else c for c in s)


def csv_cell(text) -> str:
    """A printable CSV cell that a spreadsheet will not run as a formula (OWASP's advice): a
    cell starting with = + - @, a tab or a carriage return gets a leading single quote."""
    s = printable(text)
    return "'" + s if s[:1] in ("=", "+", "-", "@", "\t", "\r") else s


# Markdown that could add a column, start code, emphasis, a link or raw HTML in a cell.
_MARKDOWN = str.maketrans({c: "\\" + c for c in "\\|`*_[]<>"})


def markdown_cell(text) -> str:
    """A markdown table cell: printable (a newline is the two characters \\n), and | ` * _
    [ ] < > backslash-escaped, so a value cannot add columns, links, code or HTML."""
    return printable(text).translate(_MARKDOWN)


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
