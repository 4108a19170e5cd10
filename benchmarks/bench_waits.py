#!/usr/bin/env python3
"""What sampling the wait channels costs a run (run/waits.py): the same run with the sampler
and without it (MPIWRITE_WAIT_SAMPLES=off), alternated, on tmpfs (the writer only runs: where
a thread taking the interpreter's lock 20 times a second would show most) and on this
machine's disk with fsync.  Prints each pair's aggregate and the median ratio.

    python benchmarks/bench_waits.py [--rounds 7] [--ranks 2] [--size 1G] [--disk DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

BIN = os.path.dirname(os.path.abspath(sys.executable))


def one(target: str, ranks: int, size: str, off: bool) -> float:
    env = dict(os.environ)
    if off:
        env["MPIWRITE_WAIT_SAMPLES"] = "off"
    out = subprocess.run([os.path.join(BIN, "mpiexec"), "-n", str(ranks),
                          os.path.join(BIN, "mpiwrite"), "run", target, "-s", size,
                          "--no-record", "--progress-interval", "0", "--json", "-"],
                         check=True, capture_output=True, text=True, env=env)
    shutil.rmtree(target, ignore_errors=True)
    return json.loads(out.stdout)["iterations"][0]["aggregate_MB_per_s"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--size", default="1G")
    ap.add_argument("--disk", default=None, help="a folder on a disk [default: a new one in "
                    "the working folder]")
    args = ap.parse_args()
    places = []
    if os.path.isdir("/dev/shm"):
        places.append(("tmpfs", tempfile.mkdtemp(prefix="mw-waits-", dir="/dev/shm")))
    places.append(("disk", args.disk or tempfile.mkdtemp(prefix="mw-waits-", dir=".")))
    try:
        for name, top in places:
            ratios, on_all, off_all = [], [], []
            for n in range(args.rounds):
                order = (False, True) if n % 2 == 0 else (True, False)
                got = {off: one(os.path.join(top, "t"), args.ranks, args.size, off)
                       for off in order}
                on_all.append(got[False])
                off_all.append(got[True])
                ratios.append(got[False] / got[True])
                print(f"{name} round {n + 1}: sampled {got[False]:.1f}, not sampled "
                      f"{got[True]:.1f} MB/s, ratio {ratios[-1]:.4f}", flush=True)
            print(f"{name}: {args.ranks} ranks x {args.size}, {args.rounds} rounds: medians "
                  f"sampled {statistics.median(on_all):.1f}, not sampled "
                  f"{statistics.median(off_all):.1f} MB/s; median ratio "
                  f"{statistics.median(ratios):.4f} (goal >= 0.98)")
    finally:
        for _name, top in places:
            shutil.rmtree(top, ignore_errors=True)


if __name__ == "__main__":
    main()
