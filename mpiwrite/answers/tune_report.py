"""`mpiwrite tune report`: each factor's main effect from a two-level screening study, with
what the run before did to it (docs/tune.md, docs/verdicts.md).

Every complete run is one observation: the mean of its metric over its good iterations, at
its point's levels (-1: the factor's first value, +1: its second).  One least-squares fit on
the log of the observations (the ratio scale: an effect is a ratio, its interval never below
-100%) holds

    log y = b0 + sum(b_j x_j)              the factors' main effects
               + sum(c_j p_j)              each factor's level in the previous run (carry-over:
                                           +1/-1, 0 for a launch's first run)
               + blocks                    the repetitions (drift between them taken out)

A factor's effect is exp(2 b_j) - 1 (second level against the first), its interval the t
interval of 2 b_j taken back, p from the same t; the p-values are corrected for the number
of factors (Holm), so that a study of k null factors says "real" of any of them at most as
often as the confidence allows.  Where the runs are too few for every term, the carry-over
terms go first, then the blocks, and the report says so.  A factor whose carry-over is
significant or as large as its own effect, or cannot be told from it, gets no recommendation
(answers/carryover.py).  Interactions are not in the model: the design's aliasing (in the
study file) says what each effect may also hold.
"""

from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from mpiwrite import stats
from mpiwrite.answers import carryover

METHOD = "least squares on log(metric)"


def effects(x: np.ndarray, y: np.ndarray, names: Sequence[str], confidence: float = 0.95,
            prev: Optional[np.ndarray] = None,
            blocks: Optional[np.ndarray] = None) -> Dict[str, Any]:
    """x: runs x factors of -1/+1; y: one value per run (positive: rates, CPU s/GB); prev:
    runs x factors, each factor's level in the previous run (-1/+1, 0 unknown); blocks: runs
    x dummy columns of the repetitions.  {'factors': ranked, 'mean', 'residual_sd', 'df',
    'terms', 'method', 'dropped'}."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    n, k = x.shape
    prev = np.zeros((n, 0)) if prev is None or not np.any(prev) else np.asarray(prev, float)
    blocks = np.zeros((n, 0)) if blocks is None else np.asarray(blocks, dtype=float)
    log = bool(n) and bool(np.all(y > 0))
    z_all = np.log(y) if log else y
    dropped: List[str] = []
    terms = [("carry-over", prev), ("blocks", blocks)]
    stalls = np.zeros(n, dtype=bool)  # runs left out as outliers (a stall), after one fit
    fit_all = None  # the fit with them in: a factor whose sign they turn gets no verdict
    while True:
        # with the carry-over in the fit, a run whose predecessor is not known (a launch's
        # first) is left out: coded 0, it alone would separate a factor from the run
        # before in a fixed cycle, a verdict resting on one run
        rows = np.any(prev != 0, axis=1) if terms[0][1].shape[1] else np.ones(n, bool)
        rows = rows & ~stalls
        cols = [np.ones((n, 1)), x] + [m for _, m in terms if m.shape[1]]
        z = z_all[rows]
        fit = stats.ols(np.hstack(cols)[rows], z)
        if terms[0][1].shape[1] and terms[1][1].shape[1] and not all(fit.estimable[1:1 + 2 * k]):
            # the run before is a repetition's own (two points, AB then BA): only the
            # comparison between repetitions tells it apart, which the blocks would take
            trial = stats.ols(np.hstack([np.ones((n, 1)), x, terms[0][1]])[rows], z)
            if all(trial.estimable[1:1 + 2 * k]):
                dropped.append("blocks")
                terms[1] = ("blocks", np.zeros((n, 0)))
                continue
        if fit.df >= 2 or not any(m.shape[1] for _, m in terms):
            if not stalls.any() and stats.outlier_check(int(rows.sum()), fit.df):
                design_ = np.hstack(cols)[rows]
                far = stats.outliers(stats.robust_residuals(design_, z), x=design_)
                if far.any() and fit.df - int(far.sum()) >= 2:
                    stalls[np.flatnonzero(rows)[far]] = True
                    fit_all = fit
                    continue
            break
        for i, (what, m) in enumerate(terms):  # too few runs: the carry-over goes first
            if m.shape[1]:
                dropped.append(what)
                terms[i] = (what, np.zeros((n, 0)))
                break
    used = [what for what, m in terms if m.shape[1]]
    x_all = x
    x, prev = x[rows], prev[rows] if prev.shape[1] else prev
    unknown = int(n - rows.sum() - stalls.sum())
    n = int(rows.sum())
    carry_at = 1 + k if "carry-over" in used else None
    tq = stats.t_ppf(0.5 + confidence / 2, fit.df) if fit.df > 0 else float("nan")
    out = []
    for j, name in enumerate(names):
        row: Dict[str, Any] = {"name": name, "n": n}
        row.update(_effect(fit, 1 + j, tq, log, z, x[:, j]))
        row["stalls"] = ""
        if fit_all is not None and fit_all.coef.size == fit.coef.size and not row["aliased"]:
            row["stalls"] = _stalled(fit_all, 1 + j, row, stalls, x_all[:, j], log, z_all,
                                     confidence)
        row["level_missing"] = len(set(x[:, j])) < 2
        if carry_at is not None:
            c = _effect(fit, carry_at + j, tq, log, z, prev[:, j])
            row.update(carryover_percent=c["effect_percent"], carryover_ci=c["ci_percent"],
                       carryover_p=c["p"], carryover_aliased=c["aliased"])
        else:
            row.update(carryover_percent=None, carryover_ci=None, carryover_p=None,
                       carryover_aliased=False, carryover_flagged=False)
        out.append(row)
    for row, p in zip(out, stats.holm([r["p_uncorrected"] for r in out])):
        row["p"] = p
        if carry_at is not None:  # beside the corrected p: what the verdict would be
            row["carryover_flagged"] = carryover.flagged(
                {"own_pct": row["effect_percent"], "own_aliased": row["aliased"],
                 "own_p": p, "carryover_pct": row["carryover_percent"],
                 "carryover_p": row["carryover_p"],
                 "carryover_aliased": row["carryover_aliased"]}, confidence)
        if row["level_missing"]:
            row["verdict"] = "cannot tell (no complete run at one of its levels)"
        elif row["aliased"]:
            row["verdict"] = "cannot tell (aliased with the previous run's level)"
        elif row["stalls"]:
            row["verdict"] = "cannot tell (stalled runs)"
        elif p is None:
            row["verdict"] = f"cannot tell ({n} runs for {k} factors: repeat the points)"
        elif row["carryover_flagged"]:
            row["verdict"] = "carry-over"
        else:
            row["verdict"] = "real" if p < 1 - confidence else "within noise"
    out.sort(key=lambda r: (r["p"] is None, -abs(r["effect_percent"] or 0.0)))
    what = [f"{k} main effect(s)"] + [{"carry-over": "each factor's level in the previous "
                                                     "run", "blocks": "repetition blocks"}[u]
                                      for u in used]
    return {"factors": out, "mean": float(np.mean(y)) if len(y) else float("nan"),
            "residual_sd": fit.sigma, "df": fit.df, "log": log, "terms": used,
            "dropped": dropped, "unknown_predecessor": unknown,
            "outliers": [int(i) for i in np.flatnonzero(stalls)],
            "method": f"{METHOD if log else 'least squares on the metric'}: "
                      f"{', '.join(what)}; p corrected for {k} factor(s) (Holm)"
                      + (f"; {unknown} run(s) whose run before is not known (a launch's "
                         "first) left out" if unknown else "")
                      + (f"; {int(stalls.sum())} run(s) left out as outliers (beyond "
                         f"{stats.OUTLIER:g} robust sd of the fit)" if stalls.any() else "")}


def _stalled(fit_all: stats.Fit, j: int, row: Dict[str, Any], stalls: np.ndarray,
             col: np.ndarray, log: bool, z: np.ndarray, confidence: float) -> str:
    """Why the runs left out as stalls withhold factor j's verdict, or '': they do when
    every one of them ran at the level the fit without them calls the better, and with them
    in the verdict would differ (its sign, or real against within noise).  A setting 3%
    faster that stalls 15% of its own runs was recommended 90 times in 100: its stalls are
    the setting's own."""
    if not stalls.any() or row.get("effect") != row.get("effect"):
        return ""
    better = 1.0 if row["effect"] > 0 else -1.0
    if not np.all(col[stalls] == better):
        return ""
    b, var = fit_all.coef[j], fit_all.cov[j, j]
    if b != b:
        return ""
    p_with = stats.effect_p(b, math.sqrt(var), fit_all.df) if var == var and var >= 0 \
        and fit_all.df > 0 else 1.0
    real_with = p_with < 1 - confidence and b * row["effect"] > 0
    real_without = row["p_uncorrected"] is not None and row["p_uncorrected"] < 1 - confidence
    if real_with == real_without and b * row["effect"] > 0:
        return ""
    return (f"the {int(stalls.sum())} run(s) left out as stalls all ran at its better-looking "
            f"level, and with them it is {_pct(_ratio_pct(2 * b, log, z, b))}: they may be "
            "the setting's own")


def _ratio_pct(effect: float, log: bool, z: np.ndarray, b: float) -> float:
    """An effect (2b) in percent, as _effect says it."""
    if log:
        return (stats._exp(effect) - 1) * 100
    low = float(np.mean(z)) - b
    return 100 * effect / low if low > 0 else float("nan")


def _effect(fit: stats.Fit, j: int, tq: float, log: bool, z: np.ndarray,
            col: np.ndarray) -> Dict[str, Any]:
    """Column j (a -1/+1 column) as an effect in percent: on the log scale exp(2b) - 1, else
    2b in percent of the fitted mean at the low level."""
    nan = float("nan")
    if not fit.estimable[j]:
        return {"effect": nan, "effect_percent": None, "ci_percent": None, "p": None,
                "p_uncorrected": None, "aliased": True}
    b, var = float(fit.coef[j]), float(fit.cov[j, j])
    se = math.sqrt(var) if var == var and var >= 0 else nan
    if log:
        pct = (stats._exp(2 * b) - 1) * 100
        ci = [(stats._exp(2 * (b - tq * se)) - 1) * 100,
              (stats._exp(2 * (b + tq * se)) - 1) * 100] if se == se else None
    else:  # a value not positive: the fitted mean at the low level must be, to be a base
        low = float(np.mean(z)) - b  # the fitted mean at the low level, the others averaged
        pct = 100 * 2 * b / low if low > 0 else None
        ci = [100 * 2 * (b - tq * se) / low, 100 * 2 * (b + tq * se) / low] \
            if se == se and low > 0 else None
    p = None if se != se or fit.df < 1 else stats.effect_p(b, se, fit.df)
    return {"effect": 2 * b, "effect_percent": pct, "ci_percent": ci, "p": p,
            "p_uncorrected": p, "aliased": False}


def recommend(found: Dict[str, Any], levels: Dict[str, List[str]],
              higher_is_better: bool) -> Dict[str, str]:
    """The better level of every factor whose effect is real; the first (current) level of
    the others (within noise, cannot tell, or withheld for carry-over)."""
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
    difference (the chosen factors' effects together) at this noise."""
    changed = [r for r in found["factors"] if chosen[r["name"]] != levels[r["name"]][0]]
    diff = sum(abs(r["effect"]) for r in changed)
    sd = found["residual_sd"]
    need = stats.needed_per_side(diff, sd, confidence) if changed and sd == sd else 0
    if found.get("log"):
        predicted = (math.exp(diff) - 1) * 100 if changed else 0.0
    else:
        predicted = sum(abs(r["effect_percent"] or 0.0) for r in changed)
    return {"changed": {r["name"]: chosen[r["name"]] for r in changed},
            "predicted_percent": predicted, "runs_per_side": need}


def text(found: Dict[str, Any], aliases: List[str], chosen: Dict[str, str],
         confirm: Dict[str, Any], metric_words: str,
         levels: Optional[Dict[str, List[str]]] = None) -> str:
    lines = [f"{'factor':<34} {'effect':>8} {'95% interval':>18} {'p':>7} "
             f"{'carry-over':>10}  verdict"]
    for r in found["factors"]:
        iv = "-" if r["ci_percent"] is None else \
            f"[{_pct(r['ci_percent'][0])}, {_pct(r['ci_percent'][1])}]"
        p = "-" if r["p"] is None else f"{r['p']:.3g}"
        lines.append(f"{r['name']:<34} {_pct(r['effect_percent']):>8} {iv:>18} {p:>7} "
                     f"{_pct(r['carryover_percent']):>10}  {r['verdict']}")
    n = found["factors"][0]["n"] if found["factors"] else 0
    lines.append(f"(each effect: the second level against the first, {metric_words}, "
                 + ("a ratio" if found.get("log") else "in % of the first")
                 + f"; carry-over: a run after the second level against one after the first; "
                   f"{n} runs, {found['df']} residual degrees of freedom)")
    lines.append(f"method: {found['method']}" + (
        f"; left out for want of runs: {', '.join(found['dropped'])}" if found["dropped"]
        else ""))
    for r in found["factors"]:
        if r.get("level_missing"):
            continue
        if r["verdict"] == "carry-over" or r.get("aliased") or r.get("carryover_aliased") or (
                r.get("carryover_p") is not None and r["carryover_p"] < 0.05):
            lv = (levels or {}).get(r["name"], ["the first", "the second"])
            lines.append(_carry_line(r, lv))
    for r in found["factors"]:
        if r.get("stalls"):
            lines.append(f"{r['name']}: no verdict: {r['stalls']}")
    lines.append("cannot be told apart: " + ("; ".join(aliases) if aliases else "nothing "
                                             "(a full factorial)"))
    lines.append("recommended: " + ", ".join(f"{k}={v}" for k, v in chosen.items()))
    withheld = [r["name"] for r in found["factors"] if r["verdict"] == "carry-over"
                or (r.get("aliased") and not r.get("level_missing"))]
    if withheld:
        lines.append(f"  ({', '.join(withheld)}: kept as now, the run order's carry-over "
                     f"withholds a verdict)")
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


def _carry_line(r: Dict[str, Any], levels: Sequence[str]) -> str:
    found = {"levels": list(levels), "own_pct": r["effect_percent"],
             "own_aliased": r.get("aliased", False), "carryover_pct": r["carryover_percent"],
             "carryover_ci_pct": r["carryover_ci"], "carryover_p": r["carryover_p"],
             "carryover_aliased": r["carryover_aliased"],
             "flagged": r["verdict"] == "carry-over" or r.get("aliased", False)}
    return carryover.text(r["name"], found)


def _pct(v) -> str:
    return "-" if v is None or not math.isfinite(v) else f"{v:+.1f}%"


def is_tune_study(st) -> bool:
    """A study `tune report` can answer: settings, every one at two levels."""
    return bool(st.settings) and all(len(s.values) == 2 for s in st.settings)


def answer(st, keys, runs, metric: str, warmup: int, confidence: float, aliases: List[str],
           where_text: str = "", results: str = "") -> Dict[str, Any]:
    """tune's answer over a tune study's runs (`st`: the study, `keys`: each point's key,
    `runs`: its records): each factor's effect ranked, what to set, what to confirm next.
    ConfigError when the runs cannot tell it (too few, a level without runs).  For
    `tune report` and a tune study's page alike."""
    from mpiwrite.answers import carryover
    from mpiwrite.answers.results import metric_info, metric_values
    from mpiwrite.errors import ConfigError

    names = [s.name for s in st.settings]
    levels = {s.name: list(s.values) for s in st.settings}
    where = {k: i for i, k in enumerate(keys)}
    points = st.points()

    def coded(i: int):
        return [-1 if str(points[i][f"setting.{n}"]) == levels[n][0] else 1 for n in names]

    xs, ys, prev, used = [], [], [], []
    for rec in runs.select():
        i = where.get(str(rec.tags().get("study_key")), -1)
        values = metric_values(rec, metric, warmup)
        if i < 0 or not values:
            continue
        xs.append(coded(i))
        ys.append(float(np.mean(values)))
        before = where.get(str(rec.tags().get("study_prev_key")), -1)  # -1: not known
        prev.append(coded(before) if before >= 0 else [0] * len(names))
        used.append(rec)
    if len(ys) < 2:
        raise ConfigError(f"{where_text}{len(ys)} complete run(s) in {results}: run the "
                          "study first (mpiexec ... mpiwrite study run FILE)")
    for j, n in enumerate(names):  # an effect needs runs at both levels: none is invented
        have = {x[j] for x in xs}
        for code, level in ((-1, levels[n][0]), (1, levels[n][1])):
            if code not in have:
                raise ConfigError(f"{where_text}no complete run with {n}={level} in "
                                  f"{results}: {n}'s effect cannot be told (run the study, "
                                  "or resume it: mpiwrite study run FILE)")
    found = effects(np.array(xs), np.array(ys), names, confidence, prev=np.array(prev),
                    blocks=carryover.blocks_of(used))
    chosen = recommend(found, levels, metric_info(metric).higher_is_better)
    return {"found": found, "chosen": chosen,
            "confirm": confirmation(found, levels, chosen, confidence),
            "aliases": list(aliases), "levels": levels, "ys": ys}
