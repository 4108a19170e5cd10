"""The HDF5 record of one run: writing (rank 0 only), reading, and checking the schema.

A record is written to a temporary name in the results folder, fsync'd and renamed into place,
so a reader sees either the previous complete version or the new one, never half a file.  The
run rewrites its record after every iteration with status "running", and sets the final status
("complete", "failed", "interrupted", "timeout") at the end: a record whose status is not
"complete" is never mistaken for a good one.  Schema: docs/record-schema.md.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any, Dict, List, Optional

import numpy as np

from mpiwrite import SCHEMA_VERSION, __version__
from mpiwrite.errors import RecordError
from mpiwrite.summary import ITER_DTYPE, RANK_DTYPE, SAMPLE_DTYPE

FORMAT = "mpiwrite-run"
SUFFIX = ".h5"
NODE_COLUMNS = ("host", "kernel", "lustre", "lustre_kernel", "checksums", "checksum_type",
                "fstype")
COMPRESS_ROWS = 4096  # tables longer than this are chunked and compressed


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

    @property
    def run_id(self) -> str:
        return str(self.attrs.get("run_id", ""))

    @property
    def status(self) -> str:
        return str(self.attrs.get("status", ""))

    def params(self) -> Dict[str, Any]:
        return json.loads(self.attrs.get("params", "{}"))

    def tags(self) -> Dict[str, str]:
        return json.loads(self.attrs.get("tags", "{}"))

    def keys(self) -> Dict[str, Any]:
        return json.loads(self.attrs.get("keys", "{}"))

    def warnings(self) -> List[str]:
        return json.loads(self.attrs.get("warnings", "[]"))


def record_path(results: str, run_id: str) -> str:
    return os.path.join(results, f"mpiwrite-{run_id}{SUFFIX}")


def _dataset(h5, name: str, data: np.ndarray) -> None:
    kw: Dict[str, Any] = {}
    if len(data) > COMPRESS_ROWS:
        kw = dict(chunks=(min(len(data), 65536),), compression="gzip", compression_opts=1,
                  shuffle=True)
    h5.create_dataset(name, data=data, **kw)


def _node_table(rec: RunRecord):
    import h5py

    s = h5py.string_dtype()
    dt = np.dtype([("node", "<i4"), ("ranks", "<i4")] + [(c, s) for c in NODE_COLUMNS]
                  + [("mem_total_bytes", "<i8"), ("clock_offset_seconds", "<f8"),
                     ("clock_uncertainty_seconds", "<f8"), ("facts_json", s)])
    out = np.zeros(len(rec.nodes), dtype=dt)
    counts = np.bincount(rec.ranks["node"][rec.ranks["iteration"] == rec.ranks["iteration"].min()],
                         minlength=len(rec.nodes)) if len(rec.ranks) else np.zeros(len(rec.nodes))
    for i, facts in enumerate(rec.nodes):
        lus = facts.get("lustre") or {}
        slim = {k: v for k, v in facts.items() if k != "raw"}
        clock = rec.node_clock[i] if rec.node_clock is not None and i < len(rec.node_clock) \
            else (np.nan, np.nan)
        out[i] = (i, counts[i] if i < len(counts) else 0, str(facts.get("host")),
                  str(facts.get("kernel")), str(lus.get("version") or "none"),
                  str(lus.get("kernel") or "n/a"), str(lus.get("checksums") or "n/a"),
                  str(lus.get("checksum_type") or "n/a"),
                  str((facts.get("fs") or {}).get("fstype")),
                  facts.get("mem_total_bytes") or -1, clock[0], clock[1], json.dumps(slim))
    return out


def write(rec: RunRecord, path: str) -> None:
    """Write the whole record to path atomically (temporary name, fsync, rename)."""
    import h5py

    folder = os.path.dirname(os.path.abspath(path))
    tmp = os.path.join(folder, f".{os.path.basename(path)}.tmp-{os.getpid()}")
    try:
        with h5py.File(tmp, "w", libver="earliest") as h5:
            attrs = dict(rec.attrs)
            attrs.update(format=FORMAT, schema_version=SCHEMA_VERSION, mpiwrite_version=__version__)
            for k, v in attrs.items():
                h5.attrs[k] = v if not isinstance(v, (dict, list)) else json.dumps(v)
            _dataset(h5, "ranks", rec.ranks.astype(RANK_DTYPE, copy=False))
            _dataset(h5, "iterations", rec.iterations.astype(ITER_DTYPE, copy=False))
            _dataset(h5, "samples", rec.samples.astype(SAMPLE_DTYPE, copy=False))
            h5.create_dataset("nodes", data=_node_table(rec))
            h5.create_dataset("nodes_raw", data=np.array(
                [json.dumps(n.get("raw", {})) for n in rec.nodes], dtype=object),
                dtype=h5py.string_dtype())
            h5.create_dataset("errors", data=np.array(
                [json.dumps(e) for e in rec.errors], dtype=object), dtype=h5py.string_dtype())
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    try:
        dfd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass


def _text(v) -> Any:
    return v.decode() if isinstance(v, bytes) else v


def read(path: str) -> RunRecord:
    """Read a record; RecordError (with the reason) for anything that is not a good one."""
    import h5py

    try:
        h5 = h5py.File(path, "r")
    except (OSError, ValueError) as exc:
        raise RecordError(f"{path}: not a readable HDF5 file ({exc})") from None
    try:
        with h5:
            attrs = {k: _text(v) for k, v in h5.attrs.items()}
            if attrs.get("format") != FORMAT:
                raise RecordError(f"{path}: not an mpiwrite record")
            version = int(attrs.get("schema_version", -1))
            if version > SCHEMA_VERSION:
                raise RecordError(f"{path}: schema {version} is newer than this mpiwrite reads "
                                  f"({SCHEMA_VERSION}); upgrade mpiwrite")
            for k, v in list(attrs.items()):
                if isinstance(v, np.generic):
                    attrs[k] = v.item()
            nodes_tbl = h5["nodes"][()]
            raws = [json.loads(_text(x)) for x in h5["nodes_raw"][()]]
            nodes = []
            for i, row in enumerate(nodes_tbl):
                facts = json.loads(_text(row["facts_json"]))
                facts["raw"] = raws[i] if i < len(raws) else {}
                nodes.append(facts)
            clock = np.stack([nodes_tbl["clock_offset_seconds"],
                              nodes_tbl["clock_uncertainty_seconds"]], axis=1) \
                if len(nodes_tbl) else None
            return RunRecord(
                attrs=attrs, ranks=h5["ranks"][()], iterations=h5["iterations"][()],
                samples=h5["samples"][()], nodes=nodes, node_clock=clock,
                errors=[json.loads(_text(e)) for e in h5["errors"][()]], path=path)
    except RecordError:
        raise
    except (KeyError, OSError, ValueError, TypeError) as exc:
        raise RecordError(f"{path}: damaged or incomplete record ({exc})") from None


def probe_writable(folder: str) -> None:
    """Raise OSError unless a record can be created in folder (creates and removes a file)."""
    os.makedirs(folder, exist_ok=True)
    tmp = os.path.join(folder, f".mpiwrite-probe-{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        os.write(fd, b"x" * 4096)
        os.fsync(fd)
    finally:
        os.close(fd)
        os.unlink(tmp)
