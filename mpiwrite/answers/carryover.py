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


OTHER = "\0other"  # a run before that was at neither level (another point of the study)


def two_levels(values: Sequence[float], own: Sequence[str], prev: Sequence[Optional[str]],
               levels: Sequence[str], blocks: Optional[np.ndarray] = None,
               others: Optional[np.ndarray] = None, confidence: float = 0.95,
               randomized: bool = False) -> Optional[Dict[str, Any]]:
    """A two-level factor's own effect and its carry-over, second level against the first,
    in percent on the ratio scale, from one fit (blocks and other factors' columns beside).
    `prev`: each run's previous level, OTHER (a point at neither level: coded 0, kept), or
    None (not known: a launch's first run, left out).  `randomized`: the study's order was
    balanced or random, so a carry-over the runs cannot estimate is no alias (said, not
    withheld).  None when nothing can be said (no run whose predecessor is at one of the
    levels, a value not positive)."""
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
    rows = np.array([p is not None and (p in levels or p == OTHER) for p in prev])
    fit = stats.ols(np.hstack(cols)[rows], np.log(y)[rows])
    with_blocks = blocks is not None and blocks.shape[1] > 0
    if with_blocks and not (fit.estimable[1] and fit.estimable[2]):
        # two levels, AB then BA: the run before is a repetition's own, and only the
        # comparison between repetitions (which the blocks would take) tells it apart
        bare = [c for i, c in enumerate(cols) if not (i == 3 and with_blocks)]
        trial = stats.ols(np.hstack(bare)[rows], np.log(y)[rows])
        if trial.estimable[1] and trial.estimable[2]:
            fit, with_blocks = trial, False
    out = _effect(fit, 1, confidence, "own")
    out.update(_effect(fit, 2, confidence, "carryover"))
    out.update(levels=list(levels), df=fit.df,
               runs_with_predecessor=int(sum(p in levels for p in prev if p is not None)),
               method="least squares on log(metric): the run's level, the previous run's "
                      "level" + (", repetition blocks" if with_blocks else "")
                      + (", the other factors" if others is not None and others.shape[1]
                         else ""))
    out["randomized"] = randomized
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
    p = stats.effect_p(b, se, fit.df)
    return {f"{name}_pct": _pct(2 * b), f"{name}_ci_pct": [_pct(2 * (b - tq * se)),
                                                          _pct(2 * (b + tq * se))],
            f"{name}_p": p, f"{name}_aliased": False}


SMALL = 0.25  # a significant carry-over below this share of the own effect withholds nothing
COMPARABLE_P = 0.2  # a carry-over as large as a real own effect withholds it below this p


def flagged(found: Dict[str, Any], confidence: float = 0.95) -> bool:
    """Whether the carry-over withholds the factor's verdict (each size on the log scale):
    - it cannot be told from the factor's own level (aliased: a fixed cycle);
    - it is significant and at least SMALL of the own effect (a significant carry-over of
      -5.7% beside an own effect of -67% cannot turn its sign: it is said, not withheld);
    - the own effect would be a verdict (`own_p` below 1 - confidence) and the carry-over,
      significant or nearly (p below COMPARABLE_P), is at least as large.
    A carry-over beside an effect within noise withholds nothing that was there."""
    if found.get("carryover_aliased") or found.get("own_aliased"):
        # a fixed cycle aliases them; in a randomized order these runs just cannot say
        return not (found.get("randomized") and not found.get("own_aliased"))
    p, c, own = found.get("carryover_p"), found.get("carryover_pct"), found.get("own_pct")
    if c is None or p is None:
        return False
    size = abs(math.log1p(c / 100))
    mine = abs(math.log1p(own / 100)) if own is not None and own > -100 else math.inf
    if p < 1 - confidence and size >= SMALL * mine:
        return True
    own_p = found.get("own_p")
    if own_p is None or own_p >= 1 - confidence:
        return False
    return size >= mine and p < COMPARABLE_P


def text(name: str, found: Dict[str, Any], confidence: float = 0.95) -> str:
    """The one line an answer prints about a factor's carry-over."""
    lv = found["levels"]
    if (found.get("carryover_aliased") or found.get("own_aliased")) and not found["flagged"]:
        return ("carry-over: these runs cannot estimate it (too few of them follow a run at "
                "either level); the study's order was randomized, so it is no alias")
    if found.get("carryover_aliased") or found.get("own_aliased"):
        return (f"carry-over: {name + chr(39) + 's level' if name else 'the side'} cannot be "
                f"told from the previous run's (the run order repeats one sequence): no "
                f"verdict; {ADVICE}")
    pct, ci, p = found["carryover_pct"], found["carryover_ci_pct"], found["carryover_p"]
    size = f"{pct:+.1f}%" + (f" [{ci[0]:+.1f}, {ci[1]:+.1f}] ({confidence * 100:g}% interval)"
                             if ci else "") + (f", p {p:.2g}" if p is not None else "")
    after = [f"{name}={x}" if name else x for x in lv]
    head = f"carry-over: a run after {after[1]} against one after {after[0]}: {size}"
    own = found.get("own_pct")
    if not found["flagged"]:
        if own is None:
            return head
        if abs(math.log1p(pct / 100)) < abs(math.log1p(own / 100)):
            return f"{head}: small beside its own effect ({own:+.1f}%), taken out of it"
        return f"{head}: within noise beside its own effect ({own:+.1f}%), taken out of it"
    if own is None:
        how = "beside an effect that cannot be estimated"
    elif abs(math.log1p(pct / 100)) >= abs(math.log1p(own / 100)):
        how = f"as large as its own effect ({own:+.1f}%)"
    else:
        how = f"significant beside its own effect ({own:+.1f}%)"
    return f"{head}, {how}: no verdict{' for ' + name if name else ''}; {ADVICE}"


def as_json(found: Optional[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    if found is None:
        return None
    return json.loads(json.dumps(found, default=float), parse_constant=lambda c: None)


class StudyFit:
    """One least-squares fit over a study's runs (one value each, its metric's mean), on the
    log scale:

        log y = each point (every point's own effect, whatever the axes)
                + the repetition blocks (drift between repetitions taken out)
                + each axis's level in the previous run (a column per level but the first)

    A verdict is the contrast of two points' coefficients, with the residual's t (the
    randomised complete block analysis, carry-over adjusted); an axis's carry-over is the
    F-test of its previous-level columns.  Runs whose run before is not known (a launch's
    first) are left out while the carry-over is in the fit.  With too few runs for every
    term, the carry-over goes first, then the blocks (`dropped`).  Values must be positive
    (`usable` is False otherwise: the answers fall back to Welch's test)."""

    def __init__(self, values: Sequence[float], points: Sequence[int],
                 blocks: Sequence[Optional[str]], prev: Dict[str, List[Optional[str]]],
                 levels: Dict[str, List[str]], confidence: float = 0.95):
        y = np.asarray(values, dtype=float)
        self.confidence = confidence
        self.usable = bool(len(y)) and bool(np.all(y > 0))
        self.dropped: List[str] = []
        self.unknown = 0
        if not self.usable:
            return
        n = len(y)
        axes = [a for a, order in levels.items() if len(order) > 1]
        known = np.array([all(prev[a][i] is not None and prev[a][i] in levels[a]
                              for a in axes) for i in range(n)]) if axes else np.ones(n, bool)
        use_carry = bool(axes) and bool(known.any())
        use_blocks = len({b for b in blocks}) > 1 and all(b is not None for b in blocks)
        tried, kept = False, None
        self.stalls = np.zeros(n, dtype=bool)  # runs left out as outliers, after one fit
        self.fit_all: Optional[stats.Fit] = None  # the fit with them in
        self.points_all = list(points)
        while True:
            rows = (known if use_carry else np.ones(n, bool)) & ~self.stalls
            idx = np.flatnonzero(rows)
            pts = sorted({points[i] for i in idx})
            cols = [np.ones((len(idx), 1))]
            self.point_col: Dict[int, Optional[int]] = {pts[0]: None} if pts else {}
            at = 1
            pm = np.zeros((len(idx), max(0, len(pts) - 1)))
            for r, i in enumerate(idx):
                j = pts.index(points[i])
                if j:
                    pm[r, j - 1] = 1.0
            for j, pt in enumerate(pts[1:]):
                self.point_col[pt] = at + j
            cols.append(pm)
            at += pm.shape[1]
            if use_blocks:
                names = sorted({str(blocks[i]) for i in idx})
                bm = np.zeros((len(idx), max(0, len(names) - 1)))
                for r, i in enumerate(idx):
                    j = names.index(str(blocks[i]))
                    if j:
                        bm[r, j - 1] = 1.0
                cols.append(bm)
                at += bm.shape[1]
            self.carry_cols: Dict[str, List[int]] = {}
            if use_carry:
                for a in axes:
                    order = levels[a]
                    cm = np.zeros((len(idx), len(order) - 1))
                    for r, i in enumerate(idx):
                        j = order.index(prev[a][i])
                        if j:
                            cm[r, j - 1] = 1.0
                    cols.append(cm)
                    self.carry_cols[a] = list(range(at, at + cm.shape[1]))
                    at += cm.shape[1]
            self.x = np.hstack(cols)
            self.y = np.log(y[idx])
            self.fit = stats.ols(self.x, self.y)
            est = self.fit.estimable
            lost = [c for c in list(self.point_col.values()) + [
                c for cs in self.carry_cols.values() for c in cs] if c is not None and not est[c]]
            if lost and use_carry and use_blocks and not tried:
                # within a block the run before is the same for every point, or the other
                # point (two points, AB then BA): only the comparison between blocks tells it
                # from the point's own, and the blocks' own columns would take that away
                tried, kept = True, (self.x, self.y, self.fit, dict(self.point_col),
                                     dict(self.carry_cols))
                use_blocks = False
                continue
            if tried and kept is not None and use_carry and not use_blocks:
                if lost:  # no better without the blocks: the fit with them stands
                    self.x, self.y, self.fit, self.point_col, self.carry_cols = kept
                    use_blocks = True
                else:
                    self.dropped.append("blocks (within a repetition the run before cannot "
                                        "be told from the point)")
                kept = None
            if self.fit.df >= 2 or not (use_carry or use_blocks):
                if not self.stalls.any() and stats.outlier_check(len(self.y), self.fit.df):
                    far = stats.outliers(stats.robust_residuals(self.x, self.y), x=self.x)
                    if far.any() and self.fit.df - int(far.sum()) >= 2:
                        self.stalls[idx[far]] = True
                        self.fit_all = self.fit  # what the stalls would say: checked after
                        continue
                break
            if use_carry:
                use_carry = False
                self.dropped.append("carry-over")
            else:
                use_blocks = False
                self.dropped.append("blocks")
        self.unknown = int(n - rows.sum() - self.stalls.sum())
        self.terms = ["each point"] + (["repetition blocks"] if use_blocks else []) + (
            ["each axis's level in the previous run"] if use_carry else [])

    def method(self) -> str:
        return (f"least squares on log(metric) over the study's runs: {', '.join(self.terms)}"
                + (f"; {self.unknown} run(s) whose run before is not known left out"
                   if self.unknown else "")
                + (f"; left out: {'; '.join(self.dropped)}" if self.dropped else "")
                + (f"; {int(self.stalls.sum())} run(s) left out as outliers (beyond "
                   f"{stats.OUTLIER:g} robust sd of the fit)" if self.stalls.any() else ""))

    def contrast(self, a: int, b: int) -> Optional[Dict[str, Any]]:
        """Point b against point a: {pct, lo, hi, p, df}, or None (not estimable, no df)."""
        if not self.usable or a not in self.point_col or b not in self.point_col:
            return None
        w = self._contrast_vector(a, b)
        got = self.fit.contrast(w) if w is not None else None
        if got is None or self.fit.df < 1 or not got[1] == got[1]:
            return None
        d, var = got
        se = math.sqrt(max(var, 0.0))
        tq = stats.t_ppf(0.5 + self.confidence / 2, self.fit.df)
        out = {"pct": _pct(d), "lo": _pct(d - tq * se), "hi": _pct(d + tq * se),
               "p": stats.effect_p(d, se, self.fit.df), "df": self.fit.df, "log_diff": d,
               "sigma": self.fit.sigma, "stalls": ""}
        if self.stalls.any() and self.fit_all is not None and \
                self.fit_all.coef.size == self.fit.coef.size:  # the same with the stalls in
            before = self.fit_all.contrast(w)
            mine = [self.points_all[i] for i in np.flatnonzero(self.stalls)
                    if self.points_all[i] in (a, b)]
            better = b if d > 0 else a
            if before is not None and abs(d) >= stats.TINY and mine and \
                    all(pt == better for pt in mine):
                p_with = stats.effect_p(before[0], math.sqrt(max(before[1], 0.0)),
                                        self.fit_all.df)
                real_with = p_with < 1 - self.confidence and before[0] * d > 0
                if before[0] * d <= 0 or real_with != (out["p"] < 1 - self.confidence):
                    out["stalls"] = (f"the {len(mine)} run(s) left out as stalls all ran at "
                                     f"its better-looking point, and with them it is "
                                     f"{_pct(before[0]):+.1f}%")
        return out

    def _contrast_vector(self, a: int, b: int) -> Optional[np.ndarray]:
        w = np.zeros(self.fit.coef.size)
        for pt, sign in ((b, 1.0), (a, -1.0)):
            j = self.point_col[pt]
            if j is not None:
                w[j] += sign
        return w

    def axis_carry(self, axis: str, order: Sequence[str]) -> Optional[Dict[str, Any]]:
        """An axis's carry-over from the fit: {levels: [{level, against, pct, ci_pct, p}],
        p (the F-test of its columns), df, aliased, method}; None when not in the fit."""
        if not self.usable or axis not in getattr(self, "carry_cols", {}):
            return None
        fit, cols = self.fit, self.carry_cols[axis]
        out: Dict[str, Any] = {"levels": [], "df": fit.df, "p": None,
                               "aliased": not any(fit.estimable[c] for c in cols),
                               "method": self.method() + "; F-test of the axis's columns"}
        if out["aliased"]:
            return out
        tq = stats.t_ppf(0.5 + self.confidence / 2, fit.df) if fit.df > 0 else math.nan
        for c, level in zip(cols, order[1:]):
            if not fit.estimable[c]:
                continue
            b, var = fit.coef[c], fit.cov[c, c]
            se = math.sqrt(var) if var == var and var >= 0 else math.nan
            p = stats.effect_p(b, se, fit.df) if se == se else None
            out["levels"].append({"level": level, "against": order[0], "pct": _pct(b),
                                  "ci_pct": [_pct(b - tq * se), _pct(b + tq * se)]
                                  if se == se else None, "p": p})
        keep = [j for j in range(self.x.shape[1]) if j not in cols]
        reduced = stats.ols(self.x[:, keep], self.y)
        dq = fit.rank - reduced.rank
        if reduced.df > 0 and not reduced.sigma >= stats.TINY:
            out["p"] = 1.0  # every run the same to the last digits: nothing to carry over
        elif fit.df > 0 and dq > 0:
            rss_f = fit.sigma ** 2 * fit.df
            rss_r = reduced.sigma ** 2 * reduced.df if reduced.df > 0 else 0.0
            f = ((rss_r - rss_f) / dq) / (rss_f / fit.df) if rss_f > 0 else math.inf
            out["p"] = stats.f_sf(f, dq, fit.df) if math.isfinite(f) else 0.0
        return out


def axis_flagged(found: Optional[Dict[str, Any]], own_pcts: Sequence[float],
                 confidence: float = 0.95) -> bool:
    """An axis's verdicts are withheld when its carry-over cannot be told from the points,
    is significant and at least SMALL of its largest real effect (`own_pcts`), or is at least
    as large as that effect (flagged's rules, per axis)."""
    if found is None:
        return False
    if found["aliased"]:
        return True
    sizes = [abs(math.log1p(c["pct"] / 100)) for c in found["levels"]]
    own = [abs(math.log1p(p / 100)) for p in own_pcts if p is not None and p > -100]
    if not sizes or found["p"] is None:
        return False
    if found["p"] < 1 - confidence and (not own or max(sizes) >= SMALL * max(own)):
        return True
    return bool(own and max(sizes) >= max(own) and found["p"] < 0.5)


def axis_text(axis_name: str, found: Dict[str, Any], confidence: float = 0.95) -> str:
    """One line: an axis's carry-over and what it means for its verdicts."""
    if found["aliased"]:
        return (f"carry-over of {axis_name}: cannot be told from the points (the run order "
                f"repeats one sequence): no verdict for {axis_name}; {ADVICE}")
    parts = []
    for c in found["levels"]:
        ci = c["ci_pct"]
        parts.append(f"after {c['level']} against after {c['against']} {c['pct']:+.1f}%"
                     + (f" [{ci[0]:+.1f}, {ci[1]:+.1f}]" if ci else ""))
    p = found["p"]
    return (f"carry-over of {axis_name} (the run before): {'; '.join(parts)} "
            f"({confidence * 100:g}% intervals)" + (f", p {p:.2g}" if p is not None else ""))
