"""The limit verdict's costs and its scenarios (docs/measurement.md, "Why this number").

    sudo .venv/bin/python benchmarks/bench_limits.py --hosts 16 --rounds 3
    sudo .venv/bin/python benchmarks/bench_limits.py --scenarios

1. The network check at N emulated hosts (one rank each, MPI over their links: UCX_TLS=tcp,
   MPIR_CVAR_NOLOCAL=1): the seconds the record says it took (median over the rounds), and
   the wall time of the same run with and without it, alternated (the median difference).
2. With --scenarios: the testbeds' known limits (tests/cluster/test_gluster.py, test_ceph.py,
   test_waits.py), each test printing the verdict and its evidence, run through pytest; the
   lines are printed here per scenario.

The sampling's own cost (the wait sampler) is benchmarks/bench_waits.py's: the verdict reads
what the run already records and adds nothing to a run.  Needs root (network namespaces).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests"))

from testbed import hosts as hostlib  # noqa: E402

TCP = {"MPIR_CVAR_NOLOCAL": "1", "UCX_TLS": "tcp"}
SCENARIOS = [
    ("the link", "tests/cluster/test_gluster.py::test_host_with_a_slower_link_is_the_slowest_node"),
    ("one target", "tests/cluster/test_gluster.py::test_show_by_target_names_the_slow_brick"),
    ("the client's CPU", "tests/cluster/test_gluster.py::"
                         "test_a_fuse_client_held_to_a_small_cpu_share_is_named_the_limit"),
    ("the page cache", "tests/cluster/test_ceph.py::"
                       "test_a_buffered_run_above_the_link_is_named_the_page_cache"),
    ("dirty throttling, the storage", "tests/cluster/test_waits.py::"
     "test_a_buffered_writer_held_by_dirty_throttling_and_a_direct_one_by_the_device"),
    ("the writer", "tests/cluster/test_waits.py::test_a_writer_into_memory_only_runs"),
]


def _mpiexec() -> str:
    here = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    return here if os.path.exists(here) else "mpiexec"


def _mpiwrite() -> str:
    here = os.path.join(os.path.dirname(sys.executable), "mpiwrite")
    return here if os.path.exists(here) else "mpiwrite"


def netcheck_cost(n: int, rounds: int, folder: str) -> dict:
    h = hostlib.Hosts(n, folder)
    seconds, walls = [], {"with": [], "without": []}
    with h:
        cmd = h.mpiexec(_mpiexec()) + [w for k, v in TCP.items() for w in ("-genv", k, v)] \
            + ["-hosts", ",".join(h.ips[:n]), "-ppn", "1", "-n", str(n), _mpiwrite(), "run",
               os.path.join(folder, "data"), "-s", "1M", "--progress-interval", "0"]
        for r in range(rounds):
            for way in (("with", "without") if r % 2 == 0 else ("without", "with")):
                res = os.path.join(folder, f"res-{r}-{way}")
                extra = ["--no-netcheck"] if way == "without" else []
                t0 = time.monotonic()
                out = subprocess.run(cmd + ["--results", res] + extra, capture_output=True,
                                     text=True, timeout=600, cwd=folder)
                walls[way].append(time.monotonic() - t0)
                if out.returncode != 0:
                    raise SystemExit(f"the {n}-host run failed: {out.stderr[-2000:]}")
                if way == "with":
                    import h5py

                    (path,) = [os.path.join(res, f) for f in os.listdir(res) if f.endswith(".h5")]
                    with h5py.File(path, "r") as f:
                        got = json.loads(f.attrs["netcheck"])
                    seconds.append(float(got["seconds"]))
    diffs = [a - b for a, b in zip(walls["with"], walls["without"])]
    return {"hosts": n, "rounds": rounds, "netcheck_seconds_median": statistics.median(seconds),
            "netcheck_seconds": [round(s, 3) for s in seconds],
            "wall_with_median": round(statistics.median(walls["with"]), 2),
            "wall_without_median": round(statistics.median(walls["without"]), 2),
            "wall_difference_median": round(statistics.median(diffs), 2)}


def scenarios() -> None:
    for name, test in SCENARIOS:
        out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-s", "-p",
                              "no:cacheprovider", "-o", "addopts=", test], cwd=ROOT,
                             capture_output=True, text=True, timeout=1200)
        said = [ln.lstrip(".F") for ln in out.stdout.splitlines() if "limit: " in ln]
        state = "passed" if out.returncode == 0 else f"FAILED (exit {out.returncode})"
        print(f"{name}: {state}")
        for line in said:
            print(f"  {line}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--hosts", type=int, default=16)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--scenarios", action="store_true", help="the testbeds' known limits")
    a = p.parse_args(argv)
    reason = hostlib.why_not()
    if reason:
        print(f"emulated hosts: {reason}", file=sys.stderr)
        return 2
    if a.scenarios:
        scenarios()
        return 0
    with tempfile.TemporaryDirectory(prefix="bench-limits-") as folder:
        print(json.dumps(netcheck_cost(a.hosts, a.rounds, folder), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
