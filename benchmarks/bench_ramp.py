#!/usr/bin/env python3
"""`run --ramp`'s steady rate against dd's, measured beside it on one throttled disk.

The disk is bench_throttled.py's (an ext4 on a loop device on tmpfs, its writes throttled by a
cgroup-v1 blkio rule; needs root).  Each round, in turn: dd writing O_DIRECT for the window's
length (`conv=fsync`, dd's own figure), and one rank of `mpiwrite run --direct --time WINDOW
--ramp RAMP` (its aggregate counts after the ramp; the record's whole-run rate beside it); with
--buffered, also the same run without --direct (fsync at the end, the ramp ends with an fsync).
Prints each round and the medians of the ratios to dd.

    python benchmarks/bench_ramp.py [--ramp 60] [--window 30] [--rate-mib 20] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_throttled import BIN, run, throttled_disk  # noqa: E402

BS = 1 << 20


def dd(inside, path, seconds: float, rate: int) -> float:
    count = max(1, int(seconds * rate / BS))
    out = run(inside + ["dd", "if=/dev/zero", f"of={path}", f"bs={BS}", f"count={count}",
                        "oflag=direct", "conv=fsync"])
    m = re.search(r"copied, ([0-9.]+) s", out.stderr)
    return count * BS / float(m.group(1)) / 1e6


def mpiwrite(inside, folder, ramp: float, window: float, direct: bool, results: str):
    """(the rate after the ramp, the whole run's rate) of one rank's run, from its record."""
    out = run(inside + [os.path.join(BIN, "mpiexec"), "-n", "1", os.path.join(BIN, "mpiwrite"),
                        "run", folder, "-t", f"{window:g}", "--ramp", f"{ramp:g}", "-b", str(BS),
                        *(["--direct"] if direct else []), "--results", results,
                        "--progress-interval", "0", "--json", "-"], env=dict(os.environ))
    it = json.loads(out.stdout)["iterations"][0]
    return it["aggregate_MB_per_s"], it["whole_MB_per_s"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ramp", type=float, default=60.0)
    ap.add_argument("--window", type=float, default=30.0)
    ap.add_argument("--rate-mib", type=int, default=20, help="the disk's throttle, MiB/s")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--buffered", action="store_true", help="also a buffered run (no --direct)")
    args = ap.parse_args()
    rate = args.rate_mib << 20
    image = int((args.ramp + args.window) * rate * 1.3) >> 20
    names = ["dd", "direct"] + (["buffered"] if args.buffered else [])
    got = {k: [] for k in ("dd", "direct", "direct whole", "buffered", "buffered whole")}
    with tempfile.TemporaryDirectory(prefix="bench-ramp-") as top:
        results = os.path.join(top, "results")
        with throttled_disk(top, rate, image) as (disk, inside):
            for n in range(args.rounds):
                order = names[n % len(names):] + names[:n % len(names)]
                for name in order:
                    target = os.path.join(disk, "t")
                    if name == "dd":
                        got["dd"].append(dd(inside, target, args.window, rate))
                    else:
                        os.mkdir(target)
                        steady, whole = mpiwrite(inside, target, args.ramp, args.window,
                                                 name == "direct", results)
                        got[name].append(steady)
                        got[f"{name} whole"].append(whole)
                    run(["rm", "-rf", target])
                    run(["sync"])
                    time.sleep(0.5)
                print(f"round {n + 1}: " + ", ".join(
                    f"{k} {v[-1]:.2f}" for k, v in got.items() if v) + " MB/s", flush=True)

    def ratio(name):
        return statistics.median(x / y for x, y in zip(got[name], got["dd"]))

    print(f"disk throttled to {rate} B/s; ramp {args.ramp:g}s, window {args.window:g}s, 1 MiB "
          f"blocks, {args.rounds} rounds; medians: " + ", ".join(
              f"{k} {statistics.median(v):.2f}" for k, v in got.items() if v) + " MB/s")
    print("ratio medians to dd: " + ", ".join(
        f"{k} {ratio(k):.4f}" for k in got if k != "dd" and got[k]) + " (goal: direct within "
        "0.98-1.02)")


if __name__ == "__main__":
    main()
