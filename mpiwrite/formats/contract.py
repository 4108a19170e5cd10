"""The machine-output contract: one vocabulary for `run --json`, `report --format json|csv`,
`compare --json` and `explain --format json`, its version, and the JSON Schemas shipped in
mpiwrite/formats/schemas/.

Every figure over repetitions is a *stat block* with the same keys everywhere:
`n`, `mean_MB_per_s`, `std_MB_per_s`, `ci_lo_MB_per_s`, `ci_hi_MB_per_s`, `min_MB_per_s`,
`max_MB_per_s` (MB = 10^6 bytes), the interval the Student t interval of the arithmetic mean;
where every value is positive also `gmean_MB_per_s` with its own interval
`gmean_ci_lo_MB_per_s`, `gmean_ci_hi_MB_per_s` (from the logs: the scale on which the
verdicts compare rates).  A figure that does not exist is `null`, never NaN.  A
metric in another unit (client CPU) has the same keys with its own unit in the name
(`mean_cpu_seconds_per_GB`), so a reader of `mean_MB_per_s` never gets CPU seconds.
Changing, renaming or removing a field means bumping OUTPUT_VERSION (and the schemas and
docs/output.md with it); adding an optional field does not.
"""

from __future__ import annotations

import json
import math
import os
from typing import Any, Dict, Optional, Sequence

import numpy as np

from mpiwrite import files
from mpiwrite.errors import ConfigError, why
from mpiwrite.vocab.status import Status

OUTPUT_VERSION = 3  # 1: the unversioned outputs before this contract; 3: docs/output.md
SCHEMA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "schemas")
SCHEMAS = {"run": "run-json.schema.json", "report": "report-json.schema.json",
           "compare": "compare-json.schema.json", "explain": "explain-json.schema.json",
           "study-report": "study-report-json.schema.json"}
STAT_NAMES = ("mean", "std", "ci_lo", "ci_hi", "min", "max")
GEO_NAMES = ("gmean", "gmean_ci_lo", "gmean_ci_hi")  # each block's geometric mean, interval
# `run --json`'s top level after the header, in the order docs/output.md gives
RUN_ORDER = ("start_time", "end_time", "command_line", "run_id", "status", "error", "record",
             "record_error", "ranks", "nodes", "hosts", "keys", "tags", "params", "iterations",
             "summary", "warnings", "errors", "first_done_note", "notes", "startup_seconds",
             "mkdir_seconds")


def stat_keys(suffix: str = "MB_per_s") -> tuple:
    """The seven keys of a stat block whose figures are in the unit named by `suffix`."""
    return ("n",) + tuple(f"{name}_{suffix}" for name in STAT_NAMES)


STAT_KEYS = stat_keys()


def version() -> str:
    from mpiwrite import __version__

    return __version__


def header(output: str) -> Dict[str, Any]:
    """The keys every JSON document starts with."""
    return {"schema_version": OUTPUT_VERSION, "output": output, "mpiwrite_version": version()}


def stat_block(values: Sequence[float], confidence: float = 0.95,
               suffix: str = "MB_per_s") -> Dict[str, Any]:
    """A stat block over these values (NaN values left out); null where undefined."""
    from mpiwrite import stats

    return summary_block(stats.describe([float(v) for v in values], confidence), suffix)


def summary_block(s, suffix: str = "MB_per_s") -> Dict[str, Any]:
    """A stat block from a stats.Summary: the arithmetic mean with its interval, then the
    geometric mean with its own (null unless every value is positive)."""
    block = dict(zip(stat_keys(suffix), (s.n, s.mean, s.std, s.lo, s.hi, s.min, s.max)))
    block.update(zip((f"{name}_{suffix}" for name in GEO_NAMES), (s.gmean, s.glo, s.ghi)))
    return finite(block)


def finite(x: Any) -> Any:
    """x with NaN and infinities as None (JSON null), numpy scalars as Python values."""
    if isinstance(x, dict):
        return {str(k): finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [finite(v) for v in x]
    if isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def dumps(doc: Any) -> str:
    """JSON text that never holds NaN (ValueError rather than invalid JSON)."""
    return json.dumps(finite(doc), indent=1, allow_nan=False)


def schema(output: str) -> Dict[str, Any]:
    with open(os.path.join(SCHEMA_DIR, SCHEMAS[output])) as fh:
        return json.load(fh)


def run_summary(run_stats: Dict[str, Any], iterations: np.ndarray) -> Dict[str, Any]:
    """summary.run_stats in the contract's vocabulary: stat blocks over the good iterations
    for aggregate, first_done, rank_mean and aggregate_with_open (and read_aggregate when the
    run read back); rank_* with units."""
    good = iterations[iterations["status"] == Status.OK] if len(iterations) else iterations
    out: Dict[str, Any] = {}
    for name, column in (("aggregate", "aggregate_MB_per_s"),
                         ("first_done", "first_done_MB_per_s"),
                         ("rank_mean", "rank_mean_MB_per_s"),
                         ("aggregate_with_open", "aggregate_with_open_MB_per_s")):
        names = iterations.dtype.names or ()
        out[name] = stat_block(good[column] if column in names and len(good) else [])
    names = iterations.dtype.names or ()
    if "read_aggregate_MB_per_s" in names:  # runs with a read phase (--read)
        good_read = good[np.isfinite(good["read_aggregate_MB_per_s"])] if len(good) else good
        if len(good_read):
            out["read_aggregate"] = stat_block(good_read["read_aggregate_MB_per_s"])
    out["rank_min_MB_per_s"] = run_stats.get("rank_min")
    out["rank_max_MB_per_s"] = run_stats.get("rank_max")
    out["rank_std_MB_per_s"] = run_stats.get("rank_std")
    out["slowest"] = run_stats.get("slowest")
    out["nodes"] = run_stats.get("nodes", [])
    last = [int(i) for i in good["iteration"]] if len(good) else []
    out["nodes_iteration"] = max(last) if last else None
    return finite(out)


def check_json_destination(path: Optional[str]) -> Optional[files.Folder]:
    """--json PATH must be writable as a file before any data is written (ConfigError).

    Its folder must exist and take a new file (a probe is created and removed: access() says
    yes to root in /proc, creating does not); PATH must be free or a regular file of this user,
    never a symlink (check_replaceable).  Returns the folder, opened once: the summary is
    written there at the end, by descriptor (files.replace_file)."""
    if not path or path == "-":
        return None
    parent = os.path.dirname(os.path.abspath(path))
    try:
        folder = files.Folder.open(parent)
    except FileNotFoundError:
        raise ConfigError(f"--json: folder {parent!r} does not exist") from None
    except OSError as exc:
        raise ConfigError(f"--json: cannot reach folder {parent!r}: {why(exc)}") from None
    name = os.path.basename(path)
    try:
        try:
            files.check_replaceable(name, folder.fd)
        except OSError as exc:
            raise ConfigError(f"--json: {files.about(repr(path), exc)}") from None
        probe = files.temp_names(name)[0]
        try:
            files.write_new(probe, b"", dir_fd=folder.fd)
            os.unlink(probe, dir_fd=folder.fd)
        except OSError as exc:
            raise ConfigError(f"--json: cannot create {path!r}: {why(exc)}") from None
    except BaseException:
        folder.close()
        raise
    return folder
