"""Many records as tables: find them, read them, skip the bad ones, and filter by keys.

`load(paths)` (also `mpiwrite.load`) gives pandas DataFrames (runs, iterations, ranks, nodes,
samples) joinable on `run_id`; the command-line tools use the pandas-free `Store` underneath,
so pandas stays an optional extra.  Records are found and read through a record store
(records/store.py); this module keeps runs once, filters and measures them.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Dict, Iterable, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from mpiwrite.errors import ConfigError, RecordError
from mpiwrite.files import same_bytes
from mpiwrite.formats.runkeys import run_keys  # noqa: F401 - the keys, defined once there
from mpiwrite.formats.summary import host_of
from mpiwrite.records.model import RunRecord
from mpiwrite.records.store import FolderStore, Read
from mpiwrite.text import printable
from mpiwrite.units import finite
from mpiwrite.vocab import keys as keytable
from mpiwrite.vocab import metrics as metricnames
from mpiwrite.vocab.status import RunStatus, Status

LEVELS = ("run", "full")
BATCH = 1024  # records read at a time (the workers' answers held in memory)
# metrics whose values come from the per-rank table or the record's `stonewall` attribute:
# a store for them reads whole records
PER_RANK_METRICS = tuple(m.name for m in metricnames.TABLE if m.whole)


def _say(text: str) -> None:
    sys.stderr.write(printable(f"mpiwrite: warning: {text}") + "\n")


def json_twin(a: RunRecord, b: RunRecord):
    """(the run's own record, the import of its `run --json`) when a and b are those two of
    one run (same run id and start), else None: counted once, the record kept (it holds the
    per-rank rows the JSON lacks)."""
    def from_json(r: RunRecord) -> bool:
        imp = r.imported()
        return isinstance(imp, dict) and imp.get("format") == "mpiwrite-json"

    for own, imp in ((a, b), (b, a)):
        if (not own.imported() and from_json(imp)
                and str(own.attrs.get("start_time")) == str(imp.attrs.get("start_time"))):
            return own, imp
    return None


def level_for(metric: str) -> str:
    """The Store level a metric needs: `full` for per-rank figures, else `run`."""
    return "full" if metric in PER_RANK_METRICS else "run"


INVALID = "not valid"  # a complete run its record says is not valid (`mpiwrite show` says why)


class Store:
    """The readable records under some paths; the unreadable ones are listed in `bad`.

    Each run counts once: records with the same run id and the same bytes (copies, a folder
    named twice) are one.  Records with the same run id and different contents are a
    conflict (a copy taken while the run wrote, or one planted): named, and none of them
    counted, shown or cleaned (`conflicts`)."""

    def __init__(self, paths: Iterable[str], warn=True, option: str = "PATHS",
                 level: str = "full", cache: Any = None):
        """level `run`: only the run-level part of each record is read (and kept in the
        index of `cache`: None for MPIWRITE_CACHE or the user's cache folder, False for
        none, or a folder; records/index.py); the rest of a record is read when used.
        level `full`: every record read whole (in a worker, records/store.py)."""
        if level not in LEVELS:
            raise ValueError(f"level: {level!r} is not one of {', '.join(LEVELS)}")
        self.runs: List[RunRecord] = []
        self.bad: List[Tuple[str, str]] = []
        self.duplicates: List[str] = []
        self.conflicts: Dict[str, List[RunRecord]] = {}  # run id -> its records
        self.leftovers: List[str] = []
        self._keys: Dict[int, Dict[str, Any]] = {}
        by_id: Dict[str, RunRecord] = {}
        kept = FolderStore(cache if level == "run" else False,
                           _say if warn else (lambda _text: None))
        self.index = kept.index
        try:
            found = kept.find(paths, option)
            self.leftovers = kept.leftovers()
            read = kept.runlevel if level == "run" else kept.wholes
            for at in range(0, len(found), BATCH):
                for got in read(found[at:at + BATCH]):
                    self._add(got, warn, by_id)
        finally:
            kept.close()
        if warn:
            for left in self.leftovers:
                sys.stderr.write(f"mpiwrite: warning: {printable(left)}: leftover temporary "
                                 "record of a killed run (remove it if no run is writing it)\n")
            if self.duplicates:
                sys.stderr.write(f"mpiwrite: note: {len(self.duplicates)} record(s) repeat a "
                                 f"run already read (e.g. {printable(self.duplicates[0])}); "
                                 "each run is counted once\n")
            for rid in self.conflicts:
                sys.stderr.write(f"mpiwrite: warning: {self.conflict_text(rid)}\n")
        self.runs.sort(key=lambda r: (getattr(r, "start_time", None)
                                      or str(r.attrs.get("start_time")), r.run_id))

    def _add(self, got: Read, warn: bool, by_id) -> None:
        path, rec, keys = got.ref, got.record, got.keys
        if rec is None:
            self._bad(path, got.error, warn)
            return
        old = by_id.get(rec.run_id)
        if old is not None:
            if same_bytes(old.path, path):
                self.duplicates.append(path)
                return
            twin = json_twin(old, rec) if rec.run_id not in self.conflicts else None
            if twin is not None:  # a run's record and its own run --json imported: one run
                keep, drop = twin
                if keep is rec:
                    self.runs = [rec if r is old else r for r in self.runs]
                    by_id[rec.run_id] = rec
                    self._keys[id(rec)] = keys
                self.duplicates.append(drop.path)
                return
            if rec.run_id not in self.conflicts:
                # by identity: == compares whole records (and reads a lazy one in full)
                self.runs = [r for r in self.runs if r is not old]
                self.conflicts[rec.run_id] = [old]
            self.conflicts[rec.run_id].append(rec)
            return
        by_id[rec.run_id] = rec
        self.runs.append(rec)
        self._keys[id(rec)] = keys

    def conflict_text(self, run_id: str) -> str:
        """One line naming the records of a run id in conflict."""
        recs = self.conflicts[run_id]
        more = f" (and {len(recs) - 2} more)" if len(recs) > 2 else ""
        return printable(f"conflict: {recs[0].path} ({recs[0].status}) and {recs[1].path} "
                         f"({recs[1].status}){more} hold the same run id {run_id} but differ "
                         "(a copy taken while the run wrote, or planted): none is counted")

    def _bad(self, path: str, message: str, warn: bool) -> None:
        self.bad.append((path, message))
        if warn:
            sys.stderr.write(f"mpiwrite: skipped {printable(message)}\n")

    def keys(self, rec: RunRecord) -> Dict[str, Any]:
        return self._keys[id(rec)]

    # whether select() counts the complete runs whose record says they are not valid (a rank
    # that wrote nothing, a stonewall shorter than asked: formats/validity.py); asked with
    # --include-invalid, else they are left out and named like the runs that did not complete
    include_invalid = False
    # report --window START:END: seconds from each iteration's first write start; the
    # aggregate is then taken from the samples over that window (window_values)
    window: Optional[Tuple[float, float]] = None

    def counted(self, r: RunRecord) -> bool:
        """A complete run, and a valid one unless invalid ones were asked for."""
        from mpiwrite.formats.validity import is_valid

        return r.status == RunStatus.COMPLETE and (self.include_invalid or is_valid(r))

    def select(self, flt: Optional[Dict[str, str]] = None, complete_only: bool = True):
        out = []
        for r in self.runs:
            if complete_only and not self.counted(r):
                continue
            k = self.keys(r)
            if flt and not all(matches(r, k, key, val) for key, val in flt.items()):
                continue
            r.__dict__["_window"] = self.window  # what metric_values takes of it
            out.append(r)
        return out

    def not_complete(self) -> Dict[str, int]:
        """How many runs did not complete, by state (`abandoned` for a `running` record whose
        run is gone: answers/state.py), and how many complete ones are not valid (`invalid`)."""
        from mpiwrite.answers.state import run_state

        out: Dict[str, int] = {}
        for r in self.runs:
            if not self.counted(r):
                state = run_state(r) if r.status != RunStatus.COMPLETE else INVALID
                out[state] = out.get(state, 0) + 1
        return out

    def find_run(self, ident: str) -> RunRecord:
        for rid in self.conflicts:
            if rid == ident or rid.startswith(ident) or rid.endswith("-" + ident):
                raise ConfigError(f"RUN: {self.conflict_text(rid)}")
        hits = [r for r in self.runs if r.run_id == ident or r.run_id.startswith(ident)
                or r.run_id.endswith("-" + ident)
                or os.path.abspath(r.path) == os.path.abspath(ident)]
        if len(hits) != 1:
            raise ConfigError(f"RUN: {printable(ident)!r} matches {len(hits)} records in --in "
                              "(give a path, a longer run id or its random suffix)")
        return hits[0]


# Keys whose filter values are read as what they mean, not as text: sizes in bytes (1MB,
# 1MiB, 1M, 4k, 1000000), durations in seconds (200s, 5min), counts, and on/off switches.
SIZE_KEYS = keytable.of_unit(keytable.SIZE)
DURATION_KEYS = keytable.of_unit(keytable.DURATION)
COUNT_KEYS = keytable.of_unit(keytable.COUNT)
ON, OFF = {"on", "true", "yes", "1"}, {"off", "false", "no", "0"}


def matches(rec: RunRecord, keys: Dict[str, Any], key: str, wanted: str) -> bool:
    """Whether a run's `key` is the filter value `wanted`, read as the key's type."""
    from mpiwrite.units import parse_size, parse_time

    have = keys.get(key)
    if str(have) == wanted:
        return True
    try:
        if key in SIZE_KEYS:
            stored = rec.params().get(key)
            return stored is not None and int(stored) == parse_size(wanted)
        if key in DURATION_KEYS:
            stored = rec.params().get(key)
            return stored is not None and abs(float(stored) - parse_time(wanted)) < 1e-9
        if key in COUNT_KEYS:
            return int(have) == int(wanted)
    except (TypeError, ValueError, ConfigError):
        return False
    low, have_low = wanted.strip().lower(), str(have).strip().lower()
    return (low in ON and have_low in ON) or (low in OFF and have_low in OFF)


def parse_filter(text: str, option: str = "filter") -> Dict[str, str]:
    """KEY=VALUE[,KEY=VALUE...] into a dict.

    Quoting, for values holding ',' '=' or '"': a value (or part of it) in double quotes is
    taken literally (`q="x,y"`), and a backslash takes the next character literally
    (`q=x\\,y`, `q="say \\"hi\\""`).  The first unquoted '=' of each part ends the key."""
    parts: List[List[Tuple[bool, str]]] = [[]]
    quoted, i = False, 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            parts[-1].append((True, text[i + 1]))
            i += 2
            continue
        if c == '"':
            quoted = not quoted
        elif c == "," and not quoted:
            parts.append([])
        else:
            parts[-1].append((quoted, c))
        i += 1
    if quoted:
        raise ConfigError(f"{option}: {printable(text)!r} has an unclosed quote")
    out = {}
    for part in parts:
        eq = next((j for j, (lit, c) in enumerate(part) if c == "=" and not lit), None)
        if eq is None:
            raise ConfigError(f"{option}: {printable(text)!r}: expected KEY=VALUE[,KEY=VALUE...]"
                              " (quote values holding ',': KEY=\"a,b\")")
        key = "".join(c for _lit, c in part[:eq]).strip()
        value = part[eq + 1:]
        text_v = "".join(c for _lit, c in value)
        if not key:
            raise ConfigError(f"{option}: {printable(text)!r}: empty key")
        out[key] = text_v if any(lit for lit, _c in value) else text_v.strip()
    return out


class MetricInfo(NamedTuple):
    """How the numbers of a metric read, so no output calls CPU seconds MB/s (the fields of
    vocab/metrics.py's entry: unit, key suffix, header, direction, decimals, a difference's
    unit)."""
    unit: str
    suffix: str
    header: str
    higher_is_better: bool = True
    digits: int = 1
    diff_unit: str = ""


def _info(m: metricnames.Metric) -> MetricInfo:
    return MetricInfo(m.unit, m.suffix, m.header, m.higher_is_better, m.digits, m.diff_unit)


# what follows is read from the table (vocab/metrics.py), never listed here
METRICS = {m.name: m.column for m in metricnames.TABLE if m.source == metricnames.COLUMN}
RATE = _info(metricnames.BY_NAME["aggregate"])
CPU_METRICS = {m.name: _info(m) for m in metricnames.TABLE if m.name not in metricnames.RATES}
METRIC_NAMES = list(metricnames.NAMES)
CPU_MISSING = ("records from before mpiwrite measured client CPU have none, nor do runs with "
               "MPIWRITE_NO_ACCOUNTING=1")


def a_figure(metric: str) -> str:
    """'a read figure', 'an aggregate figure': for messages naming what a run lacks."""
    return f"{'an' if metric[:1] in tuple('aeiou') else 'a'} {metric} figure"


def metric_info(metric: str, units: str = "MB") -> MetricInfo:
    """The unit and direction of a metric (MB/s, more is better, unless a CPU metric); with
    units `MiB` a rate is in MiB/s, its keys named so (mean_MiB_per_s)."""
    if metric not in METRIC_NAMES:
        raise ConfigError(f"--metric: {metric!r} is not one of {', '.join(METRIC_NAMES)}")
    rate_scale("aggregate", units)  # checks units
    if metric in CPU_METRICS or units == "MB":
        return CPU_METRICS.get(metric, RATE)
    return RATE._replace(unit=f"{units}/s", suffix=f"{units}_per_s", header=f"{units}/s")


def rate_scale(metric: str, units: str = "MB") -> float:
    """What a stored MB/s figure of `metric` is multiplied by to be in `units`/s (1 for the
    CPU metrics, which are no rates)."""
    from mpiwrite.units import MB, RATE_UNITS

    if units not in RATE_UNITS:
        raise ConfigError(f"--units: {units!r} is not one of {', '.join(RATE_UNITS)}")
    return 1.0 if metric in CPU_METRICS else MB / RATE_UNITS[units]


def rate_key(name: str, units: str = "MB") -> str:
    """A rate's key in JSON and CSV, its unit in the name: rank_mean_MB_per_s."""
    return f"{name}_{units}_per_s"


def _cpu_values(rec: RunRecord, its: np.ndarray, metric: str) -> List[float]:
    """Per good iteration: the busiest node's CPU busy percent, or CPU seconds per GB (the
    ranks' and the client's own processes': answers/clientcpu.py)."""
    if metric == "client-cpu":
        if "node_cpu_busy_max" not in (its.dtype.names or ()):
            return []
        vals = [100.0 * float(v) for v in its["node_cpu_busy_max"]]
    else:
        from mpiwrite.answers import clientcpu

        vals = [clientcpu.of_record(rec, int(it)).total for it in its["iteration"]]
    return [v for v in vals if np.isfinite(v)]


OK = int(Status.OK)  # an enum member looked up once, not per record


def metric_values(rec: RunRecord, metric: str, warmup: int = 0) -> List[float]:
    """One value per good iteration of a run for the chosen metric, after leaving out the
    first `warmup` iterations of the run (whatever their status).  A record from before the
    figure existed gives none (never a 0).  Kept on the record: a report asks several
    times per run."""
    memo = rec.__dict__.setdefault("_metric_values", {})
    window = rec.__dict__.get("_window")
    key = (metric, warmup, len(rec.iterations), window)
    if key not in memo:
        # a window is the aggregate's over it; no other figure is the window's (none shown)
        memo[key] = (window_values(rec, window, warmup) if metric == "aggregate" else []) \
            if window else _metric_values(rec, metric, warmup)
    return list(memo[key])


def window_values(rec: RunRecord, window: Tuple[float, float], warmup: int) -> List[float]:
    """Per good iteration, the aggregate MB/s over START..END seconds from its first write
    start, from every rank's samples (formats/summary.bytes_at); none for an iteration whose
    first rank's last write came before END (after it no sample is taken: the final fsync
    would be interpolated across), for a window shorter than the run's --sample-interval
    (it would be an interpolation, not a measurement), or a run without samples."""
    from mpiwrite.formats.summary import PHASE_WRITE, bytes_at

    start, end = window
    its = rec.iterations[(rec.iterations["status"] == OK)
                         & (rec.iterations["iteration"] >= warmup)]
    samples = rec.samples
    out = []
    for it in its["iteration"]:
        ranks = rec.ranks[rec.ranks["iteration"] == it]
        good = ranks[np.isfinite(ranks["t_write_start"]) & np.isfinite(ranks["t_close_end"])]
        mine = samples[(samples["iteration"] == it) & (samples["phase"] == PHASE_WRITE)] \
            if len(samples) else samples
        every = finite(rec.params().get("sample_interval")) or 0.0
        if not len(good) or not len(mine) or end - start < every:
            continue
        t0 = float(good["t_write_start"].min())
        if t0 + end > float(np.nanmin(good["t_write_end"])):
            continue
        got = bytes_at(t0 + end, mine, good) - bytes_at(t0 + start, mine, good)
        out.append(got / (end - start) / 1e6)
    return out


def parse_window(text: str) -> Tuple[float, float]:
    """--window START:END (durations: 10:40, 30s:2min) as seconds; ConfigError if not."""
    from mpiwrite.units import parse_time

    parts = str(text).split(":")
    try:
        if len(parts) != 2:
            raise ValueError
        start, end = parse_time(parts[0]), parse_time(parts[1])
    except ValueError:
        raise ConfigError(f"--window: {text!r} is not START:END (seconds from each "
                          "iteration's first write, e.g. 10:40 or 30s:2min)") from None
    if not 0 <= start < end:
        raise ConfigError(f"--window: {text!r}: START must be at least 0 and before END")
    return start, end


def _metric_values(rec: RunRecord, metric: str, warmup: int) -> List[float]:
    its = rec.iterations[(rec.iterations["status"] == OK)
                         & (rec.iterations["iteration"] >= warmup)]
    source = metricnames.BY_NAME[metric].source if metric in metricnames.BY_NAME else None
    if source == metricnames.PER_NODE:
        vals = []
        from mpiwrite.formats.summary import node_totals

        for it in its["iteration"]:
            totals = node_totals(rec.ranks[rec.ranks["iteration"] == it])["MB_per_s"]
            if not np.isfinite(totals).any():  # an imported record: no rank on a node
                continue
            vals.append(float(np.nanmean(totals)))
        return vals
    if source == metricnames.CPU:
        return _cpu_values(rec, its, metric)
    if source == metricnames.STONEWALL:
        return _stonewall_values(rec, its)
    if metric not in METRICS:
        raise ConfigError(f"--metric: {metric!r} is not one of {', '.join(METRIC_NAMES)}")
    col = METRICS[metric]
    if col not in (its.dtype.names or ()):
        return []  # a record from before the figure existed
    return [float(v) for v in its[col] if np.isfinite(v)]


def _stonewall_values(rec: RunRecord, its: np.ndarray) -> List[float]:
    """Per good iteration of a --stonewall run: its stonewall rate (none for other runs)."""
    import json

    text = rec.attrs.get("stonewall")
    try:
        figures = text if isinstance(text, list) else json.loads(text or "null")
    except (TypeError, ValueError, RecursionError):
        return []
    if not isinstance(figures, list):
        return []
    good = {int(i) for i in its["iteration"]}
    out = []
    for f in figures:
        if isinstance(f, dict) and f.get("iteration") in good:
            v = finite(f.get("stonewall_MB_per_s"))
            if v is not None:
                out.append(v)
    return out


UNITS = ("auto", "run", "iteration")


def resolve_unit(runs: Sequence[RunRecord], unit: str, warmup: int = 0) -> str:
    """The sample unit: `run` (one value per run, the mean of its iterations) or `iteration`.
    `auto` is `run` when some run has several good iterations after the warm-up (they are
    not independent samples), else `iteration` (then the two are the same)."""
    if unit not in UNITS:
        raise ConfigError(f"--unit: {unit!r} is not one of {', '.join(UNITS)}")
    if unit != "auto":
        return unit
    several = any(int(np.sum((r.iterations["status"] == OK)
                             & (r.iterations["iteration"] >= warmup))) > 1 for r in runs)
    return "run" if several else "iteration"


def sample_values(runs: Sequence[RunRecord], metric: str, unit: str,
                  warmup: int = 0, units: str = "MB") -> List[float]:
    """The samples of a set of runs: each good iteration (unit `iteration`) or each run's
    mean over its good iterations (unit `run`; a run with none gives no sample); rates in
    `units`/s (MB: as stored)."""
    if units != "MB":
        scale = rate_scale(metric, units)
        return [v * scale for v in sample_values(runs, metric, unit, warmup)]
    out: List[float] = []
    for r in runs:
        vals = [v for v in metric_values(r, metric, warmup) if v == v]
        if unit == "run":
            out += [float(np.mean(vals))] if vals else []
        else:
            out += vals
    return out


TABLES = ("runs", "iterations", "ranks", "nodes", "samples")


def load(paths, skip_bad: bool = True, tables: Sequence[str] = TABLES, cache: Any = None):
    """pandas DataFrames of runs, iterations, ranks, nodes and samples, keyed by run_id.

    `tables` chooses which: without ranks and samples only each record's run-level part is
    read, through the index (`cache` as Store takes it: None for the user's cache folder or
    MPIWRITE_CACHE, False for none, or a folder)."""
    try:
        import pandas as pd
    except ImportError:
        raise ImportError("mpiwrite.answers.results.load needs pandas: "
                          "pip install 'mpiwrite[pandas]'") from None
    unknown = [t for t in tables if t not in TABLES]
    if unknown:
        raise ValueError(f"tables: {', '.join(unknown)} not among {', '.join(TABLES)}")
    level = "full" if {"ranks", "samples"} & set(tables) else "run"
    import os

    # a path (str, bytes, pathlib.Path: any path-like object), or a list of them
    one = isinstance(paths, (str, bytes, os.PathLike))
    paths = [os.fsdecode(os.fspath(p)) for p in ([paths] if one else paths)]
    store = Store(paths, warn=not skip_bad,
                  level=level, cache=cache)
    if store.bad and not skip_bad:
        raise RecordError("; ".join(msg for _p, msg in store.bad))
    runs, its, ranks, nodes, samples = [], [], [], [], []
    for rec in store.runs:
        keys = store.keys(rec)
        runs.append(dict(keys, path=rec.path, params=json.dumps(rec.params())))
        tags = rec.tags()
        hosts = [n.get("host") for n in rec.nodes]
        for name, into in (("iterations", its), ("ranks", ranks), ("samples", samples)):
            if name not in tables:
                continue
            df = pd.DataFrame(getattr(rec, name))
            df.insert(0, "run_id", rec.run_id)
            if name == "ranks" and len(df):
                df["host"] = [host_of(hosts, int(i)) for i in df["node"]]
            for k, v in tags.items():  # never over a measured column (a crafted record's tags)
                df[k if k not in df.columns else f"tag.{k}"] = v
            into.append(df)
        from mpiwrite.formats.nodekeys import summary_value

        for i, n in enumerate(rec.nodes):  # the record's node columns (vocab/keys.py)
            nodes.append({"run_id": rec.run_id, "node": i,
                          **{k: summary_value(n, k) for k in keytable.NODE_COLUMNS},
                          "mem_total_bytes": n.get("mem_total_bytes")})

    def cat(frames):
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()

    out = {"runs": pd.DataFrame(runs), "iterations": cat(its), "ranks": cat(ranks),
           "nodes": pd.DataFrame(nodes), "samples": cat(samples)}
    return {name: out[name] for name in tables}
