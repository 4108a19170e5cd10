"""The nodes' clocks against rank 0's: one ping-pong between node leaders (parallel.Team
calls it once an iteration, before the write phase; the offsets place every node's samples
on rank 0's time line)."""

from __future__ import annotations

from array import array
from typing import TYPE_CHECKING, Optional

from mpiwrite.run.process import clock

if TYPE_CHECKING:
    import numpy as np

CLOCK_ROUNDS = 8  # round trips per node; the shortest one is kept


def offsets(team, tag: int) -> Optional[np.ndarray]:
    """Each node's monotonic-clock offset to rank 0's, by ping-pong (best of CLOCK_ROUNDS).

    Ranks on one node share a clock, so only node leaders take part.  Returns on rank 0 an
    (nnodes, 2) array: offset to add to that node's times, and its uncertainty (half the
    best round trip), both in seconds; None elsewhere.
    """
    result = None
    if team.leaders != team.MPI.COMM_NULL:
        lc = team.leaders
        if lc.Get_rank() == 0:
            import numpy as np

            result = np.zeros((lc.Get_size(), 2))
            ping = array("d", [0.0])
            pong = array("d", [0.0])
            for peer in range(1, lc.Get_size()):
                best = (float("inf"), 0.0)
                for _ in range(CLOCK_ROUNDS):
                    recv = lc.Irecv(pong, source=peer, tag=tag)
                    ta = clock()
                    team.wait(lc.Isend(ping, dest=peer, tag=tag))
                    team.wait(recv)
                    tb = clock()
                    if tb - ta < best[0]:
                        best = (tb - ta, (ta + tb) / 2 - pong[0])
                result[peer] = (best[1], best[0] / 2)
        else:
            buf = array("d", [0.0])
            for _ in range(CLOCK_ROUNDS):
                team.wait(lc.Irecv(buf, source=0, tag=tag))
                buf[0] = clock()
                team.wait(lc.Isend(buf, dest=0, tag=tag))
    return result if team.rank == 0 else None
