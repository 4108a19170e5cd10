"""Carry-over: how much the run before moved a run's figure (docs/verdicts.md).

A study's record names the point run just before it on its nodes in its launch
(`study_prev_key`, study/execute.py).  For a factor (an axis, a setting, a key `compare` or
`explain` splits the runs by), each run then has its own level and the previous run's level,
and a least-squares fit on the log of the metric (the ratio scale: effects are ratios, never
below -100%) with

    log y = intercept + the run's own level + the previous run's level
            [+ the repetition blocks] [+ the other factors]

gives both effects with their intervals and p.  The previous run's level is coded as an
effect (+1/-1 for two levels, one column per level but the first for more), 0 where it is not
known (a launch's first run): the usual first-period coding of crossover designs.  In a fixed
cycle the previous level is a function of the run's own, and the fit says the two cannot be
told apart (`aliased`).

A carry-over is *flagged* when it is significant (p below 1 - confidence) or at least as large
as the factor's own effect: the factor then gets no recommendation, and the answers say what
would help (a settle step between runs, longer runs, more repetitions).
"""

from __future__ import annotations

import json
import math
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from mpiwrite import stats

ADVICE = ("settle between runs ([study] settle = \"writeback\", or a sleep), longer runs, or "
          "more repetitions in a balanced order")
NONE = "none"  # study_prev_key of a launch's first run


def _pct(x: float) -> float:
    return (stats._exp(x) - 1) * 100


def predecessors(runs: Sequence[Any], keys_of) -> List[Optional[Dict[str, Any]]]:
    """For each run, the keys of the point run before it (any record of that point of the
    same study, file and generation among `runs`), or None: not a study's run, the launch's
    first, or no record of that point here."""
    index: Dict[tuple, Dict[str, Any]] = {}
    for r in runs:
        t = r.tags()
        if t.get("study") and t.get("study_key"):
            index.setdefault((t["study"], t.get("study_hash"), t.get("study_generation"),
                              t["study_key"]), keys_of(r))
    out: List[Optional[Dict[str, Any]]] = []
    for r in runs:
        t = r.tags()
        prev = t.get("study_prev_key")
        if not t.get("study") or not prev or prev == NONE:
            out.append(None)
            continue
        out.append(index.get((t["study"], t.get("study_hash"), t.get("study_generation"),
                              prev)))
    return out


def coded(levels: Sequence[Optional[str]], order: Sequence[str]) -> np.ndarray:
    """Effect coding of a factor's levels (None: unknown, all zeros): one column per level
    but the first, +1 at that level, -1 at the first (two levels: one +1/-1 column)."""
    out = np.zeros((len(levels), max(0, len(order) - 1)))
    where = {lv: i for i, lv in enumerate(order)}
    for r, lv in enumerate(levels):
        i = where.get(lv) if lv is not None else None
        if i is None:
            continue
        if i == 0:
            out[r, :] = -1.0
        else:
            out[r, i - 1] = 1.0
    return out


def blocks_of(runs: Sequence[Any]) -> np.ndarray:
    """Dummy columns of the repetition blocks (study_repeat; none when there is one)."""
    reps = [str(r.tags().get("study_repeat", "")) for r in runs]
    names = sorted(set(reps))
    if len(names) < 2 or "" in names:
        return np.zeros((len(runs), 0))
    out = np.zeros((len(runs), len(names) - 1))
    for i, rep in enumerate(reps):
        j = names.index(rep)
        if j:
            out[i, j - 1] = 1.0
    return out


def two_levels(values: Sequence[float], own: Sequence[str], prev: Sequence[Optional[str]],
               levels: Sequence[str], blocks: Optional[np.ndarray] = None,
               others: Optional[np.ndarray] = None,
               confidence: float = 0.95) -> Optional[Dict[str, Any]]:
    """A two-level factor's own effect and its carry-over, second level against the first,
    in percent on the ratio scale, from one fit (blocks and other factors' columns beside).
    None when nothing can be said (no run whose predecessor is known, a value not positive,
    fewer than one residual degree of freedom)."""
    y = np.asarray(values, dtype=float)
    if len(levels) != 2 or not len(y) or not np.all(y > 0) or \
            not any(p is not None and p in levels for p in prev):
        return None
    cols = [np.ones((len(y), 1)), coded(list(own), levels), coded(list(prev), levels)]
    if blocks is not None and blocks.shape[1]:
        cols.append(blocks)
    if others is not None and others.shape[1]:
        cols.append(others)
    # only the runs whose run before is known: coded 0, a launch's first run alone would
    # separate the factor from the run before in a fixed cycle
    rows = np.array([p is not None and p in levels for p in prev])
    fit = stats.ols(np.hstack(cols)[rows], np.log(y)[rows])
    out = _effect(fit, 1, confidence, "own")
    out.update(_effect(fit, 2, confidence, "carryover"))
    out.update(levels=list(levels), df=fit.df,
               runs_with_predecessor=int(sum(p in levels for p in prev if p is not None)),
               method="least squares on log(metric): the run's level, the previous run's "
                      "level" + (", repetition blocks" if blocks is not None and blocks.shape[1]
                                 else "") + (", the other factors" if others is not None and
                                             others.shape[1] else ""))
    out["flagged"] = flagged(out, confidence)
    return out


def _effect(fit: stats.Fit, j: int, confidence: float, name: str) -> Dict[str, Any]:
    """Column j's coefficient as a two-level effect in percent: (high vs low) = 2 b."""
    b, var = fit.coef[j], fit.cov[j, j]
    if not fit.estimable[j]:
        return {f"{name}_pct": None, f"{name}_ci_pct": None, f"{name}_p": None,
                f"{name}_aliased": True}
    if not (fit.df > 0 and var == var and var >= 0):
        return {f"{name}_pct": _pct(2 * b), f"{name}_ci_pct": None, f"{name}_p": None,
                f"{name}_aliased": False}
    se = math.sqrt(var)
    tq = stats.t_ppf(0.5 + confidence / 2, fit.df)
    p = stats.two_sided_p(b / se, fit.df) if se > 0 else (0.0 if b else 1.0)
    return {f"{name}_pct": _pct(2 * b), f"{name}_ci_pct": [_pct(2 * (b - tq * se)),
                                                          _pct(2 * (b + tq * se))],
            f"{name}_p": p, f"{name}_aliased": False}


def flagged(found: Dict[str, Any], confidence: float = 0.95) -> bool:
    """Whether the carry-over withholds the factor's verdict: aliased with it, significant,
    or, where the factor's own effect would be a verdict (`own_p` below 1 - confidence), at
    least as large as that effect (each on the log scale).  A carry-over beside an effect
    within noise withholds nothing that was there."""
    if found.get("carryover_aliased") or found.get("own_aliased"):
        return True
    p, c, own = found.get("carryover_p"), found.get("carryover_pct"), found.get("own_pct")
    if p is not None and p < 1 - confidence:
        return True
    own_p = found.get("own_p")
    if c is None or own is None or own_p is None or own_p >= 1 - confidence:
        return False
    return abs(math.log1p(c / 100)) >= abs(math.log1p(own / 100)) and p is not None and p < 0.5


def text(name: str, found: Dict[str, Any], confidence: float = 0.95) -> str:
    """The one line an answer prints about a factor's carry-over."""
    lv = found["levels"]
    if found.get("carryover_aliased") or found.get("own_aliased"):
        return (f"carry-over: {name}'s level cannot be told from the previous run's (the run "
                f"order repeats one sequence): no verdict for it; {ADVICE}")
    pct, ci, p = found["carryover_pct"], found["carryover_ci_pct"], found["carryover_p"]
    size = f"{pct:+.1f}%" + (f" [{ci[0]:+.1f}, {ci[1]:+.1f}] ({confidence * 100:g}% interval)"
                             if ci else "") + (f", p {p:.2g}" if p is not None else "")
    head = f"carry-over: a run after {name}={lv[1]} against one after {name}={lv[0]}: {size}"
    own = found.get("own_pct")
    if not found["flagged"]:
        return f"{head}: small beside its own effect" if own is not None else head
    if own is None:
        how = "beside an effect that cannot be estimated"
    elif abs(math.log1p(pct / 100)) >= abs(math.log1p(own / 100)):
        how = f"as large as its own effect ({own:+.1f}%)"
    else:
        how = f"significant beside its own effect ({own:+.1f}%)"
    return f"{head}, {how}: no verdict for {name}; {ADVICE}"


def as_json(found: Optional[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    if found is None:
        return None
    return json.loads(json.dumps(found, default=float), parse_constant=lambda c: None)
