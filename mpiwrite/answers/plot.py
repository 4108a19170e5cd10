"""Pictures of results: scaling curves, per-rank bars, throughput timelines (matplotlib)."""

from __future__ import annotations

import os
from typing import Dict, Sequence

import numpy as np

from mpiwrite import files, stats
from mpiwrite.answers.results import (
    Store,
    metric_info,
    metric_values,
    resolve_unit,
    sample_values,
)
from mpiwrite.errors import ConfigError
from mpiwrite.formats.summary import host_of
from mpiwrite.units import MB

SUFFIXES = (".png", ".svg", ".pdf")


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise ConfigError("plot needs matplotlib: pip install 'mpiwrite[plot]'") from None
    matplotlib.use("Agg")
    # Labels hold tags, run ids and host names: text, never mathtext or TeX ('cost $x^$'
    # must be drawn as written, not parsed into a ParseSyntaxException); _finish makes sure
    # of every text object again
    matplotlib.rcParams["text.parse_math"] = False
    matplotlib.rcParams["text.usetex"] = False
    import matplotlib.pyplot as plt

    return plt


def check_output(path: str) -> None:
    if os.path.splitext(path)[1].lower() not in SUFFIXES:
        raise ConfigError(f"-o: {path!r} must end in {', '.join(SUFFIXES)}")


# What a scaling point must not pool: runs at one node count with different ranks per node
# (or at one rank count on different node counts) are different experiments.
POOLING = {"nodes": "ranks_per_node", "ranks": "nodes", "ranks_per_node": "nodes"}


def scaling(store: Store, out: str, by: Sequence[str], x: str = "nodes",
            sampling=None) -> None:
    """Mean per x with its confidence interval (clipped at zero: no negative bandwidth) on a
    log2 x axis with the x values as integer ticks, and each bandwidth line's ideal (linear
    from its first point) dashed in the same colour; client CPU has no linear ideal.  A run
    without the metric's figure (a record from before it) is left out, not drawn as a gap, and
    so is one imported without a count on the x axis (IOR's CSV and IO500 do not say the
    nodes: 0), which a log axis has no place for."""
    from mpiwrite.answers.report import DEFAULT_SAMPLING, check_pooling

    sampling = sampling or DEFAULT_SAMPLING
    metric, confidence, warm = sampling.metric, sampling.confidence, sampling.warmup
    plt = _pyplot()
    units = getattr(sampling, "units", "MB")
    info = metric_info(metric, units)
    members: Dict[tuple, Dict[int, list]] = {}
    unplaced = 0
    for r in store.select():
        if not metric_values(r, metric, warm):
            continue
        k = store.keys(r)
        if int(k[x]) <= 0:  # imported, its tool silent on its nodes: no place on the axis
            unplaced += 1
            continue
        g = tuple(str(k.get(b, "-")) for b in by)
        members.setdefault(g, {}).setdefault(int(k[x]), []).append(r)
    if not members:
        raise ConfigError(f"no complete runs with {metric} figures to plot" + (
            f" ({unplaced} imported without a count of {x})" if unplaced else ""))
    point_runs = {",".join(f"{b}={v}" for b, v in zip(by, g)) + f" {x}={xv}": runs
                  for g, pts in members.items() for xv, runs in pts.items()}
    check_pooling(point_runs, store.keys, by, "--by")
    other = POOLING[x]
    for label, runs in point_runs.items():
        seen = sorted({str(store.keys(r).get(other)) for r in runs})
        if other not in by and len(seen) > 1:
            raise ConfigError(f"--x {x}: the point {label.strip()} would pool runs with "
                              f"{other} {' and '.join(seen)}; add {other} to --by (a line "
                              "each) or select one value")
    # one sample per run (its mean) or per iteration, as report decides (resolve_unit)
    unit = resolve_unit([r for pts in members.values() for rs in pts.values() for r in rs],
                        sampling.unit, warm)
    groups = {g: {xv: sample_values(rs, metric, unit, warm, units) for xv, rs in pts.items()}
              for g, pts in members.items()}
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    ticks = set()
    ci = f"{confidence * 100:g}% CI"
    for g, points in sorted(groups.items()):
        xs = sorted(points)
        ticks.update(xs)
        d = [stats.describe(points[v], confidence) for v in xs]
        # a rate's interval is its geometric mean's (from the logs): the point is that mean
        means = np.array([s.gmean if s.ratio else s.mean for s in d])
        lo = np.array([(s.glo if s.ratio else s.lo) if s.n > 1 else m
                       for s, m in zip(d, means)])
        hi = np.array([(s.ghi if s.ratio else s.hi) if s.n > 1 else m
                       for s, m in zip(d, means)])
        # exp(mean(log x)) of one value is x but for the last bit: never a negative bar
        yerr = np.maximum(np.vstack([means - np.maximum(lo, 0), hi - means]), 0)
        # a line per --by group is named by it; with no --by the one line needs no name
        label = ", ".join(f"{b}={v}" for b, v in zip(by, g)) + ": " if by else ""
        line = ax.errorbar(xs, means, yerr=yerr, marker="o", capsize=4,
                           label=f"{label}{'geometric ' if d[0].ratio else ''}mean, "
                           f"error bars {ci}")
        if len(xs) > 1 and info.higher_is_better:
            ax.plot(xs, [means[0] * v / xs[0] for v in xs], linestyle="--", linewidth=1.5,
                     color=line[0].get_color(), alpha=0.8, label=f"{label}ideal (linear)")
    ax.set_xscale("log", base=2)
    ax.set_xticks(sorted(ticks))
    ax.set_xticklabels([str(t) for t in sorted(ticks)])
    ax.minorticks_off()
    ax.set_ylim(bottom=0)
    ax.set_xlabel(f"{x} (log2 scale)")
    if info.unit == f"{units}/s":
        phase = "read" if metric == "read" else "write"  # not "read write bandwidth"
        ax.set_ylabel(f"{'' if metric == 'read' else metric + ' '}{phase} bandwidth "
                      f"({units}/s, {'10^6' if units == 'MB' else '2^20'} B/s)")
    else:
        ax.set_ylabel(f"{metric} ({info.header})")
    ax.set_title(f"mpiwrite scaling: {metric} {info.unit} against {x}")
    ax.grid(True, alpha=0.3)
    _finish(fig, ax, plt, out)


def _finish(fig, ax, plt, out: str, legend: bool = True) -> None:
    if legend:
        ax.legend(fontsize="small")
    from matplotlib.text import Text

    for text in fig.findobj(Text):
        text.set_usetex(False)
        text.set_parse_math(False)
    fig.tight_layout()
    import io

    buf = io.BytesIO()  # drawn in memory, then a new file renamed over `out` (never through a
    if isinstance(out, Drawn):  # link planted at the name), or kept for a page
        out.keep(fig, buf)
        plt.close(fig)
        return
    fig.savefig(buf, format=os.path.splitext(out)[1][1:].lower())
    plt.close(fig)
    files.replace_file(out, buf.getvalue())


class Drawn:
    """A plot kept in memory as SVG instead of a file (`page`'s inline plots): text as SVG
    text (escaped by matplotlib's writer), ids salted the same way every time, no metadata
    (its RDF names web addresses)."""

    def __init__(self):
        self.svg = ""

    def keep(self, fig, buf) -> None:
        import matplotlib

        with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "mpiwrite"}):
            fig.savefig(buf, format="svg", metadata={"Creator": None, "Date": None,
                                                     "Format": None, "Type": None})
        self.svg = buf.getvalue().decode("utf-8")


def _iteration(rec, iteration):
    """(iteration, its per-rank rows): the last one unless chosen."""
    if not len(rec.iterations):
        raise ConfigError(f"run {rec.run_id} has no iterations")
    if not len(rec.ranks) and rec.imported():
        raise ConfigError(f"run {rec.run_id} was imported from {rec.imported().get('tool')}: "
                          "it has no per-rank figures to draw (docs/import.md)")
    it = int(rec.iterations["iteration"][-1]) if iteration is None else iteration
    rows = rec.ranks[rec.ranks["iteration"] == it]
    if not len(rows):
        raise ConfigError(f"--iteration: run {rec.run_id} has no iteration {it}")
    return it, rows


BARS_UP_TO = 256  # ranks drawn as bars; above this, per-node box plots or a histogram
BOXES_UP_TO = 48  # nodes drawn as box plots; above this, a histogram of the ranks


def ranks(rec, out: str, iteration=None) -> None:
    """Per-rank MB/s of one iteration: bars up to BARS_UP_TO ranks, then one box per node
    (up to BOXES_UP_TO nodes), then a histogram; the figure stays within 16 inches."""
    plt = _pyplot()
    it, rows = _iteration(rec, iteration)
    rows = rows[np.lexsort((rows["rank"], rows["node"]))]
    hosts = [str(n.get("host")) for n in rec.nodes]
    rates = np.asarray(rows["MB_per_s"], dtype=float)
    finite = np.isfinite(rates)
    slow = int(np.argmin(np.where(finite, rates, np.inf))) if finite.any() else None
    slow_text = (f"slowest: rank {rows['rank'][slow]} on "
                 f"{host_of(hosts, int(rows['node'][slow]), 'a node not known')} "
                 f"({rates[slow]:.1f} MB/s)") if slow is not None else "no finished rank"
    title = f"per-rank MB/s, run {rec.run_id}, iteration {it} ({len(rows)} ranks)"
    if len(rows) <= BARS_UP_TO:
        fig, ax = plt.subplots(figsize=(min(16, max(6, 0.06 * len(rows) + 5)), 4.5))
        colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
        vals = np.nan_to_num(rates)
        bars = ax.bar(range(len(rows)), vals, width=0.85,
                      color=[colors[int(n) % len(colors)] for n in rows["node"]])
        if slow is not None:
            bars[slow].set_edgecolor("red")
            bars[slow].set_linewidth(2.5)
            bars[slow].set_label(slow_text)
        step = max(1, int(np.ceil(len(rows) / 40)))
        ax.set_xticks(range(0, len(rows), step))
        ax.set_xticklabels([str(r) for r in rows["rank"][::step]], fontsize="x-small")
        ax.set_xlabel("rank (grouped by node; colour = node)" if (rows["node"] >= 0).all()
                      else "rank (the tool named no node)")
        legend = slow is not None
    else:
        nodes = sorted(set(int(n) for n in rows["node"]))
        fig, ax = plt.subplots(figsize=(min(16, max(7, 0.3 * len(nodes) + 3)), 4.8))
        if len(nodes) <= BOXES_UP_TO:
            data = [rates[(rows["node"] == n) & finite] for n in nodes]
            keep = [i for i, v in enumerate(data) if v.size]
            ax.boxplot([data[i] for i in keep], positions=[i + 1 for i in keep], widths=0.6,
                       showfliers=True, flierprops={"markersize": 2})
            ax.set_xticks(range(1, len(nodes) + 1))
            ax.set_xticklabels([host_of(hosts, n) for n in nodes], rotation=60, ha="right",
                               fontsize="x-small")
            ax.set_xlabel("node (box: quartiles of its ranks; whiskers 1.5 IQR; dots: outliers)")
            title += ", per node"
        else:
            ax.hist(rates[finite], bins=min(100, max(10, int(np.sqrt(finite.sum())))))
            ax.set_xlabel("per-rank write bandwidth (MB/s)")
            title += ", histogram"
        if slow is not None:
            if len(nodes) <= BOXES_UP_TO:
                ax.plot([nodes.index(int(rows["node"][slow])) + 1], [rates[slow]], "rv",
                        label=slow_text)
            else:
                ax.axvline(rates[slow], color="red", linestyle=":", label=slow_text)
        legend = slow is not None
    ax.set_ylabel("per-rank write bandwidth (MB/s)" if len(rows) <= BARS_UP_TO
                  or ax.get_xlabel().startswith("node") else "ranks")
    ax.set_title(title, fontsize="medium")
    _finish(fig, ax, plt, out, legend=legend)


def timeline(rec, out: str, iteration=None) -> None:
    plt = _pyplot()
    it, rows = _iteration(rec, iteration)
    s = rec.samples[rec.samples["iteration"] == it]
    if "phase" in (s.dtype.names or ()):  # records with a read phase: the writes only
        s = s[s["phase"] == 0]
    t0 = float(np.nanmin(rows["t_write_start"]))
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for r in rows:
        mine = s[s["rank"] == r["rank"]]
        ts = np.concatenate([[r["t_write_start"]], mine["t"]]) - t0
        bs = np.concatenate([[0], mine["bytes"]]).astype(float)
        if len(ts) < 2:
            continue
        rate = np.diff(bs) / np.maximum(np.diff(ts), 1e-9) / MB
        line = ax.stairs(rate, ts, alpha=0.8, linewidth=1.5,
                         label=f"rank {r['rank']}" if len(rows) <= 12 else None)
        if np.isfinite(r["t_close_end"]):
            ax.axvline(r["t_close_end"] - t0, color=line.get_edgecolor(), linestyle=":",
                       alpha=0.6)
    agg_t, agg_rate = _aggregate_rate(rows, s, t0)
    if agg_t.size > 1 and len(rows) > 1:  # one rank's line is the aggregate: not hidden by it
        ax2 = ax.twinx()
        ax2.stairs(agg_rate, agg_t, color="black", linewidth=2.2,
                   label="aggregate (all ranks)")
        ax2.set_ylabel("aggregate throughput (MB/s, black)")
        ax2.set_ylim(bottom=0)
        ax2.legend(loc="upper right", fontsize="x-small")
    ax.set_xlabel("time since the first write (s)")
    ax.set_ylabel("per-rank throughput (MB/s)")
    ax.set_title(f"throughput over time, run {rec.run_id}, iteration {it}\n"
                 "(dotted: when each rank finished)", fontsize="medium")
    if len(rows) <= 12:
        ax.legend(fontsize="x-small", ncol=2, loc="upper left")
    ax.grid(True, alpha=0.3)
    _finish(fig, ax, plt, out, legend=False)


def _aggregate_rate(rows, samples, t0: float):
    """(edges, MB/s) of all ranks together: every rank's bytes interpolated on the union of
    sample times (a rank holds its last count after it finished), then differenced."""
    times = np.unique(np.concatenate([samples["t"], rows["t_write_start"]])) if len(samples) \
        else np.zeros(0)
    times = times[np.isfinite(times)]
    if times.size < 2:
        return np.zeros(0), np.zeros(0)
    total = np.zeros(times.size)
    for r in rows:
        mine = samples[samples["rank"] == r["rank"]]
        ts = np.concatenate([[r["t_write_start"]], mine["t"]])
        bs = np.concatenate([[0], mine["bytes"]]).astype(float)
        if not np.all(np.isfinite(ts)):
            continue
        total += np.interp(times, ts, bs, left=0.0, right=bs[-1])
    rate = np.diff(total) / np.maximum(np.diff(times), 1e-9) / MB
    return times - t0, rate


def _levels_axes(series, order: Sequence[str], xlabel: str, ylabel: str, title: str, out,
                 height: float = 4.8, title_size=None) -> None:
    """One axis's levels evenly spaced (categories, in `order`), a line per series
    (label, x positions, means, lower and upper bounds); error bars never below zero."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7.5, height))
    for label, xs, means, lo, hi in series:
        means = np.asarray(means, dtype=float)
        yerr = np.maximum(np.vstack([means - np.maximum(np.asarray(lo, dtype=float), 0),
                                     np.asarray(hi, dtype=float) - means]), 0)
        ax.errorbar(xs, means, yerr=yerr, marker="o", capsize=4, label=label)
    ax.set_xticks(range(len(order)))
    ax.set_xticklabels([str(lv) for lv in order])
    ax.set_xlim(-0.5, len(order) - 0.5)
    ax.set_ylim(bottom=0)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, **({"fontsize": title_size} if title_size else {}))
    ax.grid(True, alpha=0.3)
    _finish(fig, ax, plt, out)


def levels(lines: Dict[str, Dict[str, Sequence[float]]], order: Sequence[str], axis: str,
           out: str, sampling, title: str = "") -> None:
    """The metric against one axis's levels (`order`: evenly spaced, named as the table names
    them), a line per combination of the other axes (`lines`: label -> level -> samples):
    each level's mean with its confidence interval (a rate's geometric mean and the interval
    from its logs, never below zero)."""
    units = getattr(sampling, "units", "MB")
    info = metric_info(sampling.metric, units)
    ci = f"{sampling.confidence * 100:g}% CI"
    series = []
    for label, by_level in lines.items():
        xs = [i for i, lv in enumerate(order) if by_level.get(lv)]
        d = [stats.describe(by_level[order[i]], sampling.confidence) for i in xs]
        means = [s.gmean if s.ratio else s.mean for s in d]
        geo = "geometric " if d and d[0].ratio else ""
        series.append((f"{label}: {geo}mean, error bars {ci}", xs, means,
                       [(s.glo if s.ratio else s.lo) if s.n > 1 else m
                        for s, m in zip(d, means)],
                       [(s.ghi if s.ratio else s.hi) if s.n > 1 else m
                        for s, m in zip(d, means)]))
    _levels_axes(series, order, axis, f"{sampling.metric} ({info.header})",
                 title or f"mpiwrite: {sampling.metric} {info.unit} against {axis}", out)


def levels_of_rows(rows, axis: str, order: Sequence[str], others: Sequence[str], out,
                   sampling=None) -> None:
    """A study's axis: each level's row mean with its confidence interval (report's rows,
    grouped by every axis), the levels in the study file's order on the x axis, a line per
    combination of the other axes.  Sizes and words alike sit at even steps (categories)."""
    from mpiwrite.answers.report import DEFAULT_SAMPLING
    from mpiwrite.formats import contract

    sampling = sampling or DEFAULT_SAMPLING
    info = metric_info(sampling.metric, sampling.units)
    _n, mean, _sd, lo, hi = contract.stat_keys(info.suffix)[:5]
    lines: Dict[tuple, Dict[int, dict]] = {}
    place = {str(v): i for i, v in enumerate(order)}
    for r in rows:
        at = place.get(str(r["keys"][axis]))
        if at is not None and r.get(mean) is not None:
            lines.setdefault(tuple(str(r["keys"][a]) for a in others), {})[at] = r
    if not lines:
        raise ConfigError(f"no complete runs with {sampling.metric} figures along {axis}")
    series = []
    for other, pts in sorted(lines.items()):
        xs = sorted(pts)
        ms = [float(pts[x][mean]) for x in xs]
        series.append((", ".join(f"{a}={v}" for a, v in zip(others, other)) or "runs", xs, ms,
                       [float(pts[x][lo]) if pts[x].get(lo) is not None else m
                        for x, m in zip(xs, ms)],
                       [float(pts[x][hi]) if pts[x].get(hi) is not None else m
                        for x, m in zip(xs, ms)]))
    _levels_axes(series, order, f"{axis} (the study's levels, in its order)",
                 f"{sampling.metric} ({info.header})",
                 f"{sampling.metric} against {axis}: mean, error bars "
                 f"{sampling.confidence * 100:g}% CI", out, height=4.5, title_size="medium")
