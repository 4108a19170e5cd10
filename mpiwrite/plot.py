"""Pictures of results: scaling curves, per-rank bars, throughput timelines (matplotlib)."""

from __future__ import annotations

import os
from typing import Dict, List, Sequence

import numpy as np

from mpiwrite import stats
from mpiwrite.errors import ConfigError
from mpiwrite.results import Store, metric_values

SUFFIXES = (".png", ".svg", ".pdf")


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise ConfigError("plot needs matplotlib: pip install 'mpiwrite[plot]'") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def check_output(path: str) -> None:
    if os.path.splitext(path)[1].lower() not in SUFFIXES:
        raise ConfigError(f"-o: {path!r} must end in {', '.join(SUFFIXES)}")


def scaling(store: Store, out: str, by: Sequence[str], x: str = "nodes",
            metric: str = "aggregate") -> None:
    plt = _pyplot()
    groups: Dict[tuple, Dict[int, List[float]]] = {}
    for r in store.select():
        k = store.keys(r)
        g = tuple(str(k.get(b, "-")) for b in by)
        groups.setdefault(g, {}).setdefault(int(k[x]), []).extend(metric_values(r, metric))
    if not groups:
        raise ConfigError("no complete runs to plot")
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for g, points in sorted(groups.items()):
        xs = sorted(points)
        d = [stats.describe(points[v]) for v in xs]
        means = [s.mean for s in d]
        err = [0 if s.n < 2 else (s.hi - s.lo) / 2 for s in d]
        label = ", ".join(f"{b}={v}" for b, v in zip(by, g)) if by else "runs"
        line = ax.errorbar(xs, means, yerr=err, marker="o", capsize=3, label=label)
        ideal = [means[0] * v / xs[0] for v in xs]
        ax.plot(xs, ideal, linestyle=":", color=line[0].get_color(), alpha=0.6,
                label=f"ideal ({label})")
    ax.set_xlabel(f"{x}")
    ax.set_ylabel(f"{metric} write bandwidth (MB/s, 10^6 B/s)")
    ax.set_title(f"mpiwrite scaling: {metric} MB/s against {x}")
    ax.grid(True, alpha=0.3)
    _finish(fig, ax, plt, out)


def _finish(fig, ax, plt, out: str, legend: bool = True) -> None:
    if legend:
        ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)


def _iteration(rec, iteration):
    """(iteration, its per-rank rows): the last one unless chosen."""
    if not len(rec.iterations):
        raise ConfigError(f"run {rec.run_id} has no iterations")
    it = int(rec.iterations["iteration"][-1]) if iteration is None else iteration
    rows = rec.ranks[rec.ranks["iteration"] == it]
    if not len(rows):
        raise ConfigError(f"--iteration: run {rec.run_id} has no iteration {it}")
    return it, rows


def ranks(rec, out: str, iteration=None) -> None:
    plt = _pyplot()
    it, rows = _iteration(rec, iteration)
    order = np.lexsort((rows["rank"], rows["node"]))
    rows = rows[order]
    hosts = [n.get("host") for n in rec.nodes]
    fig, ax = plt.subplots(figsize=(max(6, 0.25 * len(rows) + 2), 4.5))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    vals = np.nan_to_num(rows["MB_per_s"])
    bars = ax.bar(range(len(rows)), vals,
                  color=[colors[int(n) % len(colors)] for n in rows["node"]])
    slow = int(np.argmin(np.where(np.isfinite(rows["MB_per_s"]), rows["MB_per_s"], np.inf)))
    bars[slow].set_edgecolor("red")
    bars[slow].set_linewidth(2.5)
    bars[slow].set_label(f"slowest: rank {rows['rank'][slow]} on "
                         f"{hosts[int(rows['node'][slow])]} ({vals[slow]:.1f} MB/s)")
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels([str(r) for r in rows["rank"]], fontsize="x-small")
    ax.set_xlabel("rank (grouped by node; colour = node)")
    ax.set_ylabel("per-rank write bandwidth (MB/s)")
    ax.set_title(f"per-rank MB/s, run {rec.run_id}, iteration {it}", fontsize="medium")
    _finish(fig, ax, plt, out)


def timeline(rec, out: str, iteration=None) -> None:
    plt = _pyplot()
    it, rows = _iteration(rec, iteration)
    s = rec.samples[rec.samples["iteration"] == it]
    t0 = float(np.nanmin(rows["t_write_start"]))
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for r in rows:
        mine = s[s["rank"] == r["rank"]]
        ts = np.concatenate([[r["t_write_start"]], mine["t"]]) - t0
        bs = np.concatenate([[0], mine["bytes"]]).astype(float)
        if len(ts) < 2:
            continue
        rate = np.diff(bs) / np.maximum(np.diff(ts), 1e-9) / 1e6
        line = ax.stairs(rate, ts, alpha=0.8, linewidth=1.5,
                         label=f"rank {r['rank']}" if len(rows) <= 12 else None)
        if np.isfinite(r["t_close_end"]):
            ax.axvline(r["t_close_end"] - t0, color=line.get_edgecolor(), linestyle=":",
                       alpha=0.6)
    ax.set_xlabel("time since the first write (s)")
    ax.set_ylabel("per-rank throughput (MB/s)")
    ax.set_title(f"throughput over time, run {rec.run_id}, iteration {it}\n"
                 "(dotted: when each rank finished)", fontsize="medium")
    if len(rows) <= 12:
        ax.legend(fontsize="x-small", ncol=2)
    ax.grid(True, alpha=0.3)
    _finish(fig, ax, plt, out, legend=False)
