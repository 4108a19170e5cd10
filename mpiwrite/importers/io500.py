"""An IO500 result folder as imported tests (docs/import.md).

`io500 config.ini` leaves a folder per run: `result.txt` (INI-like: a `[run]` section with the
ranks, IO500's version and its config hash; a section per phase with IOR's or mdtest's command
line `exe`, the phase's `score` and its time `t_delta`; `; ERROR INVALID ...` comments where a
rule failed; a `[SCORE]` section with the score hash), `result_summary.txt` (the same scores
as `[RESULT]` lines), and per IOR phase IOR's own log (`ior-easy-write.txt`) and its per-rank
CSV (`ior-easy-write.csv`).  `mpiwrite import FOLDER` (or its `result.txt`) reads the two
write phases, ior-easy-write and ior-hard-write, as runs: what mpiwrite measures.

Against the folder: the aggregate is IO500's score, GiB/s (2^30 B/s) x 1.073741824, exact; IO500
takes it from IOR's bandwidth, whose time runs from the first open to the last close (open
included).  The bytes are IOR's "actual aggregate bytes moved" from its log (a stonewalled
phase moves less than its -b x -s asks), else the per-rank CSV's rates times their times
(derived), else unknown.  The ranks are `procs`; the layout, pattern, block sizes, fsync and
stonewall come from the phase's IOR command line (-F, -s, -t, -b, -e, -D).  The phase's
preset is its IO500 name, so that `show` and `report` judge it by IO500's rules (a 300 s
stonewall); IO500's own verdict (its `ERROR INVALID` lines, the run's and the phase's), its
config hash and the score hash are kept as the tool's own words.  Neither the nodes nor the
host are in the folder.
"""

from __future__ import annotations

import re
from typing import Dict, List, Optional, Tuple

from mpiwrite.formats.numbers import BYTES, MAX_BYTES, RANKS, RATE, SECONDS, number
from mpiwrite.importers import ior_command, ior_ranks
from mpiwrite.importers.base import (
    UNKNOWN,
    Importer,
    Phase,
    Source,
    Test,
    read_beside,
    refuse,
    size_text,
)
from mpiwrite.importers.ior import _access, _finish, _from_command
from mpiwrite.units import MB
from mpiwrite.vocab.presets import PRESETS

WRITE_PHASES = ("ior-easy-write", "ior-hard-write")
_SECTION = re.compile(r"^\[([A-Za-z0-9_.-]{1,64})\]\s*$")
_MOVED = re.compile(r"Using actual aggregate bytes moved\s*=\s*(\S*)\s*$", re.M)
MAX_SECTIONS = 200
MAX_RESULT_BYTES = 1 << 20  # IO500's result.txt is a few KB


def detect(text: str) -> bool:
    head = text.lstrip()[:4096]
    return head.startswith("[run]") and re.search(r"^version\s*=\s*io500", head, re.M) \
        is not None and re.search(r"^config-hash\s*=", head, re.M) is not None


def sections(src: Source) -> List[Tuple[str, Dict[str, str], List[str]]]:
    """(name, its `key = value` pairs, its `ERROR INVALID` reasons), in the file's order."""
    if src.size_bytes > MAX_RESULT_BYTES:
        raise refuse(src.path, f"larger than {MAX_RESULT_BYTES // 1024} KiB: not IO500's "
                     "result.txt (a few KB)")
    out: List[Tuple[str, Dict[str, str], List[str]]] = []
    for n, line in enumerate(src.text.splitlines(), 1):
        line = line.strip()
        m = _SECTION.match(line)
        if m:
            if len(out) >= MAX_SECTIONS:
                raise refuse(src.path, f"more than {MAX_SECTIONS} sections: not IO500's")
            if any(m.group(1) == name for name, _kv, _why in out):
                raise refuse(src.path, f"line {n}: a second [{m.group(1)}]: IO500 writes "
                             "each phase once")
            out.append((m.group(1), {}, []))
            continue
        if not line:
            continue
        if not out:
            raise refuse(src.path, f"line {n}: text before the first [section]")
        if line.startswith(";"):
            said = line[1:].strip()
            if said.startswith("ERROR INVALID"):
                out[-1][2].append(said[len("ERROR INVALID"):].strip())
            continue
        key, eq, value = line.partition("=")
        if not eq:
            raise refuse(src.path, f"line {n}: neither [section], `key = value` nor a comment")
        out[-1][1][key.strip()] = value.strip()
    return out


def _sibling(src: Source, name: str) -> Optional[str]:
    """The text of a file beside result.txt, or None where there is none (base.read_beside:
    a regular file only, never through a symlink)."""
    try:
        return read_beside(src.path, name)[1].decode("utf-8", "replace")
    except OSError:
        return None


def _bytes_moved(src: Source, phase: str, test: Test) -> int:
    log = _sibling(src, f"{phase}.txt")
    found = _MOVED.findall(log) if log else []
    if len(found) > 1:
        raise refuse(src.path, f"{phase}.txt: IOR's log says {len(found)} times how many "
                     "bytes it moved (one test a phase)")
    if found:
        moved = number(found[0], BYTES, src.path, f"{phase}.txt: bytes moved")
        test.derived["bytes"] = f"IOR's log ({phase}.txt): actual aggregate bytes moved"
        return moved
    text = _sibling(src, f"{phase}.csv")
    try:
        rows = ior_ranks.rows(text) if text else []
    except ior_ranks.Misfit:  # not IOR's rows: no bytes from it
        rows = []
    if rows and all(r.access == "write" for r in rows):
        total = sum(r.rate_with_open * r.with_open for r in rows)
        moved = number(round(total), BYTES, src.path, f"{phase}.csv: bytes")
        test.derived["bytes"] = (f"the per-rank CSV ({phase}.csv): each rank's rate "
                                 "times its time, open included, summed")
        return moved
    test.unknown.append("bytes (neither IOR's log nor its per-rank CSV is beside result.txt)")
    return 0


def parse(src: Source, command: str = "") -> List[Test]:
    found = sections(src)
    run = next((kv for name, kv, _why in found if name == "run"), None)
    if run is None or "procs" not in run:
        raise refuse(src.path, "no [run] section with procs: not an IO500 result.txt")
    run_invalid = next(why for name, _kv, why in found if name == "run")
    ranks = number(run["procs"], RANKS, src.path, "[run] procs")
    version = run.get("version", UNKNOWN)
    score_kv = next((kv for name, kv, _why in found if name == "SCORE"), {})
    tests: List[Test] = []
    failed: List[str] = []
    for name, kv, invalid in found:
        if name not in WRITE_PHASES:
            continue
        label = f"phase {name}"
        if "score" not in kv:
            raise refuse(src.path, f"{label}: no score")
        gib = number(kv["score"], RATE, src.path, f"{label}: score")
        if gib == 0:  # IO500's mark of a phase that failed: no measurement to import
            failed.append(name)
            continue
        seconds = number(kv.get("t_delta", "0"), SECONDS, src.path, f"{label}: t_delta")
        exe = kv.get("exe", "")
        test = Test(index=len(tests), label=label, tool="io500", tool_version=version,
                    fmt="io500-result", ranks=ranks, command=command or exe,
                    command_source="--command" if command else ("file" if exe else UNKNOWN))
        start = kv.get("t_start", "")
        if re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", start):
            test.start_time = start.replace(" ", "T")
            test.time_note = "IO500's t_start, the machine's local time (no zone is written)"
        flags = ior_command.command_flags(test.command)
        _from_command(test, flags, {})
        p = test.params
        try:
            transfer = size_text(flags.get("transfer", "262144"))
            block = size_text(flags.get("block", "1048576"))
            segments = int(flags.get("segments", "1"))
            if not 1 <= segments <= 10**12 or block * segments > MAX_BYTES:
                raise ValueError
        except ValueError:
            raise refuse(src.path, f"{label}: the IOR command's -t, -b or -s is not a size") \
                from None
        p.update(block_size=transfer, size=block * segments, iterations=1, target=p.get(
            "target", ""))
        wall = flags.get("stonewall")
        if wall is not None:
            p["stonewall"] = number(wall, SECONDS, src.path, f"{label}: the command's -D")
        if name in PRESETS:
            p["preset"] = name
        _access(test, segments, bool(flags.get("random")), flags.get("collective"),
                "from the command line")
        moved = _bytes_moved(src, name, test)
        test.write = Phase(bytes=[moved], MB_per_s=[gib * 2**30 / MB], open_included=True)
        if moved:
            ior_ranks.read_for([test], src.path, flags)
        test.exact += ["aggregate_MB_per_s (IO500's score, GiB/s x 1.073741824)",
                       "ranks (procs)"]
        if wall is not None:
            test.exact.append("params.stonewall (the command's -D)")
        test.unknown += ["nodes", "host"]
        verdict = run_invalid + invalid
        test.original.append({"phase": name, "score_GiB_per_s": gib, "t_delta_seconds": seconds,
                              "throughput_stonewall_GiB_per_s": kv.get("throughput-stonewall"),
                              "io500_valid": not verdict, "io500_invalid": verdict,
                              "config_hash": run.get("config-hash", UNKNOWN),
                              "score_hash": score_kv.get("hash", UNKNOWN),
                              "io500_mode": run.get("mode", UNKNOWN)})
        if verdict:
            test.notes.append("IO500 marked this phase invalid: " + "; ".join(verdict))
        _finish(test)
        test.derived.pop("aggregate_MB_per_s", None)  # IOR's words: here it is IO500's score
        test.derived["aggregate_with_open_MB_per_s"] = (
            "IO500's score: IOR's bandwidth, timed from the first open to the last close")
        tests.append(test)
    if not tests:
        raise refuse(src.path, "no ior-easy-write or ior-hard-write phase with a score: "
                     "nothing written to import" + (f" (IO500 scored {', '.join(failed)} 0: "
                                                     "failed)" if failed else ""))
    for test in tests:
        test.notes += [f"phase {name} left out: IO500 scored it 0 (a phase that failed)"
                       for name in failed]
    return tests


IMPORTER = Importer(name="io500", title="IO500", detect=detect, parse=parse)
