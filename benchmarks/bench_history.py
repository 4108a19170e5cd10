#!/usr/bin/env python3
"""`report` over a site's history: thousands of records, cold (no index) and warm (index).

Synthetic records made with the real writer (tests/synth.py: 64 ranks on 4 nodes, 3
iterations, two configurations), in folders of CHUNK records; for each count, medians over
--repeat of three commands, each a process of its own so all three pay for starting Python
and importing h5py:

  bare   a loop that opens every record with h5py and reads one attribute (run_id)
  cold   `mpiwrite report PATHS --by config --cache EMPTY_DIR` (it reads every record's
         run-level part and writes the index)
  warm   the same command again (the index is there)

with each command's peak RSS (wait4), and the CPU time of cold over bare (cpu c/b: what
the load of other processes changes least; cold's includes its worker processes).
Records are dated a minute back once written, as any record of a history is: the index
keeps only records that have settled (records/index.py).
Goals (issue 20): 10,000 records warm under 2 s; cold within 5x of bare; under 1 GiB.

    python benchmarks/bench_history.py [--counts 1000,3000] [--repeat 3] [--folder DIR]
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))

KINDS = 14  # records differ in i % 7 (their figures) and i % 2 (their config)
BARE = """
import sys, h5py
for p in sys.argv[1:]:
    with open(p) as listing:
        for line in listing:
            with h5py.File(line.rstrip("\\n"), "r") as h5:
                h5.attrs["run_id"]
"""


def _make(path: str, i: int) -> None:
    import synth

    synth.make(path, [800.0 + i % 7, 810.0, 790.0], f"run{i:06d}",
               tags={"config": "AB"[i % 2]}, nodes=4, ranks_per_node=16)


def make_records(folder: str, count: int, chunk: int) -> list:
    """Folders of `chunk` records each, up to `count` records (reused when present).

    Record i differs from record i % KINDS only in its run id (same length, once in the
    file): the first KINDS are made with the real writer, the others are their bytes with
    the id replaced, which is checked to be the writer's own output for one of them (the
    writer is deterministic).  Making each with the writer took 0.3-10 s a record on a
    loaded machine (its fsync); copies take microseconds."""
    folders = []
    past = time.time_ns() - 60 * 10**9
    kinds: dict = {}
    for c in range(math.ceil(count / chunk)):
        sub = os.path.join(folder, f"chunk{c:03d}")
        folders.append(sub)
        done = os.path.join(sub, ".complete")
        if os.path.exists(done):
            continue
        os.makedirs(sub, exist_ok=True)
        for i in range(c * chunk, min(count, (c + 1) * chunk)):
            path = os.path.join(sub, f"run{i:06d}.h5")
            if i % KINDS not in kinds:
                tmp = os.path.join(sub, f".kind{i % KINDS}")
                _make(tmp, i % KINDS)
                with open(tmp, "rb") as fh:
                    kinds[i % KINDS] = fh.read()
                os.unlink(tmp)
            data = kinds[i % KINDS]
            old, new = f"run{i % KINDS:06d}".encode(), f"run{i:06d}".encode()
            assert data.count(old) == 1, "the run id is not once in the record"
            with open(path, "wb") as fh:
                fh.write(data.replace(old, new))
            if i == KINDS:  # a copy is what the writer makes
                _make(path + ".check", i)
                with open(path + ".check", "rb") as a, open(path, "rb") as b:
                    assert a.read() == b.read(), "a copied record differs from the writer's"
                os.unlink(path + ".check")
            os.utime(path, ns=(past, past))
        open(done, "w").close()
    return folders


def timed(cmd, env) -> tuple:
    """(seconds, peak RSS in bytes, CPU seconds) of one command, which must succeed; its
    CPU time includes the worker processes it waited for (records/sandbox.py)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    _pid, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - t0
    err = proc.stderr.read().decode() if proc.stderr else ""
    proc.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}\n{err}")
    return seconds, usage.ru_maxrss * 1024, usage.ru_utime + usage.ru_stime


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--counts", default="1000,3000",
                    help="record counts, e.g. 1000,3000,10000 (the issue's three)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--folder", default=None,
                    help="keep the records here to reuse them (default: a temporary folder)")
    args = ap.parse_args()
    counts = [int(x) for x in args.counts.split(",")]
    chunk = math.gcd(1000, *counts)  # the same folders whatever counts are asked
    mpiwrite = shutil.which("mpiwrite") or os.path.join(os.path.dirname(sys.executable),
                                                        "mpiwrite")
    env = dict(os.environ)
    work = tempfile.mkdtemp(prefix="bench-history-")
    folder = args.folder or os.path.join(work, "records")
    ok = True
    try:
        t0 = time.perf_counter()
        all_folders = make_records(folder, max(counts), chunk)
        print(f"records: {max(counts)} in {folder} ({time.perf_counter() - t0:.0f} s to "
              f"make); 64 ranks x 3 iterations each; medians of {args.repeat}")
        print(f"{'records':>8} {'bare ms':>8} {'cold ms':>8} {'warm ms':>8} {'cold/bare':>9} "
              f"{'warm s':>7} {'cold s':>7} {'peak MiB':>9} {'cpu c/b':>8}")
        for n in counts:
            folders = all_folders[:n // chunk]
            listing = os.path.join(work, f"list-{n}")
            with open(listing, "w") as fh:
                for f in folders:
                    for name in sorted(os.listdir(f)):
                        if name.endswith(".h5"):
                            fh.write(os.path.join(f, name) + "\n")
            bare, cold, warm, peak, cpu = [], [], [], 0, []
            for rep in range(args.repeat):
                cache = os.path.join(work, f"cache-{n}-{rep}")
                report = [mpiwrite, "report", *folders, "--by", "config", "--cache", cache]
                s, _rss, bare_cpu = timed([sys.executable, "-c", BARE, listing], env)
                bare.append(s)
                s, rss, cold_cpu = timed(report, env)
                cold.append(s)
                cpu.append(cold_cpu / bare_cpu)
                peak = max(peak, rss)
                s, rss, _cpu = timed(report, env)
                warm.append(s)
                peak = max(peak, rss)
                shutil.rmtree(cache, ignore_errors=True)
            b, c, w = (statistics.median(x) for x in (bare, cold, warm))
            print(f"{n:>8} {b / n * 1e3:8.3f} {c / n * 1e3:8.3f} {w / n * 1e3:8.3f} "
                  f"{c / b:9.2f} {w:7.2f} {c:7.2f} {peak / 2**20:9.0f} "
                  f"{statistics.median(cpu):8.2f}", flush=True)
            ok &= c / b <= 5 and peak < 2**30 and (n < 10000 or w < 2.0)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
