"""Figures from per-rank rows: aggregate (last done, first done), per-rank and per-node.

Pure numpy on the per-rank table, so the run, the record reader and the reports all compute a
figure the same way, and a test can recompute the aggregate from a record.
"""

from __future__ import annotations

from typing import Dict, Optional

import numpy as np

from mpiwrite.units import MB
from mpiwrite.vocab.status import Status

FIRST_DONE_NOTE = ("first-done unavailable: with fsync only at the end, the bytes of ranks "
                   "still writing when the fastest finished were not known to be durable "
                   "(use --fsync-every N or --direct for a first-done figure)")
FIRST_DONE_COARSE = ("first-done unavailable: a rank still writing when the fastest finished "
                     "had no durable sample yet (use a shorter --sample-interval)")
FIRST_DONE_ONCE = ("first-done unavailable: --fsync-every {every} blocks of {block} is one fsync "
                   "per {per_rank} a rank wrote, at its end: no byte of a rank still writing "
                   "was known durable when the fastest finished (a smaller --fsync-every "
                   "gives the figure)")
FIRST_DONE_NO_FSYNC = ("first-done unavailable: --no-fsync: no byte was known to be durable "
                       "(--fsync-every N or --direct give a first-done figure)")
# The same reasons in a few words, for the line that shows the '-'.
FIRST_DONE_SHORT = {FIRST_DONE_NOTE: "fsync only at the end",
                    FIRST_DONE_COARSE: "no durable sample yet",
                    FIRST_DONE_NO_FSYNC: "no fsync (--no-fsync)"}


def first_done_note(direct: bool, fsync_every: int, block_size: int, rank_bytes: int,
                    fsync: bool = True) -> str:
    """Why an iteration has no first-done figure, for a run with these settings (its rank
    that wrote most wrote `rank_bytes`)."""
    if not direct and not fsync:  # --no-fsync: there is no fsync at the end either
        return FIRST_DONE_NO_FSYNC
    if not direct and fsync_every <= 0:
        return FIRST_DONE_NOTE
    if not direct and fsync_every * block_size >= rank_bytes > 0:
        from mpiwrite.units import format_size

        return FIRST_DONE_ONCE.format(every=fsync_every, block=format_size(block_size),
                                      per_rank=format_size(rank_bytes))
    return FIRST_DONE_COARSE


def first_done_short(note: str) -> str:
    """A first_done_note in a few words ('' for none)."""
    if not note:
        return ""
    if note in FIRST_DONE_SHORT:
        return FIRST_DONE_SHORT[note]
    return "one fsync per rank, at its end" if "--fsync-every" in note and "one fsync per" \
        in note else note.split(": ", 1)[-1].split(" (", 1)[0]

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
    ("cpu_user_seconds", "<f8"), ("cpu_system_seconds", "<f8"),
    ("node_cpu_busy", "<f8"), ("node_cpu_iowait", "<f8"),
    # the read phase (--read): another rank's file, timed like the writes
    ("read_source_rank", "<i4"), ("read_status", "<i4"), ("read_errno", "<i4"),
    ("read_bytes", "<i8"), ("t_read_open_start", "<f8"), ("t_read_start", "<f8"),
    ("t_read_close_end", "<f8"), ("read_seconds", "<f8"), ("read_MB_per_s", "<f8"),
    # per-call latencies of this rank's write() and fsync() calls (latency.py)
    ("write_latency_p50_seconds", "<f8"), ("write_latency_p99_seconds", "<f8"),
    ("write_latency_max_seconds", "<f8"), ("fsync_latency_max_seconds", "<f8"),
    # --ramp: the bytes written by its end and when it ended (NaN: no ramp)
    ("ramp_bytes", "<i8"), ("t_ramp", "<f8"),
])
RAMP_RANK_FIELDS = ("ramp_bytes", "t_ramp")
LATENCY_RANK_FIELDS = ("write_latency_p50_seconds", "write_latency_p99_seconds",
                       "write_latency_max_seconds", "fsync_latency_max_seconds")
READ_RANK_FIELDS = ("read_source_rank", "read_status", "read_errno", "read_bytes",
                    "t_read_open_start", "t_read_start", "t_read_close_end", "read_seconds",
                    "read_MB_per_s")
# Fields added after schema 1 was first written: records without them read as NaN (or 0).
LATER_RANK_FIELDS = ("cpu_user_seconds", "cpu_system_seconds", "node_cpu_busy",
                     "node_cpu_iowait") + READ_RANK_FIELDS + LATENCY_RANK_FIELDS \
    + RAMP_RANK_FIELDS

ITER_DTYPE = np.dtype([
    ("iteration", "<i4"), ("status", "<i4"), ("ranks", "<i4"), ("bytes", "<i8"),
    ("t_first_start", "<f8"), ("t_first_done", "<f8"), ("t_last_done", "<f8"),
    ("aggregate_MB_per_s", "<f8"), ("first_done_MB_per_s", "<f8"), ("tail_seconds", "<f8"),
    ("rank_min_MB_per_s", "<f8"), ("rank_mean_MB_per_s", "<f8"), ("rank_max_MB_per_s", "<f8"),
    ("rank_std_MB_per_s", "<f8"), ("slowest_rank", "<i4"), ("fastest_rank", "<i4"),
    ("open_max_seconds", "<f8"), ("fsync_max_seconds", "<f8"),
    ("verify_MB_per_s", "<f8"), ("verify_mismatches", "<i8"),
    ("aggregate_with_open_MB_per_s", "<f8"), ("node_cpu_busy_max", "<f8"),
    ("read_bytes", "<i8"), ("read_aggregate_MB_per_s", "<f8"),
    ("read_first_done_MB_per_s", "<f8"), ("read_tail_seconds", "<f8"),
    ("read_rank_min_MB_per_s", "<f8"), ("read_rank_mean_MB_per_s", "<f8"),
    ("read_rank_max_MB_per_s", "<f8"), ("read_open_max_seconds", "<f8"),
    # every write() and fsync() call of the iteration, all ranks (latency.py)
    ("write_latency_p50_seconds", "<f8"), ("write_latency_p90_seconds", "<f8"),
    ("write_latency_p99_seconds", "<f8"), ("write_latency_p999_seconds", "<f8"),
    ("write_latency_max_seconds", "<f8"), ("fsync_latency_p50_seconds", "<f8"),
    ("fsync_latency_p99_seconds", "<f8"), ("fsync_latency_max_seconds", "<f8"),
    # --ramp: the bytes all ranks wrote in it, and the rate of the whole run with it (the
    # figures above count after it; without a ramp, the same as aggregate_MB_per_s)
    ("ramp_bytes", "<i8"), ("whole_MB_per_s", "<f8"),
])
LATENCY_ITER_FIELDS = ("write_latency_p50_seconds", "write_latency_p90_seconds",
                       "write_latency_p99_seconds", "write_latency_p999_seconds",
                       "write_latency_max_seconds", "fsync_latency_p50_seconds",
                       "fsync_latency_p99_seconds", "fsync_latency_max_seconds")
# read_X is X of the read phase (see read_summary)
READ_ITER_FIELDS = ("read_bytes", "read_aggregate_MB_per_s", "read_first_done_MB_per_s",
                    "read_tail_seconds", "read_rank_min_MB_per_s", "read_rank_mean_MB_per_s",
                    "read_rank_max_MB_per_s", "read_open_max_seconds")
LATER_ITER_FIELDS = ("aggregate_with_open_MB_per_s", "node_cpu_busy_max") + READ_ITER_FIELDS \
    + LATENCY_ITER_FIELDS + ("ramp_bytes", "whole_MB_per_s")

SAMPLE_DTYPE = np.dtype([("iteration", "<i4"), ("rank", "<i4"), ("t", "<f8"), ("bytes", "<i8"),
                         ("phase", "<i4")])  # PHASE_WRITE or PHASE_READ
PHASE_WRITE, PHASE_READ = 0, 1
LATER_SAMPLE_FIELDS = ("phase",)


def _mbps(nbytes, seconds):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(seconds > 0, nbytes / np.where(seconds > 0, seconds, 1) / MB, np.nan)


def fill_read_rates(ranks: np.ndarray) -> None:
    ranks["read_seconds"] = ranks["t_read_close_end"] - ranks["t_read_start"]
    ranks["read_MB_per_s"] = _mbps(ranks["read_bytes"], ranks["read_seconds"])


def read_summary(ranks: np.ndarray, samples: Optional[np.ndarray], row: np.void) -> None:
    """The read phase's figures into an iteration row (the read_* fields), computed exactly
    as the write phase's: the read columns are one stream's timeline."""
    if not np.isfinite(ranks["t_read_start"]).any():
        return
    as_write = np.zeros(len(ranks), dtype=RANK_DTYPE)
    for k in ("iteration", "rank", "node"):
        as_write[k] = ranks[k]
    as_write["bytes"] = ranks["read_bytes"]
    as_write["t_ramp"] = np.nan  # a read has no ramp
    as_write["t_open_start"] = ranks["t_read_open_start"]
    as_write["t_write_start"] = ranks["t_read_start"]
    for k in ("t_write_end", "t_fsync_end", "t_close_end"):
        as_write[k] = ranks["t_read_close_end"]
    fill_rates(as_write)
    s = samples[samples["phase"] == PHASE_READ] if samples is not None and len(samples) \
        else None
    r = iteration_summary(as_write, s, first_done="interpolate")
    for name in READ_ITER_FIELDS:
        row[name] = r["bytes" if name == "read_bytes" else name[len("read_"):]]


def ramped(ranks: np.ndarray) -> np.ndarray:
    """Which rows' rates count after a --ramp (the rank reached its ramp's end)."""
    if "t_ramp" not in (ranks.dtype.names or ()):
        return np.zeros(len(ranks), dtype=bool)
    with np.errstate(invalid="ignore"):
        return np.isfinite(ranks["t_ramp"]) & (ranks["t_ramp"] > ranks["t_write_start"])


def counted(ranks: np.ndarray):
    """(bytes, start) the rates count per row: after the ramp where there was one."""
    ramp = ramped(ranks)
    if not ramp.any():
        return ranks["bytes"], ranks["t_write_start"]
    return (ranks["bytes"] - np.where(ramp, ranks["ramp_bytes"], 0),
            np.where(ramp, ranks["t_ramp"], ranks["t_write_start"]))


def fill_rates(ranks: np.ndarray) -> None:
    """Derive per-rank durations and MB/s in place from the timeline columns (the elapsed
    time is the whole write's; the rate counts after a --ramp where there was one)."""
    ranks["open_seconds"] = ranks["t_write_start"] - ranks["t_open_start"]
    ranks["write_seconds"] = ranks["t_write_end"] - ranks["t_write_start"]
    ranks["fsync_seconds"] = ranks["t_fsync_end"] - ranks["t_write_end"]
    ranks["close_seconds"] = ranks["t_close_end"] - ranks["t_fsync_end"]
    ranks["elapsed_seconds"] = ranks["t_close_end"] - ranks["t_write_start"]
    nbytes, start = counted(ranks)
    ranks["MB_per_s"] = _mbps(nbytes, ranks["t_close_end"] - start)


def bytes_at(t: float, samples: Optional[np.ndarray], ranks: np.ndarray,
             step: bool = False) -> float:
    """Bytes all ranks had written by time t (linear between each rank's samples; with
    `step`, each rank's last sample at or before t: what was known by then, a lower bound).

    Vectorised: each rank's points are (start, 0), its samples, (end, bytes); for every rank the
    last point at or before t and the next one are found with one sort and two bincounts.
    """
    ok = np.isfinite(ranks["t_write_start"])
    r = ranks[ok]
    if not len(r):
        return 0.0
    done = np.isfinite(r["t_close_end"])
    total = float(r["bytes"][done & (r["t_close_end"] <= t)].sum())
    live = r[done & (r["t_close_end"] > t) & (r["t_write_start"] < t)]
    if not len(live):
        return total
    ids = live["rank"].astype(np.int64)
    pt_rank = [ids, ids]
    pt_t = [live["t_write_start"], live["t_close_end"]]
    pt_b = [np.zeros(len(live)), live["bytes"].astype(float)]
    if samples is not None and len(samples):
        sel = samples[np.isin(samples["rank"], ids)]
        pt_rank.append(sel["rank"].astype(np.int64))
        pt_t.append(sel["t"])
        pt_b.append(sel["bytes"].astype(float))
    rk, tt, bb = (np.concatenate(x) for x in (pt_rank, pt_t, pt_b))
    order = np.lexsort((tt, rk))
    rk, tt, bb = rk[order], tt[order], bb[order]
    first = np.flatnonzero(np.r_[True, rk[1:] != rk[:-1]])  # each rank's first point
    group = np.cumsum(np.r_[False, rk[1:] != rk[:-1]])
    before = np.bincount(group, weights=(tt <= t), minlength=len(first)).astype(np.int64)
    lo = first + before - 1  # last point at or before t (>= the start point)
    hi = lo + 1  # the next point: exists, since t < end
    span = tt[hi] - tt[lo]
    if step:
        return total + float(bb[lo].sum())
    frac = np.where(span > 0, (t - tt[lo]) / np.where(span > 0, span, 1), 1.0)
    return total + float((bb[lo] + frac * (bb[hi] - bb[lo])).sum())


def _sampled_before(t: float, samples: Optional[np.ndarray], ranks: np.ndarray) -> bool:
    """Whether every rank still writing at t has a sample after its start and at or before t:
    without one, a lower bound from durable samples knows nothing of that rank."""
    live = ranks[np.isfinite(ranks["t_write_start"]) & ~(ranks["t_close_end"] <= t)]
    if not len(live):
        return True
    if samples is None or not len(samples):
        return False
    s = samples[samples["t"] <= t]
    starts = dict(zip(live["rank"].tolist(), live["t_write_start"].tolist()))
    seen = {int(r) for r, ts in zip(s["rank"], s["t"]) if int(r) in starts and ts > starts[int(r)]}
    return len(seen) == len(starts)


def iteration_summary(ranks: np.ndarray, samples: Optional[np.ndarray] = None,
                      status: int = Status.OK, first_done: str = "interpolate") -> np.ndarray:
    """One ITER_DTYPE row from one iteration's per-rank rows (times on one timeline).

    `first_done` says what the samples count.  "durable" (--direct, --fsync-every): bytes
    known durable, so first-done takes each rank's last sample at or before the moment the
    fastest rank finished (a lower bound, never more than the storage did).  "unknown" (fsync
    only at the end, or none): with ranks still writing at that moment first-done is
    unavailable (NaN, FIRST_DONE_NOTE): their bytes sat in the page cache.  "interpolate":
    linear between samples (synthetic data, the cost model)."""
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
    out["whole_MB_per_s"] = _mbps(float(ranks["bytes"].sum()), last - t0)
    nbytes, start = counted(ranks)
    ramp_bytes = int(ranks["bytes"].sum() - nbytes.sum())
    out["ramp_bytes"] = ramp_bytes
    if ramp_bytes or ramped(ranks).any():  # the rates count after the ramp (--ramp)
        t0 = float(counted(good)[1].min())
    out["aggregate_MB_per_s"] = _mbps(float(nbytes.sum()), last - t0)
    # IOR's bandwidth: bytes / (last close end - first open start)
    opened = good["t_open_start"][np.isfinite(good["t_open_start"])]
    if opened.size:
        out["aggregate_with_open_MB_per_s"] = _mbps(float(ranks["bytes"].sum()),
                                                    last - float(opened.min()))
    if "node_cpu_busy" in ranks.dtype.names and np.isfinite(ranks["node_cpu_busy"]).any():
        out["node_cpu_busy_max"] = float(np.nanmax(ranks["node_cpu_busy"]))
    live = np.any(~np.isfinite(ranks["t_close_end"]) | (ranks["t_close_end"] > first))
    if not live or first_done == "interpolate" or (
            first_done == "durable" and _sampled_before(first, samples, ranks)):
        known = bytes_at(first, samples, ranks, step=first_done == "durable") - ramp_bytes
        out["first_done_MB_per_s"] = _mbps(known, first - t0)
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


def host_of(hosts, node: int, unknown: str = "?") -> str:
    """The host of a rank row's node: `unknown` for a node the record does not hold (an
    imported record's rank rows say node -1: the tool named none)."""
    return str(hosts[node]) if 0 <= node < len(hosts) else unknown


NODE_DTYPE = np.dtype([("node", "<i4"), ("ranks", "<i4"), ("bytes", "<i8"),
                       ("MB_per_s", "<f8"), ("slowest_rank_MB_per_s", "<f8")])


def node_totals(ranks: np.ndarray) -> np.ndarray:
    """Per node: ranks, bytes and MB/s over the node's own first start to last done (after a
    --ramp where there was one: its bytes and time left out).

    Vectorised (bincount and ufunc.at), so 100,000 ranks on 6,000 nodes cost milliseconds.
    A node with a rank that never finished has no rate.  Rows of no node (-1: an imported
    record's) are left out.
    """
    ranks = ranks[ranks["node"] >= 0]
    nodes, inv = np.unique(ranks["node"], return_inverse=True)
    k = len(nodes)
    out = np.zeros(k, dtype=NODE_DTYPE)
    out["node"] = nodes
    out["ranks"] = np.bincount(inv, minlength=k)
    nbytes, starts = counted(ranks)
    out["bytes"] = np.bincount(inv, weights=nbytes, minlength=k)
    ends = ranks["t_close_end"]
    bad = np.bincount(inv, weights=~(np.isfinite(starts) & np.isfinite(ends)), minlength=k)
    first = np.full(k, np.inf)
    last = np.full(k, -np.inf)
    np.minimum.at(first, inv, np.where(np.isfinite(starts), starts, np.inf))
    np.maximum.at(last, inv, np.where(np.isfinite(ends), ends, -np.inf))
    span = np.where(bad == 0, last - first, np.nan)
    out["MB_per_s"] = _mbps(out["bytes"].astype(float), span)
    slow = np.full(k, np.inf)
    rates = ranks["MB_per_s"]
    np.minimum.at(slow, inv, np.where(np.isfinite(rates), rates, np.inf))
    out["slowest_rank_MB_per_s"] = np.where(np.isfinite(slow), slow, np.nan)
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
    ok = iterations[iterations["status"] == Status.OK] if len(iterations) else iterations
    use = ok
    stats: Dict[str, object] = {
        "aggregate": over_iterations(use["aggregate_MB_per_s"]),
        "first_done": over_iterations(use["first_done_MB_per_s"]),
        "rank_mean": over_iterations(use["rank_mean_MB_per_s"]),
    }
    if len(use) and (use["ramp_bytes"] > 0).any():  # --ramp: the whole run's too
        stats["whole"] = over_iterations(use["whole_MB_per_s"])
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
                            "host": host_of(hosts, int(row["node"])),
                            "MB_per_s": float(row["MB_per_s"])}
    nodes = []
    if len(sel):
        last = sel[sel["iteration"] == max(its)] if its else sel
        for n in node_totals(last):
            nodes.append({"node": int(n["node"]), "host": host_of(hosts, int(n["node"])),
                          "ranks": int(n["ranks"]), "bytes": int(n["bytes"]),
                          "MB_per_s": float(n["MB_per_s"])})
    stats["nodes"] = nodes
    return stats
