"""This rank as a process: its signals, its hostname, its age, and the watchdog that ends the
job when the process is stuck outside MPI.  No messages: parallel.py makes those.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from typing import Callable, Optional

from mpiwrite.host import boot_id, start_ticks
from mpiwrite.text import printable

# The signals a run answers in order (stop writing, remove its files, record `interrupted`),
# each with the shell's exit code for it: Ctrl-C, the batch system's SIGTERM, a hang-up (a
# closed terminal or ssh session), Ctrl-\, an alarm, the user signals that batch systems
# send before a time limit (sbatch --signal), and the other signals whose default action ends
# a process: a CPU-time limit (SIGXCPU, RLIMIT_CPU as batch systems set it), a file-size limit
# (SIGXFSZ: the write that crossed RLIMIT_FSIZE then fails with EFBIG), a power failure
# (SIGPWR, Linux), and the timers' SIGVTALRM and SIGPROF (mpiwrite sets no timers).  Anything
# else ends the rank at once (SIGKILL cannot be caught); `show` then calls such a run
# abandoned once its processes are gone.
ORDERLY = ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGALRM", "SIGUSR1", "SIGUSR2",
           "SIGXCPU", "SIGXFSZ", "SIGPWR", "SIGVTALRM", "SIGPROF")
EXIT_FOR_SIGNAL = {s: 128 + s for s in (getattr(signal, n) for n in ORDERLY
                                        if hasattr(signal, n))}
# Signals the kernel sends a rank for a call of its own that then fails and says why (the
# write past RLIMIT_FSIZE: EFBIG, "File too large"): a failed run names that, not the signal.
WITH_AN_ERROR = frozenset({signal.SIGXFSZ})

clock = time.monotonic

# Variables a launcher sets to say how many ranks it started.
SIZE_VARS = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_STEP_NUM_TASKS", "MPI_LOCALNRANKS")


def launcher_size() -> int:
    """How many ranks the launcher started (1 when not under a launcher, or unknown)."""
    sizes = [1]
    for var in SIZE_VARS:
        value = os.environ.get(var, "")
        if value.isascii() and value.isdigit():
            sizes.append(int(value))
    return max(sizes)


RANK_VARS = ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID")


def launcher_rank() -> int:
    """This process's rank as the launcher says (0 when not under a launcher, or unknown)."""
    for var in RANK_VARS:
        value = os.environ.get(var, "")
        if value.isascii() and value.isdigit():
            return int(value)
    return 0


class Signals:
    """SIGINT/SIGTERM set a flag that the write loop and every wait look at."""

    def __init__(self):
        self.received = 0
        self.at = float("inf")
        for s in EXIT_FOR_SIGNAL:
            signal.signal(s, self._handle)
        early = sys.modules.get("mpiwrite.cli.entry")  # a signal during start-up, kept for us
        if early is not None and early.pending["signum"]:
            self._handle(early.pending["signum"], None)

    def _handle(self, signum, _frame):
        if not self.received:
            self.received, self.at = signum, clock()

    @property
    def exit_code(self) -> int:
        return EXIT_FOR_SIGNAL.get(self.received, 1)

    @staticmethod
    def exit_code_of(signum: int) -> int:
        return EXIT_FOR_SIGNAL.get(signum, 1)


class Watchdog:
    """A last resort for a rank stuck outside MPI (a write that never returns): if this rank
    is still in the phase after `seconds`, it ends the whole job naming itself or whom it
    waits for (describe()), after `then()` (clean-up, bounded by the caller).  Never
    silently disabled: `seconds` is bounded by the config."""

    def __init__(self, team, seconds: Optional[float], describe: Callable[[], str],
                 then: Optional[Callable[[], None]] = None):
        self.team, self.describe, self.then = team, describe, then
        self.timer = None
        if seconds:
            self.timer = threading.Timer(min(seconds, threading.TIMEOUT_MAX), self._fire)
            self.timer.daemon = True
            self.timer.start()

    def _fire(self) -> None:
        try:
            said = self.describe()  # '' when another rank speaks for this one
            if said:
                sys.stderr.write(printable(f"mpiwrite: {said}") + "\n")
                sys.stderr.flush()
            if self.then is not None:  # the clean-up and the record (run/stuck.py)
                self.then()
        finally:
            self.team.abort(1)

    def cancel(self) -> None:
        if self.timer is not None:
            self.timer.cancel()


def seconds_since_exec() -> float:
    """How long ago this process started (from /proc; 10 ms resolution), or NaN."""
    try:
        with open("/proc/self/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        with open("/proc/uptime") as fh:
            uptime = float(fh.read().split()[0])
        return uptime - int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return float("nan")


def parse_inject(text: str):
    """MPIWRITE_INJECT=RANK:PHASE[:SECONDS] -> (rank, phase, seconds to wait first); None
    when unset.  A value that is not of that form is a ValueError naming the variable (the
    guard ends the job with it), never a silently different fault."""
    if not text:
        return None
    rank, _, phase = text.partition(":")
    head, _, tail = phase.rpartition(":")
    seconds = 0.0
    if head and tail.isascii() and tail.replace(".", "", 1).isdigit():
        phase, seconds = head, min(float(tail), 60.0)
    if not (rank.isascii() and rank.isdigit() and phase):
        raise ValueError(f"MPIWRITE_INJECT: {text!r} is not RANK:PHASE[:SECONDS]")
    return int(rank), phase, seconds


def this_process() -> dict:
    """What identifies this process later, on this node: its pid, its start time (so that a
    reused pid is not mistaken for it), the node's boot id (a node that rebooted runs
    nothing of it any more), and the batch job it belongs to."""
    out = {"pid": os.getpid(), "start_ticks": start_ticks(os.getpid()), "boot_id": boot_id()}
    for var, scheduler in (("SLURM_JOB_ID", "slurm"), ("PBS_JOBID", "pbs"),
                           ("LSB_JOBID", "lsf"), ("FLUX_JOB_ID", "flux")):
        if os.environ.get(var):
            out["job"] = {"scheduler": scheduler, "id": os.environ[var][:64]}
            break
    return out


def slurm_pmi2_netmod(environ=os.environ) -> bool:
    """Before MPI_Init: under srun --mpi=pmi2 (PMI_FD from Slurm's plugin), MPICH's netmod
    defaults to OFI unless the site chose one.  Slurm 22.05 reads a PMI-1 request with one
    read() of at most 1024 bytes, and MPICH's default UCX netmod puts its 4 KiB address in
    lines of up to ~1,080 bytes: a cut line fails the step now and then (docs/testbed.md).
    Other MPIs ignore the variable; the record's environment shows it.  With that choice ours,
    libfabric's `sockets` provider is left out too (FI_PROVIDER=^sockets) unless the site
    chose providers: where no fabric provider fits (Ethernet) it is the one picked before
    `tcp`, and MPI_Init then hangs now and then, every rank spinning (3 hangs in 35 three-node
    launches here; none in 60 with `tcp`, docs/testbed.md).  True if the netmod was set."""
    if (environ.get("SLURM_MPI_TYPE") != "pmi2" or "PMI_FD" not in environ
            or "MPIR_CVAR_CH4_NETMOD" in environ):
        return False
    environ["MPIR_CVAR_CH4_NETMOD"] = "ofi"
    environ.setdefault("FI_PROVIDER", "^sockets")
    return True
