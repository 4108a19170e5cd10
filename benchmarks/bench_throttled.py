#!/usr/bin/env python3
"""One rank's O_DIRECT stream on a disk throttled to 100 MiB/s, against dd and a bare Python
os.write loop on the same disk, alternated in one run (issue 22: at least 0.99 of the bare
loop).

With one write in flight, every microsecond between two writes is lost to the device, so
this is where the loop's own cost shows.  The disk: an ext4 on a loop device whose image
sits on tmpfs, its writes throttled to 104,857,600 B/s by a cgroup-v1 blkio rule (as
tests/cluster/test_timeline.py makes it); each command runs inside that cgroup.  Every figure is
the command's own: dd's summary line, the bare loop's bytes over open-to-close, mpiwrite's
aggregate (open to close, the final fsync included, as the others).  Needs root and the
blkio controller.

    python benchmarks/bench_throttled.py [--size-mib 300] [--rounds 3] [--block 1M]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

RATE = 104857600
BIN = os.path.dirname(os.path.abspath(sys.executable))
BARE = r"""
import mmap, os, sys, time
path, count, bs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
buf = mmap.mmap(-1, bs)
buf.write(b"\x5a" * bs)
view = memoryview(buf)
if sys.argv[4:] == ["probe"]:
    fd = os.open(path + ".probe", os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_DIRECT, 0o644)
    os.write(fd, view)
    os.fsync(fd)
    os.close(fd)
    os.unlink(path + ".probe")
t0 = time.monotonic()
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_DIRECT, 0o644)
for _ in range(count):
    os.write(fd, view)
os.fsync(fd)
os.close(fd)
print(count * bs / (time.monotonic() - t0) / 1e6)
"""


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)


@contextlib.contextmanager
def throttled_disk(folder, rate: int = RATE, image_mib: int = 1100):
    """An ext4 on a loop device whose image sits on tmpfs, its writes throttled to `rate`
    B/s: (its mount point, the command prefix that runs a command inside the throttle)."""
    blkio = "/sys/fs/cgroup/blkio"
    if not os.path.exists(f"{blkio}/blkio.throttle.write_bps_device"):
        sys.exit("needs the cgroup-v1 blkio controller (and root)")
    img, mnt = os.path.join(folder, "img"), os.path.join(folder, "disk")
    group = os.path.join(blkio, f"mpiwrite-bench-{os.getpid()}")
    os.makedirs(img)
    os.makedirs(mnt)
    run(["mount", "-t", "tmpfs", "-o", f"size={image_mib + 100}m", "tmpfs", img])
    loop = None
    try:
        image = os.path.join(img, "disk.img")
        run(["truncate", "-s", f"{image_mib}m", image])
        loop = run(["losetup", "--find", "--show", image]).stdout.strip()
        run(["mkfs.ext4", "-q", "-F", loop])
        run(["mount", loop, mnt])
        major, minor = (int(x, 16) for x in run(["stat", "-c", "%t %T", loop]).stdout.split())
        os.mkdir(group)
        with open(os.path.join(group, "blkio.throttle.write_bps_device"), "w") as fh:
            fh.write(f"{major}:{minor} {rate}\n")
        yield mnt, ["sh", "-c", f'echo $$ > {group}/cgroup.procs && exec "$@"', "inside"]
    finally:
        subprocess.run(["umount", mnt], capture_output=True)
        if loop:
            subprocess.run(["losetup", "-d", loop], capture_output=True)
        for _ in range(50):
            if subprocess.run(["umount", img], capture_output=True).returncode == 0:
                break
            time.sleep(0.1)
        with contextlib.suppress(OSError):
            os.rmdir(group)


def dd(inside, path, count, bs):
    out = run(inside + ["dd", "if=/dev/zero", f"of={path}", f"bs={bs}", f"count={count}",
                        "oflag=direct", "conv=fsync"])
    m = re.search(r"copied, ([0-9.]+) s", out.stderr)
    return count * bs / float(m.group(1)) / 1e6


def bare(inside, path, count, bs):
    return float(run(inside + [sys.executable, "-c", BARE, path, str(count), str(bs)]).stdout)


def bare_after_probe(inside, path, count, bs):
    """The bare loop, right after one O_DIRECT block written, fsync'd and removed: what
    mpiwrite's TARGET probe would cost if it came just before the timed phase (it comes at
    least 0.1 s before: run/prepare.settle)."""
    return float(run(inside + [sys.executable, "-c", BARE, path, str(count), str(bs), "probe"])
                 .stdout)


def mpiwrite(inside, folder, count, bs, results=None):
    """A run as users run it (its record in `results`, off the throttled disk), or with
    --no-record."""
    keep = ["--results", results] if results else ["--no-record"]
    out = run(inside + [os.path.join(BIN, "mpiexec"), "-n", "1", os.path.join(BIN, "mpiwrite"),
                        "run", folder, "-s", str(count * bs), "-b", str(bs), "--direct",
                        *keep, "--progress-interval", "0", "--json", "-"],
              env=dict(os.environ))
    return json.loads(out.stdout)["iterations"][0]["aggregate_MB_per_s"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mib", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--block", default="1M", help="block size: 1M or 4M (MiB)")
    args = ap.parse_args()
    bs = int(args.block.rstrip("M")) << 20
    count = (args.size_mib << 20) // bs
    names = ["dd", "bare", "mpiwrite", "bare after probe", "mpiwrite --no-record"]
    figures = {k: [] for k in names}
    with tempfile.TemporaryDirectory(prefix="bench-throttled-") as top:
        with throttled_disk(top) as (disk, inside):
            results = os.path.join(top, "results")
            for n in range(args.rounds):
                order = names[n % len(names):] + names[:n % len(names)]  # each first in turn
                got = {}
                for name in order:
                    target = os.path.join(disk, "t")
                    if name == "dd":
                        got[name] = dd(inside, target, count, bs)
                    elif name == "bare":
                        got[name] = bare(inside, target, count, bs)
                    elif name == "bare after probe":
                        got[name] = bare_after_probe(inside, target, count, bs)
                    else:
                        os.mkdir(target)
                        got[name] = mpiwrite(inside, target, count, bs,
                                             None if "no-record" in name else results)
                    run(["rm", "-rf", target])
                    run(["sync"])
                    time.sleep(0.5)  # the disk's throttle settles between commands
                for k, v in got.items():
                    figures[k].append(v)
                print(f"round {n + 1}: " + ", ".join(f"{k} {got[k]:.1f}" for k in names)
                      + f" MB/s; mpiwrite/bare {got['mpiwrite'] / got['bare']:.4f}", flush=True)
    med = {k: statistics.median(v) for k, v in figures.items()}

    def ratio(a, b):
        return statistics.median(x / y for x, y in zip(figures[a], figures[b]))

    print(f"{args.size_mib} MiB, {args.block} blocks, O_DIRECT, disk throttled to {RATE} B/s, "
          f"{args.rounds} rounds; medians: " + ", ".join(f"{k} {med[k]:.1f}" for k in names)
          + " MB/s")
    print(f"ratio medians: mpiwrite/bare {ratio('mpiwrite', 'bare'):.4f} (goal >= 0.99), "
          f"mpiwrite/dd {ratio('mpiwrite', 'dd'):.4f}; with --no-record (no record saved in "
          f"the set-up) {ratio('mpiwrite --no-record', 'bare'):.4f} of bare, "
          f"{ratio('mpiwrite --no-record', 'bare after probe'):.4f} of the bare loop after "
          "the same probe")


if __name__ == "__main__":
    main()
