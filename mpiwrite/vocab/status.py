"""Statuses, written once: a rank's and an iteration's (`Status`, stored as integers in the
record's tables) and a run's (`RunStatus`, the record's `status` attribute, with its exit code).
"""

from __future__ import annotations

import enum


class Status(enum.IntEnum):
    """A rank's or an iteration's status; the integer is what the record's tables store."""

    OK = 0
    FAILED = 1
    ABORTED = 2  # stopped because another rank failed
    INTERRUPTED = 3
    MISSING = 4
    CLOCK = 5  # excluded: its timeline is wrong (docs/measurement.md)

    @property
    def label(self) -> str:
        return self.name.lower()

    @classmethod
    def label_of(cls, code) -> str:
        """The name of a stored code, or '?' for one this version does not know."""
        try:
            return cls(int(code)).label
        except ValueError:
            return "?"


class RunStatus(str, enum.Enum):
    """A run's status: the record's `status` attribute, a string in the file."""

    RUNNING = "running"  # rewritten after every iteration until the run ends
    COMPLETE = "complete"
    FAILED = "failed"
    INTERRUPTED = "interrupted"
    TIMEOUT = "timeout"
    # complete, but a study's setting was not in force on every node, or a client fact (a
    # GlusterFS graph) changed during a timed phase: its figures belong to no one setting,
    # so reports leave it out (and say so) and a study runs the point again on resume
    UNSETTLED = "unsettled"

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)

    @property
    def exit_code(self) -> int:
        """What `mpiwrite run` exits with when a run ends with this status (a signal's own
        code replaces it for an interrupted run)."""
        return 0 if self in (RunStatus.COMPLETE, RunStatus.UNSETTLED) else 1


def iteration_run_status(code: Status) -> RunStatus:
    """The run status that an iteration's status ends the run with (OK and CLOCK go on)."""
    if code == Status.INTERRUPTED:
        return RunStatus.INTERRUPTED
    if code == Status.FAILED:
        return RunStatus.FAILED
    return RunStatus.COMPLETE
