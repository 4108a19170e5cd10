#!/usr/bin/env python3
"""A study's points in one launch against one launch per point, measured alternately.

A 24-point study of tiny points (6 block sizes x 4 ranks-per-node subsets, 1 MiB per rank,
one repetition) runs as `mpiexec -n N mpiwrite study run FILE`, against the same 24 runs as 24
separate `mpiexec -n r mpiwrite run ...` launches (each with its own Python and MPI start-up).
Rounds alternate the two so that drift on a shared machine falls on both; the medians and the
median of the per-round ratios (study / separate launches; goal at 16 ranks: 0.4 or less) are
printed, with the records each side left checked for count.

    python benchmarks/bench_study.py [--ranks 16] [--rounds 3] [--dir DIR]
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

BIN = os.path.dirname(os.path.abspath(sys.executable))
BLOCKS = ["32KiB", "64KiB", "128KiB", "256KiB", "512KiB", "1MiB"]


def subsets(ranks: int):
    """Four ranks-per-node values up to `ranks` (one node here): 1, ranks/4, ranks/2, ranks."""
    return sorted({1, max(1, ranks // 4), max(1, ranks // 2), ranks})


def study_text(folder: str, ranks: int) -> str:
    return f"""
[study]
name = "bench"
target = "{folder}/data"
results = "{folder}/study-results"
order = "sequential"

[run]
size = "1MiB"
progress_interval = 0

[axes]
block_size = {BLOCKS!r}
ranks_per_node = {subsets(ranks)!r}
""".replace("'", '"')


def launch(cmd, env) -> float:
    start = time.monotonic()
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
    if out.returncode:
        sys.exit(f"failed ({out.returncode}): {' '.join(cmd)}\n{out.stderr[-2000:]}")
    return time.monotonic() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dir", default=None, help="Where to write (default: a temporary folder "
                                                "under the current one, on its filesystem).")
    args = ap.parse_args()
    mpiexec, mpiwrite = os.path.join(BIN, "mpiexec"), os.path.join(BIN, "mpiwrite")
    env = dict(os.environ)
    points = [(b, r) for b in BLOCKS for r in subsets(args.ranks)]
    folder = tempfile.mkdtemp(prefix="bench-study-", dir=args.dir or os.getcwd())
    study_times, single_times, ratios = [], [], []
    try:
        path = os.path.join(folder, "bench.toml")
        with open(path, "w") as fh:
            fh.write(study_text(folder, args.ranks))
        for n in range(args.rounds):
            for side in ("study", "runs") if n % 2 == 0 else ("runs", "study"):
                for sub in ("study-results", "run-results"):
                    shutil.rmtree(os.path.join(folder, sub), ignore_errors=True)
                if side == "study":
                    t = launch([mpiexec, "-n", str(args.ranks), mpiwrite, "study", "run", path],
                               env)
                    got = len(glob.glob(os.path.join(folder, "study-results", "*.h5")))
                    study_times.append(t)
                else:
                    t = 0.0
                    for block, r in points:
                        t += launch([mpiexec, "-n", str(r), mpiwrite, "run",
                                     os.path.join(folder, "data"), "-s", "1MiB", "-b", block,
                                     "--progress-interval", "0", "--results",
                                     os.path.join(folder, "run-results")], env)
                    got = len(glob.glob(os.path.join(folder, "run-results", "*.h5")))
                    single_times.append(t)
                if got != len(points):
                    sys.exit(f"{side}: {got} records, expected {len(points)}")
            ratios.append(study_times[-1] / single_times[-1])
            print(f"round {n + 1}: study {study_times[-1]:.1f} s, {len(points)} launches "
                  f"{single_times[-1]:.1f} s, ratio {ratios[-1]:.3f}", flush=True)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print(f"{len(points)} points at up to {args.ranks} ranks, {args.rounds} rounds: study in "
          f"one launch median {statistics.median(study_times):.1f} s, one launch per point "
          f"median {statistics.median(single_times):.1f} s; ratio median "
          f"{statistics.median(ratios):.3f} (goal <= 0.4)")


if __name__ == "__main__":
    main()
