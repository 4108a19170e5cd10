"""The client's own processes and their CPU time: a FUSE daemon (glusterfs, ceph-fuse, dfuse)
does most of a FUSE client's work, and Lustre's and NFS's kernel threads (ptlrpcd, ll_*,
ldlm_*, nfsiod...) do theirs outside the ranks, so the ranks' CPU time never shows it.

`threads` finds kernel threads by their name (/proc/PID/comm); `seconds` reads utime + stime
of each process (/proc/PID/stat, all its threads) so that the node watch can take the
difference over a timed phase.  Work a kernel work queue runs (rpciod's items) runs in kworker
threads shared with everything else: not counted.
"""

from __future__ import annotations

import os
from typing import Dict, List, Optional, Sequence, Tuple

from mpiwrite.sysroot import Reader

MAX_PROCESSES = 8192


def threads(reader: Reader, prefixes: Sequence[str]) -> List[int]:
    """The pids whose name starts with one of prefixes (kernel threads: no command line)."""
    found = []
    for rel in reader.glob("proc/[0-9]*")[:MAX_PROCESSES]:
        pid = rel.rsplit("/", 1)[-1]
        if not pid.isdigit():
            continue
        comm, _ = reader.read(f"{rel}/comm", keep=False)
        if comm and comm.strip().startswith(tuple(prefixes)):
            cmdline, _ = reader.read(f"{rel}/cmdline", keep=False)
            if not cmdline:  # a kernel thread, not a user process named alike
                found.append(int(pid))
    return found


def _stat(reader: Reader, pid: int) -> Optional[Tuple[str, List[str]]]:
    """(its name, the fields of /proc/PID/stat after it) of a process still there, or None."""
    text, _ = reader.read(f"proc/{int(pid)}/stat", keep=False)
    if not text or ")" not in text:
        return None
    return text[text.find("(") + 1:text.rfind(")")], text[text.rfind(")") + 2:].split()


def seconds(reader: Reader, pids: Sequence[int]) -> Dict[str, float]:
    """{'PID name': user + system CPU seconds} of each process still there."""
    tick = float(os.sysconf("SC_CLK_TCK")) if hasattr(os, "sysconf") else 100.0
    out: Dict[str, float] = {}
    for pid in pids:
        got = _stat(reader, pid)
        if got is None:
            continue
        name, fields = got
        try:  # fields 14 and 15 of stat(5), counted from the state (field 3)
            out[f"{pid} {name}"] = (int(fields[11]) + int(fields[12])) / tick
        except (IndexError, ValueError):
            continue
    return out


def waited(reader: Reader, pids: Sequence[int]) -> Dict[str, float]:
    """{'PID name': seconds its threads waited for a CPU while runnable} of each process still
    there: the second field of each thread's /proc/PID/task/TID/schedstat (run_delay, ns).  A
    process held by a cgroup's CPU quota, or crowded off busy cores, waits there; the limit
    verdict (answers/limits.py) reads it beside the CPU seconds."""
    out: Dict[str, float] = {}
    for pid in pids:
        got = _stat(reader, pid)
        if got is None:
            continue
        name = got[0]
        total = 0
        for rel in reader.glob(f"proc/{int(pid)}/task/[0-9]*")[:MAX_PROCESSES]:
            got, _ = reader.read(f"{rel}/schedstat", keep=False)
            fields = (got or "").split()
            if len(fields) == 3 and fields[1].isdigit():
                total += int(fields[1])
        out[f"{pid} {name}"] = total / 1e9
    return out


def spent(before: Dict[str, float], after: Dict[str, float]) -> Dict[str, float]:
    """CPU seconds each process spent between two readings (those in both)."""
    return {k: round(after[k] - before[k], 3) for k in after
            if k in before and after[k] >= before[k]}
