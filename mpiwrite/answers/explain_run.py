"""`explain RUN`: the variation between the ranks of one run (docs/explain.md, "One run").

The samples are the ranks' own write rates (the rank table's MB_per_s: its bytes over its
open-to-fsync time), one per rank and good iteration after --warmup.  The keys are what can
differ between ranks of one run: the storage `target` that holds the rank's file in that
iteration (answers/targets.py), its `host`, its `rank`, the `iteration`, and every node fact
that differs between the run's nodes (a node's `cpu_model`, `kernel`, `lustre.osc...`).  The
analysis is explain.py's (shares, permutation p, confounded keys, effects within each other's
levels), and the per-target table is `show --by target`'s, over the same iterations.
"""

from __future__ import annotations

from typing import Any, Dict, List

import numpy as np

from mpiwrite.answers import explain as history
from mpiwrite.answers.report import Sampling
from mpiwrite.answers.results import metric_info
from mpiwrite.answers.targets import by_target, file_targets, good_iterations
from mpiwrite.errors import ConfigError
from mpiwrite.formats import contract
from mpiwrite.formats.nodekeys import common_keys, fact_keys
from mpiwrite.text import printable
from mpiwrite.vocab import metrics as metricnames
from mpiwrite.vocab.status import Status

# In one run both name the ranks' own write rate: the figure each rank has.
RANK_METRICS = tuple(m.name for m in metricnames.TABLE if m.rank_figure)
OK = int(Status.OK)


class RankSamples:
    """The rank rows of one run's good iterations and, per row, its keys (explain.Samples'
    attributes: each row is its own unit)."""

    count_key = "ranks"

    def __init__(self, rec, iterations: List[int]):
        rows = rec.ranks[np.isin(rec.ranks["iteration"], iterations)
                         & (rec.ranks["status"] == OK) & np.isfinite(rec.ranks["MB_per_s"])]
        rows = rows[np.lexsort((rows["rank"], rows["iteration"]))]
        self.values = [float(v) for v in rows["MB_per_s"]]
        self.runs = [(int(it), int(r)) for it, r in zip(rows["iteration"], rows["rank"])]
        self.run_of = list(range(len(self.values)))
        nodes = [n if isinstance(n, dict) else {} for n in rec.nodes]
        hosts = [str(n.get("host", "?")) for n in nodes]
        unique_names = len(set(hosts)) == len(hosts)
        used = sorted({int(n) for n in rows["node"]})
        facts = {i: {**fact_keys([nodes[i]]), **common_keys([nodes[i]])}
                 for i in used if 0 <= i < len(nodes)}
        cols: Dict[str, List[str]] = {
            "host": [hosts[n] if unique_names and 0 <= n < len(hosts) else
                     (f"node {n}" if n >= 0 else "node not known")
                     for n in map(int, rows["node"])],
            "rank": [str(r) for r in rows["rank"]]}
        if len(iterations) > 1:
            cols["iteration"] = [str(i) for i in rows["iteration"]]
        where = file_targets(rec)
        if any(where.values()) and str(rec.params().get("layout")) != "shared":
            cols["target"] = ["+".join(where.get(u) or ["-"]) for u in self.runs]
        names = set().union(*facts.values()) if facts else set()
        for k in sorted(names, key=history._order):  # node facts that differ between nodes
            per_node = {i: f.get(k, "-") for i, f in facts.items()}
            if len(set(per_node.values())) > 1 and k not in cols:
                cols[k] = [per_node.get(int(n), "-") for n in rows["node"]]
        self.keys = {k: [printable(v) for v in col] for k, col in cols.items()}

    def per_sample(self, key: str) -> List[str]:
        return self.keys[key]


def explain_run(rec, sampling: Sampling, permutations: int = history.stats.PERMUTATIONS,
                seed: int = history.stats.SEED) -> Dict[str, Any]:
    """The `explain RUN --format json` document (scope `ranks`).  ConfigError for a metric
    or unit that has no per-rank meaning, or a run without a good iteration."""
    if sampling.metric not in RANK_METRICS:
        raise ConfigError(f"--metric: {sampling.metric} has no per-rank figure; explain on one "
                          f"run explains the ranks' write rates ({' or '.join(RANK_METRICS)})")
    if sampling.unit != "auto":
        raise ConfigError(f"--unit: {sampling.unit} does not apply to one run: its samples are "
                          "its ranks, one per rank and iteration")
    if not len(rec.ranks):
        said = f" (imported from {rec.imported().get('tool')})" if rec.imported() else ""
        raise ConfigError(f"RUN: {rec.path} has no per-rank figures{said}: nothing varies "
                          "between ranks to explain; give its folder to explain the runs")
    iterations = good_iterations(rec, sampling.warmup)
    s = RankSamples(rec, iterations)
    if not s.values:
        said = f" after --warmup {sampling.warmup}" if sampling.warmup else ""
        raise ConfigError(f"RUN: {rec.path}: no iteration with every rank's rate{said} "
                          f"(status {rec.status})")
    info = metric_info(sampling.metric)
    rows, notes = by_target(rec, sampling.confidence, iterations)
    doc = contract.header("explain")
    doc.update(scope="ranks", run_id=rec.run_id, path=rec.path, run_status=rec.status,
               metric=sampling.metric, metric_unit=info.unit,
               higher_is_better=info.higher_is_better, unit="rank",
               unit_requested=sampling.unit, warmup=sampling.warmup,
               confidence=sampling.confidence, runs=1, samples=len(s.values),
               runs_without_figure=0, iterations=iterations,
               ranks=len({r for _it, r in s.runs}), nodes=len(set(s.keys["host"])),
               targets={"rows": rows, "notes": notes})
    doc.update(history.analyse(s, sampling.confidence, info.suffix, permutations, seed,
                               clear_first=True))
    return contract.finite(doc)

