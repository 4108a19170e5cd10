"""This node's name, its boot, and a process's start: what tells later whether a run's
processes are still there (run/process.py records them, answers/state.py asks); and this
process's address space (what a limit on it leaves)."""

from __future__ import annotations

import os


def host_name() -> str:
    """This node's name: MPIWRITE_HOSTNAME (containers that share a hostname; tests that model
    uneven nodes on one machine) or the hostname.  Raises ValueError for a name that is not
    UTF-8."""
    name = os.environ.get("MPIWRITE_HOSTNAME") or os.uname().nodename
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("MPIWRITE_HOSTNAME is not valid UTF-8") from None
    if not name.strip() or any(ord(c) < 32 or ord(c) == 127 for c in name):
        raise ValueError("MPIWRITE_HOSTNAME is empty or holds control characters")
    return name


def boot_id() -> str:
    """The kernel's id of this boot ('' where it cannot be read)."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as fh:
            return fh.read(64).strip()
    except OSError:
        return ""


def start_ticks(pid: int) -> int:
    """When process `pid` started, in clock ticks after boot; -1 when it does not exist, has
    exited (a zombie not yet reaped), or cannot be read."""
    try:
        with open(f"/proc/{int(pid)}/stat") as fh:
            fields = fh.read(4096).rsplit(")", 1)[1].split()
        return -1 if fields[0] in ("Z", "X") else int(fields[19])
    except (OSError, ValueError, IndexError):
        return -1


def waits_on(pid: int) -> tuple:
    """(state, wait channel) of process `pid` as /proc says: ('D', 'request_wait_answer') for
    a writer the kernel holds in a FUSE client, ('T', 'do_signal_stop') for a stopped one;
    ('?', '') when it cannot be read.  The channel of the process's own thread (the
    writer's, the main thread of a rank)."""
    try:
        with open(f"/proc/{int(pid)}/stat") as fh:
            state = fh.read(4096).rsplit(")", 1)[1].split()[0]
        with open(f"/proc/{int(pid)}/wchan") as fh:
            wchan = fh.read(128).strip()
    except (OSError, ValueError, IndexError):
        return "?", ""
    return state, "" if wchan == "0" else wchan


def address_space() -> int:
    """This process's mapped address space in bytes (what RLIMIT_AS counts; 0 where unknown)."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0
