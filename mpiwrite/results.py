"""Many records as tables: find them, read them, skip the bad ones, and filter by keys.

`load(paths)` gives pandas DataFrames (runs, iterations, ranks, nodes, samples) joinable on
`run_id`; the command-line tools use the pandas-free `Store` underneath, so pandas stays an
optional extra.
"""

from __future__ import annotations

import glob
import json
import os
import sys
from typing import Any, Dict, Iterable, List, Optional, Tuple

import numpy as np

from mpiwrite import records
from mpiwrite.errors import ConfigError, RecordError
from mpiwrite.units import format_size


def find(paths: Iterable[str]) -> List[str]:
    """Record files from any mix of files, folders (recursively) and shell globs."""
    out: List[str] = []
    for p in paths:
        matches = sorted(glob.glob(p)) if glob.has_magic(p) else [p]
        if not matches:
            raise ConfigError(f"PATHS: nothing matches {p!r}")
        for m in matches:
            if os.path.isdir(m):
                for root, dirs, files in os.walk(m):
                    dirs.sort()
                    out += [os.path.join(root, f) for f in sorted(files)
                            if f.endswith(records.SUFFIX) and not f.startswith(".")]
            elif os.path.exists(m):
                out.append(m)
            else:
                raise ConfigError(f"PATHS: {m!r} does not exist")
    seen = set()
    return [p for p in out if not (p in seen or seen.add(p))]


def run_keys(rec: records.RunRecord) -> Dict[str, Any]:
    """The keys a run can be grouped and filtered by (built-in keys, then user tags)."""
    p = rec.params()
    keys: Dict[str, Any] = dict(rec.keys())
    ranks, nodes = int(rec.attrs.get("ranks", 0)), int(rec.attrs.get("nodes", 0))
    keys.update(
        run_id=rec.run_id, status=rec.status, nodes=nodes, ranks=ranks,
        ranks_per_node=ranks // nodes if nodes else 0,
        block_size=format_size(p.get("block_size", 0)),
        size=format_size(p["size"]) if p.get("size") else "time",
        time_limit=p.get("time_limit"), layout=p.get("layout"),
        fsync=f"every {p['fsync_every']}" if p.get("fsync_every") else
        ("on" if p.get("fsync") else "off"),
        direct="on" if p.get("direct") else "off", host=rec.attrs.get("host"),
        start_time=rec.attrs.get("start_time"), iterations=len(rec.iterations),
        mpi=str(rec.attrs.get("mpi_library", "")).split(",")[0],
        lustre_kernel=_common([n.get("lustre", {}).get("kernel", "n/a") for n in rec.nodes]),
    )
    keys.update(rec.tags())
    return keys


def _common(values: List[str]) -> str:
    s = set(values)
    return s.pop() if len(s) == 1 else "mixed"


class Store:
    """The readable records under some paths; the unreadable ones are listed in `bad`."""

    def __init__(self, paths: Iterable[str], warn=True):
        self.runs: List[records.RunRecord] = []
        self.bad: List[Tuple[str, str]] = []
        for path in find(paths):
            try:
                self.runs.append(records.read(path))
            except RecordError as exc:
                self.bad.append((path, str(exc)))
                if warn:
                    sys.stderr.write(f"mpiwrite: skipped {exc}\n")
        self.runs.sort(key=lambda r: (str(r.attrs.get("start_time")), r.run_id))
        self._keys = {id(r): run_keys(r) for r in self.runs}

    def keys(self, rec: records.RunRecord) -> Dict[str, Any]:
        return self._keys[id(rec)]

    def select(self, flt: Optional[Dict[str, str]] = None, complete_only: bool = True):
        out = []
        for r in self.runs:
            if complete_only and r.status != "complete":
                continue
            k = self.keys(r)
            if flt and any(str(k.get(key)) != val for key, val in flt.items()):
                continue
            out.append(r)
        return out

    def find_run(self, ident: str) -> records.RunRecord:
        hits = [r for r in self.runs if r.run_id == ident or r.run_id.startswith(ident)
                or os.path.abspath(r.path) == os.path.abspath(ident)]
        if len(hits) != 1:
            raise ConfigError(f"RUN: {ident!r} matches {len(hits)} records (give a path or a "
                              "longer run id)")
        return hits[0]


def parse_filter(text: str) -> Dict[str, str]:
    """KEY=VALUE[,KEY=VALUE...] into a dict."""
    out = {}
    for part in text.split(","):
        if "=" not in part:
            raise ConfigError(f"filter {text!r}: expected KEY=VALUE[,KEY=VALUE...]")
        k, v = part.split("=", 1)
        out[k.strip()] = v.strip()
    return out


METRICS = {
    "aggregate": "aggregate_MB_per_s",
    "first-done": "first_done_MB_per_s",
    "rank-mean": "rank_mean_MB_per_s",
}


def metric_values(rec: records.RunRecord, metric: str) -> List[float]:
    """One value per good iteration of a run for the chosen metric."""
    its = rec.iterations[rec.iterations["status"] == 0]
    if metric == "per-node":
        vals = []
        from mpiwrite.summary import node_totals

        for it in its["iteration"]:
            rows = rec.ranks[rec.ranks["iteration"] == it]
            vals.append(float(np.nanmean(node_totals(rows)["MB_per_s"])))
        return vals
    if metric not in METRICS:
        raise ConfigError(f"--metric: {metric!r} is not one of "
                          f"{', '.join(list(METRICS) + ['per-node'])}")
    return [float(v) for v in its[METRICS[metric]]]


def load(paths, skip_bad: bool = True):
    """pandas DataFrames of runs, iterations, ranks, nodes and samples, keyed by run_id."""
    try:
        import pandas as pd
    except ImportError:
        raise ImportError("mpiwrite.results.load needs pandas: pip install 'mpiwrite[pandas]'") \
            from None
    store = Store([paths] if isinstance(paths, str) else paths, warn=not skip_bad)
    if store.bad and not skip_bad:
        raise RecordError("; ".join(msg for _p, msg in store.bad))
    runs, its, ranks, nodes, samples = [], [], [], [], []
    for rec in store.runs:
        keys = store.keys(rec)
        runs.append(dict(keys, path=rec.path, params=json.dumps(rec.params())))
        tags = rec.tags()
        hosts = [n.get("host") for n in rec.nodes]
        for name, table, into in (("iterations", rec.iterations, its),
                                  ("ranks", rec.ranks, ranks), ("samples", rec.samples, samples)):
            df = pd.DataFrame(table)
            df.insert(0, "run_id", rec.run_id)
            if name == "ranks" and len(df):
                df["host"] = [hosts[int(i)] for i in df["node"]]
            for k, v in tags.items():
                df[k] = v
            into.append(df)
        for i, n in enumerate(rec.nodes):
            lus = n.get("lustre") or {}
            nodes.append({"run_id": rec.run_id, "node": i, "host": n.get("host"),
                          "kernel": n.get("kernel"), "lustre": lus.get("version"),
                          "checksums": lus.get("checksums"),
                          "checksum_type": lus.get("checksum_type"),
                          "fstype": (n.get("fs") or {}).get("fstype"),
                          "mem_total_bytes": n.get("mem_total_bytes")})

    def cat(frames):
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()

    return {"runs": pd.DataFrame(runs), "iterations": cat(its), "ranks": cat(ranks),
            "nodes": pd.DataFrame(nodes), "samples": cat(samples)}
