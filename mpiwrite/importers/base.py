"""Other tools' results as mpiwrite records: what every importer shares (docs/import.md).

An importer (one module per tool in this folder, registered in registry.py) says whether a
text is its tool's output (`detect`) and turns the text of one file into `Test`s (`parse`):
one per test of IOR, per group of fio jobs, per summary line of lmdd or dd, per run of
mpiwrite's own `--json`.  This module reads the file (a regular file, bounded in size) and
builds the record of each test: its iterations hold the tool's figures converted to mpiwrite's
units; it has no per-rank rows on a timeline (none of these tools times each rank on a common
clock: IOR reports aggregates, and each rank's own times only in its per-rank CSV, which become
rank rows without a node or a time: `rank_rows`; fio per job, dd one process), no node rows
(nothing was observed on a node), and an `imported` attribute that says from what file (path,
sha256), by which tool and version, which figures are exact, which derived and which unknown,
and which facts the user stated.  Pure: no MPI, no command line.
"""

from __future__ import annotations

import dataclasses
import datetime
import errno
import hashlib
import json
import math
import os
import re
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from mpiwrite import __version__, files
from mpiwrite.errors import ConfigError, why
from mpiwrite.formats.numbers import (  # noqa: F401 (ImportRefused: the importers' error)
    MAX_BYTES,
    MAX_DIGITS,
    MAX_MB_PER_S,
    MAX_RANKS,
    ImportRefused,
    refuse,
    shown,
)
from mpiwrite.formats.summary import ITER_DTYPE
from mpiwrite.text import clean, printable
from mpiwrite.units import MB, MiB
from mpiwrite.vocab import keys as keytable
from mpiwrite.vocab.status import RunStatus

MAX_INPUT_BYTES = 64 * MiB  # larger files are refused before they are read
# The node facts every run has as keys; unknown unless the user states them (--fact).
FACT_KEYS = keytable.FACT_KEYS
# Keys the file decides (vocab/keys.py): a --fact may not state them.  (Not `mpi`: no tool's
# output names its MPI library, IOR's neither, so `--fact mpi=...` states it.)  DECIDED_KEYS:
# what an imported record states (formats/runkeys.py takes them from its `keys` attribute).
NOT_FACTS = keytable.FILE_DECIDES
DECIDED_KEYS = keytable.STATED
UNKNOWN = "unknown"
MIB_TO_MB = MiB / MB


@dataclasses.dataclass
class Phase:
    """One operation (write or read) over the test's repetitions: per iteration the bytes
    moved and the tool's rate in MB/s (10^6 B/s)."""
    bytes: List[int]
    MB_per_s: List[float]
    open_included: bool = False  # the tool's time starts at the open (IOR's bandwidth)


@dataclasses.dataclass
class RankTimes:
    """One phase of one iteration, rank by rank, as the tool timed each rank on its own clock
    (IOR's per-rank CSV): durations only, no time on a common clock."""
    bytes: List[int]
    seconds: List[float]  # the rank's time of the phase (IOR: its access, fsync included)


@dataclasses.dataclass
class Test:
    """One run as another tool reported it, in mpiwrite's terms."""
    index: int  # its place in the file: part of the run id
    label: str  # "test 0", "group 0 (jobs w)", "line 2": for messages
    tool: str
    tool_version: str
    fmt: str  # ior-json, ior-text, ior-csv, fio-json, elbencho-csv, elbencho-json,
    # io500-result, lmdd, dd
    ranks: int
    nodes: int = 0  # 0: unknown
    host: str = UNKNOWN
    command: str = ""
    command_source: str = UNKNOWN  # "file", "--command" or "unknown"
    start_time: str = ""  # ISO 8601; "" unknown
    end_time: str = ""
    time_note: str = ""
    params: Dict[str, Any] = dataclasses.field(default_factory=dict)
    keys: Dict[str, str] = dataclasses.field(default_factory=dict)  # DECIDED_KEYS
    write: Optional[Phase] = None
    read: Optional[Phase] = None
    exact: List[str] = dataclasses.field(default_factory=list)
    derived: Dict[str, str] = dataclasses.field(default_factory=dict)
    unknown: List[str] = dataclasses.field(default_factory=list)
    original: List[Dict[str, Any]] = dataclasses.field(default_factory=list)  # the tool's own
    notes: List[str] = dataclasses.field(default_factory=list)
    # per iteration, any other column of the record's iteration table the file states
    # (mpiwrite's own --json: first_done_MB_per_s, status, ...); checked in check_test
    columns: Dict[str, List[float]] = dataclasses.field(default_factory=dict)
    run_id: str = ""  # the run's own id where the file states one (else from the sha256)
    tags: Dict[str, str] = dataclasses.field(default_factory=dict)  # the file's; --tag wins
    # per phase ("write", "read"), per iteration: the ranks' own figures where the tool gives
    # them (IOR's per-rank CSV); the record's rank rows.  Empty: none.
    rank_times: Dict[str, List[RankTimes]] = dataclasses.field(default_factory=dict)
    per_rank_note: str = ""  # why there are no rank rows, where the tool could have given them
    rank_csv: Dict[str, str] = dataclasses.field(default_factory=dict)  # their file, sha256
    # A piece of a test of another file (an elbencho service's own result): the key its
    # importer's `combine` matches it to that test by; never a record of its own.
    part_of: str = ""
    # per service (node) of a distributed tool, its own figures, from other files given
    # with this one (elbencho's services' own --jsonfile): the record's imported.per_service
    parts: List[Dict[str, Any]] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Source:
    path: str
    sha256: str
    size_bytes: int
    text: str
    repairs: List[str] = dataclasses.field(default_factory=list)  # warnings of repairs made
    data: Optional[bytes] = None  # a binary log's bytes (its text then ""): Darshan's


def read_source(path: str, binary: Optional[Callable[[bytes], bool]] = None,
                follow: bool = True) -> Source:
    """The file's text: a regular file (a FIFO or device is refused without blocking), at
    most MAX_INPUT_BYTES, UTF-8 (other bytes kept as escapes in what is stored); or, where
    `binary` knows the bytes for a tool's binary log, the bytes themselves.  follow=False:
    a symlink is refused (a file inside a folder named, not the file named)."""
    try:
        data = files.read_regular(path, MAX_INPUT_BYTES, follow=follow)
    except OSError as exc:
        if exc.errno == errno.EFBIG:
            raise refuse(path, f"larger than {MAX_INPUT_BYTES // MiB} MiB; refused "
                         "(no tool's summary is that large)") from None
        raise refuse(path, f"cannot read: {why(exc)}") from None
    if b"\x00" in data:
        if binary is not None and binary(data):
            return Source(path=path, sha256=hashlib.sha256(data).hexdigest(),
                          size_bytes=len(data), text="", data=data)
        raise refuse(path, "holds NUL bytes: a binary file, not a tool's output")
    # a UTF-8 byte order mark (an editor's) is not the tool's output: every format alike
    text = data.decode("utf-8", "surrogateescape").removeprefix("\ufeff")
    return Source(path=path, sha256=hashlib.sha256(data).hexdigest(), size_bytes=len(data),
                  text=text)


def beside(path: str, name: str) -> str:
    """The path of the file `name` (a base name) in the folder of the file `path`."""
    return os.path.join(os.path.dirname(os.path.abspath(path)), name)


def read_beside(path: str, name: str) -> Tuple[str, bytes]:
    """(its path, its bytes) of the file `name` (a base name) beside `path`: a regular file
    of at most MAX_INPUT_BYTES, never through a symlink (a folder anyone may have filled);
    OSError otherwise."""
    near = beside(path, name)
    return near, files.read_regular(near, MAX_INPUT_BYTES, follow=False)


@dataclasses.dataclass(frozen=True)
class Importer:
    """One tool's output as records: registered by its module's name in registry.IMPORTERS.

    `name` is what `--from` takes; `title` names the tool in messages; `detect(text)` says
    whether the text is this tool's output (asked in the registry's order, on the whole text);
    `parse(source, command)` gives its tests or raises ImportRefused (one line) for anything
    it cannot read whole, also for another tool's output."""
    name: str
    title: str
    detect: Callable[[str], bool]
    parse: Callable[[Source, str], List[Test]]
    detect_bytes: Optional[Callable[[bytes], bool]] = None  # a binary log's tool
    # the files' tests together: give the pieces of one file's tests (`part_of`) to the tests
    # they belong to, or refuse (ImportRefused); every part given to a test or refused
    combine: Optional[Callable[[List[Test]], None]] = None


def run_id(src: Source, tool: str, index: int, test: Optional[Test] = None) -> str:
    """The same file (same bytes) gives the same id, wherever it is: imported once; a test
    that carries its run's own id (mpiwrite's `--json`) keeps it."""
    if test is not None and test.run_id:
        return test.run_id
    return f"import-{tool}-{src.sha256[:16]}-{index}"


def parse_facts(items) -> Dict[str, str]:
    """--fact KEY=VALUE: node facts the user states (not measured); ConfigError otherwise."""
    out: Dict[str, str] = {}
    for text in items:
        if "=" not in text:
            raise ConfigError(f"--fact: {printable(text)!r} is not KEY=VALUE")
        key, value = (s.strip() for s in text.split("=", 1))
        if not re.match(r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}\Z", key):
            raise ConfigError(f"--fact: key {printable(key)!r} must start with a letter and "
                              "use [A-Za-z0-9_.-]")
        if key in NOT_FACTS:
            raise ConfigError(f"--fact: {key!r} is read from the file, not stated; give "
                              "another key (or a --tag)")
        if key in out:
            raise ConfigError(f"--fact: key {key!r} given twice")
        if not value or len(value) > 1024 or any(ord(c) < 32 or ord(c) == 127 for c in value):
            raise ConfigError(f"--fact: value of {key!r} must be 1 to 1024 characters "
                              "without control characters")
        out[key] = value
    return out


MAX_NODE_FACTS_BYTES = 16 * MiB


def read_node_facts(path: str) -> Dict[str, Any]:
    """A node's facts from `mpiwrite env --json` (taken on the client that ran the tool):
    checked as a record's node is; ConfigError naming the file otherwise."""
    from mpiwrite.errors import RecordError
    from mpiwrite.records.check import Checker

    try:
        data = files.read_regular(path, MAX_NODE_FACTS_BYTES)
    except OSError as exc:
        raise ConfigError(f"--node-facts: {printable(path)}: {why(exc)}") from None
    ck = Checker(f"--node-facts: {printable(path)}")
    try:
        facts = ck.node(0, ck.json("facts", data.decode("utf-8", "replace"), dict))
    except RecordError as exc:
        raise ConfigError(f"{exc} (expected the output of `mpiwrite env --json`)") from None
    if not isinstance(facts.get("fs"), dict) or "kernel" not in facts:
        raise ConfigError(f"--node-facts: {printable(path)}: not the output of "
                          "`mpiwrite env --json`")
    facts.pop("raw", None)
    facts["raw"] = {}
    facts["node_facts_source"] = {"file": os.path.abspath(path),
                                  "sha256": hashlib.sha256(data).hexdigest()}
    return facts


def iso_utc(epoch: float) -> str:
    return datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc).strftime(
        "%Y-%m-%dT%H:%M:%SZ")


def ctime_local(text: str) -> str:
    """'Tue Dec  1 09:02:33 2026' (a tool's local time, zone not said) as ISO 8601 without a
    zone, or '' when it does not parse."""
    try:
        t = datetime.datetime.strptime(" ".join(str(text).split()), "%a %b %d %H:%M:%S %Y")
    except ValueError:
        return ""
    return t.strftime("%Y-%m-%dT%H:%M:%S")


def _finite(x: float) -> float:
    return float(x) if x is not None and math.isfinite(float(x)) else math.nan


def iterations(test: Test) -> np.ndarray:
    """The record's iteration table from the test's phases (the rest NaN: not measured)."""
    n = max(len(test.write.bytes) if test.write else 0, len(test.read.bytes) if test.read else 0)
    out = np.zeros(n, dtype=ITER_DTYPE)
    for name in ITER_DTYPE.names:
        if ITER_DTYPE[name].kind == "f":
            out[name] = np.nan
    out["iteration"] = np.arange(n)
    out["ranks"] = test.ranks
    out["slowest_rank"] = out["fastest_rank"] = -1
    w, r = test.write, test.read
    for i in range(n):
        if w and i < len(w.bytes):
            out["bytes"][i] = w.bytes[i]
            out["aggregate_MB_per_s"][i] = _finite(w.MB_per_s[i])
            if w.open_included:
                out["aggregate_with_open_MB_per_s"][i] = _finite(w.MB_per_s[i])
        if r and i < len(r.bytes):
            out["read_bytes"][i] = r.bytes[i]
            out["read_aggregate_MB_per_s"][i] = _finite(r.MB_per_s[i])
    for name, values in test.columns.items():
        for i, x in enumerate(values[:n]):
            out[name][i] = _finite(x) if ITER_DTYPE[name].kind == "f" else x
    return out


def _keys(test: Test, facts: Dict[str, str], node: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    measured: Dict[str, Any] = {}
    if node is not None:
        from mpiwrite.formats.nodekeys import summary_value

        measured = {k: summary_value(node, k) for k in FACT_KEYS}
    keys: Dict[str, Any] = {k: facts.get(k, measured.get(k, test.keys.get(k, UNKNOWN)))
                            for k in FACT_KEYS}
    keys.update({k: v for k, v in facts.items() if k not in FACT_KEYS})
    for k in DECIDED_KEYS:
        keys[k] = str(test.keys.get(k, UNKNOWN))
    keys.update({k: str(v) for k, v in test.keys.items() if k not in keys})
    return keys


def build(test: Test, src: Source, tags: Dict[str, str], facts: Dict[str, str],
          now: Optional[float] = None, node: Optional[Dict[str, Any]] = None):
    """The RunRecord of one imported test; `node`: the facts of the client it ran on
    (read_node_facts), its one node row."""
    import time

    from mpiwrite.records.model import RunRecord

    stated_unknown = [k for k in FACT_KEYS if k not in facts and node is None
                      and test.keys.get(k, UNKNOWN) == UNKNOWN]
    imported = {
        "tool": test.tool, "tool_version": test.tool_version or UNKNOWN, "format": test.fmt,
        "file": os.path.abspath(src.path), "sha256": src.sha256, "size_bytes": src.size_bytes,
        "test": test.label, "index": test.index,
        "imported_at": iso_utc(time.time() if now is None else now),
        "imported_by": f"mpiwrite {__version__}",
        "command_source": test.command_source, "time_note": test.time_note,
        "exact": sorted(x for x in set(test.exact)
                        if test.read or not x.startswith("read_")),
        "derived": dict(sorted(test.derived.items())),
        "unknown": sorted((set(test.unknown) | set(stated_unknown)) - set(facts)
                          - (set(FACT_KEYS) if node is not None else set())),
        "stated_facts": dict(facts), "original": test.original,
        "per_rank": per_rank_said(test),
        "repairs": list(src.repairs), "notes": list(test.notes),
    }
    if test.parts:
        imported["per_service"] = test.parts
    if test.rank_csv:
        imported["rank_csv"] = dict(test.rank_csv)
    if node is not None:
        imported["node_facts"] = dict(node["node_facts_source"], host=node.get("host"),
                                      note="read by `mpiwrite env --json` on the client, "
                                           "not during this run: one node row stands for "
                                           "every node")
    params = dict(test.params)
    its = iterations(test)
    params.setdefault("iterations", len(its))
    attrs = {
        "run_id": run_id(src, test.tool, test.index, test), "status": RunStatus.COMPLETE.value,
        "start_time": test.start_time, "end_time": test.end_time,
        "command_line": clean(test.command) if test.command else "",
        "host": clean(test.host), "error": "", "mpi_library": "",
        "ranks": int(test.ranks), "nodes": int(test.nodes),
        "params": params, "tags": {**test.tags, **tags}, "keys": _keys(test, facts, node),
        "warnings": [f"imported from {test.tool}: {w}" for w in src.repairs]
        + ([f"imported from {test.tool}: {test.per_rank_note}"] if test.per_rank_note else []),
        "notes": list(test.notes), "first_done_note": "", "imported": imported,
    }
    ranks = rank_rows(test, its)
    return RunRecord(attrs=json.loads(json.dumps(attrs)), iterations=its, ranks=ranks,
                     nodes=[json.loads(json.dumps(node))] if node is not None else [])


NO_RANKS = "none: the tool reports no per-rank figures on a common timeline"
RANKS_UNTIMED = ("the tool's own per-rank figures (bytes and each rank's time on its own "
                 "clock): no time on a common timeline (no first-done, tail or timeline), "
                 "no node (node -1: no per-node figure)")


def per_rank_said(test: Test) -> str:
    if test.rank_times:
        return RANKS_UNTIMED
    return f"{NO_RANKS} ({test.per_rank_note})" if test.per_rank_note else NO_RANKS


def rank_rows(test: Test, its: np.ndarray) -> np.ndarray:
    """The rank table of a test whose tool gave per-rank figures (else empty), and their
    spread in the iteration table (rank min/mean/max/sd, slowest and fastest rank): each
    rank's bytes and rate, its node -1 (not known) and its times on the common clock NaN
    (the tool gives none), so nothing that needs a timeline takes them."""
    from mpiwrite.formats.summary import RANK_DTYPE

    n = len(its)
    if not test.rank_times or not n:
        return np.zeros(0, dtype=RANK_DTYPE)
    out = np.zeros(n * test.ranks, dtype=RANK_DTYPE)
    for name in RANK_DTYPE.names:
        if RANK_DTYPE[name].kind == "f":
            out[name] = np.nan
    out["iteration"] = np.repeat(np.arange(n), test.ranks)
    out["rank"] = np.tile(np.arange(test.ranks), n)
    out["node"] = out["read_source_rank"] = -1
    for phase in ("write", "read"):
        for i, t in enumerate(test.rank_times.get(phase, [])[:n]):
            at = slice(i * test.ranks, (i + 1) * test.ranks)
            b = np.asarray(t.bytes, dtype=np.int64)
            secs = np.asarray(t.seconds, dtype=float)
            rate = np.where(secs > 0, b / np.where(secs > 0, secs, 1) / MB, np.nan)
            if phase == "write":
                out["bytes"][at], out["elapsed_seconds"][at], out["MB_per_s"][at] = b, secs, rate
                blk = int(test.params.get("block_size") or 0)
                out["blocks"][at] = b // blk if blk > 0 else 0
                row = its[i]
                row["rank_min_MB_per_s"], row["rank_max_MB_per_s"] = rate.min(), rate.max()
                row["rank_mean_MB_per_s"] = rate.mean()
                row["rank_std_MB_per_s"] = rate.std(ddof=1) if len(rate) > 1 else 0.0
                row["slowest_rank"], row["fastest_rank"] = rate.argmin(), rate.argmax()
            else:
                out["read_bytes"][at], out["read_seconds"][at] = b, secs
                out["read_MB_per_s"][at] = rate
                row = its[i]
                row["read_rank_min_MB_per_s"], row["read_rank_max_MB_per_s"] = (rate.min(),
                                                                                rate.max())
                row["read_rank_mean_MB_per_s"] = rate.mean()
    return out


def check_test(test: Test, path: str) -> None:
    """What every imported test must have, else the file is refused (never half-read): the
    last check on what the importer made of the file's numbers (each was checked where it
    entered, formats/numbers.py); products of them (block x segments x tasks) are checked here."""
    if not 1 <= test.ranks <= MAX_RANKS:
        raise refuse(path, f"{test.label}: {shown(test.ranks)} tasks is not a count of processes")
    if test.nodes < 0 or test.nodes > test.ranks:
        raise refuse(path, f"{test.label}: {shown(test.nodes)} nodes for {test.ranks} tasks")
    for name, ph in (("write", test.write), ("read", test.read)):
        if ph is None:
            continue
        if len(ph.bytes) != len(ph.MB_per_s) or not ph.bytes:
            raise refuse(path, f"{test.label}: {name}: no complete repetition")
        for b, rate in zip(ph.bytes, ph.MB_per_s):
            if not 0 <= b <= MAX_BYTES or not math.isfinite(rate) or \
                    not 0 <= rate <= MAX_MB_PER_S:
                raise refuse(path, f"{test.label}: {name}: a repetition with {shown(b)} bytes "
                             f"at {shown(rate)} MB/s (at most 2^63 - 1 bytes and 10^9 MB/s)")
    if test.write is None and test.read is None:
        raise refuse(path, f"{test.label}: neither a write nor a read result")
    n = max(len(ph.bytes) for ph in (test.write, test.read) if ph is not None)
    for name, values in test.columns.items():
        if name not in ITER_DTYPE.names or len(values) != n:
            raise refuse(path, f"{test.label}: {shown(name, 40)}: not a column of {n} "
                         "iterations")


def size_text(text: str, binary_letters: str = "kmgtpe", base: int = 1024) -> int:
    """'64m', '1M', '256k', '16777216' as bytes with powers of `base` (IOR's and fio's
    suffixes); ValueError otherwise, also for more than MAX_DIGITS digits or 2^63 bytes."""
    m = re.fullmatch(r"\s*(\d+)\s*([kmgtpe]?)(?:i?b)?\s*", str(text), re.I)
    if not m or len(m.group(1)) > MAX_DIGITS:
        raise ValueError(text)
    power = binary_letters.index(m.group(2).lower()) + 1 if m.group(2) else 0
    value = int(m.group(1)) * base ** power
    if value > MAX_BYTES:
        raise ValueError(text)
    return value
