"""The `mpiwrite` console script: signals first, then everything else.

A SIGINT or SIGTERM that arrives while Python is still importing (a job cancelled at once)
ends the process quietly with 130/143 instead of a KeyboardInterrupt traceback.  A run replaces
these handlers with its own before MPI starts (parallel.Signals).
"""

import signal
import sys


def _leave(signum, _frame):
    raise SystemExit(128 + signum)


def main() -> None:
    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, _leave)
    try:
        from mpiwrite.cli import main as cli_main

        cli_main()
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
