"""A Darshan log as an imported, observed run (docs/import.md).

Darshan records what an application's ranks did to files (counters per file and rank, reduced
for shared files); it is no benchmark: the run it makes is marked observed (`tool=darshan`,
a note, and its key `engine=darshan`).  The log is read by the `darshan` package (`pip install
'mpiwrite[darshan]'`), in a process of its own (importers/darshan_log.py: libdarshan-util's C
on a file anyone may have made runs there, bounded in time, output and memory).

The run's write rate is Darshan's own "aggregate performance by the slowest rank" over the
writes: the bytes written divided by the slowest rank's I/O time, computed by libdarshan-util
(`agg_perf_by_slowest`) with the reads taken out of every record; where the job also read
from a shared file, the slowest rank's time Darshan keeps for it holds the reads too (it keeps
no other), so the write rate is a floor.  The MPI-IO module's figure is used where the job
wrote through MPI-IO (it times the MPI calls), else POSIX's.  The bytes are POSIX's
`POSIX_BYTES_WRITTEN` summed, exact; the ranks `nprocs`; the command the executable's line.
Files written, shared or not, fsync calls and the most common access sizes are kept.
"""

from __future__ import annotations

import json
import sys
from typing import Any, Dict, List

from mpiwrite.formats.numbers import BYTES, RANKS, RATE_MIB, number
from mpiwrite.importers.base import UNKNOWN, Importer, Phase, Source, Test, iso_utc, refuse
from mpiwrite.units import MB, MiB

MAGIC = (6567223).to_bytes(8, "little")  # DARSHAN_MAGIC_NR, after the 8-byte version
TIMEOUT = 120.0
OUTPUT_CAP = 1 << 20
NOT_INSTALLED = 3


def detect_bytes(data: bytes) -> bool:
    """A Darshan log's header: its version ("3.21", NUL-padded to 8 bytes), the magic."""
    return len(data) > 16 and data[:2] == b"3." and data[8:16] == MAGIC


def detect(text: str) -> bool:
    return False  # a binary log: told from its bytes (detect_bytes), never from text


def _read(src: Source) -> Dict[str, Any]:
    from mpiwrite.procs import run_bounded, signal_name

    got = run_bounded([sys.executable, "-m", "mpiwrite.importers.darshan_log"], TIMEOUT,
                      output_cap=OUTPUT_CAP, input=src.data)
    if got.code == NOT_INSTALLED:
        raise refuse(src.path, "a Darshan log: reading it needs the darshan package "
                     "(pip install 'mpiwrite[darshan]')")
    if got.timed_out:
        raise refuse(src.path, f"the Darshan library did not finish reading it in "
                     f"{TIMEOUT:g} s; not read")
    if not got.ok:
        how = signal_name(-got.code) if got.code is not None and got.code < 0 \
            else f"exit status {got.code}"
        raise refuse(src.path, f"the Darshan library crashed reading it ({how}); not read")
    said = [ln.strip() for ln in got.text("err").splitlines() if ln.startswith("Error:")]
    if said:  # libdarshan-util's own complaint, on its stderr
        raise refuse(src.path, f"not a Darshan log it can read: {said[0][len('Error:'):].strip()}")
    try:
        doc = json.loads(got.out)
    except ValueError:
        doc = None
    if not isinstance(doc, dict):
        raise refuse(src.path, "the Darshan reader gave no answer")
    if "error" in doc:
        raise refuse(src.path, f"not a Darshan log it can read: {doc['error']}")
    return doc


def parse(src: Source, command: str = "") -> List[Test]:
    if src.data is None or not detect_bytes(src.data):
        raise refuse(src.path, "not a Darshan log (no Darshan header)")
    doc = _read(src)
    modules = doc.get("modules") if isinstance(doc.get("modules"), dict) else {}
    posix = modules.get("POSIX")
    if not isinstance(posix, dict) or not posix.get("bytes_written"):
        raise refuse(src.path, "a Darshan log of a job that wrote nothing through POSIX: "
                     "no write to import")
    used = "MPI-IO" if isinstance(modules.get("MPI-IO"), dict) and \
        modules["MPI-IO"].get("bytes_written") else "POSIX"
    mod = modules[used]
    ranks = number(doc.get("nprocs"), RANKS, src.path, "nprocs")
    written = number(posix["bytes_written"], BYTES, src.path, "POSIX_BYTES_WRITTEN")
    mib = number(mod.get("write_MiB_per_s_by_slowest"), RATE_MIB, src.path,
                 f"{used} write rate by the slowest rank")
    exe = str(doc.get("exe", "")).strip()
    test = Test(index=0, label="job", tool="darshan", tool_version=str(doc.get("lib_ver", "")),
                fmt="darshan-log", ranks=ranks, command=command or exe,
                command_source="--command" if command else ("file" if exe else UNKNOWN))
    start = doc.get("start_time_sec")
    if isinstance(start, int) and 0 < start < 253402300799:
        test.start_time = iso_utc(start)
        end = doc.get("end_time_sec")
        if isinstance(end, int) and start <= end < 253402300799:
            test.end_time = iso_utc(end)
    test.write = Phase(bytes=[written], MB_per_s=[mib * MiB / MB])
    fsyncs = int(posix.get("fsyncs") or 0)
    shared = int(posix.get("shared_files_written") or 0)
    test.params.update(iterations=1, engine="darshan", target="",
                       layout="shared" if shared else "fpp", fsync=fsyncs > 0, pattern=UNKNOWN)
    test.keys = {"engine": "darshan", "layout": test.params["layout"],
                 "fsync": "on" if fsyncs else "off", "direct": UNKNOWN, "block_size": UNKNOWN,
                 "pattern": UNKNOWN}
    test.exact += ["bytes (POSIX_BYTES_WRITTEN, summed)", "ranks (nprocs)"]
    test.derived.update({
        "aggregate_MB_per_s": f"Darshan's {used} aggregate performance by the slowest rank "
                              "over the writes (libdarshan-util's agg_perf_by_slowest with "
                              "the reads taken out; a shared file's slowest-rank time still "
                              "holds its reads), MiB/s x 1.048576",
        "params.fsync": f"POSIX_FSYNCS + POSIX_FDSYNCS: {fsyncs}",
        "params.layout": f"{shared} of the files written shared by the ranks (Darshan's rank "
                         "-1 records)"})
    test.unknown += ["nodes", "host", "mpi", "params.direct", "params.block_size",
                     "params.pattern"]
    test.notes.append(f"observed by Darshan {test.tool_version or '?'} in a job's run, not a "
                      f"benchmark: {int(posix.get('files_written') or 0)} file(s) written, "
                      f"{fsyncs} fsync call(s); the most common POSIX access sizes (reads and "
                      f"writes): {posix.get('access_sizes') or {}}")
    test.original.append({"modules": modules, "jobid": doc.get("jobid"),
                          "log_ver": doc.get("log_ver"), "run_time": doc.get("run_time")})
    return [test]


IMPORTER = Importer(name="darshan", title="Darshan", detect=detect, parse=parse,
                    detect_bytes=detect_bytes)
