"""One run across all ranks: the steps every rank takes, inside one guard.

Data flows one way: config -> every rank writes (writer.py) -> typed gathers to rank 0
(parallel.py) -> rows into figures (rows.py, summary.py) -> rank 0's ledger (ledger.py) -> the
record (records.py) and screen (console.py).  This module holds no MPI calls of its own: every
message goes through `parallel.Team`.  Who owns what, and how a failure travels:
docs/architecture.md.
"""

from __future__ import annotations

import errno
import functools
import json
import os
import sys
import time
from array import array
from typing import List, NamedTuple, Optional, Sequence

from mpiwrite import structs
from mpiwrite.engines import base as engines
from mpiwrite.engines import latency
from mpiwrite.engines.base import COLLECTIVE, DROP_CACHE, FILES, ReadPlan, StreamResult
from mpiwrite.errors import Interrupted, PeerFailed, error_entry, raise_agreed, why
from mpiwrite.run import layout, prepare, rows, waits
from mpiwrite.run.config import RunConfig, differing_options
from mpiwrite.run.observe import NodeWatch
from mpiwrite.run.parallel import Team
from mpiwrite.run.process import (
    WITH_AN_ERROR,
    Signals,
    Watchdog,
    clock,
    parse_inject,
    seconds_since_exec,
)
from mpiwrite.run.progress import Progress
from mpiwrite.text import clean, printable
from mpiwrite.vocab import pattern
from mpiwrite.vocab.status import RunStatus


class Segment(NamedTuple):
    """Another rank's data, to read back: the rank, file, offset, bytes, inode, folder."""
    source: int
    path: str
    offset: int
    nbytes: int
    ino: int
    dir_fd: Optional[int]
    refused: str
    offsets: Optional[Sequence[int]] = None  # the blocks' offsets (--pattern), None: in order


class Run:
    """The steps of a run as every rank takes them; rank 0 also keeps the ledger."""

    def __init__(self, cfg: Optional[RunConfig], argv: List[str], team: Team, signals: Signals,
                 screen: Optional[dict] = None, notes: Sequence[str] = (), settings=None):
        self.cfg, self.argv, self.team, self.signals = cfg, argv, team, signals
        self.given_notes = list(notes)  # rank 0's record gets them (a study's settings)
        self.screen = dict(screen or {})  # console.configure's options, for rank 0
        self.rank = team.rank
        # MPIWRITE_INJECT=RANK:PHASE[:SECONDS] raises an unexpected error on RANK when it
        # enters a phase starting with PHASE, SECONDS after (tests of the guard at every
        # phase; docs/architecture.md)
        self._inject = parse_inject(os.environ.get("MPIWRITE_INJECT", ""))
        self.phase = "start-up"
        self.ledger = prepare.NullLedger()  # rank 0's becomes a ledger.Ledger in setup
        # the data files this rank creates, and their removal (None: this rank's input was bad)
        self.files = layout.RankFiles(cfg, "", self.rank, team.size) if cfg is not None else None
        self.run_id = ""
        self.read_shift = 0
        self.rbuf = None
        # what the client and the CPUs did, per phase (and a study's settings after it)
        self.watch = NodeWatch(team, cfg, settings)
        self.finished_writing = False
        self.waiting_in = ""  # what this rank's stream waits in for the others (run/stuck.py)
        self.iteration_now = -1
        self.stop_reason: Optional[BaseException] = None
        self.progress: Optional[Progress] = None  # the timed phase's (run/stuck.py reads it)

    @property
    def phase(self) -> str:
        return self._phase

    @phase.setter
    def phase(self, value: str) -> None:
        self._phase = value
        if self._inject and self._inject[0] == self.rank and value.startswith(self._inject[1]):
            time.sleep(self._inject[2])  # a test changes the world meanwhile
            raise RuntimeError(f"fault injected by MPIWRITE_INJECT in {value!r}")

    # ------------------------------------------------------------------ before any data
    def agree_on_input(self, problem: str) -> None:
        """Problems found before MPI (bad options on some rank) and settings that differ."""
        team = self.team
        self.phase = "checking input"
        raise_agreed(team.agree(problem), team.size)
        mine = self.cfg.to_json()
        root = team.bcast_text(mine)  # rank 0's
        diff = differing_options(json.loads(root), json.loads(mine))
        raise_agreed(team.agree(f"settings differ from rank 0's: {', '.join(diff)}"
                                if diff else ""), team.size)
        if self.cfg.verify_shift and self.cfg.verify_shift % team.size == 0:
            raise_agreed([error_entry(0, team.host, "checking input",
                                      f"--verify-shift: {self.cfg.verify_shift} is a multiple "
                                      f"of the {team.size} ranks, so every rank would read its "
                                      "own data")], team.size)

    def setup(self) -> None:
        """Every rank's set-up, in steps that each return what the next one needs; each
        problem found is one agreement (exit 2 on every rank)."""
        team, cfg = self.team, self.cfg
        self.phase = "set-up"
        watch_s = cfg.watchdog_seconds()
        if watch_s:  # with --timeout, no wait for other ranks lasts longer than this
            team.stall_seconds = watch_s + max(team.grace, 0.1 * watch_s)
        lines = team.library_version().splitlines()
        mpi_library = clean(lines[0] if lines else "unknown")
        # bcast_text sends rank 0's text: what the other ranks pass is not read; the run's
        # key is worked out there too (hashlib on rank 0 only: start-up, docs/scaling.md)
        run_id = layout.new_run_id() if self.rank == 0 else ""
        text = team.bcast_text(f"{run_id} {pattern.run_key(run_id)} {team.host}"
                               if run_id else "")
        self.run_id, key, self.root_host = text.split(" ", 2)
        self.files.run_id, self.key = self.run_id, int(key)
        team.root_host = self.root_host
        # numpy where it is used (leaders: the pattern; small blocks: latency folds), now
        problem = prepare.load_numpy(team.is_leader or latency.uses_numpy(cfg.block_size))
        # others' pattern bodies come from their node's leader (_share_bodies)
        self.buf, self.rbuf, problem = prepare.buffers(cfg, self.key, self.rank,
                                                       fill=team.is_leader) \
            if not problem else (None, None, problem)
        facts = prepare.node_facts(cfg, mpi_library, team.host) \
            if team.is_leader and not problem else None
        self.watch.node_fs = (facts or {}).get("fs") or {}
        self.watch.node_client = (facts or {}).get("client") or {}
        raise_agreed(team.agree(problem), team.size)
        nodes, spaces = prepare.gather_nodes(team, cfg, facts, self.run_id)
        probed, probed_at = prepare.probe_target(cfg, self.files, self.run_id, nodes) \
            if self.rank == 0 else (None, None)
        node_rows = team.gather_rows([float(team.node), float(team.local_rank)])
        self.ledger = prepare.ledger(self.rank, cfg, self.argv, self.run_id, team.size, nodes,
                                     spaces, node_rows, mpi_library, self.screen,
                                     self.given_notes)
        if team.is_leader:  # the node's keeper learns its ranks (run/keeper.py)
            self.files.node_ranks, self.files.node_pids = team.node_ranks(), team.node_pids
            self.files.host = team.host
        problem = prepare.target(cfg, self.files, self.run_id, self.ledger, spaces, probed) \
            if self.ledger.keeps_record else ""
        raise_agreed(team.agree(problem), team.size)
        if team.is_leader and self.rank != 0:  # rank 0's is held since before the record
            self.files.take_lock(team.node)  # none: `clean` finds no lock, proves nothing
        # every rank must take the same branch at the layout gather: rank 0's client
        self.watch.use(team.bcast_text(self.watch.run_client(self.ledger.keys["fstype"])
                                       if self.ledger.keeps_record else ""))
        if cfg.read:
            # default: the ranks per node, so that (with ranks placed by node) every rank reads
            # a file written on another node, as IOR's -C with -Q
            per_node = int(team.allreduce_max(team.local_size))
            self.read_shift = cfg.read_shift if cfg.read_shift is not None else per_node
            self.ledger.check_read_shift(self.read_shift)
        self._share_bodies()
        self.ledger.show_header()
        self.files.open_target()  # TARGET exists now (rank 0's preflight): every rank holds it
        self.ledger.extra["startup_seconds"] = team.allreduce_max(seconds_since_exec())
        prepare.settle(probed_at)  # rank 0: the probe's write is not charged to the stream
        team.barrier()
        self.origin = clock()
        # rank 0's wall clock at the common timeline's zero: the record's times as dates
        # (`mpiwrite timeline`); the other ranks' NullLedger drops it
        self.ledger.extra["origin_unix"] = time.time()

    def _share_bodies(self) -> None:
        """The pattern from each node's leader (only leaders load numpy, docs/scaling.md);
        with --verify also the body of the rank whose data this one checks (self.expect)."""
        team, cfg, bs = self.team, self.cfg, self.cfg.block_size
        into = {} if team.is_leader else {self.rank: self.buf}
        shift = self.read_shift if cfg.read else cfg.verify_shift
        self.source = (self.rank + shift) % team.size if cfg.verify else -1
        if self.source not in (-1, self.rank):
            into[self.source] = bytearray(bs)
        team.node_bodies(list(into), lambda r: pattern.body(bs, self.key, r), into, bs)
        self.expect = into.get(self.source) if self.source != self.rank else bytes(self.buf)

    # ------------------------------------------------------------------ one iteration
    def iteration(self, it: int) -> RunStatus:
        """One iteration on every rank; the run status it leads to (COMPLETE: go on).

        Its messages, in the order every rank makes them (each is collective: a rank that
        skipped one would hang the others): the clock ping-pong of the leaders; with
        --layout shared, rank 0's create (bcast); the write phase (barrier, progress to rank
        0, the agreed outcome); with --read, the read phase (allgather of sizes, then the
        same); with --verify, its allgather and barrier, then one allreduce of mismatches;
        after a failure, the error entries (gather); the rank rows (gather), each rank's
        wait channels (gather, run/waits.py), the samples
        (gatherv), with --read the read samples (gatherv); the node watch (counters from the
        leaders, iteration 0 the layouts, the latency histograms); the clean-up barrier;
        rank 0's answer (bcast)."""
        team, cfg = self.team, self.cfg
        self.iteration_now = it
        self.phase = f"iteration {it}: clock offsets"
        offsets = team.clock_offsets()
        plan = layout.plan(cfg, self.run_id, team.size, self.rank, it)
        # the folder the file goes in, checked again (device, inode) before every iteration:
        # renamed or swapped for a symlink since the start, it is refused, never written
        # through (nobody may rename in TARGET's parent, or own TARGET)
        folder, refused = self._folder(plan.path)
        plan = structs.replace(plan, dir_fd=folder.fd if folder is not None else None)
        if cfg.stonewall is not None:
            plan = structs.replace(plan, wear_out=self._wear_out())
        plan = structs.replace(plan, waiting=self._waiting)
        shared_failed = False
        if cfg.layout == "shared":  # collective: every rank, refused or not
            plan, shared_failed = self._create_shared(plan, it, folder, refused)
        pattern.HEADER.pack_into(self.buf, 0, pattern.MAGIC, self.rank, self.key, 0, it)
        before = self.watch.before()
        write = functools.partial(self._write, plan, folder, refused, shared_failed)
        res, any_failed, any_signal, window = self._timed_phase(it, "write", write, plan.path)
        node_cpu, client_delta = self.watch.after(before)
        self.ledger.keys.update({f"mpiio.{k}": v for k, v in res.info.items()})
        self.ledger.keys.update(res.facts)  # what the engine knows of itself (MPI-IO's kind)
        if cfg.stonewall is not None:
            self._stonewall_figures(it, res)
        read, read_source = None, -1
        if cfg.read and not any_failed and not any_signal:
            read, read_source, r_failed, r_signal = self._read_phase(it, res, plan)
            any_failed, any_signal = any_failed or r_failed, any_signal or r_signal
        verify = None
        bad_verify = 0
        if read is not None and cfg.verify:  # the read phase checked the pattern as it went
            bad_verify = team.allreduce_sum(1 if read.mismatches else 0)
        elif cfg.verify and not any_failed and not any_signal:
            self.phase = f"iteration {it}: verify"
            verify = self.verify(it, res)
            # one agreed answer (also a barrier: nobody removes a file another rank may still
            # be reading); the gather below is collective, so every rank must decide alike
            bad_verify = team.allreduce_sum(1 if (verify.mismatches or verify.error_text) else 0)
        self.phase = f"iteration {it}: gather"
        if any_failed or any_signal or bad_verify:
            entry = rows.rank_error(it, self.rank, team.host, res, verify, read)
            texts = team.gather_texts(json.dumps(entry) if entry else "")  # None but on 0
            self.ledger.add_errors([json.loads(t) for t in texts or () if t], offsets,
                                   self.origin)
        row = rows.pack_row(res, verify, bool(self.signals.received), node_cpu, read,
                            read_source)
        gathered = team.gather_rows(row)
        sampler = getattr(self, "sampler", None)
        waited = team.gather_texts(sampler.text() if sampler is not None else "")
        self.sampler = None
        if waited is not None:
            self.ledger.add_waits(it, waited)
        samples = team.gatherv(array("d", [x for pair in res.samples for x in pair]))
        read_samples = team.gatherv(array("d", [x for pair in read.samples for x in pair]
                                          if read is not None else [])) if cfg.read else None
        self.watch.gather(it, client_delta, plan.path, plan.path in self.files.created, res,
                          self.ledger)
        self.phase = f"iteration {it}: clean-up"
        self.files.after_iteration(plan.path, team.barrier)
        self.phase = f"iteration {it}: record"  # rank 0's; the others wait for its answer
        status = self.ledger.add_iteration(
            it, gathered, samples, offsets, self.origin, bool(self.signals.received),
            window=tuple(t - self.origin for t in window), read_samples=read_samples)
        return RunStatus(team.bcast_text(status.value))

    @property
    def engine(self) -> engines.Engine:
        """The run's I/O engine (engines/): asked for its flags, never compared by name."""
        return engines.get(self.cfg.engine)

    def _stream(self, stream, plan, buf, poll):
        """An engine's write or read stream; a collective engine (MPI-IO) also gets the
        team, whose communicator it opens its file on."""
        if self.engine.has(COLLECTIVE):
            return stream(plan, buf, poll, team=self.team)
        return stream(plan, buf, poll)

    def _write(self, plan, folder, refused: str, shared_failed: bool, poll) -> StreamResult:
        """This rank's write stream (a refused folder or a failed shared create: no write)."""
        if refused:
            res = StreamResult(path=plan.path)
            res.fail("open", OSError(errno.ESTALE, refused))
            return res
        if shared_failed:
            return StreamResult(path=plan.path, stopped_by="abort")
        self.sampler = waits.Sampler()  # where the stream's time goes (run/waits.py)
        self.sampler.start()
        try:
            res = self._stream(self.engine.write, plan, self.buf, poll)
        finally:
            self.sampler.stop()
            self.sampler.close()
        if (res.error_phase == "open" and res.error_errno == errno.ENOENT and plan.create
                and folder is not None):
            # a concurrent run sharing TARGET removed it (empty) just now: make it again
            folder, problem = self.files.folder_for(plan.path)
            if folder is not None:
                res = self._stream(self.engine.write,
                                   structs.replace(plan, dir_fd=folder.fd), self.buf, poll)
        if res.created:
            self.files.add_created(plan.path, folder)
        return res

    def _wear_out(self):
        """--stonewall's agreement (writeloop.wear_out): every rank's blocks at the
        stonewall; the most any rank wrote is what each goes on to (unless a rank failed or
        was stopped).  Made once per stream: a retried open asks again, and is answered from
        the first agreement."""
        agreed: list = []

        def agree(blocks: int, ok: bool) -> int:
            if not agreed:
                hi, neg_lo, bad = self.team.allreduce([blocks, -blocks, 0 if ok else 1])
                agreed.append((int(hi), bool(bad)))
            hi, bad = agreed[0]
            return blocks if bad else hi

        return agree

    def _stonewall_figures(self, it: int, res: StreamResult) -> None:
        """Rank 0 keeps each rank's bytes at the stonewall, when it fell and when the rank's
        writes ended (after its wear-out), and names the stonewall's and the wear-out's rates."""
        mine = f"{res.stonewall_bytes} {res.stonewall_seconds!r} " \
               f"{res.t_write_end - res.t_write_start!r}"
        texts = self.team.gather_texts(mine)
        if texts is None:
            return
        rows = [t.split() for t in texts]
        at = [int(r[0]) for r in rows]
        when = [float(r[1]) for r in rows]
        ended = [float(r[2]) for r in rows]
        fell = max((w for w in when if w == w), default=float("nan"))
        longest = max((e for e in ended if e == e), default=float("nan"))
        figures = {"iteration": it, "stonewall_seconds": self.cfg.stonewall,
                   "bytes_at_stonewall": at, "seconds_at_stonewall": when,
                   "write_seconds": ended, "min_bytes_at_stonewall": min(at),
                   "max_bytes_at_stonewall": max(at),
                   "stonewall_MB_per_s": sum(b for b in at if b > 0) / fell / 1e6
                   if fell > 0 else float("nan"),
                   "wear_out_seconds": longest - fell if fell == fell else float("nan")}
        self.ledger.extra.setdefault("stonewall", []).append(figures)
        self.ledger.note(
            f"iteration {it}: stonewall at {fell:.3g}s: {figures['stonewall_MB_per_s']:.1f} "
            f"MB/s; ranks had written {min(at)} to {max(at)} bytes; the wear-out took "
            f"{figures['wear_out_seconds']:.3g}s more")

    def _waiting(self, what: str, nbytes: int, done: bool) -> None:
        """The engine waits for the other ranks in `what` ('' once through); with `done`, its
        own part is written, and the view counts this rank done (a rank that never comes is
        then the one the time-out names)."""
        self.waiting_in = what
        if done and what and self.progress is not None:
            self.progress.arrived(nbytes)

    def _poll(self, progress: Progress, now: float, nbytes: int) -> bool:
        """The stream's poll in a timed phase: True stops it (a signal, a peer's failure, an
        abort); else progress, once per interval."""
        if self.signals.received:
            self.team.raise_abort()
            return True
        try:
            self.team.check()
        except (PeerFailed, Interrupted) as exc:
            self.stop_reason = exc  # raised once the stream has closed its file
            return True
        if self.team.poll_abort():
            return True
        progress.poll(now, nbytes)
        return False

    def _timed_phase(self, it: int, name: str, stream, path: str):
        """One timed phase on every rank: a barrier, the stream (which polls for aborts,
        failures, signals and shows progress), 'done' to rank 0 within the watchdog, and the
        agreed outcome.  Returns (result, any rank failed, any rank signalled, rank 0's
        (start, end) bracket of the phase on its own clock)."""
        team, cfg = self.team, self.cfg
        progress = self.progress = Progress(team, cfg.progress_interval, cfg.stall_seconds(),
                                            self.ledger.watching(it, name, self.origin))
        self.phase = f"iteration {it}: {name}"
        team.arm_abort()
        window_start = clock()  # rank 0's bracket of the phase (the clock check)
        team.barrier()
        watch_s = cfg.watchdog_seconds()
        grace = max(team.grace, 0.1 * (watch_s or 0))
        self.finished_writing = False
        self.waiting_in = ""
        watchdog = Watchdog(team, watch_s + grace if watch_s else None,
                            lambda: _stuck().message(self, path, watch_s, name),
                            lambda: _stuck().end(self, watch_s))
        progress.start()
        try:
            res = stream(functools.partial(self._poll, progress))
            if self.stop_reason is not None:
                raise self.stop_reason
            self.finished_writing = True
            if res.failed:
                team.raise_abort()
            progress.finish(res.bytes, progress.t0 + watch_s if watch_s else float("inf"),
                            lambda missing, stuck: self._timed_out(missing, it, watch_s, stuck))
            self.phase = f"iteration {it}: agree" if name == "write" else \
                f"iteration {it}: {name} agree"
            any_failed, any_signal = team.disarm_abort(
                extra=[1 if res.failed else 0, 1 if self.signals.received else 0])
            # after the agreement every rank has left its stream, close and all: a rank's
            # 'done' can come before its close ends (MPI-IO counts a rank done once its part
            # is written, and a collective close may return on rank 0 first)
            window_end = clock()
        finally:
            watchdog.cancel()
            progress.close()
        return res, bool(any_failed), bool(any_signal), (window_start, window_end)

    def _read_phase(self, it: int, res: StreamResult, plan):
        """Every rank reads the segment `read_shift` ranks away (by default on the next node),
        after an optional drop of its own written pages."""
        cfg = self.cfg
        self.phase = f"iteration {it}: prepare read"
        if cfg.drop_cache and self.engine.has(DROP_CACHE):
            from mpiwrite.engines.posix import drop_cache

            why = drop_cache(plan.path, plan.offset, res.bytes, plan.dir_fd) if res.bytes \
                else ""
            if why:
                self.ledger.warn(f"--drop-cache: {plan.path}: {why}")
        seg = self._segment(it, res, self.read_shift)
        rplan = ReadPlan(path=seg.path, offset=seg.offset, nbytes=seg.nbytes, offsets=seg.offsets,
                         block_size=cfg.block_size, sample_interval=cfg.sample_interval,
                         direct=cfg.direct, check=(self.key, seg.source, it) if cfg.verify
                         else None, dir_fd=seg.dir_fd, expect_ino=seg.ino, refuse=seg.refused,
                         expect=self.expect if seg.source == self.source else None)
        read, failed, signalled, _ = self._timed_phase(
            it, "read", lambda poll: self._stream(self.engine.read, rplan, self.rbuf, poll),
            rplan.path)
        return read, seg.source, failed, signalled

    def _segment(self, it: int, res: StreamResult, shift: int) -> Segment:
        """The segment `shift` ranks away as its writer left it (one allgather of every
        rank's bytes and inode), and its folder, held open or refused."""
        team, cfg = self.team, self.cfg
        written = team.allgather_texts(f"{res.bytes} {res.ino}")
        source = (self.rank + shift) % team.size
        nbytes, ino = (int(x) for x in written[source].split())
        path = layout.data_path(cfg, self.run_id, team.size, source, it)
        folder, refused = self._folder(path, make=False)
        return Segment(source, path, source * cfg.size if cfg.layout == "shared" else 0, nbytes,
                       ino, folder.fd if folder is not None else None, refused,
                       layout.block_offsets(cfg, team.size, source))

    def _folder(self, path: str, make: bool = True):
        """(open folder of a data file, '') or (None, why it is refused); (None, '') for an
        engine that touches no file (the null engine)."""
        if not self.engine.has(FILES):
            return None, ""
        return self.files.folder_for(path, make)

    def _create_shared(self, plan, it: int, folder, refused: str = ""):
        """Rank 0 creates the shared file (O_EXCL); every rank learns its device and inode,
        so a file swapped for a symlink or another file between create and open is refused."""
        team = self.team
        text = team.bcast_text(self._create(plan, folder, refused) if self.rank == 0 else "")
        ident, err = text.split("\n", 1)
        if err:
            self.ledger.add_errors([error_entry(0, team.host, "create", err, iteration=it,
                                                path=plan.path)])
            return plan, True
        dev, ino = (int(x) for x in ident.split(":"))
        # another node's mount has a device number of its own (FUSE, NFS): the inode alone
        return structs.replace(plan, expect_inode=(dev if team.node == 0 else -1, ino)), \
            False

    def _create(self, plan, folder, refused: str) -> str:
        """Rank 0: the shared file made (O_EXCL); 'device:inode\n' or '\nwhy not'."""
        if refused:
            return f"\n{refused}"
        if not self.engine.has(FILES):
            return "0:0\n"  # no file: nothing to make, nothing to find again
        try:
            dev, ino = self.engine.create_shared(plan.path, plan.dir_fd)
        except OSError as exc:
            return f"\n{why(exc)}"
        self.files.add_created(plan.path, folder)
        return f"{dev}:{ino}\n"

    def _timed_out(self, missing: List[int], it: int, watch_s: float, stuck=()) -> None:
        """Rank 0: name the ranks that never finished, keep the record, end the job."""
        if not self.cfg.keep:
            for r in range(self.team.size):
                self.files.unlink(layout.data_path(self.cfg, self.run_id, self.team.size, r, it))
        # the subdirectories, and TARGET when this run made it (an empty TARGET was left)
        self.files.release_lock()
        self.files.remove_run_folders(self.ledger.warn)
        message = self.ledger.timed_out(missing, it, watch_s, stuck)
        sys.stderr.write(printable(message) + "\n")
        self.team.abort(1)

    def verify(self, it: int, res: StreamResult):
        """Read back (own data, or the rank --verify-shift away) after a barrier."""
        seg = self._segment(it, res, self.cfg.verify_shift)
        self.team.barrier()
        return self.engine.verify(seg.path, seg.offset, seg.nbytes, self.cfg.block_size, self.key,
                              seg.source, it, dir_fd=seg.dir_fd, expect_ino=seg.ino,
                              refuse=seg.refused, offsets=seg.offsets,
                              expect=self.expect if seg.source == self.source else None)

    # ------------------------------------------------------------------ the whole run
    def execute(self) -> int:
        self.setup()
        if self.cfg.netcheck is not False and self.team.nnodes > 1:
            self.phase = "network check"  # the node leaders only; the others go on
            got = self.team.netcheck()
            if got is not None:
                self.ledger.add_netcheck(got)
        final = RunStatus.COMPLETE
        for it in range(self.cfg.iterations):
            if self.team.allreduce_max(self.signals.received):
                final = RunStatus.INTERRUPTED
                break
            final = self.iteration(it)
            if final is not RunStatus.COMPLETE:
                break
            if it + 1 < self.cfg.iterations and self.cfg.delay:
                self.phase = f"iteration {it}: delay"
                end = clock() + self.cfg.delay
                while clock() < end and not self.signals.received:
                    time.sleep(min(0.05, max(0.0, end - clock())))
        code = final.exit_code
        self.phase = "finish"
        if final is RunStatus.INTERRUPTED:
            code = Signals.exit_code_of(int(self.team.allreduce_max(self.signals.received)))
        team = self.team
        self.files.release_lock()  # with the run's other files, before its folders go
        team.barrier()
        # the data is gone, the status known: a signal must not cut rank 0's final record
        # short (a stalled rename once left a finished run `running` beside a complete .tmp)
        team.await_final_record()
        if self.ledger.keeps_record:  # rank 0: the run's folders are its own
            self.files.remove_run_folders(self.ledger.warn)
        code = self.ledger.end(final, code)
        code, late = (int(x) for x in team.allreduce([code, self.signals.received]))
        team.signal_patience = None  # a team that runs again (a study) starts with the grace
        if (late and final is not RunStatus.INTERRUPTED and self.ledger.keeps_record
                and not (final is RunStatus.FAILED and late in WITH_AN_ERROR)):
            sys.stderr.write(f"mpiwrite: signal {late} arrived after the run had ended; its "
                             f"record is final ({final})\n")
        return code


def _stuck():
    """run/stuck.py, loaded only when a watchdog fires (start-up metadata: docs/scaling.md)."""
    from mpiwrite.run import stuck

    return stuck
