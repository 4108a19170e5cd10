"""A run's throughput over time, out of its record: `mpiwrite timeline RECORD`.

Every rank's samples (its bytes written so far, every --sample-interval, and at its end) are
put on one grid of intervals on the run's common timeline (seconds since the first barrier,
rank 0's clock, each rank's clock offset already applied: docs/record-schema.md), from the
iteration's first write to its last rank's end.  Between samples a rank's bytes are taken as
linear; before its first write it has none, after its end all.  Each interval gives, per rank
or per node (the sum of its ranks), the bytes written in it and their rate; where the record
holds rank 0's wall clock at the timeline's zero (`origin_unix`), each interval's start as a
date too, so timelines of runs and nodes can be laid side by side (fio's log_alternate_epoch).

The write phase only; the samples count bytes handed to the filesystem (write() returned),
and a rank's end point is its last durable byte (its fsync and close).
"""

from __future__ import annotations

import datetime
import math
from typing import Any, Dict, Iterator, List, Optional

import numpy as np

from mpiwrite.errors import ConfigError
from mpiwrite.formats.summary import PHASE_WRITE

MB = 1e6
MAX_INTERVALS = 100_000  # an iteration's intervals at most (a tiny --interval on a long run)
COLUMNS = {"rank": ("iteration", "rank", "node", "host", "t_start", "t_end", "time_start",
                    "bytes", "MB_per_s"),
           "node": ("iteration", "node", "host", "ranks", "t_start", "t_end", "time_start",
                    "bytes", "MB_per_s")}


def origin(rec) -> Optional[float]:
    """Rank 0's wall clock at the timeline's zero, if the record holds a plausible one."""
    try:
        x = float(rec.attrs.get("origin_unix", float("nan")))
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) and 1e9 < x < 1e11 else None


def _date(at: Optional[float], t: float) -> Optional[str]:
    if at is None:
        return None
    stamp = datetime.datetime.fromtimestamp(at + t, datetime.timezone.utc)
    return stamp.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def interval_of(rec, given: Optional[float]) -> float:
    """--interval, else the run's own --sample-interval, else 1 s."""
    if given is not None:
        return given
    try:
        x = float(rec.params().get("sample_interval") or 1.0)
    except (TypeError, ValueError):
        x = 1.0
    return x if math.isfinite(x) and x > 0 else 1.0


def rows(rec, by: str = "rank", interval: Optional[float] = None,
         iteration: Optional[int] = None) -> Iterator[Dict[str, Any]]:
    """The timeline's rows, iteration by iteration, interval by interval, rank (node) by rank
    (node).  ConfigError for an iteration the record does not hold or no samples at all."""
    if by not in COLUMNS:
        raise ConfigError(f"--by: {by!r} is not rank or node")
    dt = interval_of(rec, interval)
    ranks, samples = rec.ranks, rec.samples
    its = sorted({int(i) for i in ranks["iteration"]}) if len(ranks) else []
    if iteration is not None:
        if iteration not in its:
            raise ConfigError(f"--iteration: {iteration} is not one of the record's "
                              f"iterations ({', '.join(map(str, its)) or 'none'})")
        its = [iteration]
    if samples is None or not len(samples) or not its:
        raise ConfigError(f"RECORD: run {rec.run_id} holds no throughput samples "
                          "(an imported run, or one with --sample-interval 0)")
    if "phase" in (samples.dtype.names or ()):
        samples = samples[samples["phase"] == PHASE_WRITE]
    hosts = [str(n.get("host", "?")) if isinstance(n, dict) else "?" for n in rec.nodes]
    at = origin(rec)
    for it in its:
        r = ranks[(ranks["iteration"] == it) & np.isfinite(ranks["t_write_start"])]
        if not len(r):
            continue
        start = float(np.min(r["t_write_start"]))
        ends = np.where(np.isfinite(r["t_close_end"]), r["t_close_end"], np.nan)
        s_it = samples[samples["iteration"] == it]
        last = float(np.nanmax(np.concatenate([ends, s_it["t"]]))) if len(s_it) or \
            np.isfinite(ends).any() else start
        n = max(1, math.ceil((last - start) / dt - 1e-9))
        if n > MAX_INTERVALS:
            raise ConfigError(f"--interval: {dt:g} s gives {n} intervals for iteration {it} "
                              f"(at most {MAX_INTERVALS}); give a longer one")
        edges = start + dt * np.arange(n + 1)
        edges[-1] = max(last, edges[-2] + 1e-9) if n > 1 else max(last, start + 1e-9)
        # (the last interval ends with the last rank: shorter than the others, never past it)
        per_rank = []
        for row in r:
            mine = s_it[s_it["rank"] == row["rank"]]
            ts = [float(row["t_write_start"])] + [float(x) for x in mine["t"]]
            bs = [0.0] + [float(x) for x in mine["bytes"]]
            if math.isfinite(float(row["t_close_end"])):
                ts.append(float(row["t_close_end"]))
                bs.append(float(row["bytes"]))
            order = np.argsort(ts, kind="stable")
            cum = np.interp(edges, np.asarray(ts)[order], np.maximum.accumulate(
                np.asarray(bs)[order]))
            # whole bytes at each edge, then their differences: the intervals' bytes are
            # whole and add up to the rank's exactly (rounding each interval's share on its
            # own left a 16-rank run's rows up to 3 bytes off a rank's)
            per_rank.append((int(row["rank"]), int(row["node"]), np.diff(np.rint(cum))))
        yield from _emit(it, by, edges, per_rank, hosts, at)


def _emit(it, by, edges, per_rank, hosts, at) -> Iterator[Dict[str, Any]]:
    width = np.diff(edges)
    if by == "node":
        nodes: Dict[int, List] = {}
        for _rank, node, b in per_rank:
            nodes.setdefault(node, []).append(b)
        groups = [(node, node, len(bs), np.sum(bs, axis=0))
                  for node, bs in sorted(nodes.items())]
    else:
        groups = [(rank, node, 1, b) for rank, node, b in sorted(per_rank)]
    for k in range(len(width)):
        for ident, node, count, b in groups:
            row: Dict[str, Any] = {"iteration": it}
            if by == "node":
                row.update(node=ident, host=hosts[node] if node < len(hosts) else "?",
                           ranks=count)
            else:
                row.update(rank=ident, node=node,
                           host=hosts[node] if 0 <= node < len(hosts) else "?")
            nbytes = float(b[k])
            row.update(t_start=round(float(edges[k]), 6), t_end=round(float(edges[k + 1]), 6),
                       time_start=_date(at, float(edges[k])), bytes=int(round(nbytes)),
                       MB_per_s=round(nbytes / max(float(width[k]), 1e-9) / MB, 3))
            yield row
