"""The progress protocol of a timed phase, in one place.

While a phase runs, every rank but 0 sends rank 0 its bytes so far at most once per
--progress-interval (from inside its stream's poll), and once more with `done` set when its
stream has ended.  Rank 0 keeps the board (bytes and done per rank), prints a progress line
through the ledger at the same interval, and after its own stream waits for every `done`:
within the watchdog deadline, forwarding aborts, else it names the ranks that never finished.
The messages are [rank, bytes, done] (parallel.Team.send_progress, drain_progress); nothing
else is sent and nothing else is read.
"""

from __future__ import annotations

from typing import Callable, List, Optional

from mpiwrite.run.process import clock


class ProgressBoard:
    """Rank 0's view of every rank's bytes so far, fed by progress and done messages."""

    def __init__(self, team):
        import numpy as np  # rank 0 only: the other ranks never load numpy

        self.team = team
        self.latest = np.zeros(team.size)
        self.done = np.zeros(team.size, dtype=bool)

    def drain(self) -> int:
        return self.team.drain_progress(self.latest, self.done)

    def missing(self) -> List[int]:
        return [r for r, done in enumerate(self.done) if not done]


class Progress:
    """One timed phase's progress on one rank.  `show(latest, done, elapsed)` prints rank 0's
    line (the ledger's); other ranks pass None."""

    def __init__(self, team, interval: float, show: Optional[Callable] = None):
        self.team, self.interval, self.show = team, interval, show
        self.board = ProgressBoard(team) if team.rank == 0 else None
        self.t0 = clock()
        self.next = self.t0 + interval

    def start(self) -> None:
        """The phase's writes begin now (after the start barrier)."""
        self.t0 = clock()
        self.next = self.t0 + self.interval

    def poll(self, now: float, nbytes: int) -> None:
        """From the stream's poll: a message or a line, once per interval."""
        if not self.interval or now < self.next:
            return
        self.next = now + self.interval
        if self.board is None:
            self.team.send_progress(nbytes, False)
        else:
            self.board.latest[0] = nbytes
            self.board.drain()
            self.show(self.board.latest, self.board.done, now - self.t0)

    def finish(self, nbytes: int, deadline: float,
               on_deadline: Callable[[List[int]], None]) -> None:
        """This rank's stream has ended: say so; rank 0 waits for every other rank's `done`
        (printing lines meanwhile) and calls `on_deadline(missing)` past the deadline."""
        if self.board is None:
            self.team.send_progress(nbytes, True)
            self.team.finish_progress()
            return
        board = self.board
        board.latest[0], board.done[0] = nbytes, True
        self.next = clock() + (self.interval or float("inf"))

        def tick(now: float) -> None:
            if now >= self.next:
                self.show(board.latest, board.done, now - self.t0)
                self.next = now + self.interval

        self.team.wait_for_done(board, tick, deadline, on_deadline)
