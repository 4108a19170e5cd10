"""A Darshan log read by the `darshan` package, in a process of its own (importers/darshan.py).

Run as `python -m mpiwrite.importers.darshan_log` with the log's bytes on stdin: libdarshan-util
(C, through cffi) parses a file anyone may have made, so it never runs in the command's
process; here it has no core files and a bounded address space, and the bytes it reads are
the bytes the command hashed (written to a private file of this process, not re-read by
path).  It prints one JSON object: the job's metadata and, per module that wrote (POSIX and,
where present, MPI-IO), the figures the importer uses; or {"error": ...}.  Exit 3: the
package is not installed.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from typing import Any, Dict

MEMORY_BYTES = 2 * 2**30  # beyond what the process holds once the package is loaded
READS = {"POSIX": ("POSIX_BYTES_READ", "POSIX_READS", "POSIX_F_READ_TIME"),
         "MPI-IO": ("MPIIO_BYTES_READ", "MPIIO_INDEP_READS", "MPIIO_COLL_READS",
                    "MPIIO_SPLIT_READS", "MPIIO_NB_READS", "MPIIO_F_READ_TIME")}
WRITTEN = {"POSIX": "POSIX_BYTES_WRITTEN", "MPI-IO": "MPIIO_BYTES_WRITTEN"}


def _module(report, name: str, nprocs: int) -> Dict[str, Any]:
    from darshan.backend.cffi_backend import accumulate_records

    df = report.records[name].to_df()
    counters, fcounters = df["counters"], df["fcounters"]
    whole = accumulate_records(df, name, nprocs).derived_metrics
    out: Dict[str, Any] = {
        "bytes_written": int(counters[WRITTEN[name]].sum()),
        "files_written": int((counters[WRITTEN[name]] > 0).sum()),
        "shared_files_written": int(((counters[WRITTEN[name]] > 0)
                                     & (counters["rank"] == -1)).sum()),
        "all_io_MiB_per_s_by_slowest": float(whole.agg_perf_by_slowest),
        "all_io_bytes": int(whole.total_bytes)}
    # the same figure of darshan's over the writes alone: the reads taken out of every record
    # (a shared file's slowest-rank time still holds its reads: darshan keeps no other)
    for col in READS[name]:
        frame = counters if col in counters.columns else fcounters
        if col in frame.columns:
            frame[col] = 0
    writes = accumulate_records({"counters": counters, "fcounters": fcounters}, name,
                                nprocs).derived_metrics
    out["write_MiB_per_s_by_slowest"] = float(writes.agg_perf_by_slowest)
    out["write_seconds_by_slowest"] = float(writes.agg_time_by_slowest)
    if name == "POSIX":
        out["fsyncs"] = int(counters["POSIX_FSYNCS"].sum() + counters["POSIX_FDSYNCS"].sum())
        out["writes"] = int(counters["POSIX_WRITES"].sum())
        out["consecutive_writes"] = int(counters["POSIX_CONSEC_WRITES"].sum())
        sizes: Dict[int, int] = {}
        for k in range(1, 5):
            for size, count in zip(counters[f"POSIX_ACCESS{k}_ACCESS"],
                                   counters[f"POSIX_ACCESS{k}_COUNT"]):
                if int(count) > 0:
                    sizes[int(size)] = sizes.get(int(size), 0) + int(count)
        out["access_sizes"] = {str(s): c for s, c in sorted(sizes.items())}
    return out


def read(path: str) -> Dict[str, Any]:
    import darshan

    report = darshan.DarshanReport(path, read_all=True)
    # a region the log's map gives bytes to, of which no record came: cut short or damaged
    # (libdarshan-util says so on stderr and goes on with the modules it could read)
    lost = sorted(name for name, mod in report.modules.items()
                  if int(mod.get("len") or 0) > 0 and not int(mod.get("num_records") or 0))
    if lost:
        return {"error": f"cut short or damaged: the records of {', '.join(lost)} cannot be "
                         "read"}
    job = report.metadata["job"]
    nprocs = int(job["nprocs"])
    out: Dict[str, Any] = {
        "nprocs": nprocs, "exe": str(report.metadata.get("exe", "")),
        "start_time_sec": int(job.get("start_time_sec", 0)),
        "end_time_sec": int(job.get("end_time_sec", 0)), "run_time": float(job["run_time"]),
        "log_ver": str(job.get("log_ver", "")),
        "lib_ver": str((job.get("metadata") or {}).get("lib_ver", "")),
        "jobid": int(job.get("jobid", 0)), "modules": {}}
    for name in ("POSIX", "MPI-IO"):
        if name in report.records and len(report.records[name]):
            out["modules"][name] = _module(report, name, nprocs)
    return out


def main() -> int:
    import gc
    import resource

    # no collection of cycles in the middle of a cffi call: the package's report closes its
    # log from __del__, and a collection inside cffi's lock hung a test process for good
    gc.disable()

    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    try:
        import darshan  # noqa: F401 - loaded before the address space is bounded
        from darshan.backend import cffi_backend  # noqa: F401
    except ImportError:
        return 3
    from mpiwrite.host import address_space

    held = address_space()
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if held and (hard == resource.RLIM_INFINITY or held + MEMORY_BYTES < hard):
        resource.setrlimit(resource.RLIMIT_AS, (held + MEMORY_BYTES, hard))
    data = sys.stdin.buffer.read()
    with tempfile.TemporaryDirectory(prefix="mpiwrite-darshan-") as folder:
        path = os.path.join(folder, "log.darshan")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        try:
            got: Dict[str, Any] = read(path)
        except Exception as exc:  # noqa: BLE001 - the importer names the file and this
            got = {"error": f"{type(exc).__name__}: {exc}"[:300]}
    sys.stdout.write(json.dumps(got))
    return 0


if __name__ == "__main__":
    sys.exit(main())
