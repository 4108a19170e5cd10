"""The exception tree; the CLI maps these to exit codes."""

import errno


class MpiwriteError(Exception):
    """Base of every error mpiwrite raises on purpose."""

    exit_code = 1


class ConfigError(MpiwriteError):
    """Bad input: a malformed option or a target we refuse. Exit code 2."""

    exit_code = 2


class RunError(MpiwriteError):
    """A run that started and failed (I/O error, timeout, lost rank). Exit code 1."""

    exit_code = 1


class RecordError(MpiwriteError):
    """A record that cannot be read (truncated, foreign, newer schema)."""

    exit_code = 1


class PeerFailed(MpiwriteError):
    """Another rank failed and said so on the failure channel; its report travels with this."""

    exit_code = 1

    def __init__(self, report: dict):
        self.report = report
        super().__init__(str(report.get("message", "another rank failed")))


class Interrupted(MpiwriteError):
    """A SIGINT/SIGTERM that the run could not answer in an orderly way within the grace."""

    def __init__(self, signum: int):
        self.signum = signum
        self.exit_code = 128 + signum
        super().__init__(f"interrupted by signal {signum}")


class Stalled(MpiwriteError):
    """A collective that did not complete within --timeout and the grace period."""


class AgreedError(ConfigError):
    """Bad input that every rank has agreed on: each rank leaves with exit 2, rank 0 says why."""


def raise_agreed(problems: list, size: int) -> None:
    """Turn an agreed list of rank problems into the same AgreedError on every rank.

    The same problem on every rank (a bad option) is said once; otherwise the first rank
    with a problem is named with its host, and the others are counted."""
    if not problems:
        return
    first = problems[0]
    if len(problems) == size and all(p["message"] == first["message"] for p in problems):
        raise AgreedError(first["message"])
    where = "" if (len(problems) == 1 and first["rank"] == 0) else \
        f"rank {first['rank']} on {first['host']}: "
    more = f" (and {len(problems) - 1} more rank(s))" if len(problems) > 1 else ""
    raise AgreedError(f"{where}{first['message']}{more}")


def error_entry(rank: int, host: str, phase: str, message: str, *, iteration: int = -1,
                errno: int = 0, path: str = "", **extra) -> dict:
    """One error as the record's error list and the failure channel carry it: the same keys
    from every place that says something went wrong (docs/record-schema.md, `errors`).
    `extra`: `t` (seconds on the rank's clock, moved onto the common timeline by rank 0),
    `offset` (of a mismatched block)."""
    return dict({"iteration": iteration, "rank": rank, "host": host, "phase": phase,
                 "errno": errno, "path": path, "message": message}, **extra)


def why(exc: OSError) -> str:
    """Why a path could not be used, in the words of a one-line error: 'permission denied',
    'does not exist', or the system's text."""
    if isinstance(exc, PermissionError):
        return "permission denied"
    if isinstance(exc, FileNotFoundError):
        return "does not exist"
    if getattr(exc, "errno", None) == errno.EDQUOT:
        return "disk quota exceeded (the user's or group's limit on this filesystem)"
    return exc.strerror or str(exc)
