"""Per-call latency histograms of write() and fsync(), cheap enough for the hot loop.

The write loop already reads the clock after every block; it only stores that reading in a
preallocated list, at the index its for loop counts anyway (one store of a reference per
block, no allocation; an array('d') converts every float and costs more).  When the list is
full, and at the end, the readings become doubles in one struct call and then latencies
(consecutive differences, less the time the loop spent on an fsync, a sample or a poll)
folded into a log-scale histogram with numpy.  Cost at 4 KiB blocks on tmpfs: 1.2-2.2% of
the loop's rate (benchmarks/bench_write.py), from 3.5-4% with a computed index and
np.array() of the list.  Buckets: SUB per octave of nanoseconds from 2^LOW ns (64 ns)
to 2^(LOW + OCTAVES) ns (about 19 hours): a value is known within 2^(1/SUB) = 19%.
Histograms of ranks add up: a node's or a run's is the sum, and percentiles come from it.
"""

from __future__ import annotations

import struct
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

SUB = 4  # buckets per octave
LOW = 6  # the first bucket starts at 2^6 ns = 64 ns
OCTAVES = 40
NBUCKETS = SUB * OCTAVES
CAPACITY = 16384  # readings kept before a fold (a list of 16,384 references)
# The readings become doubles with one struct call (4 ns a reading against 11 for np.array
# of the list, measured): a fold costs well under 1% of a 4 KiB write.
_PACK = struct.Struct(f"={CAPACITY}d")
PERCENTILES = (("p50", 0.50), ("p90", 0.90), ("p99", 0.99), ("p999", 0.999))


def buckets(seconds: np.ndarray) -> np.ndarray:
    ns = np.maximum(np.asarray(seconds, dtype=np.float64) * 1e9, 1.0)
    b = np.floor(np.log2(ns) * SUB).astype(np.int64) - SUB * LOW
    return np.clip(b, 0, NBUCKETS - 1)


def bucket_seconds(b) -> np.ndarray:
    """The geometric middle of bucket b, in seconds."""
    return 2.0 ** ((np.asarray(b, dtype=np.float64) + 0.5) / SUB + LOW) / 1e9


def percentiles(hist: Sequence[float], maximum: float = float("nan")) -> Dict[str, float]:
    """p50, p90, p99, p999 (bucket middles) and max (exact where given) of a histogram."""
    h = np.asarray(hist, dtype=np.float64)
    total = h.sum()
    out = {name: float("nan") for name, _ in PERCENTILES}
    out["max"] = float(maximum)
    out["count"] = int(total)
    if total <= 0:
        return out
    cum = np.cumsum(h)
    for name, q in PERCENTILES:
        out[name] = float(bucket_seconds(int(np.searchsorted(cum, q * total))))
    if not np.isfinite(out["max"]):
        out["max"] = float(bucket_seconds(int(np.flatnonzero(h)[-1])))
    for name, _ in PERCENTILES:  # a bucket's middle may lie above the exact maximum
        out[name] = min(out[name], out["max"])
    return out


class Log:
    """One stream's latencies: the readings array the hot loop fills, and the histograms."""

    def __init__(self, start: float):
        self.stamps = [0.0] * CAPACITY
        self._raw = bytearray(_PACK.size)
        self._doubles = np.frombuffer(self._raw, dtype=np.float64)
        self.base = start  # the reading before stamps[0]
        self.marks: List[Tuple[int, float]] = []  # (index, seconds not spent writing)
        self.write = np.zeros(NBUCKETS, dtype=np.int64)
        self.fsync = np.zeros(NBUCKETS, dtype=np.int64)
        self.write_max = 0.0
        self.fsync_max = 0.0

    def fold(self, n: int) -> None:
        """Turn stamps[:n] into write latencies and add them to the histogram."""
        if n <= 0:
            return
        _PACK.pack_into(self._raw, 0, *self.stamps)
        t = self._doubles[:n]
        lat = np.diff(t, prepend=self.base)
        later = []
        for i, extra in self.marks:
            if 0 <= i < n:
                lat[i] -= extra
            elif i >= n:  # belongs to a reading after this fold
                later.append((i - n, extra))
        self.marks = later
        self.base = float(t[n - 1])
        lat = lat[lat >= 0]
        if lat.size:
            self.write += np.bincount(buckets(lat), minlength=NBUCKETS)
            self.write_max = max(self.write_max, float(lat.max()))

    def add_fsync(self, seconds: float) -> None:
        self.fsync[buckets([seconds])[0]] += 1
        self.fsync_max = max(self.fsync_max, seconds)


def summary(hist: Sequence[float], maximum: float, prefix: str) -> Dict[str, float]:
    """{prefix_p50_seconds, ..., prefix_max_seconds} for JSON and records."""
    p = percentiles(hist, maximum)
    return {f"{prefix}_{k}_seconds": v for k, v in p.items() if k != "count"}


def sparse(hist: Optional[np.ndarray]) -> Dict[str, int]:
    """A histogram as {bucket: count} for the record (most buckets are empty)."""
    if hist is None:
        return {}
    return {str(int(i)): int(hist[i]) for i in np.flatnonzero(hist)}
