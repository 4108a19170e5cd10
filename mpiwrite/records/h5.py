"""The record's HDF5 form: writing (rank 0's ledger, `import`) and the private read.

A record is built in memory, written to a temporary name in the results folder (created with
O_EXCL|O_NOFOLLOW), fsync'd and renamed into place, so a reader sees either the previous
complete version or the new one, never half a file; a full disk is an OSError, not a crash.  The
run rewrites its record after every iteration with status "running", and sets the final status
("complete", "failed", "interrupted", "timeout") at the end: a record whose status is not
"complete" is never mistaken for a good one.  Schema: docs/record-schema.md.

Reading (`_read`) runs libhdf5 on a file that may be crafted: only the sandbox's worker
process calls it (records/worker.py; tests/cli/test_house.py reads the calls from the AST).
Everything else asks a record store (records/store.py).
"""

from __future__ import annotations

import errno
import json
import os
from typing import Any, Dict, List, Optional

import numpy as np

from mpiwrite import SCHEMA_VERSION, __version__, files
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
from mpiwrite.records.model import RunRecord
from mpiwrite.vocab import keys as keytable
from mpiwrite.vocab import names

FORMAT = "mpiwrite-run"
SUFFIX = names.RECORD_SUFFIX
NODE_COLUMNS = keytable.NODE_COLUMNS  # the node facts of vocab/keys.py, in order
# Optional tables (added after schema 1; absent in older records, which read as empty lists):
# what each node's filesystem client did in each iteration's timed phase (lustre_counters),
# and each rank's file layout (lustre_layout.rank_layout).
COUNTER_FIELDS = (("iteration", "<i4"), ("node", "<i4"), ("write_bytes", "<i8"),
                  ("write_rpcs", "<i8"), ("seconds", "<f8"))
LAYOUT_FIELDS = (("iteration", "<i4"), ("rank", "<i4"), ("stripe_count", "<i4"),
                 ("stripe_size", "<i8"), ("first_ost", "<i4"))
COMPRESS_ROWS = 4096  # tables longer than this are chunked and compressed


def record_path(results: str, run_id: str) -> str:
    return os.path.join(results, names.record(run_id))


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
    first = rec.ranks[rec.ranks["iteration"] == rec.ranks["iteration"].min()] \
        if len(rec.ranks) else rec.ranks
    placed = first["node"][first["node"] >= 0]  # an imported record's -1: no node known
    counts = np.bincount(placed, minlength=len(rec.nodes)) if len(placed) \
        else np.zeros(len(rec.nodes), dtype=int)
    from mpiwrite.formats.nodekeys import summary_value  # the one flattening of node facts

    for i, facts in enumerate(rec.nodes):
        slim = {k: v for k, v in facts.items() if k != "raw"}
        clock = rec.node_clock[i] if rec.node_clock is not None and i < len(rec.node_clock) \
            else (np.nan, np.nan)
        out[i] = (i, counts[i] if i < len(counts) else 0,
                  *(summary_value(facts, c) for c in NODE_COLUMNS),
                  facts.get("mem_total_bytes") or -1, clock[0], clock[1], json.dumps(slim))
    return out


def _int(value: Any, default: int = -1) -> int:
    return int(value) if isinstance(value, (int, float)) and value == value else default


def _counter_table(rows: List[Dict[str, Any]]) -> np.ndarray:
    import h5py

    dt = np.dtype(list(COUNTER_FIELDS) + [("counters_json", h5py.string_dtype())])
    out = np.zeros(len(rows), dtype=dt)
    for i, r in enumerate(rows):
        d = r.get("delta") or {}
        secs = d.get("seconds")
        out[i] = (r["iteration"], r["node"], _int(d.get("write_bytes")),
                  _int(d.get("write_rpcs")), secs if secs is not None else np.nan,
                  json.dumps(d))
    return out


def _latency_table(rows: List[Dict[str, Any]]) -> np.ndarray:
    import h5py

    dt = np.dtype([("iteration", "<i4"), ("node", "<i4"), ("latency_json", h5py.string_dtype())])
    out = np.zeros(len(rows), dtype=dt)
    for i, r in enumerate(rows):
        out[i] = (r["iteration"], r["node"], json.dumps(r.get("histograms") or {}))
    return out


def _layout_table(rows: List[Dict[str, Any]]) -> np.ndarray:
    import h5py

    dt = np.dtype(list(LAYOUT_FIELDS) + [("layout_json", h5py.string_dtype())])
    out = np.zeros(len(rows), dtype=dt)
    for i, r in enumerate(rows):
        lay = r.get("layout") or {}
        comps = lay.get("components") or [lay]
        first = comps[0] if comps else {}
        osts = lay.get("ost_indices") or []
        out[i] = (r["iteration"], r["rank"], _int(first.get("stripe_count")),
                  _int(first.get("stripe_size")), osts[0] if osts else -1, json.dumps(lay))
    return out


def temp_names(path: str) -> List[str]:
    """The temporary names write() may use for path, in order (files.temp_names)."""
    return files.temp_names(os.path.abspath(path))


def image(rec: RunRecord) -> bytes:
    """The whole record as the bytes of an HDF5 file, built in memory, with the verdict and
    the hashes `mpiwrite verify` derives again (formats/validity.py): made from the record
    as a reader sees it (this image read back), so that the reader's view is what they
    cover."""
    from mpiwrite.formats import validity

    attrs = {k: v for k, v in rec.attrs.items() if k not in validity.STAMP}
    first = _build(rec, attrs)
    return _build(rec, {**attrs, **validity.stamp(_seen(first, rec))})


def _seen(own: bytes, rec: RunRecord) -> RunRecord:
    """The record as a reader will see it, from the image this process has just built (its
    own bytes in memory, never a file: tests/cli/test_house.py OWN_IMAGE); a record the
    reader would refuse (a test's damaged one) is stamped as given."""
    import h5py

    try:
        with h5py.File(h5py.h5f.open_file_image(own), "r") as h5:
            return _from_h5(h5, "the record being written")
    except (RecordError, KeyError, OSError, ValueError, TypeError, RuntimeError):
        return rec


def schema_of(rec: RunRecord) -> int:
    """The oldest schema that holds the record: 2 for rank rows without a node, else 1."""
    return SCHEMA_VERSION if len(rec.ranks) and bool((rec.ranks["node"] < 0).any()) else 1


def _build(rec: RunRecord, attrs: Dict[str, Any]) -> bytes:
    import h5py

    with h5py.File(f"mpiwrite-{id(rec)}.h5", "w", driver="core", backing_store=False,
                   libver="earliest") as h5:
        attrs = dict(attrs)
        attrs.update(format=FORMAT, schema_version=schema_of(rec), mpiwrite_version=__version__)
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
        if rec.client_counters:
            _dataset(h5, "client_counters", _counter_table(rec.client_counters))
        if rec.layouts:
            _dataset(h5, "rank_layouts", _layout_table(rec.layouts))
        if rec.latency:
            _dataset(h5, "latency_histograms", _latency_table(rec.latency))
        h5.flush()
        return h5.id.get_file_image()


def write(rec: RunRecord, path: str, folder: Optional[files.Folder] = None) -> None:
    """Write the whole record to path atomically; OSError (errno set) on any failure.

    The file is built in memory, written to a temporary name in the same folder created with
    O_EXCL|O_NOFOLLOW (never through a planted symlink), fsync'd, renamed over path, and the
    folder fsync'd.  On failure no temporary file is left and a previous path is untouched.
    With `folder` (the results folder opened at the start of a run), the record goes into
    that folder by descriptor, under path's file name, wherever its path now leads."""
    try:
        data = image(rec)
    except MemoryError:
        raise OSError(errno.ENOMEM, "not enough memory to build the record", path) from None
    except (RuntimeError, ValueError, TypeError, OSError) as exc:
        raise OSError(errno.EIO, f"cannot build the record: {exc}", path) from None
    if folder is None:
        files.write_replacing(os.path.abspath(path), data)
    else:
        files.write_replacing(os.path.basename(path), data, folder.fd)


def write_exclusive(rec: RunRecord, folder: files.Folder, name: str) -> bool:
    """Create the record `name` in `folder` only if no file has that name (False if one has):
    the whole file is written under a temporary name (O_EXCL|O_NOFOLLOW), fsync'd, then
    hard-linked to `name` (which fails if it exists: two importers of one file cannot both
    create it, and no reader sees half a record), and the temporary name removed."""
    try:
        data = image(rec)
    except (RuntimeError, ValueError, TypeError, OSError) as exc:
        raise OSError(errno.EIO, f"cannot build the record: {exc}", name) from None
    for tmp in files.temp_names(name):
        try:
            files.write_new(tmp, data, dir_fd=folder.fd)
            break
        except FileExistsError:
            continue
    else:
        raise OSError(errno.EEXIST, "no free temporary name", name)
    try:
        os.link(tmp, name, src_dir_fd=folder.fd, dst_dir_fd=folder.fd, follow_symlinks=False)
        created = True
    except FileExistsError:
        created = False
    except OSError as exc:  # no hard links here (some FUSE filesystems): O_EXCL on the name
        if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK):
            raise
        try:
            files.write_new(name, data, dir_fd=folder.fd)
            created = True
        except FileExistsError:
            created = False
    finally:
        os.unlink(tmp, dir_fd=folder.fd)
    if created:
        os.fsync(folder.fd)
    return created


def _text(v) -> Any:
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else v


ATTR_JSON = {"params": dict, "tags": dict, "keys": dict, "warnings": list, "stripe": object,
             "environment": object, "processes": list, "imported": dict, "validity": dict,
             "hash_covers": dict}
ATTR_TEXT = ("run_id", "status", "start_time", "end_time", "command_line", "host", "error",
             "mpi_library", "mpiwrite_version", "config_hash", "result_hash")


def _read(path: str, expect: Optional[tuple] = None) -> RunRecord:
    """Read and check a record; RecordError (naming the file and what is wrong) otherwise.

    Only a regular file is opened (a FIFO or device is refused at once, without blocking);
    everything is checked before use (check.py).  The record's `identity` is the file's
    (device, inode, size, mtime, ctime in ns); with `expect`, a file that no longer has it is
    refused before libhdf5 sees it (records/sandbox.py)."""

    try:
        fd = files.open_regular(path)
    except OSError as exc:
        raise RecordError(f"{path}: cannot open: {exc.strerror or exc}") from None
    fh = os.fdopen(fd, "rb")
    try:
        st = os.fstat(fd)
        ident = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        if expect is not None and tuple(expect) != ident:
            raise RecordError(f"{path}: changed while it was being read; run the command "
                              "again")
        try:
            h5 = _open(fh, st.st_size)
        except (OSError, ValueError, OverflowError) as exc:
            raise RecordError(f"{path}: not a readable HDF5 file ({exc})") from None
        with h5:
            rec = _from_h5(h5, path)
            rec.identity = ident
            return rec
    except RecordError:
        raise
    except (KeyError, OSError, ValueError, TypeError, RuntimeError) as exc:
        raise RecordError(f"{path}: damaged or incomplete record ({exc})") from None
    finally:
        fh.close()


IMAGE_LIMIT = 64 * 1024 * 1024  # larger records are read through the file, not an image


def _open(fh, size: int):
    """The h5py File of an open record: from an image of its bytes in memory, as the fast
    reader opens it (records/runlevel.py), so that a damaged superblock is one answer for
    `show` and `report` (a file-object driver refused an end-of-file address the image
    reads past); through the file itself above IMAGE_LIMIT."""
    import h5py

    if size > IMAGE_LIMIT:
        return h5py.File(fh, "r")
    data = fh.read(IMAGE_LIMIT + 1)
    return h5py.File(h5py.h5f.open_file_image(data), "r")


def raw_attrs(items) -> Dict[str, Any]:
    """An HDF5 file's root attributes as Python values (text decoded, numpy scalars unboxed)."""
    attrs = {k: _text(v) for k, v in items}
    for k, v in list(attrs.items()):
        if isinstance(v, np.generic):
            attrs[k] = v.item()
    return attrs


def check_attrs(ck: recordcheck.Checker, attrs: Dict[str, Any]):
    """Check the root attributes (JSON ones parsed in place): (ranks, nodes) declared.  The
    one check of attributes, for records read from disk and rows of the index alike."""
    path = ck.path
    if attrs.get("format") != FORMAT:
        raise RecordError(f"{path}: not an mpiwrite record")
    version = ck.integer("schema_version", attrs.get("schema_version"), 0)
    if version > SCHEMA_VERSION:
        raise RecordError(f"{path}: schema {version} is newer than this mpiwrite reads "
                          f"({SCHEMA_VERSION}); upgrade mpiwrite")
    for name in ATTR_TEXT:
        if name in attrs:
            ck.text(name, attrs[name])
    ck.text("run_id", attrs.get("run_id"))
    ck.text("status", attrs.get("status"))
    for name, kind in ATTR_JSON.items():
        if name in attrs:
            attrs[name] = ck.json(name, attrs[name], kind)
    ck.params(attrs.get("params", {}))
    if "tags" in attrs:
        attrs["tags"] = ck.tags(attrs["tags"])
    for w in attrs.get("warnings", []):
        ck.text("warnings", w)
    if "imported" in attrs:
        ck.imported(attrs["imported"])
    nranks = ck.integer("ranks", attrs.get("ranks"), 1, recordcheck.MAX_RANKS)
    nnodes = ck.integer("nodes", attrs.get("nodes"), 0, nranks)
    return nranks, nnodes


REQUIRED = ("ranks", "iterations", "samples", "nodes", "nodes_raw", "errors")


def _from_h5(h5, path: str) -> RunRecord:
    import h5py

    ck = recordcheck.Checker(path)
    attrs = raw_attrs(h5.attrs.items())
    nranks, nnodes = check_attrs(ck, attrs)
    for name in REQUIRED:
        link = h5.get(name, getlink=True)
        if link is None:
            raise RecordError(f"{path}: {name}: missing")
        if not isinstance(link, h5py.HardLink):
            raise RecordError(f"{path}: {name}: is a {type(link).__name__} (refused)")
    its = ck.table("iterations", h5["iterations"], ITER_DTYPE, recordcheck.MAX_ITERATIONS,
                   later=LATER_ITER_FIELDS)
    per_rank = (len(its) + 1) * nranks
    ranks = ck.table("ranks", h5["ranks"], RANK_DTYPE, per_rank, later=LATER_RANK_FIELDS)
    ck.iteration_numbers(its, ranks)
    # samples belong to the rank rows actually stored (a run adds both at once), not to the
    # declared ranks: a 476 KB record declaring 10^7 ranks held 16M gzip'd sample rows (1 GB)
    samples = ck.table("samples", h5["samples"], SAMPLE_DTYPE,
                       len(ranks) * recordcheck.MAX_SAMPLES_PER_RANK_ITERATION,
                       later=LATER_SAMPLE_FIELDS)
    nodes_dset = h5["nodes"]
    ck.dataset("nodes", nodes_dset)
    names = nodes_dset.dtype.names or ()
    for f in ("facts_json", "clock_offset_seconds", "clock_uncertainty_seconds"):
        if f not in names:
            raise RecordError(f"{path}: nodes: missing field {f}")
    ck.rows("nodes", nodes_dset, max(nnodes, 1), nodes_dset.dtype.itemsize)
    nodes_tbl = nodes_dset[()]
    raws = ck.strings("nodes_raw", h5["nodes_raw"], len(nodes_tbl))
    nodes = []
    for i, row in enumerate(nodes_tbl):
        facts = ck.node(i, ck.json(f"nodes[{i}].facts_json", row["facts_json"]))
        facts["raw"] = ck.json(f"nodes_raw[{i}]", raws[i], dict) if i < len(raws) else {}
        nodes.append(facts)
    ck.rank_places(ranks, nranks, len(nodes), "imported" in attrs)
    clock = np.stack([nodes_tbl["clock_offset_seconds"].astype(float),
                      nodes_tbl["clock_uncertainty_seconds"].astype(float)], axis=1) \
        if len(nodes_tbl) else None
    errors = [ck.json(f"errors[{i}]", e, dict) for i, e in enumerate(
        ck.strings("errors", h5["errors"], per_rank * 4 + 1000))]
    counters = [dict(r, delta=r.pop("counters_json")) for r in ck.optional_rows(
        h5, "client_counters", {"node": len(nodes), "iteration": len(its) + 1},
        "counters_json", (len(its) + 1) * max(len(nodes), 1))]
    layouts = [dict(r, layout=r.pop("layout_json")) for r in ck.optional_rows(
        h5, "rank_layouts", {"rank": nranks, "iteration": len(its) + 1}, "layout_json",
        per_rank)]
    lat = [dict(r, histograms=r.pop("latency_json")) for r in ck.optional_rows(
        h5, "latency_histograms", {"node": len(nodes), "iteration": len(its) + 1},
        "latency_json", (len(its) + 1) * max(len(nodes), 1))]
    return RunRecord(attrs=attrs, ranks=ranks, iterations=its, samples=samples, nodes=nodes,
                     node_clock=clock, errors=errors, path=path, client_counters=counters,
                     layouts=layouts, latency=lat)


def open_results(folder: str) -> files.Folder:
    """The results folder (made if missing), opened once; OSError unless a record can be
    created in it (a probe file is written, fsync'd and removed, by descriptor)."""
    os.makedirs(folder, exist_ok=True)
    held = files.Folder.open(folder)
    tmp = f".mpiwrite-probe-{os.getpid()}"
    try:
        files.write_new(tmp, b"x" * 4096, dir_fd=held.fd)  # removes what it made on failure
        os.unlink(tmp, dir_fd=held.fd)
    except BaseException:
        held.close()
        raise
    return held
