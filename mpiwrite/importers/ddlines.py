"""lmdd's and GNU dd's summary lines as imported tests (docs/import.md).

Each summary line is one run of one process (one rank, one node, one iteration):
- lmdd (lmbench): `X MB in Y secs, Z MB/sec`, MB = 10^6 bytes, X printed to 10^-4 MB;
- GNU dd: `N bytes (...) copied, S s, R MB/s` after `a+b records in/out`; N is exact, the
  rate is N / S (S as dd printed it).
Neither prints its command: `--command` gives it (bs, count, fsync=1 / conv=fsync, oflag=direct
are read from it), and a line whose bytes are not the command's bs x count is refused (the
file holds runs of another command).  Without `--command` the durability is unknown.
"""

from __future__ import annotations

import re
import shlex
from typing import Dict, List, Optional

from mpiwrite.formats.numbers import (
    BYTES,
    COUNT,
    MAX_BYTES,
    MB_AMOUNT,
    RATE,
    SECONDS,
    agrees,
    digits,
    number,
    shown,
)
from mpiwrite.importers.base import UNKNOWN, Phase, Source, Test, refuse
from mpiwrite.text import printable
from mpiwrite.units import MB, format_size

LMDD_LINE = re.compile(r"^\s*(\d+(?:\.\d+)?) MB in (\d+(?:\.\d+)?) secs, "
                       r"(\d+(?:\.\d+)?) MB/sec\s*$")
DD_LINE = re.compile(r"^(\d+) bytes? (?:\([^)]*\) )?copied, (\d+(?:\.\d+)?(?:e[-+]?\d+)?) s, "
                     r"(\S+) ?(\S*B/s)$")
DD_RECORDS = re.compile(r"^(\d+)\+(\d+) records (in|out)$")
_DD_MULT = {"c": 1, "w": 2, "b": 512, "kB": 1000, "K": 1024, "k": 1024, "KiB": 1024}
for _i, _p in enumerate("MGTPEZY", start=2):
    _DD_MULT.update({f"{_p}B": 1000 ** _i, _p: 1024 ** _i, f"{_p}iB": 1024 ** _i})


def dd_size(text: str) -> Optional[int]:
    """GNU dd's N with its suffix (K=1024, kB=1000, M=2^20, MB=10^6, ...), or None."""
    m = re.fullmatch(r"(\d+)([A-Za-z]*)", text.strip())
    if not m or (m.group(2) and m.group(2) not in _DD_MULT):
        return None
    return int(m.group(1)) * _DD_MULT.get(m.group(2), 1)


def lmdd_size(text: str) -> Optional[int]:
    """lmdd's N with its suffix: k, m, g binary; K, M, G decimal (lmbench's lmdd.c)."""
    m = re.fullmatch(r"(\d+)([kKmMgG]?)", text.strip())
    if not m:
        return None
    mult = {"": 1, "k": 2**10, "K": 10**3, "m": 2**20, "M": 10**6, "g": 2**30, "G": 10**9}
    return int(m.group(1)) * mult[m.group(2)]


def _operands(command: str) -> Dict[str, str]:
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    return dict(w.split("=", 1) for w in words if "=" in w and not w.startswith("-"))


def _durability(test: Test, ops: Dict[str, str], tool: str) -> None:
    p = test.params
    if tool == "lmdd":
        p["fsync"] = ops.get("fsync", "0") not in ("0", "")
        p["direct"] = ops.get("direct", "0") not in ("0", "")
        test.derived["params.fsync"] = "from --command: fsync=1 (lmdd's default: none)"
    else:
        conv = set(ops.get("conv", "").split(","))
        oflag = set(ops.get("oflag", "").split(","))
        p["fsync"] = bool(conv & {"fsync", "fdatasync"})
        p["direct"] = "direct" in oflag
        if oflag & {"sync", "dsync"}:
            p["fsync"], p["fsync_every"] = True, 1
            test.notes.append("oflag=sync/dsync: every write was synchronous")
        test.derived["params.fsync"] = ("from --command: conv=fsync|fdatasync, oflag=sync|dsync "
                                        "(dd's default: none)")
    test.derived["params.direct"] = "from --command (oflag=direct for dd, direct=1 for lmdd)"


def _expected(ops: Dict[str, str], tool: str) -> Optional[int]:
    size = lmdd_size if tool == "lmdd" else dd_size
    bs = size(ops.get("obs") or ops.get("bs") or "")
    count = ops.get("count")
    if bs and count and count.isdigit():
        return bs * int(count)
    return None


def _time_limit(ops: Dict[str, str], tool: str, src: Source) -> Optional[float]:
    """lmdd's `time=N` (seconds), or None: the command gave no time limit."""
    if tool != "lmdd" or "time" not in ops:
        return None
    text = ops["time"]
    if not re.fullmatch(r"\d{1,9}(?:\.\d{1,9})?", text) or float(text) <= 0:
        raise refuse(src.path, f"--command: time={shown(text)} is not a number of seconds")
    return float(text)


def _test(index: int, tool: str, version: str, nbytes: int, rate: float, command: str,
          src: Source, original: Dict[str, str], exact_bytes: bool) -> Test:
    test = Test(index=index, label=f"line {original['line']}", tool=tool, tool_version=version,
                fmt=tool, ranks=1, nodes=1, command=command,
                command_source="--command" if command else UNKNOWN)
    test.write = Phase(bytes=[nbytes], MB_per_s=[rate])
    test.original.append(original)
    ops = _operands(command) if command else {}
    for key in ("bs", "obs", "count"):  # before int() meets 5000 digits
        if key in ops:
            digits(ops[key], COUNT, src.path, f"--command: {key}=")
    size = lmdd_size if tool == "lmdd" else dd_size
    bs = size(ops.get("obs") or ops.get("bs") or "") if command else None
    if command:
        want = _expected(ops, tool)
        if want is not None and want > MAX_BYTES:
            raise refuse(src.path, f"--command: bs x count is {shown(want)} bytes: beyond "
                         "2^63 - 1, not this file's command")
        tolerance = 0 if tool == "dd" else 51  # lmdd prints MB to 4 decimals
        if want is not None and abs(want - nbytes) > tolerance:
            raise refuse(src.path, f"{test.label}: {nbytes} bytes, but --command says bs x "
                         f"count = {want}: the file holds runs of other commands (split it "
                         "and import each part with its own --command)")
        if want is not None:
            test.write.bytes = [want]
            exact_bytes = True
        _durability(test, ops, tool)
        test.params["target"] = ops.get("of", "")
        test.params["engine"] = tool
    else:
        test.unknown += ["params.fsync", "params.direct", "command_line"]
    if bs:
        test.params["block_size"] = bs
    elif original.get("records_out"):
        full = int(original["records_out"].split("+")[0])
        if full and nbytes % full == 0 and original["records_out"].endswith("+0"):
            test.params["block_size"] = nbytes // full
            test.derived["params.block_size"] = "bytes / full records out"
    limit = _time_limit(ops, tool, src)
    if limit is not None:  # lmdd's time=N: ended by alarm; the bytes are an outcome
        test.params["time_limit"] = limit
        test.derived["params.time_limit"] = "from --command: time= (lmdd stops by alarm)"
        test.unknown.append("params.size")
    else:  # what was asked for is what was written (bs x count, or as printed)
        test.params["size"] = test.write.bytes[0]
    test.params.update(iterations=1, layout="fpp")
    fsync = test.params.get("fsync")
    test.keys = {"layout": "fpp", "engine": tool,
                 "fsync": UNKNOWN if fsync is None else (
                     "every 1" if test.params.get("fsync_every") else ("on" if fsync else "off")),
                 "direct": UNKNOWN if test.params.get("direct") is None else
                 ("on" if test.params["direct"] else "off"),
                 "block_size": format_size(test.params["block_size"])
                 if test.params.get("block_size") else UNKNOWN}
    test.exact += ["ranks (1 process)", "nodes (1)"] + (["bytes"] if exact_bytes else [])
    if not exact_bytes:
        test.derived["bytes"] = "lmdd's MB x 10^6, as printed (to 10^-4 MB)"
    test.unknown += ["start_time", "host", "tool_version" if not version else ""]
    test.unknown = [u for u in test.unknown if u]
    return test


def parse_lmdd(src: Source, command: str = "") -> List[Test]:
    out = []
    lines = src.text.splitlines()
    for lineno, ln in enumerate(lines, 1):
        m = LMDD_LINE.match(ln)
        if not m:
            if ln.strip():
                raise refuse(src.path, f"line {lineno}: {printable(ln[:80])!r} is not an lmdd "
                             "summary line (`X MB in Y secs, Z MB/sec`)")
            continue
        where = f"line {lineno}"
        mb = number(m.group(1), MB_AMOUNT, src.path, f"{where}: MB")
        secs = number(m.group(2), SECONDS, src.path, f"{where}: secs")
        rate = number(m.group(3), RATE, src.path, f"{where}: MB/sec")
        if secs <= 0:
            raise refuse(src.path, f"{where}: {secs} seconds")
        if not agrees(m.group(3), m.group(1), m.group(2)):
            raise refuse(src.path, f"{where}: {m.group(3)} MB/sec is not {m.group(1)} MB / "
                         f"{m.group(2)} secs: the line contradicts itself")
        t = _test(len(out), "lmdd", "", round(mb * MB), rate, command, src,
                  {"line": str(lineno), "text": ln.strip()}, exact_bytes=False)
        t.derived["aggregate_MB_per_s"] = "lmdd's MB/sec as printed (MB = 10^6 B)"
        out.append(t)
    if not out:
        raise refuse(src.path, "no lmdd summary line (`X MB in Y secs, Z MB/sec`)")
    return time_limited(out, [float(LMDD_LINE.match(t.original[0]["text"]).group(2))
                              for t in out], command)


SAME_SECONDS = 1e-3  # relative: lines whose seconds agree this closely ran for one time


def time_limited(tests: List[Test], seconds: List[float], command: str) -> List[Test]:
    """A file of lines that all ran the same seconds while their bytes vary was time-limited
    (lmdd's time=N; dd under `timeout -s INT N`): its bytes are the outcome, not a setting.
    Without a --command that says so, each line is given the time limit, inferred, and no
    size.  A single line, or bytes that agree, says nothing."""
    if command and _operands(command).get("time"):
        return tests
    if len(tests) < 2 or any(t.params.get("time_limit") for t in tests):
        return tests
    lo, hi = min(seconds), max(seconds)
    sizes = [t.write.bytes[0] for t in tests]
    if lo <= 0 or (hi - lo) > SAME_SECONDS * lo or max(sizes) <= min(sizes) * (1 + SAME_SECONDS):
        return tests
    limit = round(sum(seconds) / len(seconds), 4)
    for t in tests:
        t.params.pop("size", None)
        t.params["time_limit"] = limit
        t.derived["params.time_limit"] = (
            f"inferred: every line of the file ran {limit:g} s while the bytes vary from "
            f"{format_size(min(sizes))} to {format_size(max(sizes))}: a time limit (lmdd's "
            "time=), the bytes the outcome")
        if "params.size" not in t.unknown:
            t.unknown.append("params.size")
    return tests


def _dd_rate_agrees(m: re.Match, path: str, where: str) -> None:
    """dd's rate (rounded to 2 or 3 digits, 10^3-based units) must be its bytes / seconds."""
    rate, unit = m.group(3), m.group(4)
    scale = _DD_MULT.get(unit[:-2], 1 if unit == "B/s" else None)
    if scale is None or not _RATE_TEXT.fullmatch(rate):
        raise refuse(path, f"{where}: the rate {shown(rate + ' ' + unit)} is not a rate in B/s")
    if not agrees(rate, m.group(1), m.group(2), scale=scale, slack=0.01):
        raise refuse(path, f"{where}: {rate} {unit} is not {m.group(1)} bytes / {m.group(2)} s: "
                     "the line contradicts itself")


_RATE_TEXT = re.compile(r"\d{1,20}(?:\.\d{1,20})?")


def parse_dd(src: Source, command: str = "") -> List[Test]:
    out = []
    records: Dict[str, str] = {}
    for lineno, raw in enumerate(src.text.replace("\r", "\n").splitlines(), 1):
        ln = raw.strip()
        where = f"line {lineno}"
        r = DD_RECORDS.match(ln)
        if r:
            full, part = (number(x, COUNT, src.path, f"{where}: records {r.group(3)}")
                          for x in r.group(1, 2))
            records[r.group(3)] = f"{full}+{part}"
            continue
        m = DD_LINE.match(ln)
        if m:
            nbytes = number(m.group(1), BYTES, src.path, f"{where}: bytes")
            secs = number(m.group(2), SECONDS, src.path, f"{where}: s")
            if secs <= 0:
                raise refuse(src.path, f"{where}: {secs} seconds")
            if "out" not in records:
                continue  # a status=progress line: the summary comes after `records out`
            _dd_rate_agrees(m, src.path, where)
            t = _test(len(out), "dd", "", nbytes, nbytes / secs / MB, command, src,
                      {"line": str(lineno), "text": ln, "records_in": records.get("in", ""),
                       "records_out": records["out"]}, exact_bytes=True)
            t.derived["aggregate_MB_per_s"] = ("bytes / seconds as dd printed them (its rate "
                                               "column is rounded)")
            if not records["out"].endswith("+0"):
                t.notes.append(f"dd wrote {records['out']} records: the last one partial")
            out.append(t)
            records = {}
            continue
        if ln.startswith("dd: "):
            raise refuse(src.path, f"line {lineno}: dd reported {printable(ln[:120])!r}: "
                         "nothing imported")
        if ln and not ln.startswith(("$", "#")) and not re.match(r"^\d+ bytes .* copied", ln):
            raise refuse(src.path, f"line {lineno}: {printable(ln[:80])!r} is not dd output")
    if records:
        raise refuse(src.path, "`records in/out` without a summary line after them: cut "
                     "short; nothing imported")
    if not out:
        raise refuse(src.path, "no dd summary line (`N bytes (...) copied, S s, R MB/s`)")
    return time_limited(out, [t.write.bytes[0] / (t.write.MB_per_s[0] * MB) for t in out],
                        command)
