"""A rank stuck outside MPI past --timeout (a write() that does not return: a frozen
filesystem, a dead server): what its watchdog says, and what it does before it ends the job.

The clean-up runs in a thread of its own, waited for a bounded time: on a frozen filesystem
unlink() does not return either, and a watchdog that waited for it would never end the job.
What could not be removed in that time is named in one line; rank 0 records `timeout`.  The
other ranks give rank 0 a moment for that before they end the job themselves (rank 0 may be
the stopped one).  How a run ends: docs/architecture.md.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Callable, List, Optional

from mpiwrite.host import waits_on
from mpiwrite.run import layout
from mpiwrite.text import printable

CLEANUP_SECONDS = 2.0  # the watchdog's clean-up, at most
PEER_WAIT_SECONDS = 3.0  # a rank other than 0, before it ends the job: rank 0 records meanwhile


def leftover_text(problems: List[str], shown: int = 3) -> str:
    """'N data files of this run: path: reason; ...' naming the first few."""
    more = f"; and {len(problems) - shown} more" if len(problems) > shown else ""
    return (f"{len(problems)} data file{'s' * (len(problems) != 1)} of this run: "
            + "; ".join(problems[:shown]) + more)


def bounded(fn: Callable[[], object], seconds: float) -> Optional[list]:
    """[fn's result] once fn returns (an exception is a result too), or None when it has not
    returned within `seconds`: it goes on in a daemon thread, which the job's end takes down."""
    out: list = []

    def call():
        try:
            out.append(fn())
        except BaseException as exc:  # noqa: B036 - the watchdog must end the job whatever
            out.append(exc)

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    thread.join(seconds)
    return out or None


def absent(run) -> List[list]:
    """Rank 0, its stream waiting for the others inside the engine (run.waiting_in): the
    ranks that never came, as [rank, seconds, state, wchan] (state '?' where it cannot be
    read: another node that reported no stall).  The view's ranks not done (a rank waiting in
    a closing collective counts done); of those, the ones /proc or their node's report shows
    stopped (T) or held in the kernel (D), when any is: the others wait like this rank."""
    board = getattr(run.progress, "board", None)
    if board is None or not run.waiting_in:
        return []
    t = run.team
    local = dict(zip(t.node_ranks(), t.node_pids)) if t.is_leader else {}
    known = {int(s[0]): list(s) for s in board.stuck()}
    out = []
    for r in board.missing():
        if r == t.rank:
            continue
        if r in local:
            state, wchan = waits_on(local[r])
            known[r] = [r, float("nan"), state, wchan]
        out.append(known.get(r, [r, float("nan"), "?", ""]))
    culprits = [s for s in out if str(s[2]) in ("T", "D")]
    return culprits or out


def message(run, path: str, watch_s: float, name: str = "write") -> str:
    """What the watchdog says: a rank still writing names itself; a rank that finished names
    rank 0, which ends the write phase and evidently could not; a rank waiting for the others
    inside the engine (MPI-IO) names what it waits in and, on rank 0, who never came."""
    t = run.team
    if run.waiting_in and run.rank != 0:
        return ""  # rank 0 names who never came; this rank speaks only if rank 0 does not (end)
    if run.waiting_in:
        from mpiwrite.run.watch import state_text
        from mpiwrite.text import world_ranks_of

        gone = absent(run)
        who = ""
        if gone:
            shown = [f"rank {s[0]} on {run.ledger.host_of(int(s[0]))}"
                     + (f" (state {state_text(str(s[2]), str(s[3]))})" if s[2] != "?" else "")
                     for s in gone[:4]]
            who = (f"; never came: {'; '.join(shown)}"
                   + (f" and {len(gone) - 4} more ({world_ranks_of([int(s[0]) for s in gone])})"
                      if len(gone) > 4 else ""))
        return (f"run timed out: rank {run.rank} on {t.host} waited for the other ranks in "
                f"{run.waiting_in} past --timeout {watch_s:g}s{who}; ending the job")
    if run.finished_writing and run.rank != 0:
        return (f"run timed out: rank 0 on {run.root_host} did not end the write phase within "
                f"--timeout {watch_s:g}s (rank {run.rank} on {t.host} finished its writes and "
                f"waited); rank 0 is stopped or hung; ending the job")
    doing = "writing" if name == "write" else "reading"
    state, wchan = waits_on(os.getpid())  # this thread's process: the writer, its main thread
    return (f"run timed out: rank {run.rank} on {t.host} was still {doing} {path} after "
            f"--timeout {watch_s:g}s (state {state}{' in ' + wchan if wchan else ''}); "
            f"ending the job")


def end(run, watch_s: float) -> None:
    """After the watchdog's line, before MPI_Abort: remove this rank's files (a rank that
    finished: rank 0's too, which cannot), all of the iteration's on rank 0, bounded in time;
    rank 0 names what is left and records `timeout`."""
    files, it, rank = run.files, run.iteration_now, run.rank
    if run.finished_writing and rank != 0:
        bounded(lambda: files.remove_created() + files.remove_files_of([0], it),
                CLEANUP_SECONDS)
        return
    mine = list(range(run.team.size)) if rank == 0 else [rank]
    ledger = run.ledger

    def clean():
        left = files.remove_created() + files.remove_files_of(mine, it)
        if ledger.keeps_record:  # rank 0
            files.remove_run_folders(ledger.warn)
        return left

    done = bounded(clean, CLEANUP_SECONDS)
    removed = done is not None and isinstance(done[0], list) and not done[0]
    if not ledger.keeps_record:  # ranks but 0 (a NullLedger)
        time.sleep(PEER_WAIT_SECONDS)  # rank 0's watchdog fires alike and records the timeout
        if removed:
            bounded(files.release_lock, CLEANUP_SECONDS)
        if run.waiting_in:  # still here: rank 0 did not end the job, so this rank says why
            sys.stderr.write(printable(
                f"mpiwrite: run timed out: rank {rank} on {run.team.host} waited for the other "
                f"ranks in {run.waiting_in} past --timeout {watch_s:g}s; rank 0 on "
                f"{run.root_host} did not end the job within {PEER_WAIT_SECONDS:g}s more "
                "(stopped or hung); ending the job") + "\n")
        return
    left = done[0] if done is not None and isinstance(done[0], list) else None
    if left is None:  # the filesystem did not answer: name every file the run may have left
        left = [f"{layout.data_path(run.cfg, run.run_id, run.team.size, r, it)}: not removed "
                f"within {CLEANUP_SECONDS:g}s (the filesystem does not answer)" for r in mine]
    if left and not run.cfg.keep:
        results = run.cfg.results if run.cfg.results is not None else "DIR"
        ledger.warn(f"could not remove {leftover_text(left)}; once the filesystem answers, "
                    f"`mpiwrite clean {run.cfg.target} --results {results}` removes them")
    board = getattr(run.progress, "board", None)  # rank 0's view: who else is stuck, on what
    if board is not None:
        run.progress.close()  # the view stops; one line says what it saw
    missing = (board.missing() or [0]) if board is not None else [0]
    stuck = list(board.stuck()) if board else []
    gone = absent(run)  # waiting in a collective: the ranks that never came, not this one
    if gone:
        missing = sorted(int(s[0]) for s in gone)
        stuck = [s for s in gone if s[2] != "?"] + stuck
    said = bounded(lambda: ledger.timed_out(missing, it, watch_s, stuck), run.team.grace)
    if said and isinstance(said[0], str) and "the filesystem client is hung" in said[0]:
        sys.stderr.write(printable(said[0]) + "\n")
    if removed:  # its node's files are gone and the run is recorded: its lock goes too (a
        # rank stopped, not dead, would hold the keeper's clean-up until it is killed); a
        # file left keeps the lock file, which proves the run over to `clean` once it is
        bounded(files.release_lock, CLEANUP_SECONDS)
