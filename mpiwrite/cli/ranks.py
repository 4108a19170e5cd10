"""`run` on the ranks other than 0: rank 0's parsed options instead of click, and the way out.

Each rank used to parse its own command line with click before MPI started: some 280
file-system calls a rank for click, what it loads (`inspect`, `typing`, `datetime`, `uuid`,
`difflib` for short options) and gettext's look-ups of translations of click's messages, on
every one of thousands of ranks, against the filesystem that holds the install
(docs/scaling.md).  This module imports no click.  A process that the launcher names as a
rank other than 0 starts MPI at once; rank 0 parses with click and sends its command line and
its parsed options (run/guard.agree_on_command_line).  A rank whose command line is rank 0's
builds its settings from those options itself (run/config.from_params: its own working
folder, the --tag-file on its own node, MPIWRITE_SYSROOT from its own environment), so a
node-local problem is still this rank's to name.  A rank whose command line differs (an MPMD
launch), or whose rank 0 could not parse its own, parses its own with click, as before.

A command line on which rank 0 might leave without starting MPI (`--help`), or that points
standard output elsewhere before MPI starts (`--json -`), is parsed with click on every rank
(`quick` says no): otherwise a rank here would wait for a rank 0 that never comes.
"""

from __future__ import annotations

import os
import sys
from typing import List, Optional


def quick(args: List[str]) -> bool:
    """Whether this process may start `run` without click: `run` first, under a launcher
    that names this process a rank other than 0, and no word on which rank 0 could leave
    before MPI starts (help) or that redirects standard output first (`--json -`)."""
    from mpiwrite.run.process import launcher_rank, launcher_size

    if not args or args[0] != "run" or launcher_size() <= 1 or launcher_rank() == 0:
        return False
    for word in args[1:]:
        if word in ("-", "--help") or word.endswith("=-"):
            return False
        if word.startswith("-") and not word.startswith("--") and "h" in word:
            return False  # -h, or a cluster of short options with -h in it
    return True


def main(args: List[str]) -> None:
    """`run` on this rank, without click; never returns."""
    from mpiwrite.errors import MpiwriteError
    from mpiwrite.run import guard
    from mpiwrite.text import printable

    try:
        code = guard.main(None, ["mpiwrite"] + list(args), parse=settings)
    except KeyboardInterrupt:
        code = 130
    except MpiwriteError as exc:
        sys.stderr.write(printable(f"mpiwrite: error: {exc}".replace("\n", " ")) + "\n")
        code = exc.exit_code
    if "mpi4py.MPI" in sys.modules:
        leave_run(code)
    sys.exit(code)


def settings(argv: List[str], root: Optional[dict]):
    """This rank's (RunConfig or None, problem, parsed options, screen options): from rank
    0's parsed options `root` (this rank's command line is rank 0's), else from its own
    command line, with click."""
    if root is None:
        from mpiwrite.cli.runcmd import parse_own

        return parse_own(argv[2:])  # the words after `mpiwrite run`
    from mpiwrite.errors import ConfigError
    from mpiwrite.run import config

    params = dict(root)
    for name, var in config.FROM_ENVIRONMENT.items():
        if params.get(name) is None:  # not on the command line: this rank's environment
            params[name] = os.environ.get(var) or None
    try:
        return config.from_params(params), "", params, None
    except ConfigError as exc:
        return None, str(exc), params, None


def leave_run(code: int) -> None:
    """End a rank whose run has ended: output flushed, MPI finalized, then the C library's
    exit() without the interpreter's teardown.  Tearing down numpy, click and mpi4py costs
    ~40 ms of CPU a rank (measured), which 16 ranks on 2 cores pay in series; nothing is left
    to do by then (records and JSON are written and closed, files removed; MPI_Finalize is
    what mpi4py's atexit hook would have called).  exit(), not os._exit(): the MPI library's
    own C atexit handlers must run (MPICH's hydra kills the job, signal 9, without them).
    So `main(["run", ...])` never returns to an in-process caller once MPI is loaded: run a
    run in its own process (the tests do, through mpiexec)."""
    from mpiwrite.text import printable

    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            if stream is sys.stdout:
                code = code or 1  # the output did not all reach its reader
    MPI = sys.modules["mpi4py.MPI"]
    try:
        if MPI.Is_initialized() and not MPI.Is_finalized():
            MPI.Finalize()
    except MPI.Exception as exc:  # the run's end stands; the leaving did not go cleanly
        sys.stderr.write(printable(f"mpiwrite: warning: MPI_Finalize: {exc}") + "\n")
        sys.exit(code or 1)
    import ctypes

    try:
        libc_exit = ctypes.CDLL(None).exit
    except (OSError, AttributeError):
        sys.exit(code)  # no C library to call: the interpreter's own way out
    libc_exit(code)
