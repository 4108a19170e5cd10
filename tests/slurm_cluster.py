"""A real one-node Slurm (munged, slurmctld, slurmd from Debian's packages) for the tests.

It lives in its own folder with its own ports, declares 16 CPUs (config_overrides) so that 16
tasks fit on a small machine, and is stopped again afterwards.  munged is shared: a live one
is used as it is; otherwise the cluster starts one and later stops exactly that one, by its
pid, and waits until it is gone (a munged that has exited but is not yet reaped still shows
up by name, and the next cluster would then find no socket).  Nothing is killed by name.
"""

import os
import random
import shutil
import signal
import socket
import subprocess
import time

CONF = """ClusterName=mpiwrite
SlurmctldHost={host}
SlurmctldPort=16817
SlurmdPort=16818
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd.pid
SlurmctldLogFile={d}/slurmctld.log
SlurmdLogFile={d}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
SlurmdParameters=config_overrides
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
KillWait=5
FirstJobId={first_job}
NodeName={host} CPUs=16 RealMemory=2000 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
"""


def _pid_from(path: str, timeout: float = 5.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            with open(path) as fh:
                return int(fh.read().strip())
        except (OSError, ValueError):
            time.sleep(0.05)
    return None


MUNGED_PID = "/run/munge/munged.pid"
MUNGE_SOCKET = "/run/munge/munge.socket.2"


def _state(pid: int) -> str:
    """A process's state letter from /proc ('' when there is no such process)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return ""


def _alive(pid: int) -> bool:
    return _state(pid) not in ("", "Z", "X")


def live_munged() -> bool:
    """Whether some munged runs (a zombie does not count)."""
    out = subprocess.run(["pgrep", "-x", "munged"], capture_output=True, text=True)
    return any(_alive(int(p)) for p in out.stdout.split())


def _wait_gone(pid: int, timeout: float) -> None:
    end = time.monotonic() + timeout
    while _alive(pid) and time.monotonic() < end:
        time.sleep(0.05)


def why_not() -> str:
    """Why a Slurm cannot be started here, or '' when it can."""
    if os.geteuid() != 0:
        return "needs root to start munged, slurmctld and slurmd"
    missing = [b for b in ("munged", "slurmctld", "slurmd", "sbatch") if not shutil.which(b)
               and not os.path.exists(f"/usr/sbin/{b}")]
    if missing:
        return f"not installed: {', '.join(missing)} (apt-get install slurm-wlm munge)"
    return ""


class Cluster:
    def __init__(self, folder: str):
        self.dir = str(folder)
        self.host = socket.gethostname()
        self.conf = os.path.join(self.dir, "slurm.conf")
        self.env = dict(os.environ, SLURM_CONF=self.conf)
        self.munge_pid = None  # the munged this cluster started, if it started one

    def start(self, timeout: float = 60.0) -> "Cluster":
        for sub in ("state", "spool"):
            os.makedirs(os.path.join(self.dir, sub), exist_ok=True)
        with open(self.conf, "w") as fh:
            # Job ids start somewhere new each time: MPICH names its shared-memory segments
            # after the PMI job, and a killed job's stale /dev/shm segment for "job 1" would
            # break the next cluster's job 1 in MPI_Init ("Message truncated").
            fh.write(CONF.format(host=self.host, d=self.dir,
                                 first_job=random.randint(1000, 10**6)))
        if not live_munged():
            self._start_munged()
        try:
            subprocess.run(["/usr/sbin/slurmctld", "-f", self.conf], check=True, env=self.env)
            subprocess.run(["/usr/sbin/slurmd", "-f", self.conf], check=True, env=self.env)
            end = time.monotonic() + timeout
            while time.monotonic() < end:
                out = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True,
                                     text=True, env=self.env)
                if "idle" in out.stdout:
                    return self
                time.sleep(0.2)
            raise RuntimeError(f"Slurm node not idle after {timeout}s: {self.log()}")
        except BaseException:
            self.stop()
            raise

    def _start_munged(self) -> None:
        os.makedirs("/run/munge", exist_ok=True)
        subprocess.run(["chown", "munge:munge", "/run/munge"], check=False)
        if not os.path.exists("/etc/munge/munge.key"):
            subprocess.run(["mungekey", "--create"], check=True)
            subprocess.run(["chown", "munge:munge", "/etc/munge/munge.key"], check=True)
        subprocess.run(["runuser", "-u", "munge", "--", "/usr/sbin/munged"], check=True)
        self.munge_pid = _pid_from(MUNGED_PID)
        end = time.monotonic() + 10
        while not os.path.exists(MUNGE_SOCKET) and time.monotonic() < end:
            time.sleep(0.05)

    def log(self) -> str:
        text = ""
        for name in ("slurmctld.log", "slurmd.log"):
            try:
                with open(os.path.join(self.dir, name)) as fh:
                    text += f"--- {name}\n" + fh.read()[-3000:]
            except OSError:
                pass
        return text

    def stop(self) -> None:
        """Stop this cluster's daemons (and its munged) by their pids, and wait until they
        are gone, so that the next cluster starts clean."""
        subprocess.run(["scancel", "--full", "-u", "root"], env=self.env, capture_output=True)
        pids = []
        for name in ("slurmd.pid", "slurmctld.pid"):
            try:
                with open(os.path.join(self.dir, name)) as fh:
                    pids.append(int(fh.read().strip()))
                os.kill(pids[-1], signal.SIGTERM)
            except (OSError, ValueError):
                pass
        for pid in pids:
            _wait_gone(pid, 10)
        if self.munge_pid:
            try:
                os.kill(self.munge_pid, signal.SIGTERM)
            except OSError:
                pass
            _wait_gone(self.munge_pid, 10)
            self.munge_pid = None

    def wait(self, job_id: str, timeout: float = 180.0) -> str:
        """Wait until the job leaves the queue; returns its final state."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            out = subprocess.run(["scontrol", "show", "job", job_id], capture_output=True,
                                 text=True, env=self.env).stdout
            for word in out.split():
                if word.startswith("JobState="):
                    state = word.split("=", 1)[1]
                    if state not in ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING"):
                        return state
            time.sleep(0.3)
        subprocess.run(["scancel", job_id], env=self.env)
        raise AssertionError(f"job {job_id} did not finish within {timeout}s\n{self.log()}")
