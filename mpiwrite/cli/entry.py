"""The `mpiwrite` console script: signals first, then everything else.

A SIGINT, SIGTERM or another signal a run answers (run/process.EXIT_FOR_SIGNAL) that arrives
while Python is still importing (a job cancelled at once) ends the process quietly with 128+N
instead of a KeyboardInterrupt traceback.  A run replaces these handlers with its own before
MPI starts (run/process.Signals).  This module imports nothing of its own before the first
handlers are in place: the window in which a signal meets Python's default is start-up only.
"""

import os
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


def _off_the_script_folder() -> None:
    """Take the console script's own folder (a virtualenv's bin/) off the front of sys.path.

    Python puts a script's folder first on sys.path, and every import of a top-level module
    not yet loaded (numpy, click, mpi4py, each stdlib module) then stats that folder first:
    about 65 file-system calls on each rank's start-up, 100 on rank 0, against the filesystem
    that holds the install (benchmarks/bench_startup_metadata.py).  No module of mpiwrite or
    of its dependencies lives there.  Only the folder of the script that is running is taken
    off, and only when Python put it there (not under -P / PYTHONSAFEPATH, nor for
    `python -m mpiwrite`, whose sys.path[0] is the working folder)."""
    script = sys.argv[0] if sys.argv else ""
    if getattr(sys.flags, "safe_path", False) or not sys.path or not os.path.isabs(script):
        return
    if sys.path[0] == os.path.dirname(script) and not script.endswith(".py"):
        del sys.path[0]


def _closed_streams() -> list:
    """Standard streams that were closed at exec (`run d >&-`, `2>&-`) get /dev/null: else
    sys.stdout is None (an AttributeError at the first print) and the next file opened
    (a record, a data file) would take descriptor 1 or 2 and receive the prints.  Returns
    the names of those that were closed."""
    closed = []
    for fd, name in ((0, "stdin"), (1, "stdout"), (2, "stderr")):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, os.O_RDONLY if fd == 0 else os.O_WRONLY)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
            setattr(sys, name, open(fd, "r" if fd == 0 else "w", encoding="utf-8",
                                    errors="backslashreplace", closefd=False))
            closed.append(name)
    return closed


def _journal_warning(args) -> None:
    """A study left client settings changed on this node (study/journal.py): say so at
    every command's start.  One lstat where there is no journal folder (rank 0's start-up)."""
    state = os.environ.get("MPIWRITE_STATE") or os.path.join(
        os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local",
                                                         "state"), "mpiwrite")
    fallback = f"/tmp/mpiwrite-state-{os.geteuid()}"  # study/journal.py FALLBACK
    if args[:2] == ["study", "restore"] or not (
            os.path.isdir(state) or not os.environ.get("MPIWRITE_STATE")
            and os.path.isdir(fallback)):
        return
    from mpiwrite.run.process import launcher_rank

    if launcher_rank() != 0:
        return  # rank 0 says it for the job
    from mpiwrite.study import journal

    line = journal.warning()
    if line:
        from mpiwrite.text import printable

        sys.stderr.write(printable(line) + "\n")


def _one_blas_thread() -> None:
    """numpy's BLAS starts a thread per core when it loads, and they spin: 0.1 s of CPU in
    each process (a command, each rank, each record worker), taken on a node whose cores the
    ranks' writers want, for arithmetic that is small.  One thread unless the site or the
    user set another number (the Python API, in someone else's program, sets nothing)."""
    for name in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(name, "1")


def main() -> None:
    for s in (signal.SIGINT, signal.SIGTERM):  # at once: kept until we know which to use
        signal.signal(s, _defer)
    _one_blas_thread()  # before anything loads numpy
    closed = _closed_streams()
    if "stdout" in closed and "stderr" not in closed:
        sys.stderr.write("mpiwrite: warning: standard output is closed; what would be "
                         "printed there is discarded\n")
    _off_the_script_folder()  # before the imports below, which would stat it
    from mpiwrite.run.process import EXIT_FOR_SIGNAL

    handler = _defer if _is_parallel_run(sys.argv[1:]) else _leave
    for s in EXIT_FOR_SIGNAL:
        signal.signal(s, handler)
    if handler is _leave and pending["signum"]:
        sys.exit(128 + pending["signum"])  # it came while we chose: leave as _leave would
    try:
        from mpiwrite.cli import ranks

        if ranks.quick(sys.argv[1:]):  # a rank other than 0: no click (start-up's load)
            ranks.main(sys.argv[1:])
        _journal_warning(sys.argv[1:])
        from mpiwrite.cli.main import main as cli_main

        cli_main()
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
