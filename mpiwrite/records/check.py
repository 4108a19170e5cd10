"""Checks made on a record read from disk before anything uses it.

Records come from other people and other machines, so every dataset and attribute is checked
against the schema (docs/record-schema.md) first: links and storage (no external files, no
virtual datasets, no external links), shapes bounded by the declared ranks and iterations
*before* a byte of data is read, compound fields, JSON bounded in size and depth, and the types
of every value the reports use.  Each failure is a RecordError naming the file and what is
wrong.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, Dict, List, Optional

import numpy as np

from mpiwrite.errors import RecordError
from mpiwrite.units import MiB

MAX_JSON_CHARS = 16 * MiB  # one attribute or one table cell
MAX_JSON_DEPTH = 64
MAX_RANKS = 10**7
MAX_ITERATIONS = 10**6
MAX_SAMPLES_PER_RANK_ITERATION = 10**6  # 11 days at the default 1 s interval
MAX_TABLE_BYTES = 2**31
MAX_INT = 2**62
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)
_FLOATS: Dict[Any, Any] = {}  # per table type: its float fields and their byte offsets
_OPEN, _CLOSE = np.frombuffer(b"[{", np.uint8), np.frombuffer(b"]}", np.uint8)


def member_kinds(tid) -> Dict[str, str]:
    """A compound HDF5 type's fields as numpy kind letters: "i", "u", "f", or "V" for
    anything else (an array, text) and for a number h5py would not read as stored (a float
    that is not IEEE: a bit-flipped exponent field makes h5py choose a 16-byte long double
    over 8 stored bytes, and the table reads as garbage through h5py's high-level API but as
    the right values through a memory type).  The one answer of both readers (h5._read's
    Checker.table and h5read.table): one record, one answer.  A name that is not UTF-8 is a
    UnicodeDecodeError (a ValueError: damaged) for both."""
    import h5py

    h5t = h5py.h5t
    if tid.get_class() != h5t.COMPOUND:
        return {}
    out: Dict[str, str] = {}
    for j in range(tid.get_nmembers()):
        cls = tid.get_member_class(j)
        sub = tid.get_member_type(j)
        kind = "V"
        if cls in (h5t.INTEGER, h5t.FLOAT):
            try:
                faithful = sub.dtype.itemsize == sub.get_size()
            except (TypeError, ValueError):  # a type h5py cannot map at all
                faithful = False
            if faithful:
                kind = "f" if cls == h5t.FLOAT else \
                    "i" if sub.get_sign() == h5t.SGN_2 else "u"
        # strictly: h5py's own reading of the type fails on a name that is not UTF-8 (a
        # bit-flipped field name), so the fast reader must not take it as a missing field
        out[tid.get_member_name(j).decode("utf-8")] = kind
    return out


class Checker:
    """Raises RecordError(f"{path}: {what}: {why}") for the record at path."""

    def __init__(self, path: str):
        self.path = path

    def fail(self, what: str, why: str) -> RecordError:
        return RecordError(f"{self.path}: {what}: {why}")

    # -- JSON -----------------------------------------------------------------------------
    def json(self, what: str, text: Any, kind: type = object) -> Any:
        """Parse JSON text bounded in size and nesting; the result must be of `kind`."""
        if isinstance(text, bytes):
            text = text.decode("utf-8", "replace")
        if not isinstance(text, str):
            raise self.fail(what, f"expected JSON text, found {type(text).__name__}")
        if len(text) > MAX_JSON_CHARS:
            raise self.fail(what, f"JSON longer than {MAX_JSON_CHARS} characters")
        if text.count("[") + text.count("{") > MAX_JSON_DEPTH and \
                json_depth(text) > MAX_JSON_DEPTH:  # deeper than the opening brackets: never
            raise self.fail(what, f"JSON nested deeper than {MAX_JSON_DEPTH}")
        try:
            value = json.loads(text)
        except (ValueError, RecursionError) as exc:
            raise self.fail(what, f"not valid JSON ({str(exc)[:80]})") from None
        if kind is not object and not isinstance(value, kind):
            raise self.fail(what, f"expected a JSON {_name(kind)}, found {_name(type(value))}")
        return value

    # -- scalars --------------------------------------------------------------------------
    def integer(self, what: str, value: Any, lo: int = 0, hi: int = MAX_INT) -> int:
        if isinstance(value, np.generic):
            value = value.item()
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(what, f"expected an integer, found {_short(value)}")
        if not lo <= value <= hi:
            raise self.fail(what, f"{value} is out of range {lo}..{hi}")
        return value

    def text(self, what: str, value: Any, optional: bool = False) -> Any:
        if value is None and optional:
            return None
        if not isinstance(value, str):
            raise self.fail(what, f"expected text, found {_short(value)}")
        return value

    def number(self, what: str, value: Any, optional: bool = True) -> Any:
        if value is None and optional:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.fail(what, f"expected a number, found {_short(value)}")
        if isinstance(value, int) and abs(value) > MAX_INT:
            raise self.fail(what, "number out of range")
        return value

    # -- whole pieces ---------------------------------------------------------------------
    def params(self, p: Dict[str, Any]) -> Dict[str, Any]:
        for key in ("block_size", "fsync_every", "iterations", "files_per_dir",
                    "verify_shift"):
            if p.get(key) is not None:
                self.integer(f"params.{key}", p[key], -MAX_INT, MAX_INT)
        if p.get("size") is not None:
            self.integer("params.size", p["size"])
        for key in ("time_limit", "delay", "sample_interval", "progress_interval", "timeout"):
            self.number(f"params.{key}", p.get(key))
        for key in ("layout", "target", "sysroot", "results", "json_path"):
            self.text(f"params.{key}", p.get(key), optional=True)
        if p.get("tags") is not None and not isinstance(p["tags"], dict):
            raise self.fail("params.tags", "expected a JSON object")
        return p

    def tags(self, tags: Dict[str, Any]) -> Dict[str, str]:
        out = {}
        for k, v in tags.items():
            if isinstance(v, (dict, list)):
                raise self.fail(f"tags.{k}", "expected text, found a JSON "
                                f"{_name(type(v))}")
            out[k] = v if isinstance(v, str) else json.dumps(v)
        return out

    def imported(self, imp: Dict[str, Any]) -> Dict[str, Any]:
        """An imported record's provenance (docs/import.md): the text fields are text, the
        sha256 is 64 hex digits, the lists of figures are lists of text."""
        for key in ("tool", "tool_version", "format", "file", "sha256", "test"):
            self.text(f"imported.{key}", imp.get(key))
        if not re.fullmatch(r"[0-9a-f]{64}", imp["sha256"]):
            raise self.fail("imported.sha256", "expected 64 hexadecimal digits")
        for key in ("exact", "unknown"):
            if not isinstance(imp.get(key, []), list) or not all(
                    isinstance(x, str) for x in imp.get(key, [])):
                raise self.fail(f"imported.{key}", "expected a JSON array of strings")
        for key in ("derived", "stated_facts"):
            if not isinstance(imp.get(key, {}), dict):
                raise self.fail(f"imported.{key}", "expected a JSON object")
        self.per_service(imp.get("per_service", []))
        csv_of = imp.get("rank_csv", {})
        if not isinstance(csv_of, dict) or csv_of and (
                not isinstance(csv_of.get("file"), str)
                or not re.fullmatch(r"[0-9a-f]{64}", str(csv_of.get("sha256")))):
            raise self.fail("imported.rank_csv", "expected {file, sha256}")
        return imp

    PER_SERVICE_FIGURES = ("bytes", "threads", "first_done_seconds", "last_done_seconds",
                           "first_done_MB_per_s", "last_done_MB_per_s")

    def per_service(self, rows: Any) -> None:
        """An imported record's services' own figures (elbencho's services' --jsonfile):
        a list of objects, each a service's text name, its phase, and its figures numbers
        of at least 0 (first-done's may be null)."""
        where = "imported.per_service"
        if not isinstance(rows, list) or len(rows) > MAX_RANKS * 2:
            raise self.fail(where, "expected a JSON array of at most 2 x 10^7 objects")
        for i, row in enumerate(rows):
            if not isinstance(row, dict):
                raise self.fail(f"{where}[{i}]", "expected a JSON object")
            for key in ("service", "phase", "file"):
                self.text(f"{where}[{i}].{key}", row.get(key))
            if row["phase"] not in ("WRITE", "READ"):
                raise self.fail(f"{where}[{i}].phase", "expected WRITE or READ")
            for key in self.PER_SERVICE_FIGURES:
                value = self.number(f"{where}[{i}].{key}", row.get(key),
                                    optional=key == "first_done_MB_per_s")
                if value is not None and not (value >= 0 and math.isfinite(value)):
                    raise self.fail(f"{where}[{i}].{key}", "expected a finite number >= 0")

    def node(self, i: int, facts: Any) -> Dict[str, Any]:
        where = f"nodes[{i}]"
        if not isinstance(facts, dict):
            raise self.fail(where, f"expected a JSON object, found {_name(type(facts))}")
        self.text(f"{where}.host", facts.get("host"))
        self.text(f"{where}.kernel", facts.get("kernel"), optional=True)
        for key in ("lustre", "fs", "client"):
            value = facts.get(key)
            if value is None:
                facts[key] = {}
            elif not isinstance(value, dict):
                raise self.fail(f"{where}.{key}", f"expected a JSON object, found "
                                f"{_name(type(value))}")
        for key in ("version", "kernel", "checksums", "checksum_type"):
            self.text(f"{where}.lustre.{key}", facts["lustre"].get(key), optional=True)
        self.text(f"{where}.fs.fstype", facts["fs"].get("fstype"), optional=True)
        self.text(f"{where}.client.client", facts["client"].get("client"), optional=True)
        if facts.get("mem_total_bytes") is not None:
            self.integer(f"{where}.mem_total_bytes", facts["mem_total_bytes"], -1)
        return facts

    def table(self, name: str, dset, expected: np.dtype, max_rows: int,
              later: tuple = ()) -> np.ndarray:
        """Read a compound dataset after checking its storage, shape and fields.  Fields in
        `later` were added after older records were written: absent, they read as NaN."""
        self.dataset(name, dset)
        if dset.dtype.names is None:
            raise self.fail(name, f"expected a table with fields, found {dset.dtype}")
        kinds = member_kinds(dset.id.get_type())  # as the fast reader sees them (h5read)
        present = self.fields(name, kinds, expected, later)
        self.rows(name, dset, max_rows, expected.itemsize)
        return self.fill(name, dset[()], present, expected)

    def fields(self, name: str, kinds: Dict[str, str], expected: np.dtype,
               later: tuple = ()) -> List[str]:
        """The fields of `expected` a table has, after checking that none is missing (but
        those in `later`) and that each is a number of the right kind (`kinds`: numpy kind
        letters of the stored fields, "V" for anything else such as an array)."""
        missing = [f for f in expected.names if f not in kinds and f not in later]
        if missing:
            raise self.fail(name, f"missing field(s) {', '.join(missing[:5])}")
        present = [f for f in expected.names if f in kinds]
        for f in present:
            got, want = kinds[f], expected[f]
            ok = got in "iu" if want.kind in "iu" else got in "iuf"
            if not ok or not got:
                raise self.fail(f"{name}.{f}", f"expected {want}, found kind {got!r}")
        return present

    def fill(self, name: str, raw: np.ndarray, present: List[str],
             expected: np.dtype) -> np.ndarray:
        """The rows read, as `expected` (absent float fields NaN); no infinite value."""
        out = np.zeros(len(raw), dtype=expected)
        for f in expected.names:
            if f in present:
                out[f] = raw[f]
            elif expected[f].kind == "f":
                out[f] = np.nan
        self.finite(name, out, present)
        return out

    def iteration_numbers(self, its: np.ndarray, ranks: Optional[np.ndarray] = None) -> None:
        """Iterations are numbered 0.. in the order they ran, each once; a rank row, a sample
        or a counter belongs to one of them or to the one in progress (len(its)).  A record
        whose numbers say otherwise is damaged: `show` and `report` must not read it two
        ways (a bit-flipped table that libhdf5 read without crashing held 925892608)."""
        n = len(its)
        got = its["iteration"]
        if n and (int(got.min()) < 0 or int(got.max()) > n
                  or len(np.unique(got)) != n):
            raise self.fail("iterations.iteration", f"numbers out of range 0..{n} or repeated")
        if ranks is not None and len(ranks):
            r = ranks["iteration"]
            if int(r.min()) < 0 or int(r.max()) > n:
                raise self.fail("ranks.iteration", f"out of range 0..{n}")

    def rank_places(self, ranks: np.ndarray, nranks: int, nnodes: int,
                    imported: bool) -> None:
        """Each rank row's rank is one of the run's, its node one of the node rows; or, in
        an imported record, -1: a tool's own per-rank figures say no node
        (importers/base.rank_rows)."""
        if not len(ranks):
            return
        node = ranks["node"]
        if not nnodes and not imported:
            raise self.fail("nodes", "empty, but the ranks table has rows")
        bad = (node < 0) | (node >= nnodes)
        if imported:
            bad &= node != -1
        if bad.any():
            raise self.fail("ranks.node", f"index {int(node[bad][0])} out of range "
                            f"0..{nnodes - 1}" + (" (or -1, not known)" if imported else ""))
        if ((ranks["rank"] < 0) | (ranks["rank"] >= nranks)).any():
            raise self.fail("ranks.rank", f"out of range 0..{nranks - 1}")

    def finite(self, name: str, table: np.ndarray, fields=None) -> None:
        """No infinite value in the float fields (of `fields`) of a table: one pass over the
        8-byte floats of all of them, a field named only when there is one."""
        if not len(table):
            return
        key = (table.dtype, tuple(fields or ()))
        if key not in _FLOATS:
            names = [f for f in (fields or table.dtype.names) if table.dtype[f].kind == "f"]
            fast = bool(names) and all(table.dtype[f] == np.float64 for f in names)
            offs = np.concatenate([np.arange(table.dtype.fields[f][1],
                                             table.dtype.fields[f][1] + 8) for f in names]) \
                if fast else None
            if len(_FLOATS) > 64:
                _FLOATS.clear()
            _FLOATS[key] = (names, offs)
        names, offs = _FLOATS[key]
        if not names:
            return
        if offs is not None:
            flat = np.ascontiguousarray(
                np.ascontiguousarray(table).view(np.uint8).reshape(len(table), -1)[:, offs]
            ).view("<f8")
            if not np.isinf(flat).any():
                return
        for f in names:
            if np.isinf(table[f]).any():
                raise self.fail(f"{name}.{f}", "holds an infinite value")

    def strings(self, name: str, dset, max_rows: int) -> List[Any]:
        self.dataset(name, dset)
        if dset.dtype.kind not in "OSU":
            raise self.fail(name, f"expected strings, found {dset.dtype}")
        self.rows(name, dset, max_rows, 1)
        return list(dset[()])

    def optional_rows(self, h5, name: str, index: Dict[str, int], json_field: str,
                      max_rows: int) -> List[Dict[str, Any]]:
        """An optional table added after schema 1 (absent: []): a hard link, one dimension,
        the integer `index` fields present and in 0..bound-1, at most max_rows rows, and a JSON
        object per row under json_field.  Other numeric fields are passed through."""
        import h5py

        link = h5.get(name, getlink=True)
        if link is None:
            return []
        if not isinstance(link, h5py.HardLink):
            raise self.fail(name, f"is a {type(link).__name__} (refused)")
        dset = h5[name]
        self.dataset(name, dset)
        names = dset.dtype.names or ()
        missing = [f for f in (*index, json_field) if f not in names]
        if missing:
            raise self.fail(name, f"missing field(s) {', '.join(missing)}")
        self.rows(name, dset, max_rows, dset.dtype.itemsize)
        out = []
        for i, row in enumerate(dset[()]):
            entry: Dict[str, Any] = {}
            for f in names:
                if f == json_field:
                    entry[f] = self.json(f"{name}[{i}].{f}", row[f], dict)
                elif dset.dtype[f].kind in "iu":
                    entry[f] = int(row[f])
                elif dset.dtype[f].kind == "f":
                    entry[f] = self.number(f"{name}[{i}].{f}", float(row[f]))
            for f, bound in index.items():
                if not 0 <= entry[f] < max(bound, 1):
                    raise self.fail(f"{name}[{i}].{f}", f"{entry[f]} out of range "
                                    f"0..{bound - 1}")
            out.append(entry)
        return out

    def dataset(self, name: str, dset) -> None:
        import h5py

        if not isinstance(dset, h5py.Dataset):
            raise self.fail(name, "is not a dataset")
        if dset.is_virtual:
            raise self.fail(name, "is a virtual dataset (refused: it reads other files)")
        if dset.external:
            raise self.fail(name, "uses external storage (refused: it reads other files)")
        if dset.ndim != 1:
            raise self.fail(name, f"expected one dimension, found shape {dset.shape}")

    def rows(self, name: str, dset, max_rows: int, itemsize: int) -> None:
        n = dset.shape[0]
        if n > max_rows or n * max(itemsize, dset.dtype.itemsize) > MAX_TABLE_BYTES:
            raise self.fail(name, f"{n} rows is more than the declared ranks and iterations "
                            f"allow ({max_rows}); refused before reading")


def json_depth(text: str) -> int:
    """The deepest nesting of [ and { in JSON text, strings ignored (no recursion)."""
    if "[" not in text and "{" not in text:
        return 0
    bare = _STRING.sub("", text).encode("utf-8", "replace")
    b = np.frombuffer(bare, np.uint8)
    step = np.isin(b, _OPEN).astype(np.int64) - np.isin(b, _CLOSE)
    return int(np.cumsum(step).max()) if step.size else 0


def _name(kind: type) -> str:
    return {dict: "object", list: "array", str: "string", int: "number", float: "number",
            bool: "boolean", type(None): "null"}.get(kind, kind.__name__)


def _short(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text[:40]}{'...' if len(text) > 40 else ''}"
