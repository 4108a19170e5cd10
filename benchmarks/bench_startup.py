#!/usr/bin/env python3
"""Start-up cost at 1, 4 and 16 ranks: process start to the first barrier, and the whole run,
against a bare mpi4py start (MPI_Init and one barrier) measured alternately in the same run.

Each rank measures the time since its process started when it reaches the setup barrier
(`startup_seconds` in the record: the maximum over ranks; imports, MPI_Init, node split, node
facts, preflight).  The whole wall time of a tiny run (1 MiB per rank) is printed beside it,
and the median of the per-round ratios tiny run / bare start (target: under 3 at 16 ranks).

It measures mpiwrite as an installed package runs: with its bytecode compiled.  An editable
install under PYTHONDONTWRITEBYTECODE=1 (this sandbox sets it) never caches bytecode, so every
rank would compile every module from source (3.2x instead of 2.8x at 16 ranks, measured): the
benchmark compiles it first unless --as-is is given, and says which it measured.

    python benchmarks/bench_startup.py [--ranks 1,4,16] [--repeat 5] [--as-is]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

BIN = os.path.dirname(os.path.abspath(sys.executable))


def fresh_bytecode(source: str) -> bool:
    """Whether the source's cached bytecode is there and matches it (a stale .pyc is as good
    as none: the interpreter compiles the source again and, under PYTHONDONTWRITEBYTECODE,
    on every start)."""
    try:
        with open(importlib.util.cache_from_source(source), "rb") as f:
            head = f.read(16)
        st = os.stat(source)
    except OSError:
        return False
    if len(head) < 16 or head[:4] != importlib.util.MAGIC_NUMBER:
        return False
    flags = int.from_bytes(head[4:8], "little")
    if flags & 1:  # hash-based: checked against the source's hash, or never
        return True
    return (int.from_bytes(head[8:12], "little") == int(st.st_mtime) & 0xFFFFFFFF
            and int.from_bytes(head[12:16], "little") == st.st_size & 0xFFFFFFFF)


def bytecode(compile_it: bool) -> str:
    """Whether the mpiwrite that the ranks import has its bytecode cached and current
    (compiling it when asked and missing or stale), as one line for the output."""
    out = subprocess.run([os.path.join(BIN, "python"), "-c",
                          "import mpiwrite, os; print(os.path.dirname(mpiwrite.__file__))"],
                         capture_output=True, text=True, check=True, cwd=tempfile.gettempdir())
    pkg = out.stdout.strip()
    sources = sorted(os.path.join(d, n) for d, _, names in os.walk(pkg) for n in names
                     if n.endswith(".py"))  # the layer folders too
    missing = [p for p in sources if not fresh_bytecode(p)]
    if missing and compile_it:
        subprocess.run([os.path.join(BIN, "python"), "-m", "compileall", "-q", pkg],
                       check=True)
        return f"bytecode: compiled {len(missing)} of {len(sources)} modules in {pkg} first"
    if missing:
        return (f"bytecode: {len(missing)} of {len(sources)} modules in {pkg} have none or a stale "
                "one: every rank compiles them (--as-is)")
    return f"bytecode: cached for all {len(sources)} modules in {pkg}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", default="1,4,16")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--as-is", action="store_true",
                    help="do not compile mpiwrite's bytecode first")
    args = ap.parse_args()
    print(bytecode(compile_it=not args.as_is))
    mpiexec, mpiwrite = os.path.join(BIN, "mpiexec"), os.path.join(BIN, "mpiwrite")
    print(f"medians of {args.repeat}; {os.cpu_count()} cores (16 ranks are oversubscribed here)")
    print(f"{'ranks':>6} {'to 1st barrier s':>17} {'whole run s':>12} {'bare mpi4py s':>14} "
          f"{'run/bare':>9}")
    bare_cmd = [os.path.join(BIN, "python"), "-c",
                "from mpi4py import MPI; MPI.COMM_WORLD.Barrier()"]
    with tempfile.TemporaryDirectory() as d:
        for n in (int(x) for x in args.ranks.split(",")):
            startup, wall, bare, ratio = [], [], [], []
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                subprocess.run([mpiexec, "-n", str(n)] + bare_cmd, cwd=d, check=True,
                               capture_output=True)
                bare.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                out = subprocess.run([mpiexec, "-n", str(n), mpiwrite, "run", "t", "-s", "1M",
                                      "--no-record", "--json", "-", "--progress-interval", "0"],
                                     cwd=d, check=True, capture_output=True, text=True)
                wall.append(time.perf_counter() - t0)
                startup.append(json.loads(out.stdout)["startup_seconds"])
                ratio.append(wall[-1] / bare[-1])
            print(f"{n:>6} {statistics.median(startup):17.2f} {statistics.median(wall):12.2f} "
                  f"{statistics.median(bare):14.2f} {statistics.median(ratio):9.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
