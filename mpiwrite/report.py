"""Tables over many runs (`report`), a verdict between two sets (`compare`), one run (`show`)."""

from __future__ import annotations

import csv
import io
import json
import math
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from mpiwrite import stats
from mpiwrite.errors import ConfigError
from mpiwrite.results import Store, metric_values, parse_filter
from mpiwrite.summary import STATUS_NAMES, node_totals
from mpiwrite.text import printable
from mpiwrite.units import format_seconds, format_size


def _num(x: float, digits: int = 1) -> str:
    return "-" if x is None or x != x else f"{x:.{digits}f}"


def report_rows(store: Store, by: Sequence[str], metric: str = "aggregate",
                baseline: Optional[str] = None, confidence: float = 0.95) -> List[Dict[str, Any]]:
    runs = store.select()
    groups: Dict[tuple, list] = {}
    for r in runs:
        k = store.keys(r)
        missing = [key for key in by if key not in k]
        if missing and len(missing) == len(by):
            raise ConfigError(f"--by: no run has the key(s) {', '.join(missing)}")
        groups.setdefault(tuple(str(k.get(key, "-")) for key in by), []).append(r)
    rows = []
    for key, members in sorted(groups.items(), key=lambda kv: _sort_key(kv[0])):
        values = [v for r in members for v in metric_values(r, metric)]
        s = stats.describe(values, confidence)
        per_rank = np.concatenate([r.ranks["MB_per_s"][np.isin(
            r.ranks["iteration"], r.iterations["iteration"][r.iterations["status"] == 0])]
            for r in members]) if members else np.zeros(0)
        per_rank = per_rank[np.isfinite(per_rank)]
        first = [v for r in members for v in metric_values(r, "first-done")]
        last = [v for r in members for v in metric_values(r, "aggregate")]
        row = {k: v for k, v in zip(by, key)}
        row.update(runs=len(members), n=s.n, mean=s.mean, ci_lo=s.lo, ci_hi=s.hi, min=s.min,
                   max=s.max, rank_mean=float(per_rank.mean()) if per_rank.size else math.nan,
                   rank_std=float(per_rank.std(ddof=1)) if per_rank.size > 1 else math.nan,
                   first_done=float(np.mean(first)) if first else math.nan,
                   last_done=float(np.mean(last)) if last else math.nan, _values=values)
        rows.append(row)
    if baseline:
        flt = parse_filter(baseline, "--baseline")
        unknown = [k for k in flt if k not in by]
        if unknown:
            raise ConfigError(f"--baseline: {', '.join(unknown)} is not among --by keys")
        base = [r for r in rows if all(str(r[k]) == v for k, v in flt.items())]
        if len(base) != 1:
            raise ConfigError(f"--baseline: {baseline!r} matches {len(base)} rows, expected 1")
        for r in rows:
            c = stats.compare(base[0]["_values"], r["_values"], confidence)
            r.update(change_pct=c.pct, change_lo=c.pct_lo, change_hi=c.pct_hi,
                     verdict="base" if r is base[0] else ("real" if c.real else "noise"))
    return rows


def _sort_key(key: tuple):
    return tuple((0, float(k), "") if _isnum(k) else (1, 0.0, k) for k in key)


def _isnum(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


COLUMNS = ["runs", "n", "MB/s ±95%", "min", "max", "rank mean±sd", "first-done"]


def format_rows(rows: List[Dict[str, Any]], by: Sequence[str], fmt: str,
                confidence: float = 0.95) -> str:
    if fmt == "json":
        return json.dumps(jsonable([{k: v for k, v in r.items() if not k.startswith("_")}
                                    for r in rows]), indent=1, allow_nan=False)
    has_change = any("change_pct" in r for r in rows)
    head = list(by) + COLUMNS + (["change % ±95%"] if has_change else [])
    head = [h.replace("95%", f"{confidence * 100:g}%") for h in head]
    body = []
    for r in rows:
        cells = [printable(r[k]) for k in by]
        half = (r["ci_hi"] - r["ci_lo"]) / 2 if r["n"] > 1 else float("nan")
        cells += [str(r["runs"]), str(r["n"]), f"{_num(r['mean'])} ±{_num(half)}",
                  _num(r["min"], 0), _num(r["max"], 0),
                  f"{_num(r['rank_mean'], 0)}±{_num(r['rank_std'], 0)}", _num(r["first_done"])]
        if has_change:
            cells.append(_change_cell(r))
        body.append(cells)
    if fmt == "csv":
        out = io.StringIO()
        w = csv.writer(out)
        w.writerow(list(by) + ["runs", "n", "mean_MB_per_s", "ci_lo", "ci_hi", "min", "max",
                               "rank_mean", "rank_std", "first_done"]
                   + (["change_pct", "change_lo", "change_hi", "verdict"] if has_change else []))
        for r in rows:
            w.writerow([printable(r[k]) for k in by] + [r[k] for k in (
                "runs", "n", "mean", "ci_lo", "ci_hi", "min", "max", "rank_mean", "rank_std",
                "first_done")] + ([r["change_pct"], r["change_lo"], r["change_hi"],
                                   r["verdict"]] if has_change else []))
        return out.getvalue().rstrip("\n")
    head = [printable(h) for h in head]
    widths = [max(len(h), *(len(b[i]) for b in body)) if body else len(h)
              for i, h in enumerate(head)]
    if fmt == "markdown":
        lines = ["| " + " | ".join(_md(h) for h in head) + " |",
                 "|" + "|".join("---" for _ in head) + "|"]
        lines += ["| " + " | ".join(_md(c) for c in b) + " |" for b in body]
        return "\n".join(lines)
    if fmt != "table":
        raise ConfigError(f"--format: {fmt!r} is not one of table, markdown, csv, json")
    right = set(range(len(by), len(head)))
    lines = ["  ".join(h.rjust(w) if i in right else h.ljust(w)
                       for i, (h, w) in enumerate(zip(head, widths))).rstrip()]
    for b in body:
        lines.append("  ".join(c.rjust(w) if i in right else c.ljust(w)
                               for i, (c, w) in enumerate(zip(b, widths))).rstrip())
    if has_change:
        lines.append(f"change: against the base row, {confidence * 100:g}% interval; "
                     "~ = within noise (Welch's t-test)")
    return "\n".join(lines)


def _md(cell: str) -> str:
    """A markdown table cell: '|' escaped so a value cannot add columns (already printable)."""
    return cell.replace("\\", "\\\\").replace("|", "\\|")


def jsonable(x: Any) -> Any:
    """x with NaN and infinities as None (JSON null), numpy scalars as Python values."""
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def _change_cell(r: Dict[str, Any]) -> str:
    if r.get("verdict") == "base":
        return "base"
    if r["change_lo"] != r["change_lo"]:
        return f"{r['change_pct']:+.1f} ±?"
    half = (r["change_hi"] - r["change_lo"]) / 2
    return f"{r['change_pct']:+.1f} ±{half:.1f}{'' if r['verdict'] == 'real' else ' ~'}"


def select_side(spec: str, store_in: Optional[Store], name: str = "A"):
    """A compare side: a record path or folder, or KEY=VALUE filters over --in.

    Returns (complete runs, number of unreadable records met)."""
    import os

    if os.path.lexists(spec):
        store = Store([spec], option=name)
        return store.select(), len(store.bad)
    if "=" in spec and store_in is not None:
        return store_in.select(parse_filter(spec, name)), 0
    raise ConfigError(f"{name}: {printable(spec)!r} is neither a record path nor a KEY=VALUE "
                      "filter")


def compare_text(a_runs, b_runs, a_name: str, b_name: str, metric: str,
                 confidence: float) -> (str, Dict[str, Any]):
    va = [v for r in a_runs for v in metric_values(r, metric)]
    vb = [v for r in b_runs for v in metric_values(r, metric)]
    if not va or not vb:
        side = a_name if not va else b_name
        raise ConfigError(f"{printable(side)}: no complete runs match")
    c = stats.compare(va, vb, confidence)
    pct = f"{confidence * 100:g}%"
    lines = [f"metric: {metric} MB/s; test: Welch's t-test, {pct} confidence"]
    for name, s, runs in ((a_name, c.a, a_runs), (b_name, c.b, b_runs)):
        ci = f"{pct} CI {_num(s.lo)}-{_num(s.hi)}" if s.n > 1 else "no interval (n=1)"
        lines.append(f"  A={name}" if name == a_name else f"  B={name}")
        lines.append(f"     {len(runs)} runs, n={s.n}: mean {_num(s.mean)} MB/s, {ci}, "
                     f"sd {_num(s.std)}")
    if c.a.n < 2 or c.b.n < 2:
        verdict = "cannot tell: each side needs at least 2 repetitions"
    elif c.real:
        verdict = f"a real difference (p = {c.p_value:.2g})"
    else:
        more = (f"about {max(0, c.needed_per_group - min(c.a.n, c.b.n))} more repetitions per "
                f"side would settle a difference of this size" if c.needed_per_group > 0
                else "the means are identical")
        verdict = f"within noise (p = {c.p_value:.2g}); {more}"
    lines.append(f"  B - A: {c.diff:+.1f} MB/s ({_num(c.diff_lo)}..{_num(c.diff_hi)}), "
                 f"{c.pct:+.1f}% ({_num(c.pct_lo)}..{_num(c.pct_hi)})")
    lines.append(f"  verdict: {verdict}")
    doc = {"metric": metric, "test": "welch", "confidence": confidence,
           "a": dict(c.a._asdict(), runs=len(a_runs)), "b": dict(c.b._asdict(), runs=len(b_runs)),
           "diff": c.diff, "diff_ci": [c.diff_lo, c.diff_hi], "pct": c.pct,
           "pct_ci": [c.pct_lo, c.pct_hi], "p_value": c.p_value, "real": c.real,
           "needed_per_group": c.needed_per_group, "verdict": verdict}
    return "\n".join(printable(ln) for ln in lines), jsonable(doc)


def show_text(rec, store_keys: Dict[str, Any], iteration: Optional[int] = None) -> str:
    p = rec.params()
    hosts = [printable(n.get("host")) for n in rec.nodes]
    lines = [f"run {rec.run_id}  status {rec.status}  started {rec.attrs.get('start_time')}",
             f"command: {rec.attrs.get('command_line')}",
             f"ranks {rec.attrs.get('ranks')} on {rec.attrs.get('nodes')} nodes; block "
             f"{format_size(p.get('block_size') or 0)}, size "
             f"{format_size(p['size']) if p.get('size') else '-'}, time "
             f"{p.get('time_limit') or '-'}, fsync {store_keys.get('fsync')}, direct "
             f"{store_keys.get('direct')}, layout {p.get('layout')}, target {p.get('target')}",
             "keys: " + ", ".join(f"{k}={store_keys.get(k)}" for k in
                                  ("kernel", "lustre", "checksums", "checksum_type", "fstype")),
             ]
    if rec.tags():
        lines.append("tags: " + ", ".join(f"{k}={v}" for k, v in rec.tags().items()))
    lines.append("nodes:")
    for i, n in enumerate(rec.nodes):
        lus = n.get("lustre") or {}
        off = rec.node_clock[i] if rec.node_clock is not None else (math.nan, math.nan)
        lines.append(f"  {i:>3} {hosts[i]:<16} kernel {n.get('kernel')}, lustre "
                     f"{lus.get('version') or 'none'} ({lus.get('kernel', 'n/a')}), checksums "
                     f"{lus.get('checksums')} {lus.get('checksum_type') or ''}, fs "
                     f"{(n.get('fs') or {}).get('fstype')}, clock offset {off[0]:+.6f}s "
                     f"±{off[1]:.6f}")
    for it in rec.iterations:
        lines.append(f"iteration {it['iteration']}: {STATUS_NAMES.get(int(it['status']), '?')}"
                     f", aggregate {_num(it['aggregate_MB_per_s'])} MB/s, first done "
                     f"{_num(it['first_done_MB_per_s'])} MB/s, tail "
                     f"{format_seconds(float(it['tail_seconds']))}")
    if len(rec.iterations):
        it = int(rec.iterations["iteration"][-1]) if iteration is None else iteration
        rows = rec.ranks[rec.ranks["iteration"] == it]
        if not len(rows):
            raise ConfigError(f"--iteration: the run has no iteration {it}")
        rates = rows["MB_per_s"][np.isfinite(rows["MB_per_s"])]
        if rates.size:
            cv = rates.std(ddof=1) / rates.mean() * 100 if rates.size > 1 else 0.0
            tail = float(np.nanmax(rows["t_close_end"]) - np.nanmin(rows["t_close_end"]))
            lines.append(f"iteration {it}: imbalance slowest/fastest "
                         f"{rates.min() / rates.max():.3f}, coefficient of variation "
                         f"{cv:.1f}%, straggler tail {format_seconds(tail)}")
        lines.append("per node:")
        for n in node_totals(rows):
            lines.append(f"  {hosts[int(n['node'])]:<16} {int(n['ranks']):>4} ranks "
                         f"{format_size(int(n['bytes'])):>9} {_num(float(n['MB_per_s']))} MB/s")
        lines.append("per rank, slowest first:")
        lines.append(f"  {'rank':>5} {'host':<16} {'MB/s':>9} {'bytes':>9} {'open s':>8} "
                     f"{'write s':>8} {'fsync s':>8} {'close s':>8} {'offset s':>10} status")
        order = np.argsort(np.where(np.isfinite(rows["MB_per_s"]), rows["MB_per_s"], -1))
        for r in rows[order]:
            lines.append(f"  {r['rank']:>5} {hosts[int(r['node'])]:<16} "
                         f"{_num(float(r['MB_per_s'])):>9} {format_size(int(r['bytes'])):>9} "
                         f"{_num(float(r['open_seconds']), 4):>8} "
                         f"{_num(float(r['write_seconds']), 3):>8} "
                         f"{_num(float(r['fsync_seconds']), 3):>8} "
                         f"{_num(float(r['close_seconds']), 4):>8} "
                         f"{float(r['clock_offset_seconds']):>+10.6f} "
                         f"{STATUS_NAMES.get(int(r['status']), '?')}")
    for w in rec.warnings():
        lines.append(f"warning: {w}")
    for e in rec.errors:
        lines.append(f"error: iteration {e.get('iteration')} rank {e.get('rank')} on "
                     f"{e.get('host')}: {e.get('phase')} {e.get('path')}: {e.get('message')}")
    return "\n".join(printable(ln) for ln in lines)
