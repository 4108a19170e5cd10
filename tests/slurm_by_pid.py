"""The test Slurm of slurm_cluster.py, stopping the munged it started by its pid.

slurm_cluster.Cluster.stop() ends munged with `pkill -x munged`, which would also end a munged
that another test session started after ours; this one reads munged's pid file instead.
"""

import os
import signal

import slurm_cluster

MUNGED_PID = "/run/munge/munged.pid"


class Cluster(slurm_cluster.Cluster):
    def start(self, timeout: float = 60.0) -> "Cluster":
        super().start(timeout)
        self.munged_pid = None
        if self.started_munge:
            try:
                with open(MUNGED_PID) as fh:
                    self.munged_pid = int(fh.read().strip())
            except (OSError, ValueError):
                pass
        return self

    def stop(self) -> None:
        started, self.started_munge = self.started_munge, False
        super().stop()
        if started and self.munged_pid:
            try:
                os.kill(self.munged_pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
