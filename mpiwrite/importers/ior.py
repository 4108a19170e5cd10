"""IOR's results as imported tests: its JSON summary (`-O summaryFormat=JSON`), its default
text output and `-O summaryFormat=CSV` (docs/import.md).

One test per IOR test (TestID), its repetitions as iterations, its write figures in the write
columns and its read figures (`-r`) in the read columns, as mpiwrite's own `run --read` stores
them.  IOR's bandwidth is MiB/s from the open to the close: it becomes MB/s (x 1.048576) in
both `aggregate_MB_per_s` and `aggregate_with_open_MB_per_s` (the `ior` metric).  What the
output does not say (fsync flags in the text and CSV, O_DIRECT everywhere) comes from the
command line, named as derived; what neither says is unknown.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Tuple

from mpiwrite.formats.numbers import (
    BYTES,
    COUNT,
    INDEX,
    KIB,
    NODES,
    RANKS,
    RATE_MIB,
    SECONDS,
    Kind,
    half_unit,
    number,
    parse_json,
    shown,
)
from mpiwrite.importers import ior_ranks
from mpiwrite.importers.base import (
    MIB_TO_MB,
    UNKNOWN,
    Importer,
    Phase,
    Source,
    Test,
    ctime_local,
    refuse,
    size_text,
)
from mpiwrite.importers.ior_command import command_flags
from mpiwrite.text import printable
from mpiwrite.units import MiB, format_size


def _size(value, default=None) -> Optional[int]:
    try:
        return size_text(value) if value not in (None, "") else default
    except ValueError:
        return default


def _host(machine: str) -> str:
    parts = str(machine).split()
    return parts[1] if len(parts) > 1 else UNKNOWN


def _keys(params: Dict[str, Any]) -> Dict[str, str]:
    fsync = params.get("fsync")
    keys = {"layout": params.get("layout") or UNKNOWN, "engine": params.get("engine") or UNKNOWN,
            "fsync": UNKNOWN if fsync is None else (
                f"every {params['fsync_every']}" if params.get("fsync_every") else
                ("on" if fsync else "off")),
            "direct": UNKNOWN if params.get("direct") is None else
            ("on" if params["direct"] else "off"),
            "block_size": format_size(params["block_size"]) if params.get("block_size")
            else UNKNOWN}
    return keys


# IOR's APIs whose collective flag (-c) means collective calls (MPI_File_write_at_all)
_MPI_APIS = ("mpiio", "hdf5", "ncmpi")


def _access(test: Test, segments: Optional[int], random: Optional[bool],
            collective: Optional[bool], said: str) -> None:
    """Where IOR's blocks went and how an MPI API wrote them, as mpiwrite's keys, so that a
    strided or collective IOR test is never pooled with sequential independent runs:

    - `pattern`: random with -z (randomOffset, "ordering in a file: random"); strided for a
      shared file of more than one segment (each segment holds every task's -b block in
      turn: the tasks' blocks interleave); sequential otherwise; unknown where the layout
      or the segment count is not known;
    - `collective` (an MPI-IO run's key): -c (collective, "type: collective") for the MPI
      APIs only (IOR's POSIX ignores it).  IOR prints no hints: `mpiio_hints` unknown."""
    p = test.params
    layout = p.get("layout")
    if random:
        p["pattern"] = "random"
    elif layout == "fpp" or layout == "shared" and segments == 1:
        p["pattern"] = "sequential"
    elif layout == "shared" and segments and segments > 1:
        p["pattern"] = "strided"
        test.notes.append(f"{segments} segments of a shared file: each task's -b block of "
                          "every segment interleaves with the others' (pattern strided, "
                          "at IOR's block size, not mpiwrite's block_size = -t)")
    else:
        p["pattern"] = UNKNOWN
    test.derived["params.pattern"] = (f"{said}: random offsets (-z), the file layout and "
                                      "the segment count (-s)")
    if str(p.get("engine") or "") in _MPI_APIS:
        p["collective"] = UNKNOWN if collective is None else bool(collective)
        p["mpiio_hints"] = UNKNOWN
        test.derived["params.collective"] = f"{said} (-c)"
        test.unknown.append("params.mpiio_hints")


def _from_command(test: Test, flags: Dict[str, Any], have: Dict[str, Any]) -> None:
    """Fill what the output did not say from the command line's flags (named derived)."""
    p = test.params
    said = "from the command line"
    if "fsync" not in have:
        p["fsync"] = bool(flags.get("fsync") or flags.get("fsyncperwrite"))
        test.derived["params.fsync"] = f"{said} (-e: fsync at the end, -Y: after every write)"
        if flags.get("fsyncperwrite"):
            p["fsync_every"] = 1
    if "layout" not in have:
        p["layout"] = "fpp" if flags.get("fpp") else "shared"
        test.derived["params.layout"] = f"{said} (-F: a file per process)"
    p["direct"] = bool(flags.get("direct"))
    test.derived["params.direct"] = f"{said} (--posix.odirect, -B or -O useO_DIRECT=1)"
    if "engine" not in have:
        p["engine"] = str(flags.get("api") or "posix").lower()
        test.derived["params.engine"] = f"{said} (-a, POSIX when not given)"
    if flags.get("testfile") and "target" not in p:
        p["target"] = flags["testfile"]


def _finish(test: Test) -> Test:
    test.keys = _keys(test.params)
    # IOR's header (banner, Began, Command line, Machine: ior-output.c PrintHeader) names no
    # MPI library, nor does any summary format: `--fact mpi=...` states it
    test.unknown += ["mpi"]  # the node facts: unknown unless stated (importers/base.py)
    test.derived.setdefault("aggregate_MB_per_s", "IOR's bandwidth x 1.048576 (MiB/s to MB/s); "
                            "IOR times from the first open to the last close, mpiwrite's own "
                            "aggregate from the first write")
    test.derived.setdefault("aggregate_with_open_MB_per_s", "IOR's bandwidth in MB/s (the `ior` "
                            "metric: open included)")
    if test.read:
        test.derived.setdefault("read_aggregate_MB_per_s", "IOR's read bandwidth x 1.048576")
    return test


# -- JSON ------------------------------------------------------------------------------------
_NOISE = re.compile(r'(?:^|(?<=["\]},0-9]))[ \t]*((?:WARNING|ERROR): [^\n]*)', re.M)


def _json_doc(src: Source) -> Dict[str, Any]:
    """IOR's JSON; text IOR printed into it (a known defect) removed with a warning when it is
    only warnings, the file refused when it holds errors or is cut short."""
    text = src.text
    start = text.find("{")
    if start < 0:
        raise refuse(src.path, "no JSON object: not IOR's JSON summary")
    if text[:start].strip():
        src.repairs.append(f"ignored {len(text[:start].strip().splitlines())} line(s) printed "
                           "before IOR's JSON")
        text = text[start:]
    try:
        return parse_json(text, src.path)[0]
    except ValueError as first:
        noise = _NOISE.findall(text)
        errors = [n for n in noise if n.startswith("ERROR")]
        if errors:
            raise refuse(src.path, f"IOR printed {len(errors)} error(s) into its JSON (first: "
                         f"{errors[0][:160]}): the test did not complete; nothing imported") \
                from None
        if not noise:
            raise refuse(src.path, f"not valid JSON ({str(first)[:80]}): cut short, or not "
                         "IOR's JSON summary") from None
        try:
            doc = parse_json(_NOISE.sub("", text), src.path)[0]
        except ValueError as exc:
            raise refuse(src.path, f"not valid JSON even without the {len(noise)} warning(s) "
                         f"IOR printed into it ({str(exc)[:80]})") from None
        src.repairs.append(f"removed {len(noise)} warning(s) IOR printed into its JSON "
                           f"({noise[0][:120]!r}); the JSON is whole without them")
        return doc


def _results(test_doc: Dict[str, Any]) -> List[Dict[str, Any]]:
    out: List[Dict[str, Any]] = []
    found = test_doc.get("Results")
    for r in found if isinstance(found, list) else []:
        out += [x for x in r if isinstance(x, dict)] if isinstance(r, list) else \
            ([r] if isinstance(r, dict) else [])
    return out


def _num(d: Dict[str, Any], key: str, kind: Kind, path: str, label: str):
    """d[key] checked as a number of `kind` (formats/numbers.py), the refusal naming it."""
    return number(d.get(key), kind, path, f"{label}: {key}")


def from_json(src: Source) -> List[Test]:
    doc = _json_doc(src)
    if not isinstance(doc, dict) or not isinstance(doc.get("tests"), list):
        raise refuse(src.path, "JSON without IOR's `tests`: not IOR's JSON summary")
    if "summary" not in doc or "Finished" not in doc:
        raise refuse(src.path, "IOR's JSON has no summary or no `Finished`: the run did not "
                     "end; nothing imported")
    summary = [s for s in doc["summary"] if isinstance(s, dict)] \
        if isinstance(doc["summary"], list) else []
    command = str(doc.get("Command line") or "")
    flags = command_flags(command)
    out = []
    for index, t in enumerate(doc["tests"]):
        if not isinstance(t, dict) or not isinstance(t.get("Parameters"), dict):
            raise refuse(src.path, f"test {index}: no Parameters")
        par, opts = t["Parameters"], t.get("Options") or {}
        tid = number(par.get("testID", t.get("TestID", index)), INDEX, src.path,
                     f"tests[{index}]: testID")
        label = f"test {tid}"
        reps = _num(par, "repetitions", COUNT, src.path, label)
        block = _num(par, "blockSize", BYTES, src.path, label)
        xfer = _num(par, "transferSize", BYTES, src.path, label)
        segs = _num(par, "segmentCount", COUNT, src.path, label)
        test = Test(index=index, label=label, tool="ior", tool_version=str(doc.get("Version", "")),
                    fmt="ior-json", ranks=0, host=_host(doc.get("Machine", "")),
                    command=command, command_source="file" if command else UNKNOWN,
                    start_time=ctime_local(t.get("StartTime") or doc.get("Began", "")),
                    end_time=ctime_local(doc.get("Finished", "")),
                    time_note="IOR prints its host's local time without a zone")
        results = _results(t)
        phases = {}
        for op in ("write", "read"):
            got = [r for r in results if r.get("access") == op]
            wanted = par.get("writeFile" if op == "write" else "readFile")
            if not got and not wanted:
                continue
            s = next((s for s in summary if s.get("operation") == op
                      and s.get("TestID", tid) == tid), None)
            if s is None or len(got) != reps:
                raise refuse(src.path, f"{label}: {op}: {len(got)} of {reps} repetitions and "
                             f"{'no' if s is None else 'a'} summary: the test did not "
                             "complete; nothing imported")
            tasks = _num(s, "numTasks", RANKS, src.path, label)
            test.ranks = tasks
            rates = [_num(r, "bwMiB", RATE_MIB, src.path, f"{label}: {op}") for r in got]
            mean = sum(rates) / len(rates)
            said = _num(s, "bwMeanMIB", RATE_MIB, src.path, f"{label}: {op}")
            if abs(mean - said) > 0.001 * mean + 0.01:
                raise refuse(src.path, f"{label}: {op}: the repetitions' mean {mean:.4f} MiB/s "
                             f"is not the summary's bwMeanMIB {said}: not one IOR output")
            nbytes = block * segs * tasks
            phases[op] = Phase(bytes=[nbytes] * reps, MB_per_s=[x * MIB_TO_MB for x in rates],
                               open_included=True)
            test.original += [dict(r) for r in got]
        test.write, test.read = phases.get("write"), phases.get("read")
        test.nodes = 0 if par.get("nodes") is None else \
            _num(par, "nodes", NODES, src.path, label)
        test.params = {"block_size": xfer, "size": block * segs, "iterations": reps,
                       "layout": "fpp" if par.get("filePerProc") else "shared",
                       "fsync": bool(par.get("fsync") or par.get("fsyncperwrite")),
                       "engine": str(par.get("api") or opts.get("api") or "").lower(),
                       "target": str(par.get("testFileName") or "")}
        if par.get("fsyncperwrite"):
            test.params["fsync_every"] = 1
        _from_command(test, flags, {"fsync": 1, "layout": 1, "engine": 1})
        _access(test, segs, bool(par.get("randomOffset")) or bool(flags.get("random")),
                bool(par.get("collective")), "IOR's Parameters")
        test.exact += ["ranks", "nodes", "bytes", "read_bytes", "params.block_size (transferSize)",
                       "params.size (blockSize x segmentCount)", "params.layout (filePerProc)",
                       "params.fsync (fsync, fsyncperwrite)", "params.iterations (repetitions)",
                       "command_line", "tool_version"]
        test.derived["start_time"] = "IOR's StartTime: its host's local time, zone unknown"
        test.derived["host"] = "the second word of IOR's Machine line"
        if par.get("reorderTasks") and test.read:
            test.notes.append("read with -C: each task read another task's data, as mpiwrite "
                              "run --read does")
        out.append(_finish(test))
    if not out:
        raise refuse(src.path, "IOR's JSON lists no test")
    return out


# -- text ------------------------------------------------------------------------------------
_KV = re.compile(r"^([A-Za-z][A-Za-z #/()]*?)\s*: ?(.*)$")
_NUMBER = re.compile(r"^\d+(?:\.\d+)?$")


def _kv(lines: List[str]) -> Dict[str, str]:
    out: Dict[str, str] = {}
    for ln in lines:
        m = _KV.match(ln)
        if m and m.group(1) not in out:
            out[m.group(1).strip()] = m.group(2).strip()
    return out


def _summary_rows(lines: List[str], path: str) -> List[Dict[str, str]]:
    try:
        at = next(i for i, ln in enumerate(lines) if ln.startswith("Summary of all tests"))
    except StopIteration:
        raise refuse(path, "IOR's text has no `Summary of all tests`: the run did not end; "
                     "nothing imported") from None
    header = lines[at + 1].split() if at + 1 < len(lines) else []
    rows = []
    for ln in lines[at + 2:]:
        words = ln.split()
        if not words or words[0] not in ("write", "read"):
            break
        if len(words) != len(header):
            raise refuse(path, f"IOR summary row {printable(ln[:60])!r} has {len(words)} "
                         f"columns, its header {len(header)}")
        rows.append(dict(zip(header, words)))
    return rows


def _cell(row: Dict[str, str], column: str, kind: Kind, path: str, where: str,
          default=None):
    """A cell of IOR's summary row as a checked number; the row must have the column."""
    if column not in row and default is None:
        raise refuse(path, f"{where}: IOR's summary has no {column} column (its header names "
                     f"{shown(' '.join(row)[:200], 60)}): not IOR's text output")
    return number(row.get(column, default), kind, path, f"{where}: summary {column}")


def _mean_agrees(row: Dict[str, str], got: List[Tuple[float, Dict[str, str]]], path: str,
                 where: str) -> None:
    """The summary's Mean(MiB) must be the mean of the repetitions' bw(MiB/s), within what
    their printed digits allow (as the JSON's bwMeanMIB is checked)."""
    if "Mean(MiB)" not in row or not got:
        return
    said = _cell(row, "Mean(MiB)", RATE_MIB, path, where)
    mean = sum(bw for bw, _r in got) / len(got)
    rounding = sum(half_unit(r["bw"]) for _bw, r in got) / len(got) + half_unit(row["Mean(MiB)"])
    if abs(mean - said) > 0.001 * mean + 0.01 + rounding:
        raise refuse(path, f"{where}: the summary's Mean(MiB) {shown(said)} is not the mean "
                     f"{mean:.2f} of its {len(got)} repetitions: not one IOR output")


def from_text(src: Source) -> List[Test]:
    lines = src.text.splitlines()
    m = re.search(r"^IOR-(\S+): MPI Coordinated Test of Parallel I/O", src.text, re.M)
    errors = [ln for ln in lines if ln.startswith("ERROR")]
    if errors:
        raise refuse(src.path, f"IOR reported {len(errors)} error(s) (first: "
                     f"{errors[0][:160]}): nothing imported")
    if not any(ln.startswith("Finished") for ln in lines):
        raise refuse(src.path, "IOR's text has no `Finished` line: cut short; nothing imported")
    warned = [ln.strip() for ln in lines if ln.startswith("WARNING")]
    head = _kv(lines[:12])
    command = head.get("Command line", "")
    flags = command_flags(command)
    summary = _summary_rows(lines, src.path)
    starts = [i for i, ln in enumerate(lines) if re.match(r"^TestID\s+:", ln)]
    out = []
    for index, at in enumerate(starts):
        end = starts[index + 1] if index + 1 < len(starts) else len(lines)
        block = lines[at:end]
        kv = _kv(block)
        tid = number(kv.get("TestID", index), INDEX, src.path, f"test {index}: TestID")
        label = f"test {tid}"
        rows: Dict[str, List[Tuple[float, Dict[str, str]]]] = {"write": [], "read": []}
        cols = ["access", "bw", "iops", "latency", "block_KiB", "xfer_KiB", "open", "wrrd",
                "close", "total", "iter"]
        for ln in block:
            words = ln.split()
            if len(words) == len(cols) and words[0] in rows and _NUMBER.match(words[1]):
                bw = number(words[1], RATE_MIB, src.path, f"{label}: {words[0]}: bw(MiB/s)")
                rows[words[0]].append((bw, dict(zip(cols, words))))
        test = Test(index=index, label=label, tool="ior", tool_version=m.group(1) if m else "",
                    fmt="ior-text", ranks=0, host=_host(head.get("Machine", "")),
                    command=command, command_source="file" if command else UNKNOWN,
                    start_time=ctime_local(kv.get("StartTime") or head.get("Began", "")),
                    time_note="IOR prints its host's local time without a zone")
        phases = {}
        reps = number(kv.get("repetitions") or 0, COUNT, src.path, f"{label}: repetitions")
        for op in ("write", "read"):
            s = next((s for s in summary if s.get("Operation") == op
                      and _cell(s, "Test#", INDEX, src.path, f"{label}: {op}", tid) == tid), None)
            got = rows[op]
            if not got and s is None:
                continue
            if s is None or len(got) != reps:
                raise refuse(src.path, f"{label}: {op}: {len(got)} of {reps} repetitions and "
                             f"{'no' if s is None else 'a'} summary row: the test did not "
                             "complete; nothing imported")
            where = f"{label}: {op}"
            tasks, segs = (_cell(s, "#Tasks", RANKS, src.path, where),
                           _cell(s, "segcnt", COUNT, src.path, where))
            blk, xfer = (_cell(s, "blksiz", BYTES, src.path, where),
                         _cell(s, "xsize", BYTES, src.path, where))
            _mean_agrees(s, got, src.path, where)
            test.ranks = tasks
            test.params = {"block_size": xfer, "size": blk * segs, "iterations": reps,
                           "target": kv.get("test filename", "")}
            if kv.get("access") in ("file-per-process", "single-shared-file"):
                test.params["layout"] = "fpp" if kv["access"] == "file-per-process" else "shared"
            if s.get("API"):
                test.params["engine"] = s["API"].lower()
            phases[op] = Phase(bytes=[blk * segs * tasks] * reps,
                               MB_per_s=[bw * MIB_TO_MB for bw, _r in got], open_included=True)
            test.original += [dict(r) for _bw, r in got]
        test.write, test.read = phases.get("write"), phases.get("read")
        test.nodes = number(kv.get("nodes") or 0, NODES, src.path, f"{label}: nodes")
        _from_command(test, flags, {k: 1 for k in ("layout", "engine") if k in test.params})
        segs = number(kv["segments"], COUNT, src.path, f"{label}: segments") \
            if str(kv.get("segments", "")).isdigit() else None
        _access(test, segs, kv.get("ordering in a file") == "random" or bool(flags.get("random")),
                kv.get("type") == "collective" or bool(flags.get("collective")),
                "IOR's Options (ordering in a file, access, segments, type)")
        test.exact += ["ranks (#Tasks)", "nodes", "bytes", "read_bytes", "params.block_size "
                       "(xsize)", "params.size (blksiz x segcnt)", "params.layout (access)",
                       "params.iterations (repetitions)", "command_line", "tool_version"]
        test.derived["aggregate_MB_per_s"] = ("IOR's bw(MiB/s) column as printed (up to 6 "
                                              "digits) x 1.048576; IOR times from the first "
                                              "open to the last close")
        test.derived["start_time"] = "IOR's StartTime: its host's local time, zone unknown"
        test.derived["host"] = "the second word of IOR's Machine line"
        test.notes += [f"IOR warned: {w[:200]}" for w in warned[:8]]
        out.append(_finish(test))
    if not out:
        raise refuse(src.path, "IOR's text lists no test (no TestID line)")
    return out


# -- CSV -------------------------------------------------------------------------------------
def from_csv(src: Source, command: str = "") -> List[Test]:
    lines = [ln for ln in src.text.splitlines() if ln.strip()]
    at = next((i for i, ln in enumerate(lines) if ln.startswith("access,bw(MiB/s),")), None)
    if at is None:
        raise refuse(src.path, "no IOR CSV header (access,bw(MiB/s),IOPS,...)")
    header = lines[at].split(",")
    need = ("access", "bw(MiB/s)", "block(KiB)", "xfer(KiB)", "total(s)", "numTasks", "iter")
    if any(n not in header for n in need):
        lacking = ", ".join(n for n in need if n not in header)
        raise refuse(src.path, f"IOR CSV header lacks {lacking}")
    groups: List[List[Dict[str, str]]] = [[]]
    for ln in lines[at + 1:]:
        cells = ln.split(",")
        if len(cells) != len(header) or cells[0] not in ("write", "read"):
            raise refuse(src.path, f"IOR CSV row {printable(ln[:60])!r} is not a result row "
                         "(cut short, or other text in the file)")
        row = dict(zip(header, cells))
        if any((r["access"], r["iter"]) == (row["access"], row["iter"]) for r in groups[-1]):
            groups.append([])
        groups[-1].append(row)
    flags = command_flags(command) if command else {}
    out = []
    for index, rows in enumerate(g for g in groups if g):
        label = f"test {index}"
        test = Test(index=index, label=label, tool="ior", tool_version="", fmt="ior-csv",
                    ranks=0, command=command, command_source="--command" if command else UNKNOWN)
        phases = {}
        for op in ("write", "read"):
            got = [r for r in rows if r["access"] == op]
            if not got:
                continue
            where = f"{label}: {op}"
            tasks = number(got[0]["numTasks"], RANKS, src.path, f"{where}: numTasks")
            blk = int(number(got[0]["block(KiB)"], KIB, src.path, f"{where}: block(KiB)") * 1024)
            xfer = int(number(got[0]["xfer(KiB)"], KIB, src.path, f"{where}: xfer(KiB)") * 1024)
            rates = [number(r["bw(MiB/s)"], RATE_MIB, src.path, f"{where}: bw(MiB/s)")
                     for r in got]
            total = number(got[0]["total(s)"], SECONDS, src.path, f"{where}: total(s)")
            if not blk:
                raise refuse(src.path, f"{where}: block(KiB) is 0")
            est = rates[0] * total * MiB / (blk * tasks)
            segs = number(flags["segments"], COUNT, src.path, "--command: -s") \
                if str(flags.get("segments", "")).isdigit() else None
            if segs is None:
                segs = round(est)
                if segs < 1 or abs(est - segs) > 0.1:
                    raise refuse(src.path, f"{label}: the CSV does not say the segment count "
                                 "and bw x time does not tell it; give --command")
                test.derived["bytes"] = ("block x tasks x segments; the segment count from "
                                         "bw x total(s), the CSV does not print it")
            test.ranks = tasks
            test.params = {"block_size": xfer, "size": blk * segs, "iterations": len(got)}
            phases[op] = Phase(bytes=[blk * segs * tasks] * len(got),
                               MB_per_s=[x * MIB_TO_MB for x in rates], open_included=True)
            test.original += [dict(r) for r in got]
        test.write, test.read = phases.get("write"), phases.get("read")
        if command:
            _from_command(test, flags, {})
            if _size(flags.get("transfer")) not in (None, test.params["block_size"]):
                raise refuse(src.path, f"{label}: --command says -t {flags['transfer']}, the "
                             "CSV another transfer size: not this file's command")
            _access(test, segs, bool(flags.get("random")), bool(flags.get("collective")),
                    "--command")
        else:
            test.params["pattern"] = UNKNOWN
            test.unknown += ["params.fsync", "params.layout", "params.direct", "params.engine",
                             "params.pattern", "command_line"]
        test.unknown += ["nodes", "start_time", "host", "tool_version"]
        test.exact += ["ranks (numTasks)", "params.block_size (xfer)", "params.iterations"]
        test.derived["aggregate_MB_per_s"] = "IOR's bw(MiB/s) x 1.048576"
        out.append(_finish(test))
    return out


def parse(src: Source, command: str = "") -> List[Test]:
    """IOR's JSON, text or CSV, told apart by their content."""
    head = src.text.lstrip()[:4096]
    if re.search(r"^access,bw\(MiB/s\),", src.text[:4096], re.M):
        return from_csv(src, command)
    if re.search(r"^IOR-\S+: MPI Coordinated Test", src.text[:4096], re.M):
        tests = from_text(src)
    elif "{" in head:
        tests = from_json(src)
    else:
        raise refuse(src.path, "neither IOR's JSON, text nor CSV output")
    if tests:
        ior_ranks.read_for(tests, src.path, command_flags(tests[0].command))
    if command:
        for t in tests:
            t.notes.append("--command ignored: the output states its command line")
    return tests


_BANNER = re.compile(r"^IOR-\S+: MPI Coordinated Test of Parallel I/O", re.M)
_CSV_HEADER = re.compile(r"^access,bw\(MiB/s\),IOPS,", re.M)


def detect(text: str) -> bool:
    """IOR's text banner, its CSV header, or its JSON's `Version`, `Command line`, `tests`."""
    head = text[:4096]
    return bool(_BANNER.search(head) or _CSV_HEADER.search(head) or (
        '"Version"' in head and '"Command line"' in head and '"tests"' in text[:65536]))


IMPORTER = Importer(name="ior", title="IOR", detect=detect, parse=parse)
