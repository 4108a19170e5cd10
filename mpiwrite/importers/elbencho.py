"""elbencho's results files (`--csvfile FILE`, `--jsonfile FILE`) as imported tests
(docs/import.md).

elbencho appends one entry per benchmark phase to each file: a CSV row (the labels first, when
the file was empty) or a JSON object on a line of its own.  Each holds the date the phase
started, the run's settings (label, path type, paths, hosts, threads, dirs, files, file size,
block size, direct IO, random; elbencho 3.1 also its version and command) and the phase's
results twice: when the first worker finished (`[first]`, `first_done`: elbencho's
stonewall) and when the last did (`[last]`, `last_done`).  elbencho never syncs inside a
WRITE phase: `--sync` is a SYNC phase of its own after it, so the figure is not durable
(fsync off) and the SYNC's time is noted.  A WRITE entry is one run; a READ
entry that follows it with the same settings is that run's read phase; a READ alone is a run
of its own.  Other phases (MKDIRS, RMFILES, ...) move no data and are left out, said.

Against the file: the JSON's `bytes/s` and `bytes` are exact; the CSV prints whole MiB/s and
whole MiB (the integer part), so a CSV figure is known to 1.05 MB/s and its bytes come from
the settings (threads x hosts x dirs x files x file size for a folder run; the paths' file
size otherwise), checked against `MiB [last]`.  The last worker's rate is the aggregate, the
first's mpiwrite's first-done, their times' difference the tail.  elbencho's threads are the
ranks, its hosts the nodes.  Neither format says the host's name.

A distributed run's master file holds the phase's aggregate only.  A service started with its
own `--jsonfile` (`elbencho --service --jsonfile F`) writes its own share of each phase there:
its threads' first-done and last-done on its own clock, the same `phase_id` and start date.
Given with the master's file, each such entry becomes a row of the master's record
(`imported.per_service`), checked against it: one entry a service, their bytes the master's,
their slowest thread the master's last-done time and their fastest its first-done time.  Alone
(no master's phase among the files), a service's entry is refused: it is a share of a run,
never a run.
"""

from __future__ import annotations

import csv
import datetime
import io
import json
import os
import re
import shlex
from typing import Any, Dict, List, Optional

from mpiwrite.formats.numbers import BYTES, COUNT, MS, RANKS, RATE_MIB, number
from mpiwrite.importers.base import (
    MIB_TO_MB,
    UNKNOWN,
    Importer,
    Phase,
    Source,
    Test,
    iso_utc,
    refuse,
)
from mpiwrite.text import printable
from mpiwrite.units import MB, MiB, format_size

HEAD = ("ISO date", "label", "path type", "paths", "hosts", "threads")
NEED = ("ISO date", "path type", "paths", "hosts", "threads", "dirs", "files", "file size",
        "block size", "direct IO", "random", "operation", "time ms [first]", "time ms [last]",
        "MiB/s [first]", "MiB/s [last]", "MiB [last]")
MOVES_DATA = ("WRITE", "READ")
SAME = ("label", "path_type", "paths", "hosts", "threads", "dirs", "files", "file_size",
        "block_size", "direct", "random", "command")
MAX_ENTRIES = 100_000


def _csv_entries(src: Source) -> List[Dict[str, Any]]:
    lines = [ln for ln in src.text.splitlines() if ln.strip()]
    if not lines or not lines[0].startswith(",".join(HEAD)):
        raise refuse(src.path, "no elbencho CSV labels (ISO date,label,path type,...): "
                     "elbencho writes them first into an empty --csvfile; keep that line")
    reader = csv.reader(io.StringIO("\n".join(lines)))
    header = next(reader)
    lacking = [n for n in NEED if n not in header]
    if lacking:
        raise refuse(src.path, f"elbencho CSV labels lack {', '.join(lacking)}")
    out = []
    for i, cells in enumerate(reader, start=2):
        if cells == header:  # runs appended to a file whose labels were printed again
            continue
        if len(cells) != len(header):
            raise refuse(src.path, f"line {i}: {len(cells)} cells for {len(header)} labels "
                         "(cut short, or another tool's line)")
        r = dict(zip(header, cells))
        out.append({"where": f"line {i}", "op": r["operation"].strip().upper(),
                    "label": r["label"], "date": r["ISO date"], "path_type": r["path type"],
                    "paths": r["paths"], "hosts": r["hosts"], "threads": r["threads"],
                    "dirs": r["dirs"], "files": r["files"], "file_size": r["file size"],
                    "block_size": r["block size"], "direct": r["direct IO"].strip() == "1",
                    "random": r["random"].strip() == "1", "version": r.get("version", ""),
                    "command": r.get("command", ""), "first_ms": r["time ms [first]"],
                    "last_ms": r["time ms [last]"], "first_MiB_s": r["MiB/s [first]"],
                    "last_MiB_s": r["MiB/s [last]"], "last_MiB": r["MiB [last]"],
                    "original": r})
    return out


def _json_entries(src: Source) -> List[Dict[str, Any]]:
    out = []
    for i, line in enumerate(src.text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
        except ValueError:
            raise refuse(src.path, f"line {i}: not a JSON object (elbencho writes one a "
                         "line)") from None
        if not isinstance(d, dict) or not isinstance(d.get("config"), dict) or not all(
                isinstance(d.get(k), dict) for k in ("first_done", "last_done")):
            raise refuse(src.path, f"line {i}: no elbencho phase (phase_type, config, "
                         "first_done, last_done)")
        c, first, last = d["config"], d["first_done"], d["last_done"]
        out.append({"where": f"line {i}", "op": str(d.get("phase_type", "")).upper(),
                    "label": str(d.get("label", "")), "date": str(d.get("iso_start_date", "")),
                    "path_type": str(c.get("path_type", "")), "paths": c.get("paths"),
                    "hosts": c.get("hosts"), "threads": c.get("threads"),
                    "dirs": c.get("dirs", ""), "files": c.get("files", ""),
                    "file_size": c.get("file_size"), "block_size": c.get("block_size"),
                    "direct": str(c.get("direct_io")) == "true",
                    "random": str(c.get("random_offsets")) == "true",
                    "version": str(c.get("version", "")), "command": str(c.get("command", "")),
                    "first_ms": first.get("elapsed_time_ms"),
                    "last_ms": last.get("elapsed_time_ms"),
                    "first_Bps": first.get("bytes/s"), "last_Bps": last.get("bytes/s"),
                    "last_bytes": last.get("bytes"),
                    "original": {k: v for k, v in d.items() if k != "config"}})
    return out


def _entries(src: Source) -> List[Dict[str, Any]]:
    text = src.text.lstrip()
    got = _json_entries(src) if text.startswith("{") else _csv_entries(src)
    if not got:
        raise refuse(src.path, "no elbencho phase in the file")
    if len(got) > MAX_ENTRIES:
        raise refuse(src.path, f"{len(got)} phases: more than {MAX_ENTRIES}")
    return got


def _iso(text: str) -> str:
    """elbencho's local ISO date with its zone (2026-12-06T21:40:01.123+0000) in UTC, or ''."""
    try:
        t = datetime.datetime.strptime(str(text).strip(), "%Y-%m-%dT%H:%M:%S.%f%z")
    except ValueError:
        return ""
    return iso_utc(t.timestamp())


def _settings_bytes(e: Dict[str, Any], path: str, where: str) -> int:
    """The bytes the phase's settings move: a folder run's threads x hosts x dirs x files x
    file size, else the paths' file size (each path written whole)."""
    size = number(e["file_size"], BYTES, path, f"{where}: file size")
    if e["path_type"].strip().lower() == "dir":
        parts = [number(e[k], COUNT, path, f"{where}: {k}")
                 for k in ("threads", "hosts", "dirs", "files")]
        total = parts[0] * parts[1] * parts[2] * parts[3] * size
    else:
        total = number(e["paths"], COUNT, path, f"{where}: paths") * size
    return number(total, BYTES, path, f"{where}: the bytes its settings move")


def _phase(e: Dict[str, Any], path: str, test: Test) -> tuple:
    """(Phase, first-done MB/s or NaN) of one entry, checked."""
    where = f"{test.label}: {e['op']}"
    if "last_Bps" in e:  # JSON: exact
        nbytes = number(e["last_bytes"], BYTES, path, f"{where}: last_done bytes")
        last = number(e["last_Bps"], COUNT, path, f"{where}: last_done bytes/s") / MB
        got = e.get("first_Bps")
        first = number(got, COUNT, path, f"{where}: first_done bytes/s") / MB \
            if got not in (None, "") else float("nan")
        return Phase(bytes=[nbytes], MB_per_s=[last]), first
    last = number(e["last_MiB_s"], RATE_MIB, path, f"{where}: MiB/s [last]") * MIB_TO_MB
    mib = number(e["last_MiB"], COUNT, path, f"{where}: MiB [last]")
    nbytes = _settings_bytes(e, path, where)
    if nbytes // MiB != mib:
        raise refuse(path, f"{where}: MiB [last] is {mib}, but its settings make "
                     f"{format_size(nbytes)}: not one run's row")
    got = e["first_MiB_s"].strip()
    first = number(got, RATE_MIB, path, f"{where}: MiB/s [first]") * MIB_TO_MB \
        if got else float("nan")
    return Phase(bytes=[nbytes], MB_per_s=[last]), first


def _runs(entries: List[Dict[str, Any]]) -> List[List[Dict[str, Any]]]:
    runs: List[List[Dict[str, Any]]] = []
    for e in entries:
        if e["op"] not in MOVES_DATA:
            continue
        prev = runs[-1] if runs else None
        if e["op"] == "READ" and prev and len(prev) == 1 and prev[0]["op"] == "WRITE" and \
                all(str(prev[0][k]) == str(e[k]) for k in SAME):
            prev.append(e)
        else:
            runs.append([e])
    return runs


def _sync_after(entries: List[Dict[str, Any]], write: Dict[str, Any]) -> Any:
    """The ms of the SYNC phase right after `write` (elbencho --sync), or None."""
    i = next((k for k, e in enumerate(entries) if e is write), None)
    if i is None or write["op"] != "WRITE" or i + 1 >= len(entries) or \
            entries[i + 1]["op"] != "SYNC":
        return None
    got = entries[i + 1]["last_ms"]
    try:
        return float(got)
    except (TypeError, ValueError):
        return None


def _words(command: str) -> List[str]:
    try:
        return shlex.split(command)
    except ValueError:
        return command.split()


def _value(words: List[str], flag: str) -> str:
    """The word after `flag` on a command line ('' where it is not given)."""
    return next((words[i + 1] for i, w in enumerate(words[:-1]) if w == flag), "")


def _is_service(e: Dict[str, Any]) -> bool:
    """An entry a service wrote to its own result file (its command: elbencho --service)."""
    return "--service" in _words(e["command"])


def _key(date: Any, op: Any) -> str:
    """What ties a service's share of a phase to the master's entry: its start and kind."""
    return f"{str(date).strip()} {str(op).strip().upper()}"


def _part(e: Dict[str, Any], src: Source, index: int) -> Test:
    """A service's own share of a phase, as a piece of the master's test (`combine`)."""
    where = f"{e['where']} (a service's own {e['op']})"
    if "last_Bps" not in e:
        raise refuse(src.path, f"{where}: a service's share is read from its --jsonfile")
    threads = number(e["threads"], RANKS, src.path, f"{where}: threads")
    nbytes = number(e["last_bytes"], BYTES, src.path, f"{where}: last_done bytes")
    first_ms = number(e["first_ms"], MS, src.path, f"{where}: first time ms")
    last_ms = number(e["last_ms"], MS, src.path, f"{where}: last time ms")
    if first_ms > last_ms:
        raise refuse(src.path, f"{where}: the first worker finished after the last")
    got = e.get("first_Bps")
    words = _words(e["command"])
    port = _value(words, "--port")
    part = {"service": f"port {port}" if port.isdigit() else os.path.basename(src.path),
            "port": port if port.isdigit() else "", "phase": e["op"], "threads": threads,
            "bytes": nbytes, "first_done_seconds": first_ms / 1e3,
            "last_done_seconds": last_ms / 1e3,
            "first_done_MB_per_s": number(got, COUNT, src.path, f"{where}: first_done "
                                          "bytes/s") / MB if got not in (None, "") else None,
            "last_done_MB_per_s": number(e["last_Bps"], COUNT, src.path,
                                         f"{where}: last_done bytes/s") / MB,
            "file": os.path.abspath(src.path), "sha256": src.sha256, "line": e["where"],
            "phase_id": str(e["original"].get("phase_id") or "")}
    test = Test(index=index, label=where, tool="elbencho", tool_version=e["version"].strip(),
                fmt="elbencho-json", ranks=threads, nodes=1, part_of=_key(e["date"], e["op"]),
                parts=[part])
    test.write = Phase(bytes=[nbytes], MB_per_s=[part["last_done_MB_per_s"]])
    return test


def _master_phases(test: Test) -> Dict[str, Dict[str, Any]]:
    """{key: (op, first ms, last ms, bytes)} of a master's test, from its entries as read."""
    out = {}
    for o in test.original:
        if "phase_type" in o:  # JSON
            op, date = str(o["phase_type"]).upper(), o.get("iso_start_date", "")
            first, last = o["first_done"].get("elapsed_time_ms"), \
                o["last_done"].get("elapsed_time_ms")
        else:
            op, date = str(o.get("operation", "")).upper(), o.get("ISO date", "")
            first, last = o.get("time ms [first]"), o.get("time ms [last]")
        ph = test.write if op == "WRITE" else test.read
        out[_key(date, op)] = {"op": op, "first_ms": _ms(first), "last_ms": _ms(last),
                               "bytes": ph.bytes[0] if ph else None,
                               "phase_id": str(o.get("phase_id") or "")}
    return out


def _ms(text: Any) -> Optional[float]:
    """A time the master's entry printed (checked when it was read), or None where blank."""
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def _service_names(test: Test, parts: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """The parts, each named as the master's --hosts names its service (host:port) where its
    port says which one; else by its port and its file (elbencho's default: one service a
    host, all on one port, and a service's file does not say its host)."""
    words = _words(test.command)
    hosts = _value(words, "--hosts")
    names = [h for h in re.split(r"[,\s]+", hosts) if h]
    out = []
    for p in parts:
        mine = [h for h in names if p["port"] and h.rsplit(":", 1)[-1] == p["port"]]
        file = os.path.basename(p["file"])
        named = mine[0] if len(mine) == 1 else (
            f"port {p['port']} ({file})" if p["port"] else file)
        out.append(dict(p, service=named))
    return out


def combine(tests: List[Test]) -> None:
    """Give every service's share (`part_of`) to the master's test of the same phase among
    the files, checked against it (a share a service, their bytes the master's, the slowest
    and the fastest thread its last-done and first-done times); refuse a share that has
    none or does not add up."""
    shares = [t for t in tests if t.tool == "elbencho" and t.part_of]
    if not shares:
        return
    masters: Dict[str, List[Any]] = {}
    for t in tests:
        if t.tool == "elbencho" and not t.part_of:
            for k, ph in _master_phases(t).items():
                masters.setdefault(k, []).append((t, ph))
    by_key: Dict[str, List[Test]] = {}
    for s in shares:
        by_key.setdefault(s.part_of, []).append(s)
    for key, mine in by_key.items():
        path = mine[0].parts[0]["file"]
        parts = [p for s in mine for p in s.parts]
        seen = [p["sha256"] + p["line"] for p in parts]
        if len(set(seen)) != len(seen):
            raise refuse(path, f"{mine[0].label}: given twice: each service's share once")
        if not masters.get(key):
            raise refuse(path, f"{mine[0].label}: a service's own share of a distributed run "
                         "(elbencho --service --jsonfile): import it with the master's "
                         f"--jsonfile or --csvfile of the same run (its phase of "
                         f"{key.split()[0]} is in none of the files given)")
        # every master file of the phase gets them (its CSV and its JSON, or a file named
        # twice): each is a record of the run
        for test, ph in masters[key]:
            _check_shares(test, ph, parts, key, mine[0].label, path)
            if not any(p["phase"] == ph["op"] for p in test.parts):
                test.parts += sorted(_service_names(test, parts),
                                     key=lambda p: (p["phase"] != "WRITE", p["service"]))
            said = ("imported.per_service (the services' own --jsonfile: bytes, "
                    "first_done and last_done, each on its own clock)")
            if said not in test.exact:
                test.exact.append(said)


def _check_shares(test: Test, ph: Dict[str, Any], parts: List[Dict[str, Any]], key: str,
                  label: str, path: str) -> None:
    """The services' shares of one phase against the master's entry of it: one share a
    host, each with the master's threads a host and phase id, their bytes the master's,
    their slowest and fastest thread its last-done and first-done times."""
    threads = test.ranks // max(test.nodes, 1)
    ids = {p["phase_id"] for p in parts} | ({ph["phase_id"]} if ph["phase_id"] else set())
    said = [("services", len(parts), test.nodes),
            ("bytes", sum(p["bytes"] for p in parts), ph["bytes"]),
            ("last-done ms", max(p["last_done_seconds"] for p in parts) * 1e3, ph["last_ms"]),
            ("first-done ms", min(p["first_done_seconds"] for p in parts) * 1e3,
             ph["first_ms"])]
    said += [("threads on a service", p["threads"], threads) for p in parts]
    for what, got, want in said:
        if want is not None and abs(got - want) > 1e-6 * abs(want):
            raise refuse(path, f"{label}: the services' shares of {ph['op']} at "
                         f"{key.split()[0]} make {got:g} {what}, the master's "
                         f"{test.label} {want:g}: not that run's services")
    if len(ids - {""}) > 1:
        raise refuse(path, f"{label}: phase ids {', '.join(sorted(ids - {''}))[:200]} for "
                     f"one {ph['op']} of {key.split()[0]}: not that run's services")


def parse(src: Source, command: str = "") -> List[Test]:
    entries = _entries(src)
    moving = [e for e in entries if e["op"] in MOVES_DATA]
    shares = [e for e in moving if _is_service(e)]
    if shares and len(shares) != len(moving):
        raise refuse(src.path, "holds both a service's own shares (elbencho --service) and "
                     "a master's phases: one elbencho process writes each file")
    if shares:
        return [_part(e, src, i) for i, e in enumerate(shares)]
    fmt = "elbencho-json" if "last_Bps" in entries[0] else "elbencho-csv"
    skipped = sorted({printable(e["op"])[:20] for e in entries if e["op"] not in MOVES_DATA})
    runs = _runs(entries)
    if not runs:
        raise refuse(src.path, "no WRITE or READ phase: elbencho moved no data in "
                     + ", ".join(skipped))
    out = []
    for index, group in enumerate(runs):
        first = group[0]
        label = first["where"] + (f" ({printable(first['label'])[:40]})"
                                  if first["label"] else "")
        threads = number(first["threads"], RANKS, src.path, f"{label}: threads")
        hosts = number(first["hosts"], RANKS, src.path, f"{label}: hosts")
        own = first["command"].strip()
        test = Test(index=index, label=label, tool="elbencho",
                    tool_version=first["version"].strip(), fmt=fmt, ranks=threads * hosts,
                    nodes=hosts, command=command or own,
                    command_source="--command" if command else ("file" if own else UNKNOWN))
        test.start_time = _iso(first["date"])
        block = number(first["block_size"], BYTES, src.path, f"{label}: block size")
        size = number(first["file_size"], BYTES, src.path, f"{label}: file size")
        folder = first["path_type"].strip().lower() == "dir"
        for e in group:
            ph, first_done = _phase(e, src.path, test)
            where = f"{label}: {e['op']}"
            t_first = number(e["first_ms"], MS, src.path, f"{where}: first time ms")
            t_last = number(e["last_ms"], MS, src.path, f"{where}: last time ms")
            if t_first > t_last:
                raise refuse(src.path, f"{where}: the first worker finished after the last "
                             f"({t_first:g} ms > {t_last:g} ms)")
            if e["op"] == "WRITE":
                test.write = ph
                test.columns["tail_seconds"] = [(t_last - t_first) / 1e3]
                test.columns["first_done_MB_per_s"] = [first_done]
            else:
                test.read = ph
            test.original.append(e["original"])
        test.params.update(block_size=block, size=size, iterations=1, direct=first["direct"],
                           layout="fpp" if folder else "shared",
                           pattern="random" if first["random"] else "sequential",
                           engine="elbencho", target="")
        # elbencho's --sync is a phase of its own after the write: never in the WRITE time
        test.params["fsync"] = False
        test.keys = {"direct": "on" if first["direct"] else "off", "fsync": "off",
                     "layout": test.params["layout"], "pattern": test.params["pattern"],
                     "engine": "elbencho", "block_size": format_size(block)}
        test.derived["params.fsync"] = ("off: elbencho does not sync inside a WRITE phase; "
                                        "--sync runs a SYNC phase of its own after it")
        sync = _sync_after(entries, group[0])
        if sync is not None:
            test.notes.append(f"a SYNC phase of {sync:g} ms followed the WRITE (elbencho "
                              "--sync): the write figure leaves it out")
        test.exact += ["ranks (threads x hosts)", "nodes (hosts)", "params.block_size",
                       "params.size (file size)", "params.direct (direct IO)",
                       "params.pattern (random)", "tail_seconds (last - first time ms)"]
        test.exact += ["tool_version"] if test.tool_version else []
        test.exact += ["command_line"] if own and not command else []
        if fmt == "elbencho-json":
            test.exact += ["bytes (last_done bytes)", "aggregate_MB_per_s (last_done "
                           "bytes/s / 10^6)", "first_done_MB_per_s (first_done bytes/s)"]
        else:
            test.exact.append("bytes (its settings, checked against MiB [last])")
            test.derived.update({
                "aggregate_MB_per_s": "MiB/s [last] x 1.048576: the CSV prints whole MiB/s, "
                                      "so the figure is known to 1.05 MB/s",
                "first_done_MB_per_s": "MiB/s [first] x 1.048576 (when the first worker "
                                       "finished: elbencho's stonewall)"})
        test.derived["params.layout"] = ("a file per thread in a folder run (path type dir), "
                                         "else the given files shared by the threads")
        if test.read:
            test.derived["read_aggregate_MB_per_s"] = "as the write figure, for reads"
        if skipped:
            test.notes.append("phases that move no data left out: " + ", ".join(skipped))
        test.unknown += ["host"] + ([] if test.tool_version else ["tool_version"]) + (
            [] if test.command else ["command_line"])
        out.append(test)
    return out


def detect(text: str) -> bool:
    head = text.lstrip()[:4096]
    return head.startswith(",".join(HEAD)) or (
        head.startswith('{"phase_type"') and '"first_done"' in head)


IMPORTER = Importer(name="elbencho", title="elbencho", detect=detect, parse=parse,
                    combine=combine)
