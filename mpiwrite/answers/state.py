"""Whether a record's run is over, and whether that is proven: a run killed for good
(SIGKILL, the OOM killer, a node crash, mpiexec's own death on a hang-up or a closed pipe)
cannot rewrite its record, so the record says `running` for ever.

The proof is each node's lock (facts/liveness.py): a lock that is held means the run
lives, whatever its record says; a free lock on the kernel that ran the node (the same boot
id) means that node's part is over; a `running` record is proven `abandoned` when every
node's lock is.  Nothing else proves anything: a lock file missing (a run from before the
locks, or one that could not lock), locks that do not work on the filesystem, a node on
another host.  There the record's other evidence, per node the pid and start time of the
node's process, its boot id and its batch job (run/process.this_process), still gives
`show` and `report` a state, but not a proof: a process in another PID namespace has
another pid (on that guess, clean once removed a live run's data).  `clean` removes
files only on a proof, or with --force.
"""

from __future__ import annotations

import os
import shutil
from typing import NamedTuple, Optional

from mpiwrite.facts import liveness
from mpiwrite.host import boot_id, host_name, start_ticks
from mpiwrite.vocab import names
from mpiwrite.vocab.status import RunStatus

ABANDONED = "abandoned"
SQUEUE_TIMEOUT = 10.0  # seconds


class Verdict(NamedTuple):
    state: str  # the record's status, or `abandoned` for a `running` record whose run is gone
    proven: bool  # by a lock (held: it lives; free: it is over) or by a final record
    why: str


def run_state(rec) -> str:
    """The record's status, or `abandoned` for a `running` record whose run is gone."""
    return verdict(rec).state


def verdict(rec, target_fd: Optional[int] = None) -> Verdict:
    """What is known of the run, and whether it is proven; `target_fd`: a TARGET folder
    opened by `clean`, whose lock files of this run are asked too."""
    procs = rec.processes()
    mine = boot_id()
    over, unproven = 0, []
    for i, p in enumerate(procs):
        looks = []
        name = names.lock(rec.run_id, i)
        if p.get("lock") and os.path.basename(p["lock"]) == name:
            looks.append(liveness.check(p["lock"]))
        if target_fd is not None:
            looks.append(liveness.check(name, target_fd))
        found = [s for s, _ in looks]
        where = f"node {i} ({p['host']})"
        if liveness.HELD in found:
            return Verdict(RunStatus.RUNNING, True, f"{where}: its lock is held")
        if liveness.FREE in found and p["boot_id"] and p["boot_id"] == mine:
            over += 1
        elif liveness.FREE in found:
            unproven.append(f"{where}: its lock is free here, but the node ran on another "
                            "host or boot, which may hold locks of its own")
        elif looks:
            unproven.append(f"{where}: " + next((w for s, w in looks if s == liveness.UNKNOWN),
                                                "no lock file"))
        else:
            unproven.append(f"{where}: the record names no lock file (a run from before "
                            "mpiwrite kept one)")
    if rec.status != RunStatus.RUNNING:
        return Verdict(rec.status, True, "its record is final")
    if procs and over == len(procs):
        return Verdict(ABANDONED, True, "every node's lock is free")
    why = unproven[0] if unproven else ("the record names no process (a run from before "
                                        "mpiwrite kept them)")
    return Verdict(_by_processes(rec, procs), False, why)


def _by_processes(rec, procs) -> str:
    """The evidence that proves nothing but is all there is: `abandoned` when, on a node this
    machine can see (its own host name), that process is gone (no such pid, a pid reused by
    another process, or the node booted since), or when the batch scheduler no longer knows
    its job; else `running`."""
    if not procs:
        return rec.status
    try:
        me = host_name()
    except ValueError:
        me = ""
    boot = boot_id()
    for p in procs:
        if p["host"] != me:
            continue
        if p["boot_id"] and boot and p["boot_id"] != boot:
            return ABANDONED  # this node booted since: nothing of the run is left here
        if start_ticks(p["pid"]) != p["start_ticks"]:
            return ABANDONED  # gone, another PID namespace, or the pid now another's
        return rec.status  # its process is alive here
    job = next((p["job"] for p in procs if "job" in p), None)
    if job and job_ended(job):
        return ABANDONED
    return rec.status


def job_ended(job: dict) -> bool:
    """True when the scheduler says the job is over (Slurm's squeue no longer lists it);
    False when it runs or cannot be asked."""
    if job.get("scheduler") != "slurm" or not job.get("id", "").replace("_", "").isdigit():
        return False
    squeue = shutil.which("squeue")
    if not squeue:
        return False
    from mpiwrite.procs import run_bounded

    out = run_bounded([squeue, "-h", "-j", job["id"], "-o", "%T"], SQUEUE_TIMEOUT)
    if out.missing or out.timed_out or out.overflowed:
        return False
    if out.code != 0:
        return "Invalid job id" in out.text("err")  # purged from the controller: long over
    return out.text().strip() in ("", "COMPLETED", "CANCELLED", "FAILED", "TIMEOUT",
                                  "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY", "BOOT_FAIL",
                                  "DEADLINE")
