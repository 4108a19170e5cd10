"""Figures from per-rank rows: aggregate (last done, first done), per-rank and per-node.

Pure numpy on the per-rank table, so the run, the record reader and the reports all compute a
figure the same way, and a test can recompute the aggregate from a record.
"""

from __future__ import annotations

from typing import Dict, Optional

import numpy as np

from mpiwrite.units import MB

# Per-rank status codes, stored in the record.
OK, FAILED, ABORTED, INTERRUPTED, MISSING = 0, 1, 2, 3, 4
STATUS_NAMES = {OK: "ok", FAILED: "failed", ABORTED: "aborted", INTERRUPTED: "interrupted",
                MISSING: "missing"}

RANK_DTYPE = np.dtype([
    ("iteration", "<i4"), ("rank", "<i4"), ("node", "<i4"), ("status", "<i4"),
    ("bytes", "<i8"), ("blocks", "<i8"), ("fsyncs", "<i8"),
    ("t_open_start", "<f8"), ("t_write_start", "<f8"), ("t_write_end", "<f8"),
    ("t_fsync_end", "<f8"), ("t_close_end", "<f8"),
    ("open_seconds", "<f8"), ("write_seconds", "<f8"), ("fsync_seconds", "<f8"),
    ("close_seconds", "<f8"), ("elapsed_seconds", "<f8"), ("MB_per_s", "<f8"),
    ("clock_offset_seconds", "<f8"), ("clock_uncertainty_seconds", "<f8"),
    ("errno", "<i4"), ("stopped_by_time", "<i4"),
    ("verify_bytes", "<i8"), ("verify_seconds", "<f8"), ("verify_mismatches", "<i8"),
])

ITER_DTYPE = np.dtype([
    ("iteration", "<i4"), ("status", "<i4"), ("ranks", "<i4"), ("bytes", "<i8"),
    ("t_first_start", "<f8"), ("t_first_done", "<f8"), ("t_last_done", "<f8"),
    ("aggregate_MB_per_s", "<f8"), ("first_done_MB_per_s", "<f8"), ("tail_seconds", "<f8"),
    ("rank_min_MB_per_s", "<f8"), ("rank_mean_MB_per_s", "<f8"), ("rank_max_MB_per_s", "<f8"),
    ("rank_std_MB_per_s", "<f8"), ("slowest_rank", "<i4"), ("fastest_rank", "<i4"),
    ("open_max_seconds", "<f8"), ("fsync_max_seconds", "<f8"),
    ("verify_MB_per_s", "<f8"), ("verify_mismatches", "<i8"),
])

SAMPLE_DTYPE = np.dtype([("iteration", "<i4"), ("rank", "<i4"), ("t", "<f8"), ("bytes", "<i8")])


def _mbps(nbytes, seconds):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(seconds > 0, nbytes / np.where(seconds > 0, seconds, 1) / MB, np.nan)


def fill_rates(ranks: np.ndarray) -> None:
    """Derive per-rank durations and MB/s in place from the timeline columns."""
    ranks["open_seconds"] = ranks["t_write_start"] - ranks["t_open_start"]
    ranks["write_seconds"] = ranks["t_write_end"] - ranks["t_write_start"]
    ranks["fsync_seconds"] = ranks["t_fsync_end"] - ranks["t_write_end"]
    ranks["close_seconds"] = ranks["t_close_end"] - ranks["t_fsync_end"]
    ranks["elapsed_seconds"] = ranks["t_close_end"] - ranks["t_write_start"]
    ranks["MB_per_s"] = _mbps(ranks["bytes"], ranks["elapsed_seconds"])


def bytes_at(t: float, samples: Optional[np.ndarray], ranks: np.ndarray) -> float:
    """Bytes all ranks had written by time t (linear between each rank's samples)."""
    total = 0.0
    by_rank: Dict[int, np.ndarray] = {}
    if samples is not None and len(samples):
        order = np.lexsort((samples["t"], samples["rank"]))
        s = samples[order]
        bounds = np.flatnonzero(np.diff(s["rank"])) + 1
        for part in np.split(s, bounds):
            by_rank[int(part["rank"][0])] = part
    for row in ranks:
        start, end, nbytes = row["t_write_start"], row["t_close_end"], row["bytes"]
        if not np.isfinite(start):
            continue
        if not np.isfinite(end) or t >= end:
            total += nbytes if np.isfinite(end) else 0
            continue
        part = by_rank.get(int(row["rank"]))
        ts = [start] + ([] if part is None else list(part["t"])) + [end]
        bs = [0] + ([] if part is None else list(part["bytes"])) + [nbytes]
        total += float(np.interp(t, ts, bs))
    return total


def iteration_summary(ranks: np.ndarray, samples: Optional[np.ndarray] = None,
                      status: int = OK) -> np.ndarray:
    """One ITER_DTYPE row from one iteration's per-rank rows (times on one timeline)."""
    out = np.zeros(1, dtype=ITER_DTYPE)[0]
    for name in ITER_DTYPE.names:
        if ITER_DTYPE[name].kind == "f":
            out[name] = np.nan
    out["iteration"] = ranks["iteration"][0] if len(ranks) else 0
    out["status"] = status
    out["ranks"] = len(ranks)
    out["bytes"] = int(ranks["bytes"].sum())
    out["slowest_rank"] = out["fastest_rank"] = -1
    good = ranks[np.isfinite(ranks["t_close_end"]) & np.isfinite(ranks["t_write_start"])]
    if len(good) == 0:
        return out
    t0 = good["t_write_start"].min()
    first, last = good["t_close_end"].min(), good["t_close_end"].max()
    out["t_first_start"], out["t_first_done"], out["t_last_done"] = t0, first, last
    out["aggregate_MB_per_s"] = _mbps(float(ranks["bytes"].sum()), last - t0)
    out["first_done_MB_per_s"] = _mbps(bytes_at(first, samples, ranks), first - t0)
    out["tail_seconds"] = last - first
    rates = good["MB_per_s"]
    out["rank_min_MB_per_s"] = np.nanmin(rates)
    out["rank_mean_MB_per_s"] = np.nanmean(rates)
    out["rank_max_MB_per_s"] = np.nanmax(rates)
    out["rank_std_MB_per_s"] = np.nanstd(rates, ddof=1) if len(rates) > 1 else 0.0
    out["slowest_rank"] = good["rank"][np.nanargmin(rates)]
    out["fastest_rank"] = good["rank"][np.nanargmax(rates)]
    out["open_max_seconds"] = np.nanmax(good["open_seconds"])
    out["fsync_max_seconds"] = np.nanmax(good["fsync_seconds"])
    vsec = ranks["verify_seconds"]
    if np.any(ranks["verify_bytes"] > 0):
        out["verify_MB_per_s"] = _mbps(float(ranks["verify_bytes"].sum()), float(np.nanmax(vsec)))
    out["verify_mismatches"] = int(ranks["verify_mismatches"].sum())
    return out


def node_totals(ranks: np.ndarray) -> np.ndarray:
    """Per node: ranks, bytes and MB/s over the node's own first start to last done."""
    dt = np.dtype([("node", "<i4"), ("ranks", "<i4"), ("bytes", "<i8"), ("MB_per_s", "<f8"),
                   ("slowest_rank_MB_per_s", "<f8")])
    nodes = np.unique(ranks["node"])
    out = np.zeros(len(nodes), dtype=dt)
    for i, n in enumerate(nodes):
        sel = ranks[ranks["node"] == n]
        ends, starts = sel["t_close_end"], sel["t_write_start"]
        ok = np.isfinite(ends).all() and np.isfinite(starts).all() and len(sel)
        span = float(ends.max() - starts.min()) if ok else np.nan
        rates = sel["MB_per_s"][np.isfinite(sel["MB_per_s"])]
        out[i] = (n, len(sel), sel["bytes"].sum(), _mbps(float(sel["bytes"].sum()), span),
                  rates.min() if rates.size else np.nan)
    return out


def over_iterations(values: np.ndarray) -> Dict[str, float]:
    """min, mean, max and sample standard deviation over repetitions."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    if v.size == 0:
        return {"n": 0, "min": np.nan, "mean": np.nan, "max": np.nan, "std": np.nan}
    return {"n": int(v.size), "min": float(v.min()), "mean": float(v.mean()),
            "max": float(v.max()), "std": float(v.std(ddof=1)) if v.size > 1 else 0.0}


def run_stats(ranks: np.ndarray, iterations: np.ndarray, hosts) -> Dict[str, object]:
    """Over-iteration statistics for the summary, the JSON output and `show`."""
    ok = iterations[iterations["status"] == OK] if len(iterations) else iterations
    use = ok
    stats: Dict[str, object] = {
        "aggregate": over_iterations(use["aggregate_MB_per_s"]),
        "first_done": over_iterations(use["first_done_MB_per_s"]),
        "rank_mean": over_iterations(use["rank_mean_MB_per_s"]),
    }
    its = set(int(i) for i in use["iteration"])
    sel = ranks[np.isin(ranks["iteration"], list(its))] if len(ranks) else ranks
    rates = sel["MB_per_s"][np.isfinite(sel["MB_per_s"])] if len(sel) else np.zeros(0)
    stats["rank_min"] = float(rates.min()) if rates.size else float("nan")
    stats["rank_max"] = float(rates.max()) if rates.size else float("nan")
    stats["rank_std"] = float(rates.std(ddof=1)) if rates.size > 1 else 0.0
    stats["slowest"] = None
    if rates.size:
        finite = sel[np.isfinite(sel["MB_per_s"])]
        row = finite[np.argmin(finite["MB_per_s"])]
        stats["slowest"] = {"rank": int(row["rank"]), "iteration": int(row["iteration"]),
                            "host": hosts[int(row["node"])], "MB_per_s": float(row["MB_per_s"])}
    nodes = []
    if len(sel):
        last = sel[sel["iteration"] == max(its)] if its else sel
        for n in node_totals(last):
            nodes.append({"node": int(n["node"]), "host": hosts[int(n["node"])],
                          "ranks": int(n["ranks"]), "bytes": int(n["bytes"]),
                          "MB_per_s": float(n["MB_per_s"])})
    stats["nodes"] = nodes
    return stats
