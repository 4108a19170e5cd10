"""Everything ranks say to each other: node split, clock offsets, agreement, failures, progress.

Only this module talks MPI (what the progress messages mean is progress.py's).  The
library's traffic runs on two duplicates of COMM_WORLD: `comm` for the run's own messages and
`fcomm`, the failure channel, on which a rank that cannot go on tells every other rank why
(docs/architecture.md).  No rank ever blocks in MPI: collectives are non-blocking and waited
for by `Team.wait`, which keeps looking at the failure channel and at this rank's signals, so
one rank's failure, wherever it happens, reaches every rank within milliseconds instead of
leaving them in a collective until the wall-clock limit.  Messages are typed buffers
(array.array, bytes) with their MPI datatype named; nothing per rank is pickled.  numpy is
used only where rank 0 (or a node leader) receives a table, and imported there: the other
ranks never load it (docs/scaling.md).
"""

from __future__ import annotations

import json
import os
import sys
import time
from array import array
from typing import TYPE_CHECKING, Callable, Dict, List, Optional, Sequence, Tuple

from mpiwrite.errors import Interrupted, PeerFailed, Stalled, error_entry
from mpiwrite.host import host_name
from mpiwrite.run.process import clock
from mpiwrite.text import printable

if TYPE_CHECKING:
    import numpy as np

TAG_ABORT = 101
TAG_PROGRESS = 102  # progress and "done": rank -> its leader -> 0 (progress.py)
TAG_CLOCK = 103
TAG_FAIL = 104  # on the failure channel: a JSON report {rank, host, phase, message, ...}
TAG_BODY = 105  # a pattern body, node leader -> a rank of its node
TAG_NET = 106  # --netcheck: the node leaders' exchanges
NET_MESSAGE = 8 << 20  # bytes a message of the network check, at most
NET_FIRST = 1 << 20  # its first messages (grown 4x while a message takes under 50 ms)
NET_SECONDS = 0.3  # how long each pairing of the node leaders exchanges
FINAL_RECORD_SECONDS = 60.0  # after a signal, the wait for rank 0's final record
ABORT_DRAIN_SECONDS = 0.25  # before MPI_Abort: let the launcher forward what we printed


def grace_seconds(nranks: int) -> float:
    """How long an orderly end may take before it is forced (MPIWRITE_GRACE overrides).

    Long enough for rank 0 to gather the rows and write the record of a large run (0.5 s at
    100,000 ranks, docs/scaling.md), short enough that a stuck job ends within seconds.
    """
    try:
        value = float(os.environ.get("MPIWRITE_GRACE", ""))
        if 0 < value < 3600:
            return value
    except ValueError:
        pass
    return 5.0 + nranks / 2000.0


class Team:
    """This rank's place in the run: world, node and node-leader communicators."""

    def __init__(self, MPI, signals=None, world=None, host: str = ""):
        self.MPI = MPI
        world = world or MPI.COMM_WORLD
        self.world = world
        self.comm = world.Dup()
        self.fcomm = world.Dup()  # the failure channel
        self.rank = self.comm.Get_rank()
        self.size = self.comm.Get_size()
        self.signals = signals
        self.grace = grace_seconds(self.size)
        self.stall_seconds: Optional[float] = None  # a wait longer than this ends the job
        # how long after a signal a wait goes on before it ends the job (None: the grace);
        # longer while rank 0 saves the final record (Run.execute)
        self.signal_patience: Optional[float] = None
        self.phase = ""
        self.host = host or host_name()
        self.root_host = ""  # rank 0's, once a broadcast of the caller's has carried it
        self._fail_sends: list = []
        self._fail_data: list = []
        self._abort_req = None
        self._abort_buf = array("q", [0])
        self._abort_sends: list = []
        self._progress_sends: list = []
        shared = self.comm.Split_type(MPI.COMM_TYPE_SHARED, key=self.rank)
        # Same shared-memory domain *and* same hostname: emulated hosts share memory here.
        # The names themselves are compared (gathered within the shared-memory domain, one
        # node's ranks): a hash of them made node3985819 and node4420602 one node (same crc32).
        names = self.allgather_texts(self.host, shared)
        self.node_comm = shared.Split(names.index(self.host), self.rank)
        shared.Free()
        self.local_rank = self.node_comm.Get_rank()
        self.local_size = self.node_comm.Get_size()
        # each of this node's ranks' pid, in node order: the leader reads /proc for a rank
        # that never got to send its first progress message (stopped at the phase's start)
        pids = array("q", bytes(8 * self.local_size))
        self.wait(self.node_comm.Iallgather([array("q", [os.getpid()]), MPI.INT64_T],
                                            [pids, MPI.INT64_T]))
        self.node_pids = [int(p) for p in pids]
        self.leaders = self.comm.Split(0 if self.local_rank == 0 else MPI.UNDEFINED, self.rank)
        info = array("q", [0, 0])
        if self.local_rank == 0:
            info[:] = array("q", [self.leaders.Get_rank(), self.leaders.Get_size()])
        self.wait(self.node_comm.Ibcast([info, MPI.INT64_T], root=0))
        self.node, self.nnodes = int(info[0]), int(info[1])

    @property
    def is_leader(self) -> bool:
        return self.local_rank == 0

    def free(self) -> None:
        """Free the communicators this Team made (a study makes one Team per point), and
        the part of another team it was made on (`part`)."""
        for comm in (self.leaders, self.node_comm, self.fcomm, self.comm,
                     getattr(self, "_part_of", None)):
            if comm is not None and comm != self.MPI.COMM_NULL:
                comm.Free()

    def library_version(self) -> str:
        """The MPI library's own words for itself (MPI_Get_library_version), NULs removed."""
        return self.MPI.Get_library_version().replace("\x00", "").strip()

    def part(self, member: bool) -> Optional[Team]:
        """The Team of this team's ranks whose `member` is true (every rank calls it: a
        collective), None on the others; its `free` frees its part of this team too."""
        sub = self.comm.Split(0 if member else self.MPI.UNDEFINED, self.rank)
        if not member:
            return None
        team = Team(self.MPI, self.signals, world=sub, host=self.host)
        team._part_of = sub
        return team

    def idle_barrier(self, nap: float) -> None:
        """Wait for every rank of the team at a barrier, asleep between tests (a study's ranks
        that do not run a point wait so, without spinning on a core)."""
        req = self.comm.Ibarrier()
        while not req.Test():
            time.sleep(nap)

    # ---------------------------------------------------------------- failures
    def check(self) -> None:
        """Raise PeerFailed when another rank has reported a failure, Interrupted when a
        signal arrived more than the grace period ago and the run has still not ended."""
        status = self.MPI.Status()
        msg = self.fcomm.Improbe(source=self.MPI.ANY_SOURCE, tag=TAG_FAIL, status=status)
        if msg is not None:
            data = bytearray(status.Get_count(self.MPI.BYTE))
            msg.Recv([data, self.MPI.BYTE])
            raise PeerFailed(decode_report(bytes(data), status.Get_source()))
        sig = self.signals
        patience = self.grace if self.signal_patience is None else self.signal_patience
        if sig is not None and sig.received and clock() - sig.at > patience:
            raise Interrupted(sig.received)

    def await_final_record(self) -> None:
        """From here on only rank 0's final record is left to do: a signal must not cut it
        short (the other ranks would end the job mid-rename), so after one the waits go on for
        FINAL_RECORD_SECONDS, not the grace; still bounded (a stopped rank 0)."""
        self.signal_patience = max(self.grace, FINAL_RECORD_SECONDS)
        if self.stall_seconds:
            self.stall_seconds = max(self.stall_seconds, FINAL_RECORD_SECONDS)

    def wait(self, req) -> None:
        """Complete one request, looking at the failure channel and signals meanwhile; a wait
        longer than `stall_seconds` (set from --timeout) raises Stalled."""
        spins = 0
        nap = 0.0001
        start = clock()
        while not req.Test():
            self.check()
            spins += 1
            if spins > 20:
                # back off (to 2 ms): ranks that wait leave the cores to ranks still working,
                # which matters when ranks outnumber cores
                time.sleep(nap)
                nap = min(nap * 1.5, 0.002)
                if self.stall_seconds and clock() - start > self.stall_seconds:
                    raise Stalled(f"no answer from the other ranks within {self.stall_seconds:g}s "
                                  f"(--timeout and the grace period); a rank is stopped or hung")

    def waitall(self, reqs: Sequence) -> None:
        for req in reqs:
            self.wait(req)

    def report_failure(self, report: Dict) -> None:
        """Tell every other rank that this one cannot go on (never blocks)."""
        data = json.dumps(report).encode("utf-8", "surrogateescape")
        self._fail_data.append(data)
        for peer in range(self.size):
            if peer != self.rank:
                self._fail_sends.append(self.fcomm.Isend([data, self.MPI.BYTE], dest=peer,
                                                         tag=TAG_FAIL))

    def abort(self, code: int) -> None:
        """End the whole job now with this exit code (MPI_Abort)."""
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        # The launcher forwards our output through its proxies, and MPI_Abort tears those
        # down: without a moment to drain, the one line that says why was sometimes lost
        # (seen under load with MPICH's hydra).
        time.sleep(ABORT_DRAIN_SECONDS)
        self.world.Abort(int(code))

    # ---------------------------------------------------------------- collectives
    def barrier(self) -> None:
        self.wait(self.comm.Ibarrier())

    def bcast_text(self, text: Optional[str], root: int = 0) -> str:
        """Broadcast a string as bytes (length first): no pickling."""
        data = (text or "").encode("utf-8", "surrogateescape") if self.rank == root else b""
        n = array("q", [len(data)])
        self.wait(self.comm.Ibcast([n, self.MPI.INT64_T], root=root))
        buf = bytearray(data) if self.rank == root else bytearray(n[0])
        self.wait(self.comm.Ibcast([buf, self.MPI.BYTE], root=root))
        return buf.decode("utf-8", "surrogateescape")

    def allreduce(self, values: Sequence[float], op: str = "max") -> List[float]:
        mine = array("d", [float(v) for v in values])
        out = array("d", bytes(len(mine) * 8))
        self.wait(self.comm.Iallreduce([mine, self.MPI.DOUBLE], [out, self.MPI.DOUBLE],
                                       op={"max": self.MPI.MAX, "sum": self.MPI.SUM}[op]))
        return list(out)

    def allreduce_max(self, value: float) -> float:
        return float(self.allreduce([float(value)], "max")[0])

    def allreduce_sum(self, value: int) -> int:
        out = array("q", [0])
        self.wait(self.comm.Iallreduce([array("q", [int(value)]), self.MPI.INT64_T],
                                       [out, self.MPI.INT64_T], op=self.MPI.SUM))
        return int(out[0])

    def gather_rows(self, row: Sequence[float]) -> Optional[np.ndarray]:
        """Gather one fixed-length float64 row per rank into a (size, n) array on rank 0."""
        row = array("d", row)
        out = None
        if self.rank == 0:
            import numpy as np

            out = np.empty((self.size, len(row)), dtype=np.float64)
        self.wait(self.comm.Igather([row, self.MPI.DOUBLE],
                                    [out, self.MPI.DOUBLE] if out is not None else None, root=0))
        return out

    def gatherv(self, data, comm=None) -> Optional[Tuple[np.ndarray, np.ndarray]]:
        """Gather variable-length 1-D data to rank 0 of `comm`: (concatenated, counts) as
        numpy arrays there.  `data`: bytes (uint8), or floats (float64: array('d'), ...)."""
        comm = comm or self.comm
        floats = not isinstance(data, (bytes, bytearray))
        data = array("d", data) if floats and not isinstance(data, array) else data
        kind = self.MPI.DOUBLE if floats else self.MPI.BYTE
        counts = array("q", bytes(8 * comm.Get_size())) if comm.Get_rank() == 0 else None
        self.wait(comm.Igather([array("q", [len(data)]), self.MPI.INT64_T],
                               [counts, self.MPI.INT64_T] if counts is not None else None,
                               root=0))
        if counts is not None:
            import numpy as np

            out = np.empty(sum(counts), dtype=np.float64 if floats else np.uint8)
            self.wait(comm.Igatherv([data, kind], [out, list(counts), kind], root=0))
            return out, np.array(counts, dtype=np.int64)
        self.wait(comm.Igatherv([data, kind], None, root=0))
        return None

    def gather_texts(self, text: str, comm=None) -> Optional[List[str]]:
        """Gather one short string per rank of `comm` to its rank 0, as bytes."""
        got = self.gatherv(text.encode("utf-8", "surrogateescape"), comm)
        return None if got is None else _split_texts(got[0].tobytes(), got[1])

    def allgather_texts(self, text: str, comm=None) -> List[str]:
        comm = comm or self.comm
        data = text.encode("utf-8", "surrogateescape")
        counts = array("q", bytes(8 * comm.Get_size()))
        self.wait(comm.Iallgather([array("q", [len(data)]), self.MPI.INT64_T],
                                  [counts, self.MPI.INT64_T]))
        out = bytearray(sum(counts))
        self.wait(comm.Iallgatherv([data, self.MPI.BYTE], [out, list(counts), self.MPI.BYTE]))
        return _split_texts(out, counts)

    def node_sums(self, values: Sequence[float]) -> Optional[np.ndarray]:
        """The sum of `values` over each node's ranks, as an (nnodes, len) array on rank 0:
        a reduction on the node communicator, then the leaders' rows gathered."""
        mine = array("d", values)
        total = array("d", bytes(8 * len(mine)))
        self.wait(self.node_comm.Ireduce([mine, self.MPI.DOUBLE], [total, self.MPI.DOUBLE],
                                         op=self.MPI.SUM, root=0))
        if not self.is_leader:
            return None
        got = self.gatherv(total, self.leaders)
        if got is None:
            return None
        flat, _counts = got
        return flat.reshape(-1, len(mine))

    def node_bodies(self, needs: Sequence[int], make: Callable[[int], object],
                    into: Dict[int, object], size: int) -> None:
        """Pattern bodies of `size` bytes made by each node's leader for its ranks: this rank
        needs those of the world ranks `needs`, into the writable buffers `into[r]`.  The
        leader makes each with `make(r)` (numpy: only leaders load it) and sends them one at
        a time; it fills its own `into` itself.  Waits allow for a node's bodies made in
        series (2 a rank at 50 MB/s; 400 measured here) beyond --timeout's stall limit."""
        node, saved = self.node_comm, self.stall_seconds
        if saved:
            self.stall_seconds = saved + self.local_size * 2 * size / 50e6
        try:
            if not self.is_leader:
                self.wait(node.Isend([array("q", [len(needs), *needs]), self.MPI.INT64_T],
                                     dest=0, tag=TAG_BODY))
                self.waitall([node.Irecv([into[r], self.MPI.BYTE], source=0, tag=TAG_BODY)
                              for r in needs])
                return
            for r in needs:
                memoryview(into[r])[:] = make(r)
            for peer in range(1, self.local_size):
                head = array("q", bytes(8 * 8))  # a count and up to 7 ranks (a run needs 2)
                self.wait(node.Irecv([head, self.MPI.INT64_T], source=peer, tag=TAG_BODY))
                for r in head[1:1 + head[0]]:
                    self.wait(node.Isend([make(r), self.MPI.BYTE], dest=peer, tag=TAG_BODY))
        finally:
            self.stall_seconds = saved

    def agree(self, problem: str) -> List[Dict]:
        """Every rank's problem, or '' for none, agreed: the same list on every rank of
        error entries (errors.error_entry, phase "agreement"), empty when no rank has one.
        Costs one allreduce when all is well."""
        if not self.allreduce_sum(1 if problem else 0):
            return []
        mine = json.dumps(error_entry(self.rank, self.host, "agreement", problem)) \
            if problem else ""
        return [json.loads(t) for t in self.allgather_texts(mine) if t]

    # ---------------------------------------------------------------- clocks
    def netcheck(self, message: int = NET_MESSAGE,
                 seconds: float = NET_SECONDS) -> Optional[Dict[str, object]]:
        """The network's ceiling per node, measured by MPI between the node leaders before the
        first iteration (--netcheck; docs/measurement.md, "The network's ceiling"): each
        pairing (leader i sends to i + s and receives from i - s, for s = 1, -1 and the
        job's half) exchanges messages for `seconds`, every leader told by one agreement when
        to stop and how large the next messages are.  What counts is when each message has
        arrived (a send completes once the data is in the socket's buffer, not on the wire):
        a node whose own link is fast receives fast from a peer whose link is fast.  On rank
        0: {"message_bytes" (the largest timed), "seconds", "shifts", "nodes": [{"in": {s:
        MB/s}, "bytes": {s: its messages' size}}, ...]} in node order; None elsewhere and
        with one node."""
        if self.leaders == self.MPI.COMM_NULL or self.nnodes < 2:
            return None
        MPI, comm = self.MPI, self.leaders
        size, me = comm.Get_size(), comm.Get_rank()
        send, recv = bytearray(message), bytearray(message)
        go, gview = bytearray(8), memoryview(bytearray(8))
        shifts = sorted({1, size - 1, size // 2})
        mine: Dict[str, Dict[str, float]] = {"in": {}, "bytes": {}}
        started = clock()
        sview, rview = memoryview(send), memoryview(recv)
        for s in shifts:
            dest, src = (me + s) % size, (me - s) % size
            ins: List[float] = []
            t_shift = clock()
            # each sender's messages grow (4x) while its receiver takes them in under 50 ms:
            # a fast link is timed on messages long enough to time, whatever a slow one does
            # elsewhere; every leader learns every receiver's time from the agreement, so a
            # receiver grows what it expects as its sender grows what it sends
            out_n = in_n = min(NET_FIRST, message)
            while True:
                # a small message, then the message: the receiver times the message from the
                # small one's arrival (one source's messages match in order), so a sender
                # that began late (it heard the last agreement later, through a slow link's
                # full queue) is not taken for a slow link of its own
                reqs = [comm.Irecv([gview, MPI.BYTE], source=src, tag=TAG_NET),
                        comm.Irecv([rview[:in_n], MPI.BYTE], source=src, tag=TAG_NET),
                        comm.Isend([go, MPI.BYTE], dest=dest, tag=TAG_NET),
                        comm.Isend([sview[:out_n], MPI.BYTE], dest=dest, tag=TAG_NET)]
                done = [0.0] * len(reqs)
                while not all(done):  # spun, not napped: a nap would be counted as transfer
                    for k, req in enumerate(reqs):
                        if not done[k] and req.Test():
                            done[k] = clock()
                    self.check()
                ins.append(done[1] - done[0])
                # one agreement: whether the time is up, and each leader's receive time
                said = array("q", [0] * (size + 1))
                said[0] = 1 if clock() - t_shift >= seconds else 0
                said[1 + me] = int((done[1] - done[0]) * 1e6)
                agreed = array("q", [0] * (size + 1))
                self.wait(comm.Iallreduce([said, MPI.INT64_T], [agreed, MPI.INT64_T],
                                          op=MPI.MAX))
                if agreed[0]:
                    break
                if agreed[1 + dest] < 50000 and out_n < message:  # too short to time well
                    out_n = min(out_n * 4, message)
                if agreed[1 + me] < 50000 and in_n < message:  # my sender grows alike
                    in_n, ins = min(in_n * 4, message), []
            # the median message's time: one slow message (a retransmit) does not decide
            mid = sorted(ins)[len(ins) // 2]
            mine["in"][str(s)] = in_n / mid / 1e6 if mid > 0 else float("nan")
            mine["bytes"][str(s)] = in_n
        texts = self.gather_texts(json.dumps(mine), comm)
        if texts is None:
            return None
        nodes = [json.loads(t) for t in texts]
        return {"message_bytes": max(max(n["bytes"].values()) for n in nodes),
                "seconds": round(clock() - started, 3), "shifts": shifts, "nodes": nodes}

    def clock_offsets(self) -> Optional[np.ndarray]:
        """Each node's monotonic-clock offset to rank 0's (run/clocks.py): on rank 0; None
        elsewhere (ranks that lead no node take no part, and load nothing for it)."""
        if self.leaders == self.MPI.COMM_NULL:
            return None
        from mpiwrite.run.clocks import offsets

        return offsets(self, TAG_CLOCK)

    # ---------------------------------------------------------------- write-phase aborts
    # A rank that must stop everyone's writing (an I/O error, a signal) tells rank 0; rank 0
    # tells every other rank once, so an abort costs O(ranks) messages even when every rank is
    # signalled at the same moment.  Unlike a failure report, this ends the write phase in
    # order: every rank still takes part in the gathers that follow.
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
        msg = array("q", [self.rank])
        for peer in range(1, self.size):
            self._abort_sends.append(self.comm.Isend(msg, dest=peer, tag=TAG_ABORT))

    def raise_abort(self) -> None:
        """Ask every rank to stop writing now."""
        if self.rank == 0:
            self._forward()
        elif not self._sent_to_root:
            self._sent_to_root = True
            msg = array("q", [self.rank])
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
        mine = array("q", [int(self._sent_to_root), int(self._forwarded), *extra])
        sums = array("q", bytes(8 * len(mine)))
        self.wait(self.comm.Iallreduce([mine, self.MPI.INT64_T], [sums, self.MPI.INT64_T],
                                       op=self.MPI.SUM))
        expect = int(sums[0]) if self.rank == 0 else int(sums[1])
        req = self._abort_req
        if expect == 0:
            if not req.Test():
                req.Cancel()
            req.Wait()
        else:
            self.wait(req)
            for _ in range(expect - 1):
                self.receive_any(self._abort_buf, TAG_ABORT)
        self.waitall(self._abort_sends)
        self._abort_sends = []
        self._abort_req = None
        return [int(x) for x in sums[2:]]

    def receive_any(self, buf, tag: int, poll: float = 0.001) -> int:
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
            self.check()
            time.sleep(poll)

    # ---------------------------------------------------------------- progress (progress.py)
    # A rank's counters go to its node's leader (node_comm), a node's report from its leader
    # to rank 0 (leaders).  Both ends may be a thread of their own (MPI_THREAD_MULTIPLE):
    # matched probes, and no check() here, so a thread never takes a failure report that the
    # main thread must see.
    @property
    def threads_ok(self) -> bool:
        """Whether another thread may make MPI calls (mpi4py asks for THREAD_MULTIPLE)."""
        return self.MPI.Query_thread() == self.MPI.THREAD_MULTIPLE

    def node_ranks(self) -> List[int]:
        """The world ranks of this node's ranks, in node order (no message: group maps)."""
        return list(self.MPI.Group.Translate_ranks(
            self.node_comm.Get_group(), list(range(self.local_size)), self.comm.Get_group()))

    def send_progress(self, data: bytes, up: bool) -> None:
        """A progress message to this node's leader, or (`up`: a leader) to rank 0."""
        comm = self.leaders if up else self.node_comm
        self._progress_sends = [r for r in self._progress_sends if not r.Test()]
        self._progress_sends.append(comm.Isend([data, self.MPI.BYTE], dest=0, tag=TAG_PROGRESS))

    def progress_sent(self) -> bool:
        """Whether every progress message this rank sent has left."""
        self._progress_sends = [r for r in self._progress_sends if not r.Test()]
        return not self._progress_sends

    def take_progress(self, up: bool) -> Optional[bytes]:
        """One progress message waiting from this node's ranks (or, `up`, from the leaders)."""
        comm = self.leaders if up else self.node_comm
        status = self.MPI.Status()
        msg = comm.Improbe(source=self.MPI.ANY_SOURCE, tag=TAG_PROGRESS, status=status)
        if msg is None:
            return None
        data = bytearray(status.Get_count(self.MPI.BYTE))
        msg.Recv([data, self.MPI.BYTE])
        return bytes(data)


def abort_world(MPI, what: str) -> None:
    """End the job when not even a Team could be made: one line, then MPI_Abort."""
    rank = MPI.COMM_WORLD.Get_rank()
    sys.stderr.write(printable(f"mpiwrite: run failed: rank {rank} {what}") + "\n")
    sys.stderr.flush()
    time.sleep(ABORT_DRAIN_SECONDS)
    MPI.COMM_WORLD.Abort(1)


def decode_report(data: bytes, source: int) -> Dict:
    """A failure report from the wire; a garbled one still names its sender."""
    try:
        report = json.loads(data.decode("utf-8", "surrogateescape"))
        if isinstance(report, dict):
            report.setdefault("rank", source)
            return report
    except ValueError:
        pass
    entry = error_entry(source, "?", "?", "unreadable failure report")
    del entry["iteration"]  # not in the report: rank 0 records its own (guard.end_job)
    return entry


def _split_texts(flat: bytes, counts: Sequence[int]) -> List[str]:
    out, at = [], 0
    for c in counts:
        c = int(c)
        out.append(bytes(flat[at:at + c]).decode("utf-8", "surrogateescape"))
        at += c
    return out
