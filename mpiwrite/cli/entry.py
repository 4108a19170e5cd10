"""The `mpiwrite` console script: signals first, then everything else.

A SIGINT, SIGTERM or another signal a run answers (run/process.EXIT_FOR_SIGNAL) that arrives
while Python is still importing (a job cancelled at once) ends the process quietly with 128+N
instead of a KeyboardInterrupt traceback.  A run replaces these handlers with its own before
MPI starts (run/process.Signals).  This module imports nothing of its own before the first
handlers are in place: the window in which a signal meets Python's default is start-up only.
"""

import signal
import sys

# A signal that arrived before the run's own handlers, for the run to answer (run/process.Signals).
pending = {"signum": 0}


def _leave(signum, _frame):
    raise SystemExit(128 + signum)


def _defer(signum, _frame):
    pending["signum"] = pending["signum"] or signum


def _is_parallel_run(args) -> bool:
    """`run` under a launcher with more than one rank: a rank may not leave alone, or the
    others wait for it in MPI_Init; the run answers the signal with the rest of the job."""
    from mpiwrite.run.process import launcher_size

    words = [a for a in args if not a.startswith("-")]
    return bool(words) and words[0] == "run" and launcher_size() > 1


def main() -> None:
    for s in (signal.SIGINT, signal.SIGTERM):  # at once: kept until we know which to use
        signal.signal(s, _defer)
    from mpiwrite.run.process import EXIT_FOR_SIGNAL

    handler = _defer if _is_parallel_run(sys.argv[1:]) else _leave
    for s in EXIT_FOR_SIGNAL:
        signal.signal(s, handler)
    if handler is _leave and pending["signum"]:
        sys.exit(128 + pending["signum"])  # it came while we chose: leave as _leave would
    try:
        from mpiwrite.cli.main import main as cli_main

        cli_main()
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
