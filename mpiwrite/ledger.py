"""Rank 0's account of a run: what was measured so far, the record, the JSON summary.

Only rank 0 has one.  The runner feeds it iterations, errors and warnings; it writes the HDF5
record (after every iteration and at the end) and the final summary on screen and as JSON.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any, Dict, List, Optional

import numpy as np

from mpiwrite import __version__, summary
from mpiwrite.config import RunConfig
from mpiwrite.console import Console

ENV_PREFIXES = ("SLURM_", "MPIWRITE_", "PMI_", "OMPI_", "HYDRA_")


def jsonable(obj):
    """NaN and numpy scalars made JSON-safe (NaN becomes null)."""
    if isinstance(obj, dict):
        return {k: jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, (np.floating, float)):
        return float(obj) if np.isfinite(obj) else None
    if isinstance(obj, np.integer):
        return int(obj)
    return obj


class RunLog:
    def __init__(self, cfg: RunConfig, argv: List[str], run_id: str, nranks: int,
                 nodes: List[Dict[str, Any]], keys: Dict[str, str], mpi_library: str,
                 console: Console):
        self.cfg, self.argv, self.run_id, self.nranks = cfg, argv, run_id, nranks
        self.nodes, self.keys, self.mpi_library, self.console = nodes, keys, mpi_library, console
        self.hosts = [n["host"] for n in nodes]
        self.start_time = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        self.errors: List[Dict[str, Any]] = []
        self.warnings: List[str] = []
        self.rank_rows: List[np.ndarray] = []
        self.iter_rows: List[np.void] = []
        self.sample_rows: List[np.ndarray] = []
        self.node_clock: Optional[np.ndarray] = None
        self.extra: Dict[str, Any] = {}  # startup_seconds, mkdir_seconds, stripe, bytes_to_ram
        self.record_file: Optional[str] = None
        self.record_error = ""

    def add_iteration(self, ranks: np.ndarray, samples: np.ndarray, row: np.void,
                      node_clock: np.ndarray) -> None:
        self.rank_rows.append(ranks)
        self.sample_rows.append(samples)
        self.iter_rows.append(row)
        self.node_clock = node_clock

    def warn(self, text: str) -> None:
        if text not in self.warnings:
            self.warnings.append(text)
            self.console.warn(text)

    def attrs(self, status: str, error: str = "") -> Dict[str, Any]:
        return {
            "run_id": self.run_id, "status": status, "error": error,
            "command_line": " ".join(self.argv), "start_time": self.start_time,
            "end_time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "params": self.cfg.to_json(), "tags": json.dumps(self.cfg.tags),
            "keys": json.dumps(self.keys), "warnings": json.dumps(self.warnings),
            "ranks": self.nranks, "nodes": len(self.nodes), "mpi_library": self.mpi_library,
            "host": self.hosts[0], "mpiwrite_version": __version__,
            "mkdir_seconds": self.extra.get("mkdir_seconds", 0.0),
            "startup_seconds": self.extra.get("startup_seconds", float("nan")),
            "bytes_to_ram": self.extra.get("bytes_to_ram", float("nan")),
            "stripe": json.dumps(self.extra.get("stripe")),
            "environment": json.dumps({k: v for k, v in os.environ.items()
                                       if k.startswith(ENV_PREFIXES)}),
        }

    def build(self, status: str, error: str = ""):
        from mpiwrite import records

        return records.RunRecord(
            attrs=self.attrs(status, error),
            ranks=np.concatenate(self.rank_rows) if self.rank_rows else
            np.zeros(0, summary.RANK_DTYPE),
            iterations=np.array(self.iter_rows, dtype=summary.ITER_DTYPE),
            samples=np.concatenate(self.sample_rows) if self.sample_rows else
            np.zeros(0, summary.SAMPLE_DTYPE),
            nodes=self.nodes, node_clock=self.node_clock, errors=self.errors)

    def save(self, status: str, error: str = "") -> None:
        """Write the record atomically; a failure is remembered, not raised."""
        if self.record_file is None:
            return
        from mpiwrite import records

        try:
            records.write(self.build(status, error), self.record_file)
        except OSError as exc:
            self.record_error = f"record not saved: {self.record_file}: {exc.strerror or exc}"

    def finish(self, status: str, error: str = "") -> Dict[str, Any]:
        """The final record, the summary on screen, and the JSON summary."""
        self.save(status, error)
        rec = self.build(status, error)
        stats = summary.run_stats(rec.ranks, rec.iterations, self.hosts)
        if len(rec.iterations):
            self.console.summary(stats)
        saved = self.record_file if (self.record_file and not self.record_error) else None
        if saved:
            self.console.line(f"record {saved}")
        out = {"run_id": self.run_id, "status": status, "error": error or None,
               "record": saved, "record_error": self.record_error or None,
               "ranks": self.nranks, "nodes": len(self.nodes), "hosts": self.hosts,
               "keys": self.keys, "tags": self.cfg.tags, "params": json.loads(self.cfg.to_json()),
               "iterations": [{k: row[k].item() for k in summary.ITER_DTYPE.names}
                              for row in rec.iterations],
               "summary": stats, "warnings": self.warnings, "errors": self.errors,
               "startup_seconds": self.extra.get("startup_seconds"),
               "mkdir_seconds": self.extra.get("mkdir_seconds")}
        if self.cfg.json_path:
            text = json.dumps(jsonable(out), indent=1, allow_nan=False)
            if self.cfg.json_path == "-":
                sys.stdout.write(text + "\n")
                sys.stdout.flush()
            else:
                with open(self.cfg.json_path, "w") as fh:
                    fh.write(text + "\n")
        return out

    def failure_message(self, final: str) -> str:
        """One line naming the first failing rank, its host, path and error."""
        if final == "complete":
            return ""
        if final == "interrupted":
            return "mpiwrite: run interrupted by a signal; partial results recorded"
        errs = sorted(self.errors, key=lambda e: (e.get("phase") == "verify",
                                                  e.get("t", 0.0) or 0.0))
        if not errs:
            return f"mpiwrite: run {final}"
        e = errs[0]
        more = f"; {len(errs) - 1} more rank error(s) in the record" if len(errs) > 1 else ""
        errno_text = f" (errno {e['errno']})" if e.get("errno") else ""
        return (f"mpiwrite: run failed: rank {e['rank']} on {e['host']}: {e['phase']} "
                f"{e['path']}: {e['message']}{errno_text}{more}")
