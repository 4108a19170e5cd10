"""Pure functions between one rank's result and rank 0's tables; no MPI, no I/O (the node's
CPU counters that `cpu_fractions` compares are read by facts/nodeinfo.cpu_line).

A rank packs what it did into one float64 row (`pack_row`); rank 0 turns the gathered rows
into the per-rank table on the common timeline (`rank_table`, `sample_table`) and decides the
iteration's status (`iteration_status`).  An error a rank saw becomes one entry (`rank_error`, an
`errors.error_entry`).
The runner and benchmarks/bench_records.py use the same functions.  `pack_row` and
`rank_error` run on every rank and use no numpy (ranks other than the node leaders never load
it, docs/scaling.md); the tables are rank 0's and import numpy (and formats/summary) there.
"""

from __future__ import annotations

from array import array
from typing import TYPE_CHECKING, Any, Dict, Optional, Tuple

from mpiwrite.errors import error_entry
from mpiwrite.vocab.status import Status

if TYPE_CHECKING:
    import numpy as np

NAN = float("nan")
# summary.LATENCY_RANK_FIELDS (formats/summary loads numpy; tests/unit/test_rows.py checks them)
LATENCY_RANK_FIELDS = ("write_latency_p50_seconds", "write_latency_p99_seconds",
                       "write_latency_max_seconds", "fsync_latency_max_seconds")

ROW_FIELDS = ("bytes", "blocks", "fsyncs", "t_open_start", "t_write_start", "t_write_end",
              "t_fsync_end", "t_close_end", "status", "errno", "stopped_by_time",
              "verify_bytes", "verify_seconds", "verify_mismatches", "cpu_user_seconds",
              "cpu_system_seconds", "node_cpu_busy", "node_cpu_iowait", "read_source_rank",
              "read_status", "read_errno", "read_bytes", "t_read_open_start", "t_read_start",
              "t_read_close_end", "ramp_bytes", "t_ramp") + LATENCY_RANK_FIELDS


def rank_status(res, signalled: bool) -> Status:
    if res.failed:
        return Status.FAILED
    if res.stopped_by == "abort":
        return Status.INTERRUPTED if signalled else Status.ABORTED
    return Status.OK


def cpu_fractions(before, after) -> Tuple[float, float]:
    """(busy, iowait) fractions of all CPUs between two /proc/stat 'cpu' lines (lists of
    jiffies: user nice system idle iowait irq softirq steal ...); NaN when unknown."""
    if not before or not after or len(before) < 8 or len(after) < 8:
        return float("nan"), float("nan")
    d = [a - b for a, b in zip(after[:8], before[:8])]
    total = sum(d)
    if total <= 0:
        return float("nan"), float("nan")
    busy = d[0] + d[1] + d[2] + d[5] + d[6] + d[7]
    return busy / total, d[4] / total


def pack_row(res, verify=None, signalled: bool = False, node_cpu=(NAN, NAN),
             read=None, read_source: int = -1) -> array:
    """One rank's iteration as a float64 row in ROW_FIELDS order (times on its own clock).
    `node_cpu`: (busy, iowait) fractions of the node's CPUs, from its leader (else NaN);
    `read`: the read phase's result (writer.ReadResult), whose pattern check counts as the
    verify when there is no separate one."""
    status = rank_status(res, signalled)
    if read is not None and verify is None and read.first is not None:
        verify = read
    values = {
        "bytes": res.bytes, "blocks": res.blocks, "fsyncs": res.fsyncs,
        "t_open_start": res.t_open_start, "t_write_start": res.t_write_start,
        "t_write_end": res.t_write_end, "t_fsync_end": res.t_fsync_end,
        "t_close_end": res.t_close_end, "status": status, "errno": res.error_errno,
        "stopped_by_time": 1 if res.stopped_by == "time" else 0,
        "verify_bytes": verify.bytes if verify else 0,
        "verify_seconds": getattr(verify, "seconds", NAN) if verify else NAN,  # a read: none
        "verify_mismatches": (verify.mismatches + (1 if verify.error_text else 0))
        if verify else 0,
        "cpu_user_seconds": getattr(res, "cpu_user", NAN),
        "cpu_system_seconds": getattr(res, "cpu_system", NAN),
        "node_cpu_busy": node_cpu[0], "node_cpu_iowait": node_cpu[1],
        "read_source_rank": read_source, "read_status": Status.OK, "read_errno": 0,
        "read_bytes": 0, "t_read_open_start": NAN, "t_read_start": NAN,
        "t_read_close_end": NAN,
        "ramp_bytes": getattr(res, "ramp_bytes", 0), "t_ramp": getattr(res, "t_ramp", NAN),
    }
    lat = getattr(res, "latency", None)
    for k in LATENCY_RANK_FIELDS:
        values[k] = NAN
    if lat is not None:
        from mpiwrite.engines import latency

        w = latency.percentiles(lat.write, lat.write_max if any(lat.write) else NAN)
        values.update(write_latency_p50_seconds=w["p50"], write_latency_p99_seconds=w["p99"],
                      write_latency_max_seconds=w["max"],
                      fsync_latency_max_seconds=lat.fsync_max if any(lat.fsync) else NAN)
    if read is not None:
        values.update(read_status=rank_status(read, signalled), read_errno=read.error_errno,
                      read_bytes=read.bytes, t_read_open_start=read.t_open_start,
                      t_read_start=read.t_write_start,
                      t_read_close_end=NAN if read.failed else read.t_close_end)
        if verify is read:
            values["verify_bytes"], values["verify_seconds"] = read.bytes, NAN
            values["verify_mismatches"] = read.mismatches
    if status == Status.FAILED:  # a stream that did not finish has no valid end times
        values["t_fsync_end"] = values["t_close_end"] = NAN
    return array("d", [float(values[k]) for k in ROW_FIELDS])


def rank_table(it: int, rows: np.ndarray, node_of: np.ndarray, offsets: np.ndarray,
               origin: float) -> np.ndarray:
    """The per-rank table of one iteration, every time moved onto rank 0's clock (minus the
    run's origin) with its node's offset."""
    import numpy as np

    from mpiwrite.formats import summary

    n = len(rows)
    ranks = np.zeros(n, dtype=summary.RANK_DTYPE)
    ranks["iteration"], ranks["rank"], ranks["node"] = it, np.arange(n), node_of
    off = offsets[node_of, 0] - origin
    for i, k in enumerate(ROW_FIELDS):
        col = rows[:, i]
        ranks[k] = col + off if k.startswith("t_") else col
    # the node's CPU fractions were measured by its leader: give them to all its ranks
    nodes, first_row = np.unique(node_of, return_index=True)
    for k in ("node_cpu_busy", "node_cpu_iowait"):
        per_node = np.full(int(node_of.max()) + 1 if n else 0, np.nan)
        per_node[nodes] = ranks[k][first_row]
        ranks[k] = per_node[node_of] if n else ranks[k]
    ranks["clock_offset_seconds"] = offsets[node_of, 0]
    ranks["clock_uncertainty_seconds"] = offsets[node_of, 1]
    summary.fill_rates(ranks)
    summary.fill_read_rates(ranks)
    return ranks


def sample_table(it: int, flat: np.ndarray, counts: np.ndarray, node_of: np.ndarray,
                 offsets: np.ndarray, origin: float, phase: int = 0) -> np.ndarray:
    """(t, bytes) pairs gathered from every rank as a sample table on the common timeline."""
    import numpy as np

    from mpiwrite.formats import summary

    pairs = np.asarray(flat, dtype=np.float64).reshape(-1, 2)
    srows = np.zeros(len(pairs), dtype=summary.SAMPLE_DTYPE)
    owner = np.repeat(np.arange(len(counts)), np.asarray(counts) // 2)
    off = offsets[node_of, 0] - origin
    srows["iteration"], srows["rank"], srows["phase"] = it, owner, phase
    srows["t"] = pairs[:, 0] + off[owner] if len(pairs) else pairs[:, 0]
    srows["bytes"] = pairs[:, 1]
    return srows


def iteration_status(ranks: np.ndarray, signalled: bool) -> Status:
    """OK, FAILED or INTERRUPTED for one iteration's per-rank table."""
    import numpy as np

    if np.any(ranks["status"] == Status.FAILED) or np.any(ranks["read_status"] ==
                                                          Status.FAILED):
        return Status.FAILED
    if np.any(ranks["status"] == Status.INTERRUPTED) or signalled:
        return Status.INTERRUPTED
    if np.any(ranks["verify_mismatches"] > 0):
        return Status.FAILED
    return Status.OK


def clock_outliers(ranks: np.ndarray, window: Tuple[float, float], slack: float) -> np.ndarray:
    """Indices of ranks whose phase times lie outside the iteration's wall-clock window.

    Rank 0 brackets each write phase on its own clock: before the barrier that starts it and
    after the last rank's "done" arrived.  Every rank's write start and close end, moved onto
    that clock with its node's offset, must lie inside (give or take the offset's uncertainty
    and `slack`); if not, that rank's clock disagrees with its node leader's, and the node
    offset does not apply to it."""
    import numpy as np

    lo, hi = window
    unc = np.nan_to_num(ranks["clock_uncertainty_seconds"]) + slack
    bad = np.zeros(len(ranks), dtype=bool)
    for k in ("t_open_start", "t_write_start", "t_close_end"):
        t = ranks[k]
        fin = np.isfinite(t)
        bad |= fin & ((t < lo - unc) | (t > hi + unc))
    return np.flatnonzero(bad)


def rank_error(it: int, rank: int, host: str, res, verify=None,
               read=None) -> Optional[Dict[str, Any]]:
    """What one rank has to say about an iteration that went wrong for it, or None.

    `t` is on the rank's own clock; rank 0 moves it onto the common timeline."""
    if read is not None and read.failed and not res.failed:
        return error_entry(rank, host, f"read {read.error_phase}", read.error_text,
                           iteration=it, errno=read.error_errno, path=read.path,
                           t=read.t_write_end)
    if read is not None and verify is None and read.first is not None:
        verify = read
    if res.failed:
        return error_entry(rank, host, res.error_phase, res.error_text, iteration=it,
                           errno=res.error_errno, path=res.path, t=res.t_write_end)
    if verify is not None and (verify.mismatches or verify.error_text):
        first = verify.first
        detail = (f"{verify.mismatches} mismatched block(s); first at offset "
                  f"{first.offset}: expected {first.expected}, found {first.found}"
                  if first else verify.error_text)
        return error_entry(rank, host, "verify", detail, iteration=it, path=verify.path,
                           offset=first.offset if first else -1)
    return None
