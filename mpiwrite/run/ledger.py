"""Rank 0's ledger of a run: hosts, progress, timeouts, the page-cache guard, the figures of
every iteration, the HDF5 record and the JSON summary.

Only rank 0 has one (the other ranks hold a prepare.NullLedger, which takes the same calls
and keeps nothing), and it makes no MPI call: the runner hands it gathered tables and it
answers with statuses and messages.  The record is rewritten after iterations (status
"running") and at the end; a failure to write it is remembered and reported, never raised
mid-run.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from typing import Any, Dict, List, Optional

import numpy as np

from mpiwrite import __version__, files
from mpiwrite.errors import ConfigError, error_entry
from mpiwrite.facts import mpiinfo
from mpiwrite.formats import summary
from mpiwrite.run import layout, rows
from mpiwrite.run.config import RunConfig
from mpiwrite.run.console import Console
from mpiwrite.text import printable, world_ranks_of
from mpiwrite.units import format_size
from mpiwrite.vocab.status import RunStatus, Status, iteration_run_status

ENV_PREFIXES = ("SLURM_", "MPIWRITE_", "PMI_", "OMPI_", "HYDRA_", "MPIR_CVAR_", "FI_PROVIDER")
CPU_SATURATED = 0.9  # a node's CPUs busier than this during the write phase get a note
CLOCK_SLACK = 0.005  # seconds beyond the measured offset uncertainty before a clock is odd
SAVE_EVERY = 1.0  # seconds: the least time between two records saved after iterations
# what the record says where the run JSON says null (Ledger.shared)
RECORD_DEFAULTS = {"error": "", "first_done_note": "", "startup_seconds": float("nan"),
                   "mkdir_seconds": 0.0}


class Ledger:
    keeps_record = True  # the other ranks' NullLedger: False

    def __init__(self, cfg: RunConfig, argv: List[str], run_id: str, nranks: int,
                 nodes: List[Dict[str, Any]], node_of: np.ndarray, keys: Dict[str, str],
                 mpi_library: str, console: Console):
        self.cfg, self.argv, self.run_id, self.nranks = cfg, argv, run_id, nranks
        self.nodes, self.keys, self.mpi_library, self.console = nodes, keys, mpi_library, console
        self.node_of = node_of
        self.hosts = [str(n.get("host")) for n in nodes]
        self.ram = np.array([_number(n.get("mem_total_bytes")) for n in nodes], dtype=float)
        self.start_time = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        self.errors: List[Dict[str, Any]] = []
        self.warnings: List[str] = []
        self.notes: List[str] = []
        self.not_in_force: List[str] = []  # in a timed phase (run/observe.not_in_force)
        self.processes: List[Dict[str, Any]] = []  # per node: what identifies the run there
        self.client_counters: List[Dict[str, Any]] = []  # per node and iteration
        self.latency: List[Dict[str, Any]] = []  # per node and iteration: histograms
        self._pending_latency: Dict[int, Any] = {}
        self.layouts: List[Dict[str, Any]] = []  # per rank (Lustre)
        self.rank_rows: List[np.ndarray] = []
        self.iter_rows: List[np.void] = []
        self.sample_rows: List[np.ndarray] = []
        self.node_clock: Optional[np.ndarray] = None
        self.extra: Dict[str, Any] = {}  # startup_seconds, mkdir_seconds, stripe, bytes_to_ram
        self.record_file: Optional[str] = None
        self.results: Optional[files.Folder] = None  # --results, opened once
        self.json_folder: Optional[files.Folder] = None  # --json's folder, opened once
        self.record_error = ""
        self._saved_at, self._save_seconds = float("-inf"), 0.0  # save_running's pace
        self._saved_iterations = 0  # in the last record saved: the first is saved at once
        self.finished = False

    def host_of(self, rank: int) -> str:
        return self.hosts[int(self.node_of[rank])]

    # ------------------------------------------------------------------ before data
    def check_destinations(self) -> None:
        """--json and --results, checked before TARGET sees a single byte (ConfigError)."""
        from mpiwrite.formats.contract import check_json_destination

        self.json_folder = check_json_destination(self.cfg.json_path)
        self._open_live_stream()
        if self.cfg.results is None:
            return
        from mpiwrite.records.h5 import open_results, record_path

        try:
            self.results = open_results(self.cfg.results)
        except OSError as exc:
            raise ConfigError(f"--results: cannot write records in {self.cfg.results!r}: "
                              f"{exc.strerror or exc}") from None
        self.record_file = os.path.abspath(record_path(self.cfg.results, self.run_id))

    def _open_live_stream(self) -> None:
        """--live-jsonl PATH: a new file (O_EXCL, never through a planted link), made before
        any data; `-` is standard output (the console then writes to standard error)."""
        self.live_fd: Optional[int] = None
        path = self.cfg.live_jsonl
        if not path or path == "-":
            return
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            self.live_fd = os.open(path, flags, 0o644)
        except OSError as exc:
            raise ConfigError(f"--live-jsonl: cannot create {path!r}: "
                              f"{files.about(path, exc)}") from None

    def live_json(self, obj: Dict[str, Any]) -> None:
        """One line of --live-jsonl: written whole and at once (a reader never sees half a
        line); a stream that cannot be written is said once and given up, the run goes on."""
        if not self.cfg.live_jsonl or getattr(self, "live_broken", False):
            return
        line = (json.dumps(obj, allow_nan=False) + "\n").encode()
        try:
            if getattr(self, "live_fd", None) is not None:
                view = memoryview(line)
                while view:
                    view = view[os.write(self.live_fd, view):]
            else:
                sys.stdout.write(line.decode())
                sys.stdout.flush()
        except (OSError, ValueError) as exc:
            self.live_broken = True
            self.warn(f"--live-jsonl {self.cfg.live_jsonl}: stopped streaming: "
                      f"{getattr(exc, 'strerror', None) or exc}")

    def _results_moved(self) -> None:
        """The results folder's path no longer leads to the folder opened at the start
        (renamed, or swapped for a symlink by someone who may rename in its parent): the
        record stays in the folder opened at the start; say so once, and where it is now."""
        if self.results is None or self.results.leads_here() or self.results.gone():
            return
        where = self.results.now_at()
        if where:
            self.record_file = os.path.join(where, os.path.basename(self.record_file))
        self.warn(f"--results {self.cfg.results} was renamed or replaced during the run; the "
                  f"record stays in the folder opened at the start"
                  f"{', now ' + where if where else ''}, written there by descriptor, never "
                  f"through the new path")

    def show_header(self) -> None:
        self.console.header(self.run_id, self.nranks, self.hosts, self.keys,
                            self.nodes[0]["fs"])

    def check_read_shift(self, read_shift: int) -> None:
        """--read: note the shift, and warn when some ranks read a file of their own node."""
        n = len(self.node_of)
        source = (np.arange(n) + read_shift) % n
        same = np.flatnonzero(self.node_of[source] == self.node_of)
        self.extra["read_shift"] = read_shift
        cfg = self.cfg
        if len(same) and not cfg.direct:  # O_DIRECT reads bypass the client's page cache
            own = np.flatnonzero(source == np.arange(n))
            what = "its own file" if len(own) == n else "a file written on its own node"
            self.warn(f"--read: with read shift {read_shift}, {len(same)} of {n} "
                      f"rank(s) read {what}: the client's page cache may serve those "
                      f"reads (use more nodes, --read-shift"
                      f"{'' if cfg.drop_cache else ', or --drop-cache'})")
    def _results_made_again(self) -> None:
        """The results folder was removed since it was opened (a concurrent run that made it
        and then failed removes it while empty): make it again and open it, as the start did,
        rather than write into a removed folder."""
        if self.results is None or not self.results.gone():
            return
        from mpiwrite.records.h5 import open_results

        self.results.close()
        self.results = open_results(self.cfg.results)
        self.warn(f"--results {self.cfg.results} was removed during the run (by another run "
                  f"that made it and failed?); made again")

    # ------------------------------------------------------------------ during the run
    def watching(self, it: int, name: str, origin: float):
        """Rank 0's side of a timed phase's progress (run/watch.py); the other ranks: None."""
        from mpiwrite.run import watch

        return watch.Watch(self, it, name, origin)

    def timed_out(self, missing: List[int], it: int, watch_s: float, stuck=()) -> str:
        """Name the ranks that never finished (and what the stalled ones wait on: in D state,
        the filesystem client holds them), keep the record; returns the message."""
        from mpiwrite.run.watch import held_text, state_text

        paths = {r: layout.data_path(self.cfg, self.run_id, self.nranks, r, it)
                 for r in missing}
        waits = {int(s[0]): (str(s[2]), str(s[3])) for s in stuck}
        for r in missing:
            extra = f"; state {state_text(*waits[r])}" if r in waits else ""
            self.errors.append(error_entry(r, self.host_of(r), "timeout",
                                           f"did not finish within --timeout {watch_s:g}s"
                                           f"{extra}", iteration=it, path=paths[r]))
        first = missing[0]
        msg = (f"mpiwrite: run timed out: rank{'s' * (len(missing) > 1)} "
               f"{world_ranks_of(missing)} did not finish within {watch_s:g}s (--timeout); "
               f"rank {first} on {self.host_of(first)} writing {paths[first]}")
        msg += held_text(self, [s for s in stuck if int(s[0]) in paths])
        self.finish(RunStatus.TIMEOUT, msg)
        return msg

    def add_errors(self, entries: List[Dict[str, Any]], offsets: Optional[np.ndarray] = None,
                   origin: float = 0.0) -> None:
        """Errors gathered from the ranks, their times moved onto the common timeline (with
        the clock offsets of the iteration)."""
        for e in entries:
            t = e.get("t")
            if isinstance(t, (int, float)) and offsets is not None:
                node = int(self.node_of[int(e["rank"])])
                e["t"] = float(t) + float(offsets[node, 0]) - origin
            self.errors.append(e)

    def add_iteration(self, it: int, rank_rows: np.ndarray, samples, offsets: np.ndarray,
                      origin: float, signalled: bool, window=None,
                      read_samples=None) -> RunStatus:
        """One iteration's gathered rows into figures, screen and record; returns the run
        status it leads to (COMPLETE: the run goes on).  `samples`, `read_samples`: the
        gathered (flat, counts) of the phases' samples.

        `window`: rank 0's (start, end) of the write phase on the common timeline; a rank
        whose times fall outside has a clock of its own, and the iteration is excluded."""
        ranks = rows.rank_table(it, rank_rows, self.node_of, offsets, origin)
        flat, counts = samples
        srows = rows.sample_table(it, flat, counts, self.node_of, offsets, origin)
        if read_samples is not None:
            rflat, rcounts = read_samples
            srows = np.concatenate([srows, rows.sample_table(
                it, rflat, rcounts, self.node_of, offsets, origin, summary.PHASE_READ)])
        code = rows.iteration_status(ranks, signalled)
        if window is not None and code == Status.OK:
            odd = rows.clock_outliers(ranks, window, CLOCK_SLACK)
            if len(odd):
                code = Status.CLOCK
                self.clock_warning(it, ranks, odd, window)
        durable = self.cfg.direct or self.cfg.fsync_every > 0
        row = summary.iteration_summary(ranks, srows, code,
                                        first_done="durable" if durable else "unknown")
        summary.read_summary(ranks, srows, row)
        self._latency_figures(it, row, ranks)
        self.figure_notes(it, row, ranks, code)
        if not np.isfinite(row["first_done_MB_per_s"]) and code == Status.OK \
                and "first_done_note" not in self.extra:
            self.extra["first_done_note"] = summary.first_done_note(
                self.cfg.direct, self.cfg.fsync_every, self.cfg.block_size,
                int(ranks["bytes"].max()) if len(ranks) else 0, self.cfg.fsync)
        self.rank_rows.append(ranks)
        self.sample_rows.append(srows)
        self.iter_rows.append(row)
        self.node_clock = offsets
        self.page_cache_guard(ranks)
        self.console.iteration(row, code.label, self.extra.get("first_done_note", ""))
        if self.cfg.steady:
            self._steady(it, ranks, srows)
        if np.isfinite(row["read_aggregate_MB_per_s"]):
            self.console.line(
                f"  read: aggregate {row['read_aggregate_MB_per_s']:.1f} MB/s, first-done "
                f"{row['read_first_done_MB_per_s']:.1f}, per rank min "
                f"{row['read_rank_min_MB_per_s']:.1f} mean {row['read_rank_mean_MB_per_s']:.1f}"
                f" max {row['read_rank_max_MB_per_s']:.1f} MB/s, tail "
                f"{row['read_tail_seconds']:.2f}s (shift {self.extra.get('read_shift')})")
        checked = int(ranks["verify_bytes"].sum())
        if self.cfg.verify and checked and not row["verify_mismatches"]:
            blocks = int(np.sum(-(-ranks["verify_bytes"] // self.cfg.block_size)))
            self.console.line(f"  verify: {blocks} block{'s' * (blocks != 1)} "
                              f"({format_size(checked)}) checked at "
                              f"{row['verify_MB_per_s']:.1f} MB/s, none mismatched")
        self.save_running()
        return iteration_run_status(code)

    def add_latency(self, it: int, write: np.ndarray, fsync: np.ndarray) -> None:
        """Per-node histograms of one iteration (kept for the record, summed for the row)."""
        from mpiwrite.engines import latency

        self._pending_latency[it] = (write.sum(axis=0), fsync.sum(axis=0))
        for node in range(len(write)):
            if write[node].any() or fsync[node].any():
                self.latency.append({"iteration": it, "node": node, "histograms": {
                    "buckets_per_octave": latency.SUB, "first_octave_ns_log2": latency.LOW,
                    "write": latency.sparse(write[node]),
                    "fsync": latency.sparse(fsync[node])}})

    def _latency_figures(self, it: int, row, ranks: np.ndarray) -> None:
        """The iteration's latency percentiles from the summed histograms; maxima exact from
        the ranks' own."""
        from mpiwrite.engines import latency

        hists = self._pending_latency.pop(it, None)
        if hists is None:
            return
        wmax = ranks["write_latency_max_seconds"]
        fmax = ranks["fsync_latency_max_seconds"]
        w = latency.summary(hists[0], float(np.nanmax(wmax)) if np.isfinite(wmax).any()
                            else float("nan"), "write_latency")
        f = latency.summary(hists[1], float(np.nanmax(fmax)) if np.isfinite(fmax).any()
                            else float("nan"), "fsync_latency")
        for k, v in {**w, **f}.items():
            if k in row.dtype.names:
                row[k] = v

    def figure_notes(self, it: int, row, ranks: np.ndarray, code: Status = Status.OK) -> None:
        """IOR's figure where it differs from ours by more than 1%; saturated client CPUs
        (not for an iteration that failed, nor on a memory filesystem, where writing is the
        CPU's work and a busy CPU says nothing about the client)."""
        ours, ior = float(row["aggregate_MB_per_s"]), float(row["aggregate_with_open_MB_per_s"])
        # after a --ramp ours counts after it and IOR's the whole: no comparison of the two
        if np.isfinite(ours) and np.isfinite(ior) and ours > 0 and abs(ior / ours - 1) > 0.01 \
                and not row["ramp_bytes"]:
            self.note(f"iteration {it}: with the open time included (IOR's figure) the "
                      f"aggregate is {ior:.1f} MB/s ({(ior / ours - 1) * 100:+.1f}%)")
        busy = ranks["node_cpu_busy"]
        from mpiwrite.clients import registry  # a memory filesystem: the CPU copies the data

        in_memory = registry.for_mount(self.keys.get("fstype")).in_memory
        if code == Status.OK and not in_memory and np.isfinite(busy).any() \
                and np.nanmax(busy) > CPU_SATURATED:
            hot = sorted({self.host_of(int(r)) for r in ranks["rank"][busy > CPU_SATURATED]})
            self.note(f"iteration {it}: client CPU {np.nanmax(busy) * 100:.0f}% busy on "
                      f"{', '.join(hot[:4])}{' and more' if len(hot) > 4 else ''}: the figure "
                      f"may be bounded by the clients' CPU (checksums, compression, more "
                      f"ranks than cores?)")

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)
            self.console.line(f"  note: {text}")

    def clock_warning(self, it: int, ranks: np.ndarray, odd: np.ndarray, window) -> None:
        lo, hi = window
        t = np.concatenate([ranks["t_write_start"][odd], ranks["t_close_end"][odd]])
        t = t[np.isfinite(t)]
        off = float(np.max(np.maximum(lo - t, t - hi))) if t.size else float("nan")
        who = [f"{int(ranks['rank'][i])} on {self.host_of(int(ranks['rank'][i]))}"
               for i in odd[:4]]
        more = f" and {len(odd) - 4} more" if len(odd) > 4 else ""
        self.warn(f"clock: iteration {it} excluded from statistics: rank(s) {', '.join(who)}"
                  f"{more} report times up to {off:.3g}s outside the iteration's wall-clock "
                  f"window: their monotonic clock disagrees with their node leader's (a time "
                  f"namespace or container per rank?)")

    def page_cache_guard(self, ranks: np.ndarray) -> None:
        per_node = np.bincount(ranks["node"], weights=ranks["bytes"], minlength=len(self.ram))
        with np.errstate(divide="ignore", invalid="ignore"):
            ratios = np.where(self.ram > 0, per_node / np.where(self.ram > 0, self.ram, 1),
                              np.nan)
        ratio = float(np.nanmax(ratios)) if np.isfinite(ratios).any() else float("nan")
        self.extra["bytes_to_ram"] = ratio
        if not self.cfg.fsync and not self.cfg.direct:
            shown = f"{ratio:.2f}x" if ratio == ratio else "an unknown share of"
            self.warn(f"neither fsync nor O_DIRECT bounds this measurement and a node "
                      f"wrote {shown} its RAM: the page cache may inflate the figure "
                      f"(write over 2x RAM, or use --fsync / --direct)")

    def warn(self, text: str) -> None:
        if text not in self.warnings:
            self.warnings.append(text)
            self.console.warn(text)

    def add_netcheck(self, got) -> None:
        """--netcheck's rates per node (run/parallel.Team.netcheck), kept for the record and
        said in one line: each node's ceiling is the fastest it received over the pairings."""
        self.extra["netcheck"] = got
        parts = []
        for host, node in zip(self.hosts, got["nodes"]):
            best = max([v for v in node["in"].values() if v == v], default=float("nan"))
            parts.append(f"{host} {best:.1f}")
        self.console.line(f"  network check ({got['seconds']:g}s, MPI between the node "
                          f"leaders): " + ", ".join(parts) + " MB/s")

    def add_waits(self, it: int, texts) -> None:
        """Each rank's wait-channel counts of the iteration's write stream (run/waits.py), in
        rank order; a rank that sampled nothing (no /proc wchan, a refused folder) is null."""
        ranks = []
        for text in texts:
            try:
                got = json.loads(text) if text else None
            except ValueError:
                got = None
            ranks.append(got if isinstance(got, dict) and got.get("n") else None)
        self.extra.setdefault("waits", []).append({"iteration": it, "ranks": ranks})

    def _steady(self, it: int, ranks, srows) -> None:
        """--steady: whether and when the iteration's aggregate rate became steady, kept for
        the record and said under the iteration's line (formats/steady.py)."""
        from mpiwrite.formats import steady

        writes = srows[srows["phase"] == summary.PHASE_WRITE] if len(srows) else srows
        found = steady.detect(steady.parse(self.cfg.steady), ranks, writes,
                              self.cfg.sample_interval)
        found["iteration"] = it
        self.extra.setdefault("steady", []).append(found)
        self.console.line("  " + steady.text(found))

    # ------------------------------------------------------------------ the record
    def shared(self, status: RunStatus, error: str = "",
               end_time: Optional[str] = None) -> Dict[str, Any]:
        """The keys the record's attributes and the run JSON share, each written once here
        (None: not known; the record has its own defaults, RECORD_DEFAULTS)."""
        return {
            "start_time": self.start_time,
            "end_time": end_time or time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "command_line": " ".join(self.argv), "run_id": self.run_id,
            "status": str(status), "error": error or None,
            "ranks": self.nranks, "nodes": len(self.nodes), "keys": self.keys,
            "tags": self.cfg.tags, "params": json.loads(self.cfg.to_json()),
            "warnings": self.warnings, "first_done_note": self.extra.get("first_done_note"),
            "notes": self.notes, "startup_seconds": self.extra.get("startup_seconds"),
            "mkdir_seconds": self.extra.get("mkdir_seconds"),
        }

    def attrs(self, status: RunStatus, error: str = "") -> Dict[str, Any]:
        """The record's attributes: the shared keys (dicts and lists as JSON text) and the
        record's own."""
        out = {k: json.dumps(v) if isinstance(v, (dict, list)) else
               (RECORD_DEFAULTS[k] if v is None else v)
               for k, v in self.shared(status, error).items()}
        out.update({
            "mpi_library": self.mpi_library,
            "mpi_family": mpiinfo.family(self.mpi_library), "launcher": mpiinfo.launcher(),
            "host": self.hosts[0], "mpiwrite_version": __version__,
            "bytes_to_ram": self.extra.get("bytes_to_ram", float("nan")),
            "origin_unix": float(self.extra.get("origin_unix", float("nan"))),
            "stripe": json.dumps(self.extra.get("stripe")),
            "stonewall": json.dumps(self.extra.get("stonewall")),
            "steady": json.dumps(self.extra.get("steady")),
            "waits": json.dumps(self.extra.get("waits")),
            "netcheck": json.dumps(self.extra.get("netcheck")),
            "read_shift": int(self.extra.get("read_shift", -1)),
            "stripe_request": json.dumps(self.extra.get("stripe_request")),
            "processes": json.dumps(self.processes),
            "environment": json.dumps({k: v for k, v in os.environ.items()
                                       if k.startswith(ENV_PREFIXES)}),
        })
        return out

    def build(self, status: RunStatus, error: str = ""):
        from mpiwrite.records.model import RunRecord

        return RunRecord(
            attrs=self.attrs(status, error),
            ranks=np.concatenate(self.rank_rows) if self.rank_rows else
            np.zeros(0, summary.RANK_DTYPE),
            iterations=np.array(self.iter_rows, dtype=summary.ITER_DTYPE),
            samples=np.concatenate(self.sample_rows) if self.sample_rows else
            np.zeros(0, summary.SAMPLE_DTYPE),
            nodes=self.nodes, node_clock=self.node_clock, errors=self.errors,
            client_counters=self.client_counters, layouts=self.layouts,
            latency=self.latency)

    def save(self, status: RunStatus, error: str = "") -> None:
        """Write the record atomically; a failure is remembered, not raised.  Only the last
        save's outcome counts: a complete final record after a failed intermediate one is
        a saved record (with a warning), not "record not saved"."""
        if self.record_file is None:
            return
        from mpiwrite.records import h5

        self._results_moved()
        began = time.monotonic()
        try:
            for again in (False, True):
                try:
                    self._results_made_again()
                    h5.write(self.build(status, error), self.record_file, self.results)
                    break
                except FileNotFoundError:
                    if again or self.results is None or not self.results.gone():
                        raise
        except (OSError, RuntimeError, ValueError) as exc:
            # h5py reports a full disk as RuntimeError; whatever it is, the run goes on and
            # the end says the record is missing.
            reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
            self.record_error = f"record not saved: {self.record_file}: {reason}"
        else:
            if self.record_error:
                self.warn(f"an earlier save of the record {self.record_file} failed "
                          f"({self.record_error.rsplit(': ', 1)[-1]}); a later one worked")
            self.record_error = ""
            self._saved_iterations = len(self.iter_rows)
        self._saved_at, self._save_seconds = time.monotonic(), time.monotonic() - began

    def save_running(self) -> None:
        """The record after an iteration, so that a run killed for good leaves what it had
        measured: the first iteration at once, then at most every SAVE_EVERY seconds and never
        more than a tenth of the run's time (each save rewrites the whole record: at every
        iteration, -i 1000 was quadratic).  The set-up and the final save are always made
        (save())."""
        if not self._saved_iterations or \
                time.monotonic() - self._saved_at >= max(SAVE_EVERY, 10 * self._save_seconds):
            self.save(RunStatus.RUNNING)

    def finish(self, status: RunStatus, error: str = "") -> Dict[str, Any]:
        """The final record, the summary on screen, and the JSON summary (once)."""
        if self.finished:
            return {}
        self.finished = True
        self.save(status, error)
        rec = self.build(status, error)
        stats = summary.run_stats(rec.ranks, rec.iterations, self.hosts)
        if len(rec.iterations):
            good = rec.iterations["iteration"][rec.iterations["status"] == Status.OK]
            self.console.summary(stats, int(good.max()) if len(good) else None,
                                 self.extra.get("first_done_note") or "")
            self.console.ior_summary(rec.iterations)
        saved = self.record_file if (self.record_file and not self.record_error) else None
        if saved:
            self.console.line(f"record {saved}")
        from mpiwrite.formats import contract

        values = self.shared(status, error, rec.attrs["end_time"])
        values.update({"record": saved, "record_error": self.record_error or None,
                       "hosts": self.hosts,
                       "iterations": [{k: row[k].item() for k in summary.ITER_DTYPE.names}
                                      for row in rec.iterations],
                       "summary": contract.run_summary(stats, rec.iterations),
                       "errors": self.errors})
        out = contract.header("run")
        out.update((k, values[k]) for k in contract.RUN_ORDER)
        if self.cfg.json_path:
            text = contract.dumps(out)
            if self.cfg.json_path == "-":
                sys.stdout.write(text + "\n")
                sys.stdout.flush()
            else:
                try:  # into the folder checked at the start; never through a planted name
                    files.replace_file(os.path.basename(self.cfg.json_path),
                                       (text + "\n").encode(), dir_fd=self.json_folder.fd)
                except OSError as exc:
                    self.record_error = (self.record_error + "; " if self.record_error
                                         else "") + (f"--json not written by rank 0 on "
                                                     f"{self.hosts[0]}: "
                                                     + files.about(self.cfg.json_path, exc))
        return out

    def end(self, final: RunStatus, code: int) -> int:
        """The run's end on rank 0: the final record and JSON, the failure (if any) in one
        line; returns `code`, or 1 when the record could not be saved."""
        final = RunStatus.UNSETTLED if final is RunStatus.COMPLETE and self.not_in_force else final
        message = self.failure_message(final, code)
        self.finish(final, message)
        if message:
            sys.stderr.write(printable(message) + "\n")
        if self.record_error:
            sys.stderr.write(printable(f"mpiwrite: {self.record_error}") + "\n")
            code = code or 1
        return code

    def failure_message(self, final: RunStatus, code: int = 0) -> str:
        """One line naming the first failing rank, its host, path and error (or the signal
        that interrupted the run, from its exit code 128+N)."""
        if final == RunStatus.COMPLETE:
            return ""
        if final == RunStatus.INTERRUPTED:
            name = signal.Signals(code - 128).name if code - 128 in signal.valid_signals() \
                else "a signal"
            return f"mpiwrite: run interrupted by {name}; partial results recorded"
        errs = sorted((e for e in self.errors if e.get("phase") != "stall"),  # watch.py's
                      key=lambda e: (e.get("phase") == "verify", _number(e.get("t"), 0.0)))
        if not errs:
            return f"mpiwrite: run {final}"
        e = errs[0]
        more = ""
        if len(errs) > 1:  # the others by host: a dead server fails ranks on several nodes
            others = sorted({str(x.get("host")) for x in errs[1:]} - {str(e.get("host"))})
            where = (f" (also on {', '.join(others[:4])}"
                     f"{f' and {len(others) - 4} more hosts' if len(others) > 4 else ''})"
                     if others else "")
            more = f"; {len(errs) - 1} more rank error(s){where} in the record"
        errno_text = f" (errno {e['errno']})" if e.get("errno") else ""
        return (f"mpiwrite: run failed: rank {e['rank']} on {e['host']}: {e['phase']} "
                f"{e['path']}: {e['message']}{errno_text}{more}")


def _number(value, default=0.0) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError, OverflowError):
        return default
    return v if np.isfinite(v) else default

