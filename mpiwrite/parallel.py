"""Everything ranks say to each other: node split, clock offsets, aborts, progress, gathers.

The library's traffic runs on a duplicate of COMM_WORLD.  Reductions are typed (numpy buffers);
nothing per rank is pickled.  No rank is ever left waiting: a failing rank tells every other
rank to stop, rank 0 waits for the others' "done" with a deadline, and a watchdog thread on
every rank aborts the job if even that does not happen.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
import zlib
from typing import List, Optional, Sequence, Tuple

import numpy as np

TAG_ABORT = 101
TAG_PROGRESS = 102  # progress and "done" messages, rank -> 0
TAG_CLOCK = 103
CLOCK_ROUNDS = 8

clock = time.monotonic


class Team:
    """This rank's place in the run: world, node and node-leader communicators."""

    def __init__(self, MPI, world=None):
        self.MPI = MPI
        self.comm = (world or MPI.COMM_WORLD).Dup()
        self.rank = self.comm.Get_rank()
        self.size = self.comm.Get_size()
        # MPIWRITE_HOSTNAME names the node where hostnames do not tell nodes apart
        # (containers that share a hostname; tests that model uneven nodes on one machine).
        self.host = os.environ.get("MPIWRITE_HOSTNAME") or socket.gethostname()
        shared = self.comm.Split_type(MPI.COMM_TYPE_SHARED, key=self.rank)
        # Same shared-memory domain *and* same hostname: emulated hosts share memory here.
        color = zlib.crc32(self.host.encode()) & 0x7FFFFFFF
        self.node_comm = shared.Split(color, self.rank)
        shared.Free()
        self.local_rank = self.node_comm.Get_rank()
        self.local_size = self.node_comm.Get_size()
        self.leaders = self.comm.Split(0 if self.local_rank == 0 else MPI.UNDEFINED, self.rank)
        info = np.zeros(2, dtype=np.int64)
        if self.local_rank == 0:
            info[:] = (self.leaders.Get_rank(), self.leaders.Get_size())
        self.node_comm.Bcast(info, root=0)
        self.node, self.nnodes = int(info[0]), int(info[1])
        self._abort_req = None
        self._abort_buf = np.zeros(1, dtype=np.int64)
        self._abort_sends: list = []
        self._progress_sends: list = []

    @property
    def is_leader(self) -> bool:
        return self.local_rank == 0

    # ---------------------------------------------------------------- collectives
    def barrier(self) -> None:
        self.comm.Barrier()

    def bcast_text(self, text: Optional[str], root: int = 0) -> str:
        """Broadcast a string as bytes (length first): no pickling."""
        data = (text or "").encode("utf-8", "surrogateescape") if self.rank == root else b""
        n = np.array([len(data)], dtype=np.int64)
        self.comm.Bcast(n, root=root)
        buf = np.frombuffer(data, dtype=np.uint8).copy() if self.rank == root else np.empty(
            int(n[0]), dtype=np.uint8)
        self.comm.Bcast(buf, root=root)
        return buf.tobytes().decode("utf-8", "surrogateescape")

    def allreduce_max(self, value: float) -> float:
        out = np.zeros(1)
        self.comm.Allreduce(np.array([float(value)]), out, op=self.MPI.MAX)
        return float(out[0])

    def allreduce_sum(self, value: int) -> int:
        out = np.zeros(1, dtype=np.int64)
        self.comm.Allreduce(np.array([int(value)], dtype=np.int64), out, op=self.MPI.SUM)
        return int(out[0])

    def gather_rows(self, row: np.ndarray) -> Optional[np.ndarray]:
        """Gather one fixed-length float64 row per rank into a (size, n) array on rank 0."""
        row = np.ascontiguousarray(row, dtype=np.float64)
        out = np.empty((self.size, row.size)) if self.rank == 0 else None
        self.comm.Gather(row, out, root=0)
        return out

    def gatherv(self, data: np.ndarray, comm=None) -> Optional[Tuple[np.ndarray, np.ndarray]]:
        """Gather variable-length 1-D arrays to rank 0: (concatenated, counts)."""
        comm = comm or self.comm
        data = np.ascontiguousarray(data)
        counts = np.zeros(comm.Get_size(), dtype=np.int64)
        comm.Gather(np.array([data.size], dtype=np.int64), counts, root=0)
        if comm.Get_rank() == 0:
            out = np.empty(int(counts.sum()), dtype=data.dtype)
            comm.Gatherv(data, (out, counts), root=0)
            return out, counts
        comm.Gatherv(data, None, root=0)
        return None

    def gather_texts(self, text: str, comm=None) -> Optional[List[str]]:
        """Gather one short string per rank of `comm` to its rank 0, as bytes."""
        got = self.gatherv(np.frombuffer(text.encode("utf-8", "surrogateescape"),
                                         dtype=np.uint8), comm)
        if got is None:
            return None
        flat, counts = got
        ends = np.cumsum(counts)
        return [flat[e - c:e].tobytes().decode("utf-8", "surrogateescape")
                for c, e in zip(counts, ends)]

    # ---------------------------------------------------------------- clocks
    def clock_offsets(self) -> Optional[np.ndarray]:
        """Each node's monotonic-clock offset to rank 0's, by ping-pong (best of several).

        Ranks on one node share a clock, so only node leaders take part.  Returns on rank 0 an
        (nnodes, 2) array: offset to add to that node's times, and its uncertainty (half the
        best round trip), both in seconds.
        """
        result = None
        if self.leaders != self.MPI.COMM_NULL:
            lc = self.leaders
            if lc.Get_rank() == 0:
                result = np.zeros((lc.Get_size(), 2))
                ping = np.zeros(1)
                pong = np.zeros(1)
                for peer in range(1, lc.Get_size()):
                    best = (float("inf"), 0.0)
                    for _ in range(CLOCK_ROUNDS):
                        ta = clock()
                        lc.Send(ping, dest=peer, tag=TAG_CLOCK)
                        lc.Recv(pong, source=peer, tag=TAG_CLOCK)
                        tb = clock()
                        if tb - ta < best[0]:
                            best = (tb - ta, (ta + tb) / 2 - pong[0])
                    result[peer] = (best[1], best[0] / 2)
            else:
                buf = np.zeros(1)
                for _ in range(CLOCK_ROUNDS):
                    lc.Recv(buf, source=0, tag=TAG_CLOCK)
                    buf[0] = clock()
                    lc.Send(buf, dest=0, tag=TAG_CLOCK)
        return result if self.rank == 0 else None

    # ---------------------------------------------------------------- aborts
    # A rank that must stop everyone tells rank 0; rank 0 tells every other rank once.  So an
    # abort costs O(ranks) messages even when every rank is signalled at the same moment.
    def arm_abort(self) -> None:
        self._abort_req = self.comm.Irecv(self._abort_buf, source=self.MPI.ANY_SOURCE,
                                          tag=TAG_ABORT)
        self._sent_to_root = False
        self._forwarded = False
        self._abort_got = False

    def _forward(self) -> None:
        if self._forwarded:
            return
        self._forwarded = True
        msg = np.array([self.rank], dtype=np.int64)
        for peer in range(1, self.size):
            self._abort_sends.append(self.comm.Isend(msg, dest=peer, tag=TAG_ABORT))

    def raise_abort(self) -> None:
        """Ask every rank to stop writing now."""
        if self.rank == 0:
            self._forward()
        elif not self._sent_to_root:
            self._sent_to_root = True
            msg = np.array([self.rank], dtype=np.int64)
            self._abort_sends.append(self.comm.Isend(msg, dest=0, tag=TAG_ABORT))

    def poll_abort(self) -> bool:
        """True once an abort has reached this rank (rank 0 passes it on)."""
        if not self._abort_got and self._abort_req is not None and self._abort_req.Test():
            self._abort_got = True
        if self._abort_got and self.rank == 0:
            self._forward()
        return self._abort_got

    def disarm_abort(self, extra: Sequence[int] = ()) -> List[int]:
        """Match every abort message still in flight; returns the sums of `extra` over ranks."""
        mine = np.array([int(self._sent_to_root), int(self._forwarded), *extra], dtype=np.int64)
        sums = np.zeros_like(mine)
        self.comm.Allreduce(mine, sums, op=self.MPI.SUM)
        expect = int(sums[0]) if self.rank == 0 else int(sums[1])
        req = self._abort_req
        if expect == 0:
            if not req.Test():
                req.Cancel()
            req.Wait()
        else:
            req.Wait()
            for _ in range(expect - 1):
                self.receive_any(self._abort_buf, TAG_ABORT)
        self.MPI.Request.Waitall(self._abort_sends)
        self._abort_sends = []
        self._abort_req = None
        return [int(x) for x in sums[2:]]

    def receive_any(self, buf: np.ndarray, tag: int, poll: float = 0.001) -> int:
        """Receive one message of `tag` from any rank; returns its source.

        Matched probes only: with MPICH 5 over UCX, a Recv(ANY_SOURCE) posted after a message
        from another host has arrived never matches it (found with emulated hosts), while
        Improbe does.  The same path is used everywhere a message may already be waiting.
        """
        status = self.MPI.Status()
        while True:
            msg = self.comm.Improbe(source=self.MPI.ANY_SOURCE, tag=tag, status=status)
            if msg is not None:
                msg.Recv(buf)
                return status.Get_source()
            time.sleep(poll)

    # ---------------------------------------------------------------- progress / done
    def send_progress(self, nbytes: int, done: bool, elapsed: float) -> None:
        msg = np.array([self.rank, nbytes, 1.0 if done else 0.0, elapsed])
        if self.rank == 0:
            return
        self._progress_sends.append(self.comm.Isend(msg, dest=0, tag=TAG_PROGRESS))
        if len(self._progress_sends) > 64:
            self.MPI.Request.Waitall(self._progress_sends)
            self._progress_sends = []

    def finish_progress(self) -> None:
        self.MPI.Request.Waitall(self._progress_sends)
        self._progress_sends = []


class ProgressBoard:
    """Rank 0's view of every rank's bytes so far, fed by progress and done messages."""

    def __init__(self, team: Team):
        self.team = team
        self.latest = np.zeros(team.size)
        self.done = np.zeros(team.size, dtype=bool)
        self._buf = np.zeros(4)

    def drain(self) -> int:
        comm, MPI = self.team.comm, self.team.MPI
        got = 0
        while True:
            # A matched probe receives exactly the message it saw (see Team.receive_any).
            msg = comm.Improbe(source=MPI.ANY_SOURCE, tag=TAG_PROGRESS)
            if msg is None:
                break
            msg.Recv(self._buf)
            r = int(self._buf[0])
            self.latest[r] = self._buf[1]
            if self._buf[2]:
                self.done[r] = True
            got += 1
        return got

    def missing(self) -> List[int]:
        return [int(r) for r in np.flatnonzero(~self.done)]


class Watchdog:
    """A last resort: if this rank is still in a phase after `seconds`, end the whole job."""

    def __init__(self, team: Team, seconds: Optional[float], describe):
        self.team, self.describe = team, describe
        self.timer = None
        if seconds:
            self.timer = threading.Timer(seconds, self._fire)
            self.timer.daemon = True
            self.timer.start()

    def _fire(self) -> None:
        sys.stderr.write(f"mpiwrite: {self.describe()}\n")
        sys.stderr.flush()
        self.team.comm.Abort(1)

    def cancel(self) -> None:
        if self.timer is not None:
            self.timer.cancel()


def seconds_since_exec() -> float:
    """How long ago this process started (from /proc; 10 ms resolution), or NaN."""
    try:
        with open("/proc/self/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        with open("/proc/uptime") as fh:
            uptime = float(fh.read().split()[0])
        return uptime - int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return float("nan")


def world_ranks_of(values: Sequence[int]) -> str:
    """'3' or '3, 7 and 12' or '3, 7, 12 and 40 more' for messages."""
    vals = list(values)
    if len(vals) <= 4:
        return ", ".join(map(str, vals[:-1])) + (" and " if len(vals) > 1 else "") + str(vals[-1])
    return ", ".join(map(str, vals[:3])) + f" and {len(vals) - 3} more"
