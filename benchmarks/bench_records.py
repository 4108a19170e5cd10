#!/usr/bin/env python3
"""Rank 0's work after the timed phase, at 1,000 / 10,000 / 100,000 ranks, with synthetic data.

For each size: the reductions (timeline conversion, per-rank rates, iteration summary with
first-done interpolation, per-node totals, over-iteration statistics) and the HDF5 record
(ranks, samples, nodes), timed, with rank 0's peak memory (tracemalloc, in a separate
pass: numpy and h5py buffers included) and the record's size.  Target: 100,000 ranks written
in under 2 s with under 1 GiB.

    python benchmarks/bench_records.py [--samples 10] [--ranks-per-node 16] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import tracemalloc

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from mpiwrite.formats import summary
from mpiwrite.records import h5 as records
from mpiwrite.records.store import FolderStore
from mpiwrite.run import rows as mwrows


def synthetic(nranks: int, per_node: int, nsamples: int, rng):
    """What rank 0 holds after the gathers: rows, samples, node facts."""
    nnodes = -(-nranks // per_node)
    rows = np.zeros((nranks, 14))
    start = rng.uniform(0, 0.01, nranks)
    end = start + rng.uniform(190, 200, nranks)
    rows[:, 0] = rng.integers(100, 200, nranks) * 2**30  # bytes
    rows[:, 4], rows[:, 7] = start, end
    rows[:, 3], rows[:, 5], rows[:, 6] = start - 0.01, end - 1, end - 0.1
    t = np.linspace(0, 1, nsamples + 2)[1:-1]
    samples = np.empty((nranks, nsamples, 2))
    samples[:, :, 0] = start[:, None] + t[None, :] * (end - start)[:, None]
    samples[:, :, 1] = t[None, :] * rows[:, 0][:, None]
    node_of = np.arange(nranks) // per_node
    offsets = np.zeros((nnodes, 2))
    facts = {"host": "node0000", "kernel": "4.18.0-477.el8", "fs": {"fstype": "lustre"},
             "lustre": {"present": True, "version": "2.15.5", "checksums": "on",
                        "checksum_type": "crc32c"}, "mem_total_bytes": 256 * 2**30,
             "raw": {"/sys/fs/lustre/version": "2.15.5\n"}}
    nodes = [dict(facts, host=f"node{i:04d}") for i in range(nnodes)]
    return rows, samples.ravel(), np.full(nranks, 2 * nsamples), node_of, offsets, nodes


def reduce(rows, flat, counts, node_of, offsets):
    """The same steps as rank 0's ledger, without MPI (rows.py is what the run uses)."""
    full = np.zeros((len(rows), len(mwrows.ROW_FIELDS)))
    for i, name in enumerate(mwrows.ROW_FIELDS):  # fields a run fills only sometimes
        if name.startswith("t_") or "latency" in name or "cpu" in name:
            full[:, i] = np.nan
    full[:, :rows.shape[1]] = rows  # the first 14 fields, in ROW_FIELDS order
    ranks = mwrows.rank_table(0, full, node_of, offsets, 0.0)
    s = mwrows.sample_table(0, flat, counts, node_of, offsets, 0.0)
    it = summary.iteration_summary(ranks, s)
    summary.node_totals(ranks)
    return ranks, s, it


def one(nranks, per_node, nsamples, folder, rng, trace=False):
    """(reduce seconds, record seconds, peak traced bytes or 0, file size)."""
    data = synthetic(nranks, per_node, nsamples, rng)
    if trace:  # tracing doubles the time: memory is measured in a pass of its own
        tracemalloc.start()
    t0 = time.perf_counter()
    ranks, s, it = reduce(*data[:5])
    t1 = time.perf_counter()
    stats = summary.run_stats(ranks, np.array([it]), [n["host"] for n in data[5]])
    nnodes = len(data[5])
    rec = records.RunRecord(attrs={"run_id": "bench", "status": "complete",
                                   "params": json.dumps({}), "tags": "{}", "keys": "{}",
                                   "ranks": nranks, "nodes": nnodes},
                            ranks=ranks, iterations=np.array([it]), samples=s, nodes=data[5],
                            node_clock=data[4])
    path = os.path.join(folder, f"bench-{nranks}.h5")
    t2 = time.perf_counter()
    records.write(rec, path)
    t3 = time.perf_counter()
    peak = 0
    if trace:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    size = os.path.getsize(path)
    back = FolderStore().whole(path)  # untimed: read back as every reader does
    assert len(back.ranks) == nranks and len(back.samples) == nranks * nsamples
    assert stats["aggregate"]["n"] == 1
    os.unlink(path)
    return t1 - t0, t3 - t2, peak, size


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=10, help="samples per rank")
    ap.add_argument("--ranks-per-node", type=int, default=16)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--sizes", default="1000,10000,100000")
    args = ap.parse_args()
    rng = np.random.default_rng(1)
    print(f"{args.samples} samples per rank, {args.ranks_per_node} ranks per node; medians of "
          f"{args.repeat}")
    print(f"{'ranks':>8} {'nodes':>6} {'reduce s':>9} {'record s':>9} {'peak MiB':>9} "
          f"{'file MiB':>9}")
    ok = True
    with tempfile.TemporaryDirectory() as folder:
        for n in (int(x) for x in args.sizes.split(",")):
            runs = [one(n, args.ranks_per_node, args.samples, folder, rng)
                    for _ in range(args.repeat)]
            red, rec, _, size = (statistics.median(x) for x in zip(*runs))
            peak = one(n, args.ranks_per_node, args.samples, folder, rng, trace=True)[2]
            print(f"{n:>8} {-(-n // args.ranks_per_node):>6} {red:9.3f} {rec:9.3f} "
                  f"{peak / 2**20:9.1f} {size / 2**20:9.1f}")
            if n >= 100000:
                ok &= rec < 2.0 and peak < 2**30
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
