"""`mpiwrite tune report`: each factor's main effect from a two-level screening study
(docs/tune.md).

Every complete run is one observation: the mean of its metric over its good iterations, at
its point's levels (-1: the factor's first value, +1: its second).  A least-squares fit of
y = b0 + sum(b_j x_j) over all runs gives each main effect (2 b_j: the high level's mean minus
the low level's), its standard error from the residual variance (runs - factors - 1 degrees of
freedom: repetitions are what make it), a t interval and p.  In percent of the fitted mean at
the low level, so a factor reads as "off against on: -36.9%".  Interactions are not in the
model: the design's aliasing (in the study file) says what each effect may also hold.
"""

from __future__ import annotations

import math
from typing import Any, Dict, List, Sequence

import numpy as np

from mpiwrite import stats


def effects(x: np.ndarray, y: np.ndarray, names: Sequence[str],
            confidence: float = 0.95) -> Dict[str, Any]:
    """x: runs x factors of -1/+1, y: one value per run.  {'factors': ranked, 'mean',
    'residual_sd', 'df'}; a factor's effect_percent is None when there are too few runs."""
    n, k = x.shape
    design = np.hstack([np.ones((n, 1)), x.astype(float)])
    coef, _res, rank, _sv = np.linalg.lstsq(design, y, rcond=None)
    df = n - k - 1
    resid = y - design @ coef
    s = math.sqrt(float(resid @ resid) / df) if df > 0 else float("nan")
    try:
        cov = np.linalg.inv(design.T @ design) * (s ** 2)
    except np.linalg.LinAlgError:
        cov = np.full((k + 1, k + 1), float("nan"))
    tq = stats.t_ppf(0.5 + confidence / 2, df) if df > 0 else float("nan")
    out = []
    for j, name in enumerate(names):
        effect = 2 * float(coef[j + 1])
        se = 2 * math.sqrt(float(cov[j + 1, j + 1])) if df > 0 and rank == k + 1 else float("nan")
        low = float(coef[0] - coef[j + 1])  # the fitted mean at the low level, others averaged
        row: Dict[str, Any] = {"name": name, "effect": effect, "n": n}
        if math.isfinite(se) and low:
            p = 1.0 if se == 0 and effect == 0 else (
                0.0 if se == 0 else min(1.0, 2 * (1 - stats.t_cdf(abs(effect) / se, df))))
            row.update(effect_percent=100 * effect / low,
                       ci_percent=[100 * (effect - tq * se) / low, 100 * (effect + tq * se) / low],
                       p=p, verdict="real" if p < 1 - confidence else "within noise")
        else:
            row.update(effect_percent=100 * effect / low if low else None, ci_percent=None,
                       p=None, verdict=f"cannot tell ({n} runs for {k} factors: repeat the "
                                       "points)")
        out.append(row)
    out.sort(key=lambda r: (r["p"] is None, -abs(r["effect_percent"] or 0.0)))
    return {"factors": out, "mean": float(np.mean(y)) if n else float("nan"),
            "residual_sd": s, "df": df}


def recommend(found: Dict[str, Any], levels: Dict[str, List[str]],
              higher_is_better: bool) -> Dict[str, str]:
    """The better level of every factor whose effect is real; the first (current) level of
    the others."""
    out = {}
    for r in found["factors"]:
        low, high = levels[r["name"]]
        if r["verdict"] == "real":
            better_high = (r["effect"] > 0) == higher_is_better
            out[r["name"]] = high if better_high else low
        else:
            out[r["name"]] = low
    return out


def confirmation(found: Dict[str, Any], levels: Dict[str, List[str]],
                 chosen: Dict[str, str], confidence: float = 0.95) -> Dict[str, Any]:
    """The run to do next: the recommended setting against the current one (each factor's
    first level), and the repetitions per side `compare` would need to see the predicted
    difference (the sum of the chosen factors' effects) at this noise."""
    changed = [r for r in found["factors"] if chosen[r["name"]] != levels[r["name"]][0]]
    diff = sum(abs(r["effect"]) for r in changed)
    sd = found["residual_sd"]
    need = stats.needed_per_side(diff, sd, confidence) if changed and math.isfinite(sd) else 0
    return {"changed": {r["name"]: chosen[r["name"]] for r in changed},
            "predicted_percent": sum(abs(r["effect_percent"] or 0.0) for r in changed),
            "runs_per_side": need}


def text(found: Dict[str, Any], aliases: List[str], chosen: Dict[str, str],
         confirm: Dict[str, Any], metric_words: str) -> str:
    lines = [f"{'factor':<40} {'effect':>9} {'95% interval':>20} {'p':>7}  verdict"]
    for r in found["factors"]:
        if r["ci_percent"] is None:
            lines.append(f"{r['name']:<40} {_pct(r['effect_percent']):>9} {'-':>20} "
                         f"{'-':>7}  {r['verdict']}")
            continue
        lo, hi = r["ci_percent"]
        lines.append(f"{r['name']:<40} {_pct(r['effect_percent']):>9} "
                     f"{'[' + _pct(lo) + ', ' + _pct(hi) + ']':>20} {r['p']:>7.3g}  "
                     f"{r['verdict']}")
    lines.append(f"(each effect: the second level against the first, {metric_words}, in % of "
                 f"the first; {found['factors'][0]['n'] if found['factors'] else 0} runs, "
                 f"{found['df']} residual degrees of freedom)")
    lines.append("cannot be told apart: " + ("; ".join(aliases) if aliases else "nothing "
                                             "(a full factorial)"))
    lines.append("recommended: " + ", ".join(f"{k}={v}" for k, v in chosen.items()))
    if confirm["changed"]:
        lines.append(f"confirm next: {', '.join(f'{k}={v}' for k, v in confirm['changed'].items())}"
                     f" against the current setting, {confirm['runs_per_side']} runs each "
                     f"(predicted {_pct(confirm['predicted_percent'])} or so; `mpiwrite "
                     "compare` on the records)")
    else:
        real = [r["name"] for r in found["factors"] if r["verdict"] == "real"]
        lines.append("confirm next: nothing to change; " + (
            f"the current level is the better one of {', '.join(real)}" if real
            else "no factor had a real effect"))
    return "\n".join(lines)


def _pct(v) -> str:
    return "-" if v is None or not math.isfinite(v) else f"{v:+.1f}%"
