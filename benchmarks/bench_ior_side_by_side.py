#!/usr/bin/env python3
"""mpiwrite beside IOR on the same write pattern, under the same MPI library, alternated in one
run: prints the ratio mpiwrite / IOR per case (the median over rounds), not absolute figures.

Both tools' figures are IOR's own definition: total bytes over the time from the first open to
the last close, the closing fsync included (`ior -w -e` prints "Max Write: X MiB/sec (Y
MB/sec)"; `mpiwrite run --ior-summary` prints the same line, the same way computed).  Each
round runs every case once per tool, the order of the two tools swapped from round to round.

Cases: a file per process sequential, a shared file contiguous, a shared file strided at
47,008 bytes (IO500's ior-hard transfer), random offsets (IOR -z, a file per process); each
through POSIX and MPI-IO, independent and collective (but random: IOR refuses random offsets
with collective MPI-IO).  Where the medium is slow (the GlusterFS
testbed with its links limited by tc, a throttled loop disk with O_DIRECT) the ratio is a fair
test; on tmpfs the figures are noisy on a small machine (report it, do not gate on it).

IOR: `--ior PATH`, else `ior` on PATH, else built from source (`--build-ior`: git clone of
https://github.com/hpc/ior into a scratch folder outside the repository, configured with the
mpicc beside the mpiexec used).  The tests never need it.

    python benchmarks/bench_ior_side_by_side.py --target /dev/shm/x [--ranks 2] [--rounds 5]
        [--size-mib 64] [--block 1M] [--ior PATH | --build-ior DIR] [--cases fpp,strided]
    python benchmarks/bench_ior_side_by_side.py --ior PATH --throttled --size-mib 256
    python benchmarks/gluster_testbed.py --hosts 3 --rate 160mbit -- sh -c \
        '$TESTBED_ENTER h0 mkdir -p $TESTBED_MOUNT/b && python benchmarks/bench_ior_side_by_side.py
         --ior PATH --mpiexec "$TESTBED_MPIEXEC -ppn 1" --ranks 3 --target $TESTBED_MOUNT/b'

(The testbed's volume is mounted only inside its hosts: the folder is made through
$TESTBED_ENTER; IOR removes its files itself, mpiwrite its own.)
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

BIN = os.path.dirname(os.path.abspath(sys.executable))
MAX_WRITE = re.compile(r"Max Write:\s+([0-9.]+) MiB/sec \(([0-9.]+) MB/sec\)")
HARD = 47008  # IO500 ior-hard's transfer size


def cases(block: int, size: int):
    """name -> (IOR's options, mpiwrite's options), the same pattern."""
    count = size // block
    hard = max(1, size // HARD)
    base = {
        "fpp": (["-F", "-t", str(block), "-b", str(size)],
                ["--layout", "fpp", "-b", str(block), "-s", str(size)]),
        "shared": (["-t", str(block), "-b", str(size)],
                   ["--layout", "shared", "-b", str(block), "-s", str(size)]),
        "strided": (["-t", str(HARD), "-b", str(HARD), "-s", str(hard)],
                    ["--layout", "shared", "--pattern", "strided", "-b", str(HARD),
                     "--count", str(hard)]),
        "random": (["-F", "-z", "-t", str(block), "-b", str(size)],
                   ["--layout", "fpp", "--pattern", "random", "-b", str(block), "--count",
                    str(count)]),
    }
    out = {}
    for name, (ior, mine) in base.items():
        out[f"{name} posix"] = (["-a", "POSIX"] + ior, ["--engine", "posix"] + mine)
        out[f"{name} mpiio-indep"] = (["-a", "MPIIO"] + ior, ["--engine", "mpiio"] + mine)
        if name != "random":  # IOR: "random offset not available with collective MPIIO"
            out[f"{name} mpiio-coll"] = (["-a", "MPIIO", "-c"] + ior,
                                         ["--engine", "mpiio", "--collective"] + mine)
    return out


SUMMARY_WRITE = re.compile(r"Summary of all tests:.*?^write\s+([0-9.]+)\s", re.S | re.M)


def direct_cases(block: int, size: int):
    """POSIX with O_DIRECT on both sides (IOR --posix.odirect, mpiwrite --direct): what a
    throttled disk limits (cgroup v1's blkio throttle holds O_DIRECT writes only).  The
    strided case at the block size: 47,008 bytes is no multiple of the sector."""
    count = size // block
    both = (["-t", str(block), "-b", str(size)], ["-b", str(block), "-s", str(size)])
    return {
        "fpp posix direct": (["-a", "POSIX", "--posix.odirect", "-F"] + both[0],
                             ["--engine", "posix", "--direct", "--layout", "fpp"] + both[1]),
        "shared posix direct": (["-a", "POSIX", "--posix.odirect"] + both[0],
                                ["--engine", "posix", "--direct", "--layout", "shared"]
                                + both[1]),
        "strided posix direct": (["-a", "POSIX", "--posix.odirect", "-t", str(block), "-b",
                                  str(block), "-s", str(count)],
                                 ["--engine", "posix", "--direct", "--layout", "shared",
                                  "--pattern", "strided", "-b", str(block), "--count",
                                  str(count)]),
        "random posix direct": (["-a", "POSIX", "--posix.odirect", "-F", "-z"] + both[0],
                                ["--engine", "posix", "--direct", "--layout", "fpp",
                                 "--pattern", "random", "-b", str(block), "--count",
                                 str(count)]),
    }


def max_write(text: str) -> float:
    """The MB/s of the "Max Write" line (IOR 3.2's, or mpiwrite's --ior-summary), or of the
    write row of IOR 3.3+'s "Summary of all tests" (its Max(MiB) column, MiB/s)."""
    found = MAX_WRITE.search(text)
    if found:
        return float(found.group(2))
    found = SUMMARY_WRITE.search(text)
    if found:
        return float(found.group(1)) * 2**20 / 1e6
    raise RuntimeError("no 'Max Write' line and no summary in:\n" + text[-2000:])


def run_ior(ior: str, mpiexec: str, ranks: int, target: str, opts, timeout: float,
            inside=()) -> float:
    path = os.path.join(target, "ior-file")
    cmd = list(inside) + shlex.split(mpiexec) + ["-n", str(ranks), ior, "-w", "-e", "-i", "1",
                                                 "-o", path] + opts
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    for name in os.listdir(target):
        if name.startswith("ior-file"):
            os.unlink(os.path.join(target, name))
    if out.returncode:
        raise RuntimeError(f"{' '.join(cmd)}: exit {out.returncode}\n{out.stderr[-2000:]}")
    return max_write(out.stdout)


def run_mpiwrite(mpiexec: str, ranks: int, target: str, opts, timeout: float,
                 inside=()) -> float:
    cmd = list(inside) + shlex.split(mpiexec) + [
        "-n", str(ranks), sys.executable, "-m", "mpiwrite", "run",
        os.path.join(target, "mpiwrite-data"), "--no-record", "--ior-summary",
        "--progress-interval", "0", "--allow-fill"] + opts
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if out.returncode:
        raise RuntimeError(f"{' '.join(cmd)}: exit {out.returncode}\n{out.stderr[-2000:]}")
    return max_write(out.stdout + out.stderr)


def build_ior(folder: str, mpicc: str) -> str:
    """IOR from source in `folder` (outside the repository): its src/ior binary."""
    src = os.path.join(folder, "ior")
    if not os.path.isdir(src):
        subprocess.run(["git", "clone", "--depth", "1", "https://github.com/hpc/ior", src],
                       check=True)
    binary = os.path.join(src, "src", "ior")
    if not os.path.exists(binary):
        for cmd in (["./bootstrap"], ["./configure", f"CC={mpicc}"], ["make", "-j2"]):
            subprocess.run(cmd, cwd=src, check=True, capture_output=True)
    return binary


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--target", default=None, help="folder on the filesystem to test")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--size-mib", type=int, default=64, help="MiB per rank")
    ap.add_argument("--block", default="1M", help="transfer size (the strided case: 47008)")
    ap.add_argument("--ior", default=None)
    ap.add_argument("--build-ior", default=None, metavar="DIR")
    ap.add_argument("--mpiexec", default=os.path.join(BIN, "mpiexec"),
                    help="the launcher, with its own options (gluster_testbed.py's "
                         "$TESTBED_MPIEXEC: mpiexec and its -hosts)")
    ap.add_argument("--cases", default="", help="comma-separated prefixes (default: all)")
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--throttled", action="store_true",
                    help="POSIX with O_DIRECT on an ext4 loop disk throttled to 100 MiB/s "
                         "(bench_throttled.py's; root and cgroup v1's blkio)")
    args = ap.parse_args()
    block = int(args.block[:-1]) * 2**20 if args.block.endswith("M") else \
        int(args.block[:-1]) * 2**10 if args.block.endswith("k") else int(args.block)
    ior = args.ior or shutil.which("ior")
    if ior is None and args.build_ior:
        ior = build_ior(args.build_ior, os.path.join(
            os.path.dirname(shlex.split(args.mpiexec)[0]), "mpicc"))
    if ior is None:
        sys.exit("no ior: give --ior PATH, put ior on PATH, or --build-ior DIR")
    if args.throttled:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from bench_throttled import throttled_disk

        top = tempfile.mkdtemp(prefix="bench-ior-throttled-")
        try:
            with throttled_disk(top) as (disk, inside):
                return measure(args, ior, block, disk,
                               direct_cases(block, args.size_mib * 2**20), inside)
        finally:  # the image's tmpfs can still be busy while the loop device lets go
            img = os.path.join(top, "img")
            for _ in range(100):
                if not os.path.ismount(img) or subprocess.run(
                        ["umount", img], capture_output=True).returncode == 0:
                    break
                time.sleep(0.2)
            shutil.rmtree(top, ignore_errors=True)
    target = args.target or tempfile.mkdtemp(prefix="bench-ior-", dir="/dev/shm")
    os.makedirs(target, exist_ok=True)
    return measure(args, ior, block, target, cases(block, args.size_mib * 2**20))


def measure(args, ior: str, block: int, target: str, todo, inside=()) -> int:
    """Every case once per tool per round, alternated; the ratios' medians printed."""
    if args.cases:
        wanted = tuple(c.strip() for c in args.cases.split(","))
        todo = {k: v for k, v in todo.items() if k.startswith(wanted)}
    ratios = {k: [] for k in todo}
    for rnd in range(args.rounds):
        for name, (ior_opts, mine) in todo.items():
            first_ior = rnd % 2 == 0
            got = {}
            try:
                for tool in (("ior", "mpiwrite") if first_ior else ("mpiwrite", "ior")):
                    got[tool] = run_ior(ior, args.mpiexec, args.ranks, target, ior_opts,
                                        args.timeout, inside) if tool == "ior" else \
                        run_mpiwrite(args.mpiexec, args.ranks, target, mine, args.timeout,
                                     inside)
            except (RuntimeError, subprocess.TimeoutExpired) as exc:
                lines = str(exc).strip().splitlines()
                print(f"round {rnd + 1} {name}: {lines[0]}\n  " + "\n  ".join(lines[-3:]),
                      file=sys.stderr)
                continue
            ratios[name].append(got["mpiwrite"] / got["ior"])
            print(f"round {rnd + 1} {name:22s} mpiwrite/IOR {ratios[name][-1]:.3f} "
                  f"({got['mpiwrite']:.1f} / {got['ior']:.1f} MB/s)", file=sys.stderr,
                  flush=True)
    print(f"mpiwrite / IOR, 'Max Write' (open to close, fsync included), {args.ranks} ranks, "
          f"{args.size_mib} MiB per rank, median of {args.rounds} rounds, target {target}")
    print(f"{'case':22s} {'median':>7s} {'min':>6s} {'max':>6s}")
    for name, rs in ratios.items():
        if rs:
            print(f"{name:22s} {statistics.median(rs):7.3f} {min(rs):6.3f} {max(rs):6.3f}")
        else:
            print(f"{name:22s}  failed (see stderr)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
