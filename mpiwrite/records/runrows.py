"""A record's run-level part as plain JSON and bytes: the form of the index's rows and of
the workers' answers (records/sandbox.py), and the records made from it with checks of
types only (the values were checked by runlevel.build where the part was read)."""

from __future__ import annotations

import json
from typing import Any, Dict, Optional, Tuple

import numpy as np

from mpiwrite.errors import RecordError
from mpiwrite.records.model import RunRecord
from mpiwrite.records.runlevel import ITER_DTYPE, RSTAT_DTYPE, RunLevel, _whole_file


def answered(path: str, got: Dict[str, Any]) -> RunLevel:
    """The record from a worker's answer (records/sandbox.py): the worker read the file and
    checked every value (`build`); here the answer's types are checked, as an index row's."""
    from mpiwrite.records import sandbox

    if not got.get("ok"):
        raise RecordError(str(got.get("error")))
    ident = sandbox._ident(got)
    if got.get("whole"):  # too large for an image: the worker read it whole, as here
        return _whole_file(path, ident, sandbox.record_of(got, path))
    try:
        doc = got["doc"]
        rec = from_doc(path, ident, json.loads(doc), sandbox.unb64(got["its"]),
                       sandbox.unb64(got["stats"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise RecordError(f"{path}: the record reader's answer is not usable ({exc})") from None
    rec.row_text = doc if got.get("keep") else None
    rec.keys_text = got.get("keys") if isinstance(got.get("keys"), str) else None
    return rec


def keys_of(rec: RunLevel) -> Optional[Dict[str, Any]]:
    """The run keys a worker derived (runkeys.run_keys) with the check of their type only,
    as a row's (a JSON object: its values are what run_keys gives, as the command itself
    would derive them); None where it sent none (they are derived here then)."""
    text = getattr(rec, "keys_text", None)
    if text is None:
        return None
    keys = json.loads(text)
    if not isinstance(keys, dict):
        raise ValueError("its run keys are not keys")
    return keys


def doc_of(rec: RunLevel) -> Dict[str, Any]:
    """What a checked record's run-level part is, as JSON: the index's rows and the
    workers' answers (the tables go as bytes)."""
    clock = rec.node_clock
    return {"attrs": rec.attrs, "nodes": rec.nodes,
            "clock": clock.tolist() if clock is not None else None,
            "counters": rec.client_counters}


def parts(d: Any) -> tuple:
    """(attrs, nodes, clock, counters) of a checked run-level part (doc_of), with the checks
    of its types only: what an index row that verified, or a worker, gives."""
    if not isinstance(d, dict):
        raise ValueError("not a run-level part")
    attrs, nodes, counters = d["attrs"], d["nodes"], d["counters"]
    if not (isinstance(attrs, dict) and isinstance(nodes, list) and isinstance(counters, list)
            and all(isinstance(n, dict) for n in nodes)
            and all(isinstance(c, dict) for c in counters)):
        raise ValueError("not a run-level part")
    clock = np.asarray(d["clock"], dtype=float).reshape(len(nodes), 2) if nodes else None
    return attrs, nodes, clock, counters


def tables(its: bytes, stats: bytes) -> Tuple[np.ndarray, np.ndarray]:
    iterations = np.frombuffer(its, ITER_DTYPE).copy()
    rstats = np.frombuffer(stats, RSTAT_DTYPE).copy()
    if len(rstats) != len(iterations):
        raise ValueError("table lengths differ")
    return iterations, rstats


def from_doc(shown: str, ident, d: Any, its: bytes, stats: bytes) -> RunLevel:
    attrs, nodes, clock, counters = parts(d)
    iterations, rstats = tables(its, stats)
    return RunLevel(attrs, iterations, nodes, clock, shown, ident, rstats, counters)


def head_of(rec: RunRecord) -> list:
    """What a report asks of every record besides its keys and tables: run id, status and
    start time, as the record's properties give them."""
    return [rec.run_id, rec.status, str(rec.attrs.get("start_time"))]


class Lazy(RunLevel):
    """A record from a verified index row: run id, status, start time and tables at once,
    the attributes, node facts and counters parsed when first used (a report over thousands
    of records uses none of them)."""

    def __init__(self, text: str, head: list, iterations, path: str, ident, stats):
        self._text, self._head, self._part = text, head, None
        self.iterations, self.path, self.identity = iterations, path, ident
        self.rank_stats, self._whole = stats, None

    def _get(self, i: int):
        if self._part is None:
            try:
                self._part = parts(json.loads(self._text))
            except (KeyError, TypeError, ValueError) as exc:
                raise RecordError(f"{self.path}: its index row is not usable ({exc}); "
                                  "run with --no-cache") from None
        return self._part[i]

    attrs = property(lambda self: self._get(0))
    nodes = property(lambda self: self._get(1))
    node_clock = property(lambda self: self._get(2))
    client_counters = property(lambda self: self._get(3))
    run_id = property(lambda self: self._head[0])
    status = property(lambda self: self._head[1])
    start_time = property(lambda self: self._head[2])
