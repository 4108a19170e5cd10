"""The exception tree; the CLI maps these to exit codes."""


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
