"""Rank 0's side of a phase being watched: the board (live.py) made for the run's nodes, the
view drawn once per interval, each stall named on screen and in the record's errors (phase
`stall`, its time on the common timeline), and what a time-out says of ranks the kernel holds.

Called from rank 0's progress thread (progress.py) while the main thread writes.
"""

from __future__ import annotations

from typing import List

from mpiwrite.errors import error_entry
from mpiwrite.run import layout, live
from mpiwrite.text import world_ranks_of
from mpiwrite.units import RATE_UNITS


def state_text(state: str, wchan: str) -> str:
    """'D (uninterruptible) in request_wait_answer': what /proc says the rank waits on."""
    words = {"D": "D (uninterruptible, in the kernel)", "T": "T (stopped)",
             "R": "R (running)", "S": "S (sleeping)"}.get(state, state or "?")
    return words + (f" in {wchan}" if wchan else "")


class Watch:
    def __init__(self, ledger, it: int, name: str, origin: float):
        self.ledger, self.it, self.name, self.origin = ledger, it, name, origin
        self.console = ledger.console

    def live_board(self, t0: float) -> live.Board:
        cfg = self.ledger.cfg
        return live.Board(self.ledger.hosts, self.ledger.node_of, cfg.size, cfg.time_limit, t0)

    def live_show(self, board: live.Board, now: float) -> None:
        units = self.console.units()
        if self.console.live_view:
            width, height = self.console.screen_size()
            self.console.live(live.render(board, now, units, RATE_UNITS[units], width, height,
                                          silent_after=3 * self.ledger.cfg.progress_interval))
        else:
            self.console.live([live.line(board, now, units, RATE_UNITS[units])])
        if self.ledger.cfg.live_jsonl:
            self.ledger.live_json(live.record(board, now, self.it, self.name, self.origin))

    def live_end(self, board: live.Board, now: float) -> None:
        """Every rank of the phase is done: --live-jsonl's last line of it (a phase shorter
        than one progress interval has this one only)."""
        if self.ledger.cfg.live_jsonl:
            self.ledger.live_json(live.record(board, now, self.it, self.name, self.origin))

    def path(self, rank: int) -> str:
        led = self.ledger
        return layout.data_path(led.cfg, led.run_id, led.nranks, rank, self.it)

    def stalled(self, stall: list, now: float) -> None:
        """A rank a leader reports stalled: one line now, an entry on the timeline."""
        rank, seconds, state, wchan = int(stall[0]), float(stall[1]), str(stall[2]), \
            str(stall[3])
        doing = f"writing {self.path(rank)}" if self.name == "write" else "reading"
        text = (f"rank {rank} on {self.ledger.host_of(rank)} stalled: no bytes for "
                f"{seconds:.1f}s (--stall) {doing}; state {state_text(state, wchan)}")
        self.console.warn(text)
        self.ledger.errors.append(error_entry(
            rank, self.ledger.host_of(rank), "stall", text, iteration=self.it,
            path=self.path(rank) if self.name == "write" else "", t=now - self.origin,
            state=state, wchan=wchan))


    def silent(self, board: live.Board, node: int, now: float) -> None:
        """A node whose leader sent nothing for --stall: its leader is stopped or its node
        gone (what it waits on is read on that node, by that leader: unknown here)."""
        ranks = board.members[node]
        host = board.hosts[node]
        text = (f"node {host} (rank{'s' * (len(ranks) > 1)} {world_ranks_of(ranks)}) "
                f"stalled: no progress report for {now - board.at[node]:.1f}s (--stall); "
                f"its leader, rank {ranks[0]}, is stopped or held, or the node is gone")
        self.console.warn(text)
        self.ledger.errors.append(error_entry(
            ranks[0], host, "stall", text, iteration=self.it, t=now - self.origin,
            path=self.path(ranks[0]) if self.name == "write" else "", state="?", wchan=""))


def held_text(ledger, stuck: List[list]) -> str:
    """At a time-out, the timeout line's end for the ranks in D state (held by the
    filesystem client), or '' when none is."""
    from mpiwrite.clients import registry

    client = registry.for_run(ledger.keys.get("fstype", ""), ledger.nodes[0]["fs"])
    kept = [s for s in stuck if client.holds(str(s[2]), str(s[3]))]
    if not kept:
        return ""
    ranks = [int(s[0]) for s in kept]
    hosts = sorted({ledger.host_of(r) for r in ranks})
    how = sorted({f"{s[2]} in {s[3]}" if s[3] else str(s[2]) for s in kept})
    return (f"; rank{'s' * (len(ranks) > 1)} {world_ranks_of(ranks)} on "
            f"{', '.join(hosts[:4])}{' and more' if len(hosts) > 4 else ''} "
            f"{'wait' if len(ranks) > 1 else 'waits'} in the kernel ({', '.join(how[:3])}): "
            f"the filesystem client is hung, not mpiwrite; the job ends once the client "
            f"answers or its connection is aborted (docs/measurement.md, 'A hung filesystem "
            f"client')")
