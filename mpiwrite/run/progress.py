"""The progress protocol of a timed phase, in one place.

Every rank that leads no node sends its leader [rank, bytes so far, done] once per
--progress-interval from its stream's poll, once at the start and once with `done` set when
its stream has ended (the leader knows its ranks' pids from the team's set-up, `node_pids`).
Each node leader (rank 0 leads the first node) keeps its ranks' counters in a `Relay`: when
each last grew, which rank is the slowest, which has not grown for --stall seconds and what
it waits on (/proc/PID/stat and wchan, read on its own node); it sends rank 0 one report per
interval (JSON, live.py says what is in it), at once when a rank newly stalls, and a last
one when all its ranks are done. Rank 0 keeps the reports on a `live.Board`, prints the view
once per interval, names each stall as it is reported, and after its own stream waits until
every rank is done: within the watchdog deadline, forwarding aborts, else it names the ranks
that never finished.

The leaders' side runs in a thread of its own that does no data I/O (where the MPI library
gives MPI_THREAD_MULTIPLE, as mpi4py asks for): a leader blocked in write() on a hung client
still relays its node, rank 0 blocked so still prints, and names itself as stalled.  Without
that thread level the same steps run from the stream's poll (the view then stops while rank
0's own write does).  docs/measurement.md, "Watching a run".
"""

from __future__ import annotations

import json
import threading
import time
from array import array
from typing import Callable, List, Optional

from mpiwrite.host import waits_on
from mpiwrite.run.process import clock

TICK = 0.05  # how often a leader's thread takes its ranks' messages while its rank writes
# ... and once its own stream has ended (the main thread then waits at this pace too): the
# others' last messages are taken at once, not up to a TICK late at every phase's end
FINISH_TICK = 0.002
SHOWN_STALLS = 4  # stalled ranks a report names (with their count)
FEW = 64  # a report lists its node's unfinished ranks when at most this many are left


class Relay:
    """A node leader's account of its node's ranks (index 0: the leader itself)."""

    def __init__(self, team, stall: Optional[float], t0: float):
        self.team, self.stall = team, stall
        self.ranks = team.node_ranks()
        n = len(self.ranks)
        self.index = {r: i for i, r in enumerate(self.ranks)}
        self.bytes, self.done = [0.0] * n, [False] * n
        self.pid = team.node_pids  # gathered at set-up: known even for a rank stopped at once
        self.changed = [t0] * n  # when each rank's bytes last grew (this leader's clock)
        self.snap, self.snap_t = [0.0] * n, t0
        self.reported: set = set()  # stalled ranks already in a report
        self.reported_done = -1

    def own(self, nbytes: float, now: float, done: bool = False) -> None:
        if nbytes != self.bytes[0]:
            self.bytes[0], self.changed[0] = nbytes, now
        if done:
            self.done[0] = True

    def take(self, now: float) -> None:
        while True:
            data = self.team.take_progress(up=False)
            if data is None:
                return
            rank, nbytes, done = array("d", data)
            i = self.index.get(int(rank))
            if i is None:
                continue
            if nbytes != self.bytes[i]:
                self.bytes[i], self.changed[i] = nbytes, now
            self.done[i] = self.done[i] or bool(done)

    def stalled(self, now: float) -> List[int]:
        if not self.stall:
            return []
        return [i for i, d in enumerate(self.done)
                if not d and now - self.changed[i] >= self.stall]

    def news(self, now: float) -> bool:
        """A rank newly stalled, or more ranks done, since the last report."""
        return (bool({self.ranks[i] for i in self.stalled(now)} - self.reported)
                or sum(self.done) != self.reported_done)

    def all_done(self) -> bool:
        return all(self.done)

    def report(self, now: float, node: int) -> dict:
        dt = now - self.snap_t
        slow = None
        for i, r in enumerate(self.ranks):
            if not self.done[i] and dt > 0:
                rate = (self.bytes[i] - self.snap[i]) / dt
                if slow is None or rate < slow[1]:
                    slow = [r, rate]
        self.snap, self.snap_t = list(self.bytes), now
        stalled = self.stalled(now)
        self.reported = {self.ranks[i] for i in stalled}
        self.reported_done = sum(self.done)
        shown = []
        for i in stalled[:SHOWN_STALLS]:
            state, wchan = waits_on(self.pid[i]) if self.pid[i] else ("?", "")
            shown.append([self.ranks[i], round(now - self.changed[i], 1), state, wchan])
        left = [r for i, r in enumerate(self.ranks) if not self.done[i]]
        return {"n": node, "b": sum(self.bytes), "d": self.reported_done,
                "k": len(self.ranks), "slow": slow, "ns": len(stalled), "st": shown,
                "w": left if len(left) <= FEW else None}


class Progress:
    """One timed phase's progress on one rank.  `view`: rank 0's ledger (live_board,
    live_show, stalled), None on the other ranks."""

    def __init__(self, team, interval: float, stall: Optional[float], view=None):
        self.team, self.interval, self.view = team, interval, view
        self.stall = stall if interval else None
        self.t0 = clock()
        self.next = self.t0 + interval
        self.relay: Optional[Relay] = None
        self.board = None
        self.thread: Optional[threading.Thread] = None
        self.stopping = threading.Event()
        self.wake = threading.Event()  # the thread's nap cut short: this rank has finished
        self.tick = TICK
        self.error: Optional[BaseException] = None

    def start(self) -> None:
        """The phase's writes begin now (after the start barrier)."""
        team = self.team
        self.t0 = clock()
        self.next = self.t0 + (self.interval or float("inf"))
        if not team.is_leader:
            if self.interval:
                self._send(0, False)
            return
        self.relay = Relay(team, self.stall, self.t0)
        if self.view is not None:
            self.board = self.view.live_board(self.t0)
        if team.threads_ok:
            self.thread = threading.Thread(target=self._run, name="mpiwrite-progress",
                                           daemon=True)
            self.thread.start()

    def _send(self, nbytes: float, done: bool) -> None:
        self.team.send_progress(array("d", [self.team.rank, nbytes, 1.0 if done else 0.0])
                                .tobytes(), up=False)

    def poll(self, now: float, nbytes: int) -> None:
        """From the stream's poll (every 0.1 s): the counter, and a message per interval."""
        if self.relay is not None:
            self.relay.own(nbytes, now)
            if self.thread is None:
                self.step(now)
        elif self.interval and now >= self.next:
            self.next = now + self.interval
            self._send(nbytes, False)

    def arrived(self, nbytes: int) -> None:
        """This rank's part is written and it waits for the others inside its stream (a
        collective engine's closing agreement): counted done now, said again at finish."""
        if self.relay is not None:
            self.relay.own(nbytes, clock(), done=True)
            self.wake.set()
        else:
            self._send(nbytes, True)

    def _run(self) -> None:
        try:
            while not self.stopping.is_set():
                if self.step(clock()):
                    return
                self.wake.wait(self.tick)
                self.wake.clear()
        except BaseException as exc:  # noqa: B036 - the main thread raises it at finish
            self.error = exc

    def step(self, now: float) -> bool:
        """One pass of a leader: its ranks' messages, a report when due; rank 0 also takes
        the other leaders' reports and shows the view.  True once a leader other than 0
        has sent its node's last report."""
        relay, team = self.relay, self.team
        relay.take(now)
        due = bool(self.interval) and now >= self.next
        if due:
            self.next = now + self.interval
        if self.board is None:
            if due or relay.news(now) or relay.all_done():
                team.send_progress(json.dumps(relay.report(now, team.node)).encode(), up=True)
            return relay.all_done()
        if due or relay.news(now):
            self._add(relay.report(now, team.node), now)
        while True:
            data = team.take_progress(up=True)
            if data is None:
                break
            self._add(json.loads(data), now)
        for node in self.board.newly_silent(now, self.stall):
            self.view.silent(self.board, node, now)
        if due:
            self.view.live_show(self.board, now)
        return False

    def _add(self, report: dict, now: float) -> None:
        for stall in self.board.add(report, now):
            self.view.stalled(stall, now)

    def finish(self, nbytes: int, deadline: float,
               on_deadline: Callable[[List[int], List[list]], None]) -> None:
        """This rank's stream has ended: say so; a leader waits until its node's ranks are
        done and reported, rank 0 until every rank is, calling `on_deadline(missing,
        stalled)` past the deadline."""
        team = self.team
        if self.relay is None:
            self._send(nbytes, True)
            self._wait(team.progress_sent)
            return
        self.relay.own(nbytes, clock(), done=True)
        self.tick = FINISH_TICK
        self.wake.set()
        board = self.board

        def over() -> bool:
            if self.error is not None:
                raise self.error
            if self.thread is None:
                finished = self.step(clock())
            else:
                finished = not self.thread.is_alive()
            if board is not None:
                if clock() >= deadline and not board.all_done():
                    on_deadline(board.missing(), board.stuck())
                return board.all_done()
            return finished and team.progress_sent()

        self._wait(over)
        if board is not None and board.all_done():  # the phase's last word (--live-jsonl)
            self.view.live_end(board, clock())
        self.close()

    def _wait(self, over: Callable[[], bool]) -> None:
        team = self.team
        while not over():
            if team.signals is not None and team.signals.received:
                team.raise_abort()
            team.poll_abort()
            team.check()
            time.sleep(0.002)

    def close(self) -> None:
        """Stop the leader's thread (the phase ended, or failed)."""
        self.stopping.set()
        self.wake.set()
        if self.thread is not None and self.thread is not threading.current_thread():
            self.thread.join(1.0)
