"""Whether a record that says `running` still is: a run killed for good (SIGKILL, the OOM
killer, a node crash, mpiexec's own death on a hang-up or a closed pipe) cannot rewrite its
record, so the record says `running` for ever.  Its processes say otherwise.

The record keeps, per node, the pid and start time of the process that ran the node's part,
the node's boot id and the batch job (run/process.this_process).  A `running` record is
`abandoned` when, on a node this machine can see (its own host name), that process is gone
(no such pid, a pid reused by another process, or the node booted since), or when the
batch scheduler no longer knows its job.  Where neither can be known (another host, no job
id), the record stays `running`: nothing is ever called abandoned on a guess.
"""

from __future__ import annotations

import shutil

from mpiwrite.facts.host import boot_id, host_name, start_ticks
from mpiwrite.formats.status import RunStatus

ABANDONED = "abandoned"
SQUEUE_TIMEOUT = 10.0  # seconds


def run_state(rec) -> str:
    """The record's status, or `abandoned` for a `running` record whose run is gone."""
    if rec.status != RunStatus.RUNNING:
        return rec.status
    procs = rec.processes()
    if not procs:
        return rec.status  # written before mpiwrite kept them: cannot tell
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
            return ABANDONED  # gone, or the pid now belongs to another process
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
