"""The test Slurm of slurm_cluster.py, with munged handled by its pid.

slurm_cluster.Cluster decides whether munged runs by looking for the name `munged`, which
also matches a munged that has exited but not been reaped yet (pid 1 here reaps
late); the next Slurm then finds no munge socket.  This subclass starts munged itself when
no live one exists, stops only that one by its pid and waits until it is gone, and stops
the daemons again when the Slurm does not come up.
"""

import os
import signal
import subprocess
import time

import slurm_cluster

MUNGED_PID = "/run/munge/munged.pid"
SOCKET = "/run/munge/munge.socket.2"


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return ""


def live_munged() -> bool:
    out = subprocess.run(["pgrep", "-x", "munged"], capture_output=True, text=True)
    return any(_state(int(p)) not in ("", "Z", "X") for p in out.stdout.split())


def _wait_gone(pid: int, timeout: float) -> None:
    end = time.monotonic() + timeout
    while _state(pid) not in ("", "Z", "X") and time.monotonic() < end:
        time.sleep(0.05)


class Cluster(slurm_cluster.Cluster):
    munged_pid = None

    def start(self, timeout: float = 60.0) -> "Cluster":
        if not live_munged():
            self._start_munged()
        try:
            super().start(timeout)  # finds our munged running: starts none
        except BaseException:
            self.stop()
            raise
        return self

    def _start_munged(self) -> None:
        os.makedirs("/run/munge", exist_ok=True)
        subprocess.run(["chown", "munge:munge", "/run/munge"], check=False)
        if not os.path.exists("/etc/munge/munge.key"):
            subprocess.run(["mungekey", "--create"], check=True)
            subprocess.run(["chown", "munge:munge", "/etc/munge/munge.key"], check=True)
        subprocess.run(["runuser", "-u", "munge", "--", "/usr/sbin/munged"], check=True)
        with open(MUNGED_PID) as fh:
            self.munged_pid = int(fh.read().strip())
        end = time.monotonic() + 10
        while not os.path.exists(SOCKET) and time.monotonic() < end:
            time.sleep(0.05)

    def stop(self) -> None:
        self.started_munge = False  # this class stops its own munged, below
        super().stop()
        for name in ("slurmd.pid", "slurmctld.pid"):
            try:
                with open(os.path.join(self.dir, name)) as fh:
                    _wait_gone(int(fh.read().strip()), 10)
            except (OSError, ValueError):
                pass
        if self.munged_pid:
            try:
                os.kill(self.munged_pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            _wait_gone(self.munged_pid, 10)
            self.munged_pid = None
