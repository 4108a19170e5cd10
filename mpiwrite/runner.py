"""One run across all ranks: setup, iterations, reductions, the record and the exit code.

Data flows one way: config -> every rank writes (writer.py) -> typed reductions to rank 0
(parallel.py) -> figures (summary.py) -> record (records.py) and screen (console.py).
Only this module imports mpi4py, and only when a run starts.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import sys
import time
from typing import List, Optional

import numpy as np

from mpiwrite import layout, nodeinfo, pattern, summary
from mpiwrite.config import RunConfig
from mpiwrite.console import Console
from mpiwrite.errors import ConfigError
from mpiwrite.parallel import ProgressBoard, Team, Watchdog, seconds_since_exec, world_ranks_of
from mpiwrite.runlog import RunLog
from mpiwrite.text import clean
from mpiwrite.writer import StreamResult, clock, verify_segment, write_stream

ROW_FIELDS = ("bytes", "blocks", "fsyncs", "t_open_start", "t_write_start", "t_write_end",
              "t_fsync_end", "t_close_end", "status", "errno", "stopped_by_time",
              "verify_bytes", "verify_seconds", "verify_mismatches")
EXIT_FOR_SIGNAL = {signal.SIGINT: 130, signal.SIGTERM: 143}
STATUS_EXIT = {"complete": 0, "failed": 1, "timeout": 1, "interrupted": 1}


class Signals:
    """SIGINT/SIGTERM set a flag the write loop looks at a few times a second."""

    def __init__(self):
        self.received = 0
        for s in EXIT_FOR_SIGNAL:
            signal.signal(s, self._handle)

    def _handle(self, signum, _frame):
        self.received = self.received or signum


def new_run_id() -> str:
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + secrets.token_hex(3)


class Run:
    def __init__(self, cfg: RunConfig, argv: List[str], MPI):
        self.cfg, self.argv, self.MPI = cfg, argv, MPI
        self.signals = Signals()
        self.team = Team(MPI)
        self.rank = self.team.rank
        self.console = Console(cfg) if self.rank == 0 else None
        self.log: Optional[RunLog] = None  # rank 0's account of the run
        self.created_target = False

    # ------------------------------------------------------------------ setup
    def setup(self) -> None:
        team, cfg = self.team, self.cfg
        # Open MPI's version string ends with a NUL, which an HDF5 string cannot hold.
        lines = self.MPI.Get_library_version().replace("\x00", "").strip().splitlines()
        self.mpi_library = clean(lines[0] if lines else "unknown")
        facts_text = ""
        if team.is_leader:
            facts_text = json.dumps(nodeinfo.collect(cfg.target, cfg.sysroot, self.mpi_library,
                                                     host=team.host))
        self.nodes = None
        if team.is_leader:
            texts = team.gather_texts(facts_text, team.leaders)
            if texts is not None:
                self.nodes = [json.loads(t) for t in texts]
        node_rows = team.gather_rows(np.array([team.node, team.local_rank], dtype=float))
        message = ""
        if self.rank == 0:
            self.node_of = node_rows[:, 0].astype(np.int64)
            self.run_id = new_run_id()
            log = self.log = RunLog(cfg, self.argv, self.run_id, team.size, self.nodes,
                                    nodeinfo.run_keys(self.nodes), self.mpi_library,
                                    self.console)
            try:
                existed = os.path.isdir(cfg.target)
                layout.preflight(cfg, self.run_id, log.keys["fstype"])
                self.created_target = not existed
                if cfg.results is not None:
                    from mpiwrite.records import probe_writable, record_path

                    try:
                        probe_writable(cfg.results)
                    except OSError as exc:
                        raise ConfigError(f"--results: cannot write records in "
                                          f"{cfg.results!r}: {exc.strerror}") from None
                    log.record_file = os.path.abspath(record_path(cfg.results, self.run_id))
                log.extra["mkdir_seconds"] = layout.make_subdirs(cfg, self.run_id, team.size)
                log.save("running")
                if log.record_error:
                    layout.remove_subdirs(cfg, self.run_id, team.size)
                    raise ConfigError(f"--results: {log.record_error}")
            except ConfigError as exc:
                message = str(exc)
            except OSError as exc:
                message = f"TARGET: cannot create run directories: {exc.strerror}"
            if message and self.created_target:
                try:
                    os.rmdir(cfg.target)
                except OSError:
                    pass
        text = team.bcast_text("" if self.rank else f"{self.run_id}\n{message}")
        self.run_id, message = text.split("\n", 1)
        if message:
            raise ConfigError(message)
        self.key = pattern.run_key(self.run_id)
        self.buf = pattern.make_buffer(cfg.block_size, self.key, self.rank, 0)
        if self.rank == 0:
            ram = [n.get("mem_total_bytes") or 0 for n in self.nodes]
            self.ram = np.array(ram, dtype=float)
            self.console.header(self.run_id, team.size, self.log.hosts, self.log.keys,
                                self.nodes[0]["fs"])
        startup = team.allreduce_max(seconds_since_exec())
        if self.log is not None:
            self.log.extra["startup_seconds"] = startup
        team.barrier()
        self.origin = clock()

    # ------------------------------------------------------------------ one iteration
    def iteration(self, it: int) -> str:
        team, cfg = self.team, self.cfg
        offsets = team.clock_offsets()
        plan = layout.plan(cfg, self.run_id, team.size, self.rank, it)
        setup_err = ""
        if cfg.layout == "shared" and self.rank == 0:
            try:
                os.close(os.open(plan.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
            except OSError as exc:
                setup_err = exc.strerror or str(exc)
        shared_failed = cfg.layout == "shared" and team.allreduce_max(1 if setup_err else 0)
        pattern.HEADER.pack_into(self.buf, 0, pattern.MAGIC, self.rank, self.key, 0, it)
        board = ProgressBoard(team) if self.rank == 0 else None
        total_planned = (cfg.size or 0) * team.size
        state = {"next": 0.0, "t0": 0.0}

        def poll(now: float, nbytes: int) -> bool:
            if self.signals.received:
                team.raise_abort()
                return True
            if team.poll_abort():
                return True
            if cfg.progress_interval and now >= state["next"]:
                state["next"] = now + cfg.progress_interval
                if self.rank:
                    team.send_progress(nbytes, False, now - state["t0"])
                else:
                    board.latest[0] = nbytes
                    self.show_progress(board, now - state["t0"], total_planned)
            return False

        team.arm_abort()
        team.barrier()
        watch_s = cfg.watchdog_seconds()
        grace = max(5.0, 0.1 * (watch_s or 0))
        watchdog = Watchdog(team, watch_s + grace if watch_s else None,
                            lambda: f"rank {self.rank} on {team.host}: the write phase did not end "
                                    f"within --timeout {watch_s:g}s ({plan.path}); ending the job")
        state["t0"] = clock()
        state["next"] = state["t0"] + cfg.progress_interval
        if shared_failed:
            res = StreamResult(path=plan.path, error_phase="create" if setup_err else "",
                               error_text=setup_err, stopped_by="" if setup_err else "abort")
        else:
            res = write_stream(plan, self.buf, poll)
        if res.failed:
            team.raise_abort()
        if self.rank:
            team.send_progress(res.bytes, True, clock() - state["t0"])
            team.finish_progress()
        else:
            board.latest[0], board.done[0] = res.bytes, True
            self.wait_for_ranks(board, state["t0"], watch_s, it, total_planned)
        flags = team.disarm_abort(extra=[1 if res.failed else 0,
                                         1 if self.signals.received else 0])
        any_failed, any_signal = flags
        verify = None
        bad_verify = 0
        if cfg.verify and not any_failed and not any_signal:
            verify = self.verify(it, res)
            # one agreed answer (also a barrier: nobody removes a file another rank may still
            # be reading); the gather below is collective, so every rank must decide alike
            bad_verify = team.allreduce_sum(1 if (verify.mismatches or verify.error_text) else 0)
        if any_failed or any_signal or bad_verify:
            self.collect_errors(it, res, verify)
        row = self.row(res, verify)
        rows = team.gather_rows(row)
        samples = team.gatherv(np.asarray(res.samples, dtype=np.float64).ravel())
        watchdog.cancel()
        if self.rank == 0 and it == 0 and self.log.keys["fstype"] in ("lustre", "mixed"):
            self.log.extra["stripe"] = nodeinfo.stripe_of(plan.path)
        self.cleanup(res, plan.path)
        status = "ok"
        if self.rank == 0:
            status = self.reduce(it, rows, samples, offsets)
        status = team.bcast_text(status if self.rank == 0 else "")
        return status

    def show_progress(self, board: ProgressBoard, elapsed: float, planned: int) -> None:
        board.drain()
        nbytes = float(board.latest.sum())
        frac = nbytes / planned if planned else 0.0
        if self.cfg.time_limit:
            frac = max(frac, min(1.0, elapsed / self.cfg.time_limit))
        self.console.progress(elapsed, nbytes, min(frac, 1.0), int(board.done.sum()),
                              self.team.size)

    def wait_for_ranks(self, board: ProgressBoard, t0: float, watch_s: Optional[float],
                       it: int, planned: int) -> None:
        """Rank 0: collect every rank's 'done', forwarding aborts, within the watchdog."""
        deadline = t0 + watch_s if watch_s else float("inf")
        next_progress = clock() + (self.cfg.progress_interval or float("inf"))
        while True:
            board.drain()
            if board.done.all():
                return
            if self.signals.received:
                self.team.raise_abort()
            self.team.poll_abort()
            now = clock()
            if now >= next_progress:
                self.show_progress(board, now - t0, planned)
                next_progress = now + self.cfg.progress_interval
            if now >= deadline:
                self.timed_out(board.missing(), it, watch_s)
            time.sleep(0.002)

    def timed_out(self, missing: List[int], it: int, watch_s: float) -> None:
        """Rank 0: name the ranks that never finished, keep the record, end the job."""
        paths = {r: layout.data_path(self.cfg, self.run_id, self.team.size, r, it)
                 for r in missing}
        for r in missing:
            self.log.errors.append({"iteration": it, "rank": r, "host": self.host_of(r),
                                "phase": "timeout", "errno": 0, "path": paths[r],
                                "message": f"did not finish within --timeout {watch_s:g}s"})
        first = missing[0]
        msg = (f"mpiwrite: run timed out: rank{'s' * (len(missing) > 1)} "
               f"{world_ranks_of(missing)} did not finish within {watch_s:g}s (--timeout); "
               f"rank {first} on {self.host_of(first)} writing {paths[first]}")
        sys.stderr.write(msg + "\n")
        if not self.cfg.keep:
            for r in range(self.team.size):
                layout.remove(layout.data_path(self.cfg, self.run_id, self.team.size, r, it))
        self.log.finish("timeout", msg)
        sys.stderr.flush()
        sys.stdout.flush()
        self.team.comm.Abort(1)

    def host_of(self, rank: int) -> str:
        return self.log.hosts[int(self.node_of[rank])]

    def verify(self, it: int, res: StreamResult):
        """Read back (own data, or the rank --verify-shift away) after a barrier."""
        team, cfg = self.team, self.cfg
        counts = np.zeros(team.size, dtype=np.int64)
        team.comm.Allgather(np.array([res.bytes], dtype=np.int64), counts)
        source = (self.rank + cfg.verify_shift) % team.size
        path = layout.data_path(cfg, self.run_id, team.size, source, it)
        offset = source * cfg.size if cfg.layout == "shared" else 0
        team.barrier()
        return verify_segment(path, offset, int(counts[source]), cfg.block_size, self.key,
                              source, it)

    def collect_errors(self, it: int, res: StreamResult, verify) -> None:
        mine = ""
        if res.failed:
            mine = json.dumps({"iteration": it, "rank": self.rank, "host": self.team.host,
                               "phase": res.error_phase, "errno": res.error_errno,
                               "path": res.path, "message": res.error_text,
                               "t": res.t_write_end})
        elif verify is not None and (verify.mismatches or verify.error_text):
            first = verify.first
            detail = (f"{verify.mismatches} mismatched block(s); first at offset "
                      f"{first.offset}: expected {first.expected}, found {first.found}"
                      if first else verify.error_text)
            mine = json.dumps({"iteration": it, "rank": self.rank, "host": self.team.host,
                               "phase": "verify", "errno": 0, "path": verify.path,
                               "message": detail, "offset": first.offset if first else -1})
        texts = self.team.gather_texts(mine)
        if texts is not None:
            self.log.errors.extend(json.loads(t) for t in texts if t)

    def row(self, res: StreamResult, verify) -> np.ndarray:
        if res.failed:
            status = summary.FAILED
        elif res.stopped_by == "abort":
            status = summary.INTERRUPTED if self.signals.received else summary.ABORTED
        else:
            status = summary.OK
        values = {
            "bytes": res.bytes, "blocks": res.blocks, "fsyncs": res.fsyncs,
            "t_open_start": res.t_open_start, "t_write_start": res.t_write_start,
            "t_write_end": res.t_write_end, "t_fsync_end": res.t_fsync_end,
            "t_close_end": res.t_close_end, "status": status, "errno": res.error_errno,
            "stopped_by_time": 1 if res.stopped_by == "time" else 0,
            "verify_bytes": verify.bytes if verify else 0,
            "verify_seconds": verify.seconds if verify else np.nan,
            "verify_mismatches": (verify.mismatches + (1 if verify.error_text else 0))
            if verify else 0,
        }
        if status != summary.OK:  # a stream that did not finish has no valid end times
            for k in ("t_fsync_end", "t_close_end"):
                values[k] = np.nan if status == summary.FAILED else values[k]
        return np.array([values[k] for k in ROW_FIELDS], dtype=np.float64)

    def cleanup(self, res: StreamResult, path: str) -> None:
        if self.cfg.keep:
            return
        problem = layout.remove(path) if res.created else None
        if self.cfg.layout == "shared":
            self.team.barrier()
            if self.rank == 0:
                problem = layout.remove(path)
        if problem:
            sys.stderr.write(f"mpiwrite: warning: rank {self.rank} could not remove {problem}\n")

    # ------------------------------------------------------------------ rank 0: reduce
    def reduce(self, it: int, rows: np.ndarray, samples, offsets: np.ndarray) -> str:
        n = self.team.size
        ranks = np.zeros(n, dtype=summary.RANK_DTYPE)
        ranks["iteration"], ranks["rank"], ranks["node"] = it, np.arange(n), self.node_of
        off = offsets[self.node_of, 0] - self.origin
        for i, k in enumerate(ROW_FIELDS):
            col = rows[:, i]
            ranks[k] = col + off if k.startswith("t_") else col
        ranks["clock_offset_seconds"] = offsets[self.node_of, 0]
        ranks["clock_uncertainty_seconds"] = offsets[self.node_of, 1]
        summary.fill_rates(ranks)
        flat, counts = samples
        pairs = flat.reshape(-1, 2)
        srows = np.zeros(len(pairs), dtype=summary.SAMPLE_DTYPE)
        owner = np.repeat(np.arange(n), counts // 2)
        srows["iteration"], srows["rank"] = it, owner
        srows["t"] = pairs[:, 0] + off[owner] if len(pairs) else pairs[:, 0]
        srows["bytes"] = pairs[:, 1]
        if np.any(ranks["status"] == summary.FAILED):
            status, code = "failed", summary.FAILED
        elif np.any(ranks["status"] == summary.INTERRUPTED) or self.signals.received:
            status, code = "interrupted", summary.INTERRUPTED
        elif np.any(ranks["verify_mismatches"] > 0):
            status, code = "failed", summary.FAILED
        else:
            status, code = "ok", summary.OK
        row = summary.iteration_summary(ranks, srows, code)
        self.log.add_iteration(ranks, srows, row, offsets)
        self.page_cache_guard(ranks)
        self.console.iteration(row, status)
        self.log.save("running")
        return status

    def page_cache_guard(self, ranks: np.ndarray) -> None:
        per_node = np.bincount(ranks["node"], weights=ranks["bytes"], minlength=len(self.ram))
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = float(np.nanmax(np.where(self.ram > 0, per_node / self.ram, np.nan)))
        self.log.extra["bytes_to_ram"] = ratio
        if not self.cfg.fsync and not self.cfg.direct:
            self.log.warn(f"neither fsync nor O_DIRECT bounds this measurement and a node "
                          f"wrote {ratio:.2f}x its RAM: the page cache may inflate the figure "
                          f"(write over 2x RAM, or use --fsync / --direct)")

    # ------------------------------------------------------------------ the whole run
    def execute(self) -> int:
        self.setup()
        status = "ok"
        for it in range(self.cfg.iterations):
            if self.team.allreduce_max(self.signals.received):
                status = "interrupted"
                break
            status = self.iteration(it)
            if status != "ok":
                break
            if it + 1 < self.cfg.iterations and self.cfg.delay:
                end = clock() + self.cfg.delay
                while clock() < end and not self.signals.received:
                    time.sleep(min(0.05, max(0.0, end - clock())))
        final = "complete" if status == "ok" else status
        code = STATUS_EXIT.get(final, 1)
        if final == "interrupted":
            signum = int(self.team.allreduce_max(self.signals.received))
            code = EXIT_FOR_SIGNAL.get(signum, 1)
        self.team.barrier()
        if self.rank == 0:
            if not self.cfg.keep:
                layout.remove_subdirs(self.cfg, self.run_id, self.team.size)
                if self.created_target:
                    try:
                        os.rmdir(self.cfg.target)
                    except OSError:
                        pass
            message = self.log.failure_message(final)
            self.log.finish(final, message)
            if message:
                sys.stderr.write(message + "\n")
            if self.log.record_error:
                sys.stderr.write(f"mpiwrite: {self.log.record_error}\n")
                code = code or 1
        code = int(self.team.allreduce_max(code))
        return code


def main(cfg: RunConfig, argv: List[str]) -> int:
    from mpi4py import MPI

    run = Run(cfg, argv, MPI)
    return run.execute()
