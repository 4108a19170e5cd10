"""A run's record in memory (RunRecord): its attributes and tables, as a run builds it and a
reader gives it.  The record's HDF5 form is records/h5.py; docs/record-schema.md."""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Dict, List, Optional

import numpy as np

from mpiwrite.formats.summary import ITER_DTYPE, RANK_DTYPE, SAMPLE_DTYPE


@dataclasses.dataclass
class RunRecord:
    attrs: Dict[str, Any]
    ranks: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, RANK_DTYPE))
    iterations: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, ITER_DTYPE))
    samples: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, SAMPLE_DTYPE))
    nodes: List[Dict[str, Any]] = dataclasses.field(default_factory=list)  # facts per node
    node_clock: Optional[np.ndarray] = None  # (nnodes, 2) offset, uncertainty (last iteration)
    errors: List[Dict[str, Any]] = dataclasses.field(default_factory=list)
    path: str = ""
    # {"iteration", "node", "delta": lustre_counters.counter_delta(...)} per node and iteration
    client_counters: List[Dict[str, Any]] = dataclasses.field(default_factory=list)
    # {"iteration", "rank", "layout": lustre_layout.rank_layout(path)} per rank (where known)
    layouts: List[Dict[str, Any]] = dataclasses.field(default_factory=list)
    # per node and iteration: {"histograms": {"write": {bucket: n}, "fsync": {...}, ...}}
    latency: List[Dict[str, Any]] = dataclasses.field(default_factory=list)

    @property
    def run_id(self) -> str:
        return str(self.attrs.get("run_id", ""))

    @property
    def status(self) -> str:
        return str(self.attrs.get("status", ""))

    def _json(self, name: str, default: Any) -> Any:
        """An attribute holding JSON: parsed already (read() checks it) or JSON text."""
        value = self.attrs.get(name)
        if value is None:
            return default
        if not isinstance(value, (str, bytes)):
            return value
        try:  # an attribute read() does not check (a figure's): malformed is absent
            return json.loads(value)
        except (ValueError, RecursionError):
            return default

    def params(self) -> Dict[str, Any]:
        return self._json("params", {})

    def tags(self) -> Dict[str, str]:
        return self._json("tags", {})

    def processes(self) -> List[Dict[str, Any]]:
        """Per node, the process that identifies the run there: {host, pid, start_ticks,
        boot_id, job?, lock?}; entries of the wrong shape are left out (records from before the
        attribute have none)."""
        out = []
        for p in self._json("processes", []) or []:
            if not isinstance(p, dict):
                continue
            host, pid, start = p.get("host"), p.get("pid"), p.get("start_ticks")
            if not (isinstance(host, str) and type(pid) is int and type(start) is int
                    and 0 < pid < 2**31 and isinstance(p.get("boot_id", ""), str)):
                continue
            one = {"host": host[:256], "pid": pid, "start_ticks": start,
                   "boot_id": str(p.get("boot_id", ""))[:64]}
            job = p.get("job")
            if isinstance(job, dict) and isinstance(job.get("id"), str) \
                    and isinstance(job.get("scheduler"), str):
                one["job"] = {"scheduler": job["scheduler"][:16], "id": job["id"][:64]}
            if isinstance(p.get("lock"), str) and p["lock"].startswith("/"):
                one["lock"] = p["lock"][:4096]  # the lock file of its proof of life
            out.append(one)
        return out

    def keys(self) -> Dict[str, Any]:
        """The run keys; `client`, absent from records written before it, is derived from
        the nodes' facts (their Lustre version and fstype): docs/record-schema.md."""
        keys = self._json("keys", {})
        if isinstance(keys, dict) and "client" not in keys:
            keys = dict(keys)
            from mpiwrite.clients.registry import legacy_client
            from mpiwrite.formats.nodekeys import client_of

            values = {client_of(n) for n in self.nodes} if self.nodes else \
                {legacy_client(keys)}
            keys["client"] = values.pop() if len(values) == 1 else "mixed"
        return keys

    def warnings(self) -> List[str]:
        return self._json("warnings", [])

    def imported(self) -> Dict[str, Any]:
        """For a record imported from another tool's output (importers/base.py): the tool,
        file, sha256, exact/derived/unknown figures; {} for mpiwrite's own runs."""
        value = self._json("imported", {})
        return value if isinstance(value, dict) else {}
