"""mpiwrite's own `run --json` summary as a record (docs/import.md, docs/output.md).

For a run whose record is lost, or that ran with `--no-record`: the JSON states the run's
id, its settings (`params`), its keys (the node facts `report --by` groups by), its tags and
its iteration table, so the record holds exactly that, under the run's own id (a record of
the same run already in the folder makes the import a no-op, and the run is counted once
wherever both are read).  What the JSON does not hold is named unknown: the per-rank and
sample tables and the nodes' full facts.  Only a complete run of schema version 2 is read;
every number is checked where it enters (formats/numbers.py).
"""

from __future__ import annotations

import re
from typing import Any, Dict, List

from mpiwrite.formats.numbers import (
    BYTES,
    COUNT,
    INDEX,
    NODES,
    RANKS,
    RATE,
    SECONDS,
    Kind,
    number,
    parse_json,
    shown,
)
from mpiwrite.formats.summary import ITER_DTYPE
from mpiwrite.importers.base import FACT_KEYS, UNKNOWN, Importer, Phase, Source, Test, refuse
from mpiwrite.text import clean, printable
from mpiwrite.units import format_size

READS = (2, 3)  # 3 changed compare's diff and the meaning of rates' ci_lo/ci_hi, not a run's
_RUN_ID = re.compile(r"\d{8}T\d{6}Z-[0-9a-f]{6}\Z")
_ISO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z\Z")
_SHARE = Kind(0, 100, False, "a share (0 to 100)")
_RANK = Kind(-1, 10**7, True, "a rank (-1 to 10^7)")
# the columns the phases fill; every other column of the iteration table is taken as stated
_PHASES = ("iteration", "ranks", "bytes", "aggregate_MB_per_s", "read_bytes",
           "read_aggregate_MB_per_s")


def detect(text: str) -> bool:
    head = text[:4096]
    return bool(re.search(r'"output"\s*:\s*"run"', head)) and '"mpiwrite_version"' in head


def _kind(column: str) -> Kind:
    if column in ("slowest_rank", "fastest_rank"):
        return _RANK
    if column in ("status", "verify_mismatches"):
        return INDEX if column == "status" else COUNT
    if column == "node_cpu_busy_max":
        return _SHARE
    return RATE if column.endswith("_MB_per_s") else SECONDS


def _text(doc: Dict[str, Any], key: str, path: str, pattern=None) -> str:
    value = doc.get(key)
    if not isinstance(value, str) or len(value) > 65536 or (
            pattern is not None and not pattern.match(value)):
        raise refuse(path, f"{key}: {shown(value)} is not what mpiwrite's run --json writes")
    return value


def _doc(src: Source) -> Dict[str, Any]:
    try:
        doc = parse_json(src.text, src.path)[0]
    except ValueError as exc:
        raise refuse(src.path, f"not valid JSON ({str(exc)[:80]}): cut short, or not "
                     "mpiwrite's run --json") from None
    if not isinstance(doc, dict) or doc.get("output") != "run" or \
            not isinstance(doc.get("mpiwrite_version"), str):
        raise refuse(src.path, "JSON without `output: run` and `mpiwrite_version`: not "
                     "mpiwrite's run --json")
    if doc.get("schema_version") not in READS:
        raise refuse(src.path, f"schema_version {shown(doc.get('schema_version'))}: this "
                     f"mpiwrite reads versions {', '.join(map(str, READS))}")
    if doc.get("status") != "complete":
        raise refuse(src.path, f"run status {shown(doc.get('status'))}: only a complete run "
                     "is imported")
    return doc


def _agrees(cols: Dict[str, List[Any]], path: str) -> None:
    """An iteration's aggregate rate is its bytes over first start to last done (as the run
    computed it, formats/summary.py): a rate that contradicts them is refused, one line."""
    starts, dones = cols.get("t_first_start"), cols.get("t_last_done")
    for i, (nbytes, rate) in enumerate(zip(cols["bytes"], cols["aggregate_MB_per_s"])):
        if nbytes <= 0 or rate != rate:
            continue
        t0, t1 = (starts[i], dones[i]) if starts and dones else (float("nan"),) * 2
        if not t1 - t0 > 0:  # no times to check it against: a positive rate at least
            if rate <= 0:
                raise refuse(path, f"iterations[{i}]: aggregate_MB_per_s is {rate:g} for "
                             f"{nbytes} bytes written: not a rate")
            continue
        expect = nbytes / (t1 - t0) / 1e6
        if abs(rate - expect) > 1e-6 * expect:
            raise refuse(path, f"iterations[{i}]: aggregate_MB_per_s {rate:g} contradicts its "
                         f"own {nbytes} bytes in {t1 - t0:g} s ({expect:g} MB/s)")


def _columns(rows: List[Any], path: str) -> Dict[str, List[Any]]:
    if not isinstance(rows, list) or not rows or not all(isinstance(r, dict) for r in rows):
        raise refuse(path, "iterations: no iteration table")
    out: Dict[str, List[Any]] = {}
    for name in ITER_DTYPE.names:
        if not any(name in r for r in rows):
            continue
        kind = COUNT if name in ("bytes", "read_bytes") else _kind(name)
        blank = -1 if ITER_DTYPE[name].kind == "i" else float("nan")
        out[name] = [blank if r.get(name) is None else
                     number(r[name], kind, path, f"iterations[{i}]: {name}")
                     for i, r in enumerate(rows)]
    if "bytes" not in out or "aggregate_MB_per_s" not in out:
        raise refuse(path, "iterations: no bytes or aggregate_MB_per_s")
    _agrees(out, path)
    return out


def _params(doc: Dict[str, Any], path: str) -> Dict[str, Any]:
    p = doc.get("params")
    if not isinstance(p, dict):
        raise refuse(path, "params: not an object")
    out = {k: v for k, v in p.items()
           if isinstance(k, str) and (v is None or isinstance(v, (bool, int, float, str)))}
    number(p.get("block_size"), BYTES, path, "params: block_size")
    if p.get("size") is not None:
        number(p["size"], BYTES, path, "params: size")
    if p.get("layout") not in ("fpp", "shared"):
        raise refuse(path, f"params: layout {shown(p.get('layout'))} is not fpp or shared")
    for flag in ("fsync", "direct"):
        if not isinstance(p.get(flag), bool):
            raise refuse(path, f"params: {flag} {shown(p.get(flag))} is not true or false")
    number(p.get("fsync_every") or 0, COUNT, path, "params: fsync_every")
    return out


def _words(value: Any, path: str, where: str) -> Dict[str, str]:
    if not isinstance(value, dict):
        raise refuse(path, f"{where}: not an object")
    return {clean(str(k))[:64]: clean(str(v))[:1024] for k, v in value.items()}


def parse(src: Source, command: str = "") -> List[Test]:
    doc = _doc(src)
    path = src.path
    cols = _columns(doc.get("iterations"), path)
    params = _params(doc, path)
    hosts = doc.get("hosts") if isinstance(doc.get("hosts"), list) else []
    test = Test(index=0, label=f"run {printable(str(doc.get('run_id'))[:40])}",
                tool="mpiwrite", tool_version=_text(doc, "mpiwrite_version", path)[:64],
                fmt="mpiwrite-json", ranks=number(doc.get("ranks"), RANKS, path, "ranks"),
                nodes=number(doc.get("nodes"), NODES, path, "nodes"),
                host=str(hosts[0]) if hosts else UNKNOWN,
                command=_text(doc, "command_line", path), command_source="file",
                start_time=_text(doc, "start_time", path, _ISO),
                end_time=_text(doc, "end_time", path, _ISO),
                run_id=_text(doc, "run_id", path, _RUN_ID), params=params)
    n = len(cols["bytes"])
    test.write = Phase(bytes=cols["bytes"], MB_per_s=cols["aggregate_MB_per_s"])
    if any(cols.get("read_bytes", [])):
        test.read = Phase(bytes=cols["read_bytes"], MB_per_s=cols["read_aggregate_MB_per_s"])
    test.columns = {k: v for k, v in cols.items() if k not in _PHASES}
    stated = _words(doc.get("keys"), path, "keys")
    test.keys = {k: stated.get(k, UNKNOWN) for k in FACT_KEYS}
    test.keys.update(
        fsync=f"every {params['fsync_every']}" if params.get("fsync_every") else
        ("on" if params["fsync"] else "off"), direct="on" if params["direct"] else "off",
        layout=params["layout"], engine=str(params.get("engine") or "posix"),
        block_size=format_size(params["block_size"]))
    test.tags = _words(doc.get("tags"), path, "tags")
    test.notes = [clean(str(x))[:500] for x in (doc.get("notes") or [])[:64]]
    test.original.append({"run_id": test.run_id, "record": doc.get("record"),
                          "hosts": [clean(str(h))[:256] for h in hosts[:4096]]})
    test.exact += ["run_id", "ranks", "nodes", "params", "keys", "tags", "start_time",
                   "end_time", "command_line", "tool_version", "iterations"]
    test.unknown += ["per-rank rows (the JSON holds none)", "samples (the JSON holds none)",
                     "node facts beyond the keys (the JSON holds their summary only)"]
    if n != int(params.get("iterations") or n) and not params.get("time_limit"):
        test.notes.append(f"{n} iterations in the JSON, {params.get('iterations')} asked")
    return [test]


IMPORTER = Importer(name="mpiwrite-json", title="mpiwrite's run --json", detect=detect,
                    parse=parse)
