"""Client CPU per GB: the ranks' own CPU time and that of the client's own processes.

A FUSE client (GlusterFS, ceph-fuse, dfuse, bindfs) does most of its work in its daemon, and
Lustre's and NFS's clients part of theirs in kernel threads: the ranks' CPU time never sees
it.  A run's node leaders read those processes' CPU seconds over each timed phase
(run/observe.py: `client_counters[].delta.client_cpu`); `cpu-per-GB` is the sum of two
shares, each per 10^9 bytes of the ranks it serves:

- the ranks': user + system seconds of the ranks whose CPU was measured, over their bytes;
- the client's own: the seconds of the nodes that measured their client's processes, over
  the bytes of all ranks on those nodes (a daemon serves every rank of its node).

A node without such processes (a local filesystem), or a record from before they were
measured, adds nothing: its figure is the ranks' share alone (docs/tune.md says where this
stops).
"""

from __future__ import annotations

import math
from typing import Any, Dict, Iterable, List, NamedTuple

import numpy as np

NAN = float("nan")


class CpuPerGB(NamedTuple):
    ranks: float  # s/GB of the measured ranks; NaN when none was measured or they wrote 0
    own: float  # s/GB of the client's own processes; 0.0 when no node measured any
    processes: List[str]  # their names, each once ("glusterfs", "ptlrpcd_00_00", ...)

    @property
    def total(self) -> float:
        """What `--metric cpu-per-GB` counts: NaN unless the ranks' share is known."""
        return self.ranks + self.own if math.isfinite(self.ranks) else NAN


def ranks_per_GB(rows: np.ndarray) -> float:
    """User + system CPU seconds per 10^9 bytes over the ranks of one iteration whose CPU was
    measured, and only their bytes; NaN when no rank has a CPU figure (records from before
    it, MPIWRITE_NO_ACCOUNTING=1) or they wrote nothing."""
    names = rows.dtype.names or ()
    if "cpu_user_seconds" not in names or "cpu_system_seconds" not in names:
        return NAN
    cpu = rows["cpu_user_seconds"] + rows["cpu_system_seconds"]
    measured = np.isfinite(cpu)
    nbytes = float(rows["bytes"][measured].sum())
    if not measured.any() or nbytes <= 0:
        return NAN
    return float(cpu[measured].sum()) / nbytes * 1e9


def own_seconds(counters: Iterable[Dict[str, Any]], it: int) -> Dict[int, Dict[str, float]]:
    """{node: {'PID name': seconds}} of iteration `it`, for the nodes that measured their
    client's own processes (values that are no finite, non-negative numbers are left out)."""
    out: Dict[int, Dict[str, float]] = {}
    for row in counters or ():
        if row.get("iteration") != it or not isinstance(row.get("node"), int):
            continue
        own = (row.get("delta") or {}).get("client_cpu")
        procs = own.get("processes") if isinstance(own, dict) else None
        if not isinstance(procs, dict):
            continue
        out[row["node"]] = {str(k): float(v) for k, v in procs.items()
                            if isinstance(v, (int, float)) and not isinstance(v, bool)
                            and math.isfinite(v) and v >= 0}
    return out


def per_GB(rows: np.ndarray, counters: Iterable[Dict[str, Any]], it: int) -> CpuPerGB:
    """The two shares of one iteration: `rows` its ranks, `counters` the record's
    client_counters."""
    own = own_seconds(counters, it)
    names: List[str] = []
    for procs in own.values():
        for key in procs:
            name = key.split(" ", 1)[-1]
            if name not in names:
                names.append(name)
    seconds = sum(sum(p.values()) for p in own.values())
    served = float(rows["bytes"][np.isin(rows["node"], list(own))].sum()) if own else 0.0
    return CpuPerGB(ranks_per_GB(rows), seconds / served * 1e9 if served > 0 else 0.0, names)


def of_record(rec, it: int) -> CpuPerGB:
    """The two shares of iteration `it` of a record (its counters grouped by iteration once
    per record: a run of many iterations on many nodes has a row per both)."""
    memo = rec.__dict__.setdefault("_counters_by_iteration", {})
    if not memo:
        for row in getattr(rec, "client_counters", None) or []:
            memo.setdefault(row.get("iteration"), []).append(row)
        memo.setdefault(None, [])  # grouped, even when there is none
    return per_GB(rec.ranks[rec.ranks["iteration"] == it], memo.get(it, []), it)


def own_share(runs, warmup: int = 0, unit: str = "run"):
    """(mean s/GB of the client's own processes, their names) over the samples that
    `--metric cpu-per-GB` takes from these runs (good iterations after the warm-up with a
    figure; each run's mean with unit `run`), for the report's note; (NaN, []) without any."""
    from mpiwrite.vocab.status import Status

    samples: List[float] = []
    names: List[str] = []
    for rec in runs:
        its = rec.iterations
        its = its[(its["status"] == int(Status.OK)) & (its["iteration"] >= warmup)]
        mine = []
        for it in its["iteration"]:
            cpu = of_record(rec, int(it))
            if math.isfinite(cpu.total):
                mine.append(cpu.own)
                names += [n for n in cpu.processes if n not in names]
        if unit == "run":
            samples += [float(np.mean(mine))] if mine else []
        else:
            samples += mine
    return (float(np.mean(samples)) if samples else NAN), names
