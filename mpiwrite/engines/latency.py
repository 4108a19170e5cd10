"""Per-call latency histograms of write() and fsync(), cheap enough for the hot loop.

The write loop already reads the clock after every block; it only stores that reading in a
preallocated list, at the index its for loop counts anyway (one store of a reference per
block, no allocation; an array('d') converts every float and costs more).  When the list is
full, and at the end, the readings become latencies (consecutive differences, less the time
the loop spent on an fsync, a sample or a poll) folded into a log-scale histogram: with numpy
for blocks under VECTOR_BELOW (the readings become doubles in one struct call; cost at 4 KiB
blocks on tmpfs 1.2-2.2% of the loop's rate, benchmarks/bench_write.py), else in plain Python
(C-level map and bisect: ~0.3 us a reading here, 0.25% of a 256 KiB write to tmpfs, 0.08% of
a 1 MiB one), so that a rank writing such blocks never loads numpy (docs/scaling.md).  Both
give the same histogram.  Buckets: SUB per octave of nanoseconds from 2^LOW ns (64 ns) to
2^(LOW + OCTAVES) ns (about 19 hours): a value is known within 2^(1/SUB) = 19%.
Histograms of ranks add up: a node's or a run's is the sum, and percentiles come from it.
"""

from __future__ import annotations

import math
import operator
import struct
from bisect import bisect_right
from collections import Counter
from itertools import chain, repeat
from typing import Dict, List, Sequence, Tuple

SUB = 4  # buckets per octave
LOW = 6  # the first bucket starts at 2^6 ns = 64 ns
OCTAVES = 40
NBUCKETS = SUB * OCTAVES
CAPACITY = 16384  # readings kept before a fold (a list of 16,384 references)
# The readings become doubles with one struct call (4 ns a reading against 11 for np.array
# of the list, measured): a fold costs well under 1% of a 4 KiB write.
_PACK = struct.Struct(f"={CAPACITY}d")
PERCENTILES = (("p50", 0.50), ("p90", 0.90), ("p99", 0.99), ("p999", 0.999))
# Blocks smaller than this fold with numpy: the plain-Python fold's ~0.3 us a reading costs
# 11% of a 4 KiB write to tmpfs (2.6 us), 1% of a 64 KiB one (29 us), 0.25% of 256 KiB (132
# us), measured here; numpy's fold costs ~0.06 us a reading, but loads numpy.
VECTOR_BELOW = 256 * 2**10
# The lower edge, in seconds, of buckets 1..NBUCKETS-1: bisect_right over them is a bucket.
_EDGES = [2.0 ** ((b + SUB * LOW) / SUB) / 1e9 for b in range(1, NBUCKETS)]


def uses_numpy(block_size: int) -> bool:
    """Whether this block size folds with numpy (loaded at set-up then: never in the loop)."""
    return block_size < VECTOR_BELOW


def buckets(seconds: Sequence[float]) -> List[int]:
    return [bisect_right(_EDGES, s) for s in seconds]


def bucket_seconds(b) -> float:
    """The geometric middle of bucket b, in seconds."""
    return 2.0 ** ((float(b) + 0.5) / SUB + LOW) / 1e9


def percentiles(hist: Sequence[float], maximum: float = float("nan")) -> Dict[str, float]:
    """p50, p90, p99, p999 (bucket middles) and max (exact where given) of a histogram."""
    h = [float(x) for x in hist]
    total = sum(h)
    out = {name: float("nan") for name, _ in PERCENTILES}
    out["max"] = float(maximum)
    out["count"] = int(total)
    if total <= 0:
        return out
    cum = 0.0
    cums = [cum := cum + x for x in h]
    for name, q in PERCENTILES:  # the first bucket whose running sum reaches q of the total
        out[name] = bucket_seconds(next(i for i, c in enumerate(cums) if c >= q * total))
    if not math.isfinite(out["max"]):
        out["max"] = bucket_seconds(max(i for i, x in enumerate(h) if x))
    for name, _ in PERCENTILES:  # a bucket's middle may lie above the exact maximum
        out[name] = min(out[name], out["max"])
    return out


class Log:
    """One stream's latencies: the readings list the hot loop fills, and the histograms
    (lists of NBUCKETS counts).  vector: fold with numpy (blocks under VECTOR_BELOW)."""

    def __init__(self, start: float, vector: bool = False):
        self.stamps = [0.0] * CAPACITY
        self.vector = vector
        if vector:
            import numpy as np

            self._raw = bytearray(_PACK.size)
            self._doubles = np.frombuffer(self._raw, dtype=np.float64)
        self.base = start  # the reading before stamps[0]
        self.marks: List[Tuple[int, float]] = []  # (index, seconds not spent writing)
        self.write = [0] * NBUCKETS
        self.fsync = [0] * NBUCKETS
        self.write_max = 0.0
        self.fsync_max = 0.0

    def _later_marks(self, n: int, lat) -> None:
        later = []
        for i, extra in self.marks:
            if 0 <= i < n:
                lat[i] -= extra
            elif i >= n:  # belongs to a reading after this fold
                later.append((i - n, extra))
        self.marks = later

    def fold(self, n: int) -> None:
        """Turn stamps[:n] into write latencies and add them to the histogram."""
        if n <= 0:
            return
        if self.vector:
            self._fold_numpy(n)
            return
        t = self.stamps[:n] if n < CAPACITY else self.stamps
        lat = list(map(operator.sub, t, chain((self.base,), t)))
        self._later_marks(n, lat)
        self.base = t[n - 1]
        if min(lat) < 0:
            lat = [x for x in lat if x >= 0]
        if lat:
            hist = self.write
            for b, c in Counter(map(bisect_right, repeat(_EDGES), lat)).items():
                hist[b] += c
            self.write_max = max(self.write_max, max(lat))

    def _fold_numpy(self, n: int) -> None:
        import numpy as np

        _PACK.pack_into(self._raw, 0, *self.stamps)
        t = self._doubles[:n]
        lat = np.diff(t, prepend=self.base)
        self._later_marks(n, lat)
        self.base = float(t[n - 1])
        lat = lat[lat >= 0]
        if lat.size:
            ns = np.maximum(lat * 1e9, 1.0)
            b = np.clip(np.floor(np.log2(ns) * SUB).astype(np.int64) - SUB * LOW, 0,
                        NBUCKETS - 1)
            counts = np.bincount(b, minlength=NBUCKETS)
            for i in np.flatnonzero(counts):
                self.write[int(i)] += int(counts[i])
            self.write_max = max(self.write_max, float(lat.max()))

    def add_fsync(self, seconds: float) -> None:
        self.fsync[bisect_right(_EDGES, seconds)] += 1
        self.fsync_max = max(self.fsync_max, seconds)


def summary(hist: Sequence[float], maximum: float, prefix: str) -> Dict[str, float]:
    """{prefix_p50_seconds, ..., prefix_max_seconds} for JSON and records."""
    p = percentiles(hist, maximum)
    return {f"{prefix}_{k}_seconds": v for k, v in p.items() if k != "count"}


def sparse(hist) -> Dict[str, int]:
    """A histogram as {bucket: count} for the record (most buckets are empty)."""
    if hist is None:
        return {}
    return {str(i): int(c) for i, c in enumerate(hist) if c}
