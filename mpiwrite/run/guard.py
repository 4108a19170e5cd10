"""The guard around every rank: any failure ends the whole job, within the grace period.

`main` is where a rank enters a run: it starts MPI (with the signal rules that start-up
needs), makes the Team, agrees on the input and runs `runner.Run`; whatever escapes goes to
`end_job`.  How a failure travels: docs/architecture.md.  Like runner.py, no MPI calls of
its own: every message goes through parallel.Team.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from typing import Callable, List, Optional

from mpiwrite.errors import AgreedError, Interrupted, PeerFailed, error_entry, raise_agreed
from mpiwrite.host import host_name
from mpiwrite.run.config import RunConfig
from mpiwrite.run.parallel import Team, abort_world
from mpiwrite.run.prepare import NullLedger
from mpiwrite.run.process import (
    EXIT_FOR_SIGNAL,
    Signals,
    launcher_rank,
    launcher_size,
    slurm_pmi2_netmod,
)
from mpiwrite.run.runner import Run
from mpiwrite.text import printable
from mpiwrite.vocab.status import RunStatus


def end_job(run: Run, exc: BaseException) -> None:
    """Any exception on any rank ends the whole job, within the grace period.

    The rank that failed says so in one line and tells every other rank on the failure
    channel; every rank removes the data files it created; rank 0 records the failure and
    calls MPI_Abort.  A rank whose rank 0 does not end the job in time ends it itself."""
    team = run.team
    try:
        if isinstance(exc, PeerFailed):
            report, code, mine = exc.report, 1, False
        elif isinstance(exc, Interrupted):
            report = error_entry(team.rank, team.host, run.phase,
                                 f"interrupted by signal {exc.signum}; ranks did not answer "
                                 f"within {team.grace:.0f}s", iteration=run.iteration_now)
            code, mine = exc.exit_code, False
        else:
            detail = str(exc) or type(exc).__name__
            report = error_entry(team.rank, team.host, run.phase,
                                 f"{type(exc).__name__}: {detail}", iteration=run.iteration_now,
                                 errno=getattr(exc, "errno", 0) or 0,
                                 path=str(getattr(exc, "filename", None) or ""))
            code, mine = 1, True
        if mine:
            sys.stderr.write(printable(
                f"mpiwrite: run failed: rank {team.rank} on {team.host} in {run.phase}: "
                f"{report['message']}") + "\n")
            if os.environ.get("MPIWRITE_DEBUG"):
                import traceback

                traceback.print_exception(type(exc), exc, exc.__traceback__)
            team.report_failure(report)
        # Rank 0 tries every rank's file names again below and names what is left in one
        # line (a dead server would otherwise give a line per rank); on node-local targets
        # it cannot see other nodes' files, and their leftovers go unnamed.
        files = run.files
        left = files.remove_created() if files is not None else []
        if files is not None:
            files.release_lock()  # with the run's files, before its folders go
        if team.rank == 0 and isinstance(exc, Interrupted):
            sys.stderr.write(f"mpiwrite: run interrupted by signal {exc.signum}; not every "
                             f"rank answered within {team.grace:.0f}s, ending the job\n")
        if run.ledger.keeps_record:  # rank 0, once set-up made its ledger
            left = sorted(set(left + files.remove_files_of(range(team.size), run.iteration_now)))
            if left:  # a dead server, a read-only remount: the user must remove them
                from mpiwrite.run.stuck import leftover_text  # rank 0, rarely: not at start-up

                run.ledger.warn(f"could not remove {leftover_text(left)}")
            files.remove_run_folders(run.ledger.warn)
            run.ledger.add_errors([dict(report, iteration=report.get("iteration",
                                                                      run.iteration_now))])
            status = RunStatus.INTERRUPTED if isinstance(exc, Interrupted) else RunStatus.FAILED
            run.ledger.finish(status, f"rank {report.get('rank')} on {report.get('host')} in "
                                      f"{report.get('phase')}: {report.get('message')}")
    except BaseException:  # the end must come, whatever breaks on the way to it
        pass
    if team.rank != 0:
        # rank 0 records the failure and ends the job; after a signal the ranks already gave
        # it the grace period, so only a moment more (rank 0 may be the one that is stuck)
        waited = min(team.grace, 1.0) if isinstance(exc, Interrupted) else team.grace
        time.sleep(waited)
        rank_0_is_stuck(run, exc, waited)
    team.abort(code)


def rank_0_is_stuck(run, exc: BaseException, waited: float) -> None:
    """A rank other than 0 still here after waiting for rank 0 to end the job: rank 0 is
    stopped or hung.  Remove its data file of this iteration (it cannot) and say why the job
    ends, in one line (once MPICH's Abort line was all there was)."""
    try:
        if run.files is not None:
            run.files.remove_files_of([0], run.iteration_now)
        why = (f"interrupted by signal {exc.signum}" if isinstance(exc, Interrupted)
               else "failed")
        sys.stderr.write(printable(
            f"mpiwrite: run {why}; rank 0 on {run.team.root_host or '?'} did not end the "
            f"job within {waited:g}s more (stopped or hung); rank {run.team.rank} on "
            f"{run.team.host} ends it") + "\n")
        sys.stderr.flush()
    except BaseException:  # the end must come, whatever breaks on the way to it
        pass


def main(cfg: Optional[RunConfig], argv: List[str], problem: str = "",
         screen: Optional[dict] = None, params: Optional[dict] = None,
         parse: Optional[Callable] = None) -> int:
    """Run on this rank: `cfg` is None and `problem` says why when this rank's input was bad
    (the other ranks still learn of it, so that no rank waits for one that left).  `screen`:
    the screen options for rank 0's console (console.configure).  `params`: the options as
    parsed here, for the ranks that take rank 0's; `parse`: given instead of `cfg` by a rank
    that has not parsed its command line (agree_on_command_line)."""
    team = start()
    if isinstance(team, int):
        return team
    try:
        cfg, problem, screen = agree_on_command_line(team, cfg, argv, problem, screen, params,
                                                     parse)
    except BaseException as exc:
        end_job(Unmade(team), exc)
        return 1
    return run_one(team, cfg, argv, problem, screen)


def agree_on_command_line(team: Team, cfg, argv, problem, screen, params, parse):
    """Rank 0 sends its command line and its parsed options (JSON): a rank that came without
    parsing its own (`parse` given: cli/ranks.py, no click on it) makes its settings from
    them when its command line is the same, else parses its own; `parse(argv, rank 0's
    options or None)` -> (cfg, problem, options, screen).  Every rank of a world run takes
    this step, whichever way it came (one broadcast)."""
    if parse is not None and team.rank == 0:  # the launcher named it another rank
        cfg, problem, params, screen = parse(argv, None)
    if team.size > 1:
        text = team.bcast_text(json.dumps([argv, params]) if team.rank == 0 else "")
        if parse is not None and team.rank != 0:
            root_argv, root_params = json.loads(text)
            cfg, problem, _, screen = parse(argv, root_params if root_argv == argv else None)
    return cfg, problem, screen


def start():
    """MPI started with the signal rules start-up needs, and the world's Team, with Signals
    answered from here on; or the exit code when the launch cannot be used."""
    early = sys.modules.get("mpiwrite.cli.entry")
    pending = early.pending["signum"] if early is not None else 0
    if pending and pending != signal.SIGINT:
        sys.exit(128 + pending)  # the batch system's signal while Python was importing
    # MPI_Init and the communicator set-up are C code that holds the GIL: no Python handler
    # (nor thread) can run there, so a handler that only sets a flag would swallow SIGTERM
    # while a rank waits for one that never starts (an MPMD launch with a broken command).
    # In that window SIGTERM, what batch systems and `timeout` send, takes its default action:
    # it ends the rank and the launcher the job (hydra exits with 15, not 143).  SIGINT stays
    # answered in order (130): an interactive user's second Ctrl-C makes hydra force the end.
    for s in EXIT_FOR_SIGNAL:
        if s != signal.SIGINT:
            signal.signal(s, signal.SIG_DFL)
    slurm_pmi2_netmod()
    try:
        from mpi4py import MPI
    except Exception as exc:  # MPI4PY_LIBMPI names no MPI library, ulimit -v, a broken install
        return cannot_load_mpi(exc)

    problem = ""
    try:
        host = host_name()
    except ValueError as exc:
        host, problem = os.uname().nodename, str(exc)
    try:
        team = Team(MPI, None, host=host)
    except BaseException as exc:
        abort_world(MPI, f"on {host} in start-up: {type(exc).__name__}: {exc}")
        raise
    team.start_problem = problem
    started = launcher_size()
    if team.size == 1 and started > 1:
        # MPICH's mpiexec with Open MPI's library (or the other way round): every rank is a
        # singleton, and N one-rank runs would be recorded as complete
        lib = MPI.Get_library_version().replace("\x00", "").strip().splitlines()
        sys.stderr.write(printable(
            f"mpiwrite: error: the launcher started {started} ranks but MPI sees 1 on {host}: "
            f"the launcher and the MPI library mpi4py loaded ({lib[0] if lib else 'unknown'}) "
            "are of different families; launch with that library's own mpiexec, or load the "
            "launcher's library (MPI4PY_LIBMPI)") + "\n")
        return 2
    team.signals = Signals()  # from here on, every wait answers signals in order
    return team


def cannot_load_mpi(exc: BaseException) -> int:
    """Exit 2 with one line (from the launcher's rank 0 only: every rank fails alike, and a
    48-line traceback per rank helps nobody) when mpi4py cannot load an MPI library."""
    if launcher_rank() == 0:
        reason = str(exc).strip().splitlines()
        lib = os.environ.get("MPI4PY_LIBMPI")
        sys.stderr.write(printable(
            f"mpiwrite: error: cannot load the MPI library"
            f"{f' MPI4PY_LIBMPI={lib!r}' if lib else ''}: {type(exc).__name__}: "
            f"{reason[-1] if reason else ''}"[:2000]) + "\n")
    return 2


def run_one(team: Team, cfg: Optional[RunConfig], argv: List[str], problem: str = "",
            screen: Optional[dict] = None, notes: Optional[List[str]] = None,
            settings=None) -> int:
    """One run on `team` (the world's, or a study point's sub-team), inside the guard: any
    failure ends the whole job (end_job).  `notes` go into the record (a study's settings);
    `settings()`, on node leaders, reads a study's settings after each timed phase."""
    problem = problem or getattr(team, "start_problem", "")
    run = None
    try:
        # inside the try: an error while the run is made (a bad MPIWRITE_INJECT on one rank)
        # must end the job like any other, not leave a traceback here and a peer waiting
        run = Run(cfg, argv, team, team.signals, screen, notes or (), settings)
        if cfg is None:
            raise_agreed(team.agree(problem or "bad input"), team.size)
        run.agree_on_input(problem)
        return run.execute()
    except AgreedError as exc:
        if run is not None and run.files is not None:
            run.files.release_lock()
        if team.rank == 0:
            sys.stderr.write(printable(f"mpiwrite: error: {exc}") + "\n")
        return exc.exit_code
    except BaseException as exc:
        end_job(run if run is not None else Unmade(team), exc)
        return 1


class Unmade:
    """What end_job needs of a Run whose making failed: nothing created, a ledger that keeps
    nothing."""

    phase = "start-up"
    files = None
    iteration_now = -1

    def __init__(self, team: Team, phase: str = "start-up"):
        self.team, self.phase = team, phase
        self.ledger = NullLedger()
