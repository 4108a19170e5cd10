"""A record's run-level part: what `report`, `compare` and `plot scaling` use, read fast.

The root attributes, the iterations table, the nodes' facts and clocks, the client counters
(per node and iteration) and, from the ranks table, per iteration the count, mean and sum of
squared deviations of the ranks' write and read rates (what a report's rank mean±sd needs).
The samples and raw node texts are checked without reading their data, the errors list is
read and checked, layouts and latency histograms are not read: a `RunLevel` record loads the
whole record when one of them is asked for, and refuses if the file changed since
(docs/history.md).

Reading is split in two so that rows of the index (records/index.py) are as untrusted as
files: `_extract` reads a file into plain material (HDF5-level checks: links, storage,
shapes and field types before any data), `build` checks every value of that material with
the same checks as h5._read and makes the record.  Reading a file is private to the
sandbox's worker (records/worker.py).  Files are read through a
descriptor (regular files only, never blocking) into memory and opened as an HDF5 file
image with h5py's low-level API and memory types made once: the high-level API translates
every table's type on every open, which was most of a report's time.
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from mpiwrite import files
from mpiwrite.errors import RecordError
from mpiwrite.formats.summary import (
    ITER_DTYPE,
    LATER_ITER_FIELDS,
    LATER_RANK_FIELDS,
    LATER_SAMPLE_FIELDS,
    RANK_DTYPE,
    SAMPLE_DTYPE,
)
from mpiwrite.records import check as recordcheck
from mpiwrite.records import h5, sandbox
from mpiwrite.records.h5read import (
    ck_rows,
    dataset,
    links_of,
    members,
    mtype,
    node_type,
    root_attrs,
    table,
    whole_type,
)
from mpiwrite.records.model import RunRecord
from mpiwrite.vocab.status import RunStatus

IMAGE_LIMIT = h5.IMAGE_LIMIT  # larger records are read through the file (h5._read)
RSTAT_DTYPE = np.dtype([("iteration", "<i4"), ("n", "<i8"), ("mean", "<f8"), ("m2", "<f8"),
                        ("read_n", "<i8"), ("read_mean", "<f8"), ("read_m2", "<f8")])
RATE_COLUMNS = {"MB_per_s": "", "read_MB_per_s": "read_"}
USED_RANK_FIELDS = ("iteration", "rank", "node", "MB_per_s", "read_MB_per_s")
FINAL = tuple(s.value for s in RunStatus if s is not RunStatus.RUNNING)  # `running` changes


def identity(st: os.stat_result) -> Tuple[int, int, int, int, int]:
    """What says a file is still the one read: device, inode, size, mtime and ctime (ns)."""
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def rank_stats(ranks: np.ndarray, iterations: np.ndarray) -> np.ndarray:
    """Per iteration of the table: n, mean and squared deviations of the finite rates (two
    passes over the ranks, grouped by iteration at once: a cold report does this a record)."""
    out = np.zeros(len(iterations), RSTAT_DTYPE)
    its = iterations["iteration"]
    out["iteration"] = its
    names = ranks.dtype.names or ()
    if not len(its) or not len(ranks):
        return out
    keys, where = np.unique(its, return_inverse=True)  # an iteration listed twice: both rows
    pos = np.searchsorted(keys, ranks["iteration"])
    pos[pos == len(keys)] = 0
    known = keys[pos] == ranks["iteration"]
    for c, pre in RATE_COLUMNS.items():
        if c not in names:
            continue
        values = ranks[c].astype(float)
        use = known & np.isfinite(values)
        at, v = pos[use], values[use]
        n = np.bincount(at, minlength=len(keys))
        total = np.bincount(at, weights=v, minlength=len(keys))
        mean = np.divide(total, n, out=np.zeros(len(keys)), where=n > 0)
        m2 = np.bincount(at, weights=(v - mean[at]) ** 2, minlength=len(keys))
        out[pre + "n"], out[pre + "mean"], out[pre + "m2"] = n[where], mean[where], m2[where]
    return out


def pooled(stats: List[np.ndarray], read: bool = False) -> Tuple[int, float, float]:
    """(n, mean, sd with ddof 1) of all the ranks' rates of these per-iteration rows, pooled
    exactly (Chan et al.'s combination of means and squared deviations)."""
    pre = "read_" if read else ""
    rows = np.concatenate(stats) if stats else np.zeros(0, RSTAT_DTYPE)
    rows = rows[rows[pre + "n"] > 0]
    n = int(rows[pre + "n"].sum())
    if not n:
        return 0, float("nan"), float("nan")
    mean = float(np.sum(rows[pre + "n"] * rows[pre + "mean"]) / n)
    n_i, mean_i = rows[pre + "n"], rows[pre + "mean"]
    m2 = float(np.sum(rows[pre + "m2"]) + np.sum(n_i * (mean_i - mean) ** 2))
    return n, mean, (m2 / (n - 1)) ** 0.5 if n > 1 else float("nan")


class RunLevel(RunRecord):
    """A record of which only the run-level part was read; the rest is read on first use."""

    def __init__(self, attrs, iterations, nodes, node_clock, path, ident, stats, counters):
        self.attrs, self.iterations, self.nodes = attrs, iterations, nodes
        self.node_clock, self.path, self.identity = node_clock, path, ident
        self.rank_stats, self.client_counters = stats, counters
        self._whole: Optional[RunRecord] = None

    def __repr__(self) -> str:
        return f"RunLevel({self.path!r}, run_id={self.run_id!r})"

    def whole(self) -> RunRecord:
        """The whole record, read now; RecordError if the file is no longer the one read."""
        if self._whole is None:
            try:
                before = identity(os.stat(self.path))
            except OSError as exc:
                raise RecordError(f"{self.path}: cannot open: {exc.strerror or exc}") from None
            rec = sandbox.read_whole(self.path)
            if before != self.identity or rec.run_id != self.run_id:
                raise RecordError(f"{self.path}: changed since it was read; run the command "
                                  "again")
            self._whole = rec
        return self._whole

    ranks = property(lambda self: self.whole().ranks)
    samples = property(lambda self: self.whole().samples)
    errors = property(lambda self: self.whole().errors)
    layouts = property(lambda self: self.whole().layouts)
    latency = property(lambda self: self.whole().latency)


def stats_of(rec: RunRecord) -> np.ndarray:
    """A record's per-iteration rank statistics (read or computed from its ranks)."""
    got = getattr(rec, "rank_stats", None)
    return got if got is not None else rank_stats(rec.ranks, rec.iterations)


# -- reading a file ---------------------------------------------------------------------------
def _read(path: str):
    """(record, material, identity) of the file at path; RecordError naming what is wrong
    (in this process: for the worker, and tests of the reader)."""
    material, ident = _read_material(path)
    if material is None:
        return _whole_file(path, ident, h5._read(path, expect=ident)), None, ident
    return build(path, material, ident), material, ident


def _read_material(path: str, whole: bool = False):
    """(material, identity) of the file at path, after the HDF5-level checks only (what a
    worker of records/sandbox.py does; the values are checked by `build`); material None
    for a record too large to be read as an image.  With `whole`, every table of the record
    is also read and checked as h5._read checks it, from the same image (the whole-record
    check that `report` needs before it counts a run `show` would refuse)."""
    try:
        fd = files.open_regular(path)
    except OSError as exc:
        raise RecordError(f"{path}: cannot open: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if st.st_size > IMAGE_LIMIT:
            return None, identity(st)
        chunks = []
        while True:
            data = os.read(fd, 1 << 22)
            if not data:
                break
            chunks.append(data)
    except OSError as exc:
        raise RecordError(f"{path}: cannot read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    try:
        material = _extract(path, b"".join(chunks), whole)
    except RecordError:
        raise
    except (KeyError, OSError, ValueError, TypeError, RuntimeError) as exc:
        raise RecordError(f"{path}: damaged or incomplete record ({exc})") from None
    return material, identity(st)


def _whole_file(path: str, ident: Tuple[int, ...], rec: RunRecord) -> RunLevel:
    """The run-level record of a whole record (one too large to be read as an image)."""
    lvl = RunLevel(rec.attrs, rec.iterations, rec.nodes, rec.node_clock, path, ident,
                   rank_stats(rec.ranks, rec.iterations), rec.client_counters)
    lvl._whole = rec
    return lvl


def _extract(path: str, data: bytes, whole: bool = False) -> Dict[str, Any]:
    """The run-level material of a record's bytes, after the HDF5-level checks (`whole`:
    and every other table read and checked, as h5._read does)."""
    import h5py

    ck = recordcheck.Checker(path)
    try:
        fid = h5py.h5f.open_file_image(data)
    except (OSError, ValueError) as exc:
        raise RecordError(f"{path}: not a readable HDF5 file ({exc})") from None
    root = h5py.h5g.open(fid, b"/")
    attrs = root_attrs(root)
    material: Dict[str, Any] = {"attrs": dict(attrs)}
    nranks, nnodes = h5.check_attrs(ck, attrs)
    material["checked"] = (attrs, nranks, nnodes)  # build's own check of them, made here
    links = links_of(root)
    for name in h5.REQUIRED:
        kind = links.get(name)
        if kind is None:
            raise RecordError(f"{path}: {name}: missing")
        if kind != h5py.h5l.TYPE_HARD:
            what = "SoftLink" if kind == h5py.h5l.TYPE_SOFT else "ExternalLink"
            raise RecordError(f"{path}: {name}: is a {what} (refused)")
    its = table(ck, root, "iterations", ITER_DTYPE, recordcheck.MAX_ITERATIONS,
                 LATER_ITER_FIELDS)
    per_rank = (len(its) + 1) * nranks
    ranks = table(ck, root, "ranks", RANK_DTYPE, per_rank, LATER_RANK_FIELDS,
                  None if whole else USED_RANK_FIELDS)
    ck.iteration_numbers(its, ranks)
    d, n, tid = dataset(ck, root, "nodes")
    names = members(tid)
    for f in ("facts_json", "clock_offset_seconds", "clock_uncertainty_seconds"):
        if f not in names:
            raise RecordError(f"{path}: nodes: missing field {f}")
    ck_rows(ck, "nodes", n, max(nnodes, 1), tid.get_size())
    ndt, nmt = node_type()
    nodes = np.empty(n, ndt)
    if n:
        d.read(h5py.h5s.ALL, h5py.h5s.ALL, nodes, nmt)
        if whole:  # the node table whole, as show reads it: h5py's own types, every string
            full = whole_type(tid)
            d.read(h5py.h5s.ALL, h5py.h5s.ALL, np.empty(n, full), mtype(full))
    facts = [h5._text(v) for v in nodes["facts_json"]]
    ck.rank_places(ranks, nranks, n, "imported" in attrs)
    _unread(ck, root, per_rank, n)
    optional = _whole_check(ck, root, links, ranks, nranks, len(its), n) if whole else []
    counters: List[Dict[str, Any]] = []
    if "client_counters" in links or optional:
        # rare tables (Lustre, NFS, ceph clients; layouts, latency): the checked reader, one
        # File over the image (closing it closes the image: it is opened once, here)
        with h5py.File(fid) as f:
            for name, bounds, field, rows in optional:
                ck.optional_rows(f, name, bounds, field, rows)
            if "client_counters" in links:
                counters = ck.optional_rows(f, "client_counters",
                                            {"node": n, "iteration": len(its) + 1},
                                            "counters_json", (len(its) + 1) * max(n, 1))
    material.update(iterations=its, nodes=facts,
                    clock=np.stack([nodes["clock_offset_seconds"],
                                    nodes["clock_uncertainty_seconds"]], axis=1),
                    rank_stats=rank_stats(ranks, its),
                    counters=[dict(r, counters_json=json.dumps(r["counters_json"]))
                              for r in counters])
    return material


def _unread(ck, root, per_rank: int, nnodes: int) -> None:
    """The tables a report does not use, checked as h5._read checks them but for the
    data of the two large ones: samples (storage, fields, rows bounded: metadata only),
    nodes_raw (storage, strings, rows), errors (a few strings, read and checked)."""
    import h5py

    _d, n, tid = dataset(ck, root, "samples")
    kinds = members(tid)
    if not kinds:
        raise ck.fail("samples", "expected a table with fields")
    ck.fields("samples", kinds, SAMPLE_DTYPE, LATER_SAMPLE_FIELDS)
    ck_rows(ck, "samples", n, per_rank * recordcheck.MAX_SAMPLES_PER_RANK_ITERATION,
            max(SAMPLE_DTYPE.itemsize, tid.get_size()))
    for name, bound in (("nodes_raw", nnodes), ("errors", per_rank * 4 + 1000)):
        d, n, tid = dataset(ck, root, name)
        if tid.get_class() != h5py.h5t.STRING:
            raise ck.fail(name, "expected strings")
        ck_rows(ck, name, n, bound, 1)
        if name == "errors" and n:
            dt = np.dtype(h5py.string_dtype())
            texts = np.empty(n, dt)
            d.read(h5py.h5s.ALL, h5py.h5s.ALL, texts, mtype(dt))
            for i, e in enumerate(texts):
                ck.json(f"errors[{i}]", e, dict)


def _whole_check(ck, root, links, ranks, nranks: int, nits: int, nnodes: int) -> list:
    """The rest of h5._read's checks, through the image already open: the samples' data (its
    rows bounded by the rank rows stored, every value finite) and each node's raw facts as
    JSON objects; returned, the optional tables a report does not use, for the caller's
    checked reader.  A record that fails them is refused here as `show` would refuse it,
    without a second read of the file."""
    import h5py

    table(ck, root, "samples", SAMPLE_DTYPE,
          len(ranks) * recordcheck.MAX_SAMPLES_PER_RANK_ITERATION, LATER_SAMPLE_FIELDS)
    d, n, _tid = dataset(ck, root, "nodes_raw")
    if n:
        dt = np.dtype(h5py.string_dtype())
        texts = np.empty(n, dt)
        d.read(h5py.h5s.ALL, h5py.h5s.ALL, texts, mtype(dt))
        for i, raw in enumerate(texts[:nnodes]):
            ck.json(f"nodes_raw[{i}]", raw, dict)
    return [(name, bounds, field, rows) for name, bounds, field, rows in (
        ("rank_layouts", {"rank": nranks, "iteration": nits + 1}, "layout_json",
         (nits + 1) * nranks),
        ("latency_histograms", {"node": nnodes, "iteration": nits + 1}, "latency_json",
         (nits + 1) * max(nnodes, 1))) if name in links]


# -- checking material (from a file or from the index) ----------------------------------------
def build(path: str, m: Dict[str, Any], ident) -> RunLevel:
    """The record from run-level material, every value checked as h5._read checks it."""
    ck = recordcheck.Checker(path)
    attrs = dict(m["attrs"])
    if not all(isinstance(v, (str, int, float, type(None))) or (isinstance(v, list) and
                                                              sandbox.plain(v))
               for v in attrs.values()):
        raise ck.fail("attributes", "a value is neither text, a number nor a list of them")
    checked = m.get("checked")  # _extract checked these very attributes: not twice
    if checked is not None:
        attrs, nranks, nnodes = dict(checked[0]), checked[1], checked[2]
    else:
        nranks, nnodes = h5.check_attrs(ck, attrs)
    its = m["iterations"]
    if not isinstance(its, np.ndarray) or its.dtype != ITER_DTYPE or its.ndim != 1:
        raise ck.fail("iterations", "not the iterations table")
    ck_rows(ck, "iterations", len(its), recordcheck.MAX_ITERATIONS, ITER_DTYPE.itemsize)
    ck.finite("iterations", its)
    ck.iteration_numbers(its)
    raw = m["nodes"]
    if not isinstance(raw, list) or len(raw) > max(nnodes, 1):
        raise ck.fail("nodes", "more rows than the declared nodes")
    nodes = [ck.node(i, ck.json(f"nodes[{i}].facts_json", text)) for i, text in enumerate(raw)]
    clock = np.asarray(m["clock"], dtype=float).reshape(len(nodes), 2) if nodes else None
    stats = m["rank_stats"]
    if not isinstance(stats, np.ndarray) or stats.dtype != RSTAT_DTYPE or \
            len(stats) != len(its) or not np.array_equal(stats["iteration"], its["iteration"]):
        raise ck.fail("ranks", "per-iteration rank figures do not match the iterations")
    counts = np.concatenate([stats["n"], stats["read_n"]])
    figures = np.concatenate([stats["mean"], stats["read_mean"], stats["m2"],
                              stats["read_m2"]])
    if len(stats) and (counts.min() < 0 or counts.max() > nranks
                       or not np.isfinite(figures).all()
                       or min(stats["m2"].min(), stats["read_m2"].min()) < 0):
        raise ck.fail("ranks", "per-iteration rank figures out of range")
    counters = []
    for i, r in enumerate(m["counters"]):
        if not isinstance(r, dict) or type(r.get("iteration")) is not int \
                or type(r.get("node")) is not int:
            raise ck.fail(f"client_counters[{i}]", "not a counter row")
        if not (0 <= r["iteration"] <= len(its) and 0 <= r["node"] < max(len(nodes), 1)):
            raise ck.fail(f"client_counters[{i}]", "index out of range")
        row = {k: ck.number(f"client_counters[{i}].{k}", v) for k, v in r.items()
               if k != "counters_json"}
        counters.append(dict(row, delta=ck.json(f"client_counters[{i}].counters_json",
                                                r.get("counters_json"), dict)))
    return RunLevel(attrs, its, nodes, clock, path, ident, stats, counters)
