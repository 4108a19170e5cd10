"""Confounding: a factor whose levels also differ in another key (docs/verdicts.md).

Runs on tmpfs and on a disk, most 64 KiB runs on tmpfs and most 1 MiB runs on the disk:
"block_size 64KiB vs 1MiB: +82.5%" is then mostly the target's difference (within tmpfs the
block size made -5%).  For a factor (explain's, or compare's two sides) every other key with
two or more values is checked for how unevenly it is spread over the factor's levels
(Cramer's V over the runs: 0 when every level holds the key's values in the same shares, 1
when the key's value follows from the factor's level).  At CONFOUNDED or more the key is
named beside the effect, and where the runs hold both levels within one value (or one
combination) of those keys, the effect is taken within those strata (one fit on the logs:
each stratum's mean and the level's common effect, the noise pooled over the strata): the
answer the runs can give, said before the pooled one.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from mpiwrite import stats

CONFOUNDED = 0.3  # Cramer's V at which a key is named beside a factor's effect
MOST = 3  # confounding keys taken as strata at most (the most associated first)
MIN_SAMPLES = 2  # a level within a stratum needs this many samples for its effect


ASSOCIATED = 0.05  # and a chi-square test of independence below this; for a key of at most
FEW, ASSOCIATED_FEW = 3, 0.2  # FEW values (a setting, a filesystem) below this: a study's
# few runs that never tried checksums on the old build are confounded however few they are


def association(a: Sequence[str], b: Sequence[str]) -> tuple:
    """(Cramer's V, bias-corrected; the chi-square test's p) of two labellings."""
    n = len(a)
    ta, tb = Counter(a), Counter(b)
    if n < 2 or min(len(ta), len(tb)) < 2:
        return 0.0, 1.0
    joint = Counter(zip(a, b))
    chi2 = sum((joint.get((x, y), 0) - na * nb / n) ** 2 / (na * nb / n)
               for x, na in ta.items() for y, nb in tb.items())
    return cramers_v(a, b), stats.chi2_sf(chi2, (len(ta) - 1) * (len(tb) - 1))


def cramers_v(a: Sequence[str], b: Sequence[str]) -> float:
    """Association of two labellings of the same units, 0 to 1, bias-corrected (Bergsma
    2013): hosts drawn at random for each run are not "associated" with the setting by the
    chance spread of few runs over many hosts."""
    n = len(a)
    ta, tb = Counter(a), Counter(b)
    r, c = len(ta), len(tb)
    if n < 2 or min(r, c) < 2:
        return 0.0
    joint = Counter(zip(a, b))
    chi2 = 0.0
    for x, na in ta.items():
        for y, nb in tb.items():
            e = na * nb / n
            chi2 += (joint.get((x, y), 0) - e) ** 2 / e
    phi2 = max(0.0, chi2 / n - (r - 1) * (c - 1) / (n - 1))
    rc, cc = r - (r - 1) ** 2 / (n - 1), c - (c - 1) ** 2 / (n - 1)
    k = min(rc, cc) - 1
    return min(1.0, math.sqrt(phi2 / k)) if k > 0 else 0.0


def confounders(levels: Sequence[str], keys: Dict[str, Sequence[str]],
                exclude: Sequence[str] = (), aliases: bool = False,
                alpha: Optional[float] = ASSOCIATED) -> List[Dict[str, Any]]:
    """The keys (per unit, like `levels`) spread unevenly over the factor's levels, the most
    associated first: {key, v, split: {level: {value: units}}}.  A key that splits the units
    exactly as the factor does is the factor's alias (explain names those apart; `aliases`
    keeps them: compare's sides have no other name).  `alpha`: the chi-square test's level
    too (None: the association alone)."""
    out = []
    own = _partition(levels)
    for key, col in keys.items():
        if key in exclude or len(set(col)) < 2 or (_partition(col) == own and not aliases):
            continue
        if nested(col, levels):
            continue  # hosts within CPU types: a finer split of the same thing, not another
        v, p = association(levels, col)
        level = ASSOCIATED_FEW if alpha == ASSOCIATED and len(set(col)) <= FEW else alpha
        if v >= CONFOUNDED and (alpha is None or p < level):
            split: Dict[str, Dict[str, int]] = {}
            for lv, val in zip(levels, col):
                split.setdefault(lv, {}).setdefault(val, 0)
                split[lv][val] += 1
            out.append({"key": key, "v": v, "split": split})
    out.sort(key=lambda c: (-c["v"], c["key"]))
    return out


def strata_keys(found: List[Dict[str, Any]], levels: Sequence[str],
                keys: Dict[str, Sequence[str]]) -> List[str]:
    """The confounders to take the effect within: the most associated first, each next one
    only while the strata holding both levels (MIN_SAMPLES units each) keep at least half
    of the units (a stratum per host of a few runs each says nothing)."""
    chosen: List[str] = []
    for c in found[:MOST]:
        trial = chosen + [c["key"]]
        cells = Counter((" / ".join(keys[k][u] for k in trial), levels[u])
                        for u in range(len(levels)))
        names = {st for st, _ in cells}
        kept = sum(n for (st, _lv), n in cells.items()
                   if all(cells.get((st, lv), 0) >= MIN_SAMPLES for lv in set(levels)))
        if chosen and kept * 2 < len(levels):
            break
        chosen = trial
        if len(names) == 1:
            break
    return chosen


def nested(finer: Sequence[str], coarser: Sequence[str]) -> bool:
    """Whether `finer` strictly refines `coarser`: more values, each with one value of it."""
    pairs = set(zip(finer, coarser))
    return len(set(finer)) > len(set(coarser)) and len(pairs) == len(set(finer))


def _partition(values: Sequence[str]) -> tuple:
    first: Dict[str, int] = {}
    return tuple(first.setdefault(v, len(first)) for v in values)


def within(values: Sequence[float], labels: Sequence[str], strata: Sequence[str],
           against: str, level: str, confidence: float = 0.95) -> Optional[Dict[str, Any]]:
    """`level` against `against` within each stratum that holds both (MIN_SAMPLES or more
    each), on the log of the values: one least-squares fit of each stratum's own mean and the
    level's common effect, its residual pooled over the strata (a stratum whose runs are all
    equal, lmdd lines in whole MB/s, weighs by its runs, not infinitely): {strata: [{where,
    change_pct, n}], change_pct, change_ci_lo_pct, change_ci_hi_pct, p_value, df}; None when
    no stratum holds both, a value is not positive, or no degree of freedom is left."""
    v = np.asarray(values, dtype=float)
    if not v.size or not np.all(v > 0):
        return None
    lv = np.log(v)
    labels, strata = list(labels), list(strata)
    parts, rows, names = [], [], []
    for st in sorted(set(strata)):
        ia = [i for i, (s_, lab) in enumerate(zip(strata, labels)) if s_ == st and lab == against]
        ib = [i for i, (s_, lab) in enumerate(zip(strata, labels)) if s_ == st and lab == level]
        if len(ia) < MIN_SAMPLES or len(ib) < MIN_SAMPLES:
            continue
        parts.append({"where": st, "n": [len(ia), len(ib)], "change_pct":
                      (stats._exp(float(lv[ib].mean() - lv[ia].mean())) - 1) * 100})
        rows += ia + ib
        names.append(st)
    if not parts:
        return None
    x = np.zeros((len(rows), len(names) + 1))
    for r, i in enumerate(rows):
        x[r, names.index(strata[i])] = 1.0
        x[r, -1] = 1.0 if labels[i] == level else 0.0
    fit = stats.ols(x, lv[rows])
    if fit.df < 1 or not fit.estimable[-1]:
        return None
    d, se = float(fit.coef[-1]), math.sqrt(max(float(fit.cov[-1, -1]), 0.0))
    tq = stats.t_ppf(0.5 + confidence / 2, fit.df)
    return {"strata": parts, "change_pct": (stats._exp(d) - 1) * 100,
            "change_ci_lo_pct": (stats._exp(d - tq * se) - 1) * 100,
            "change_ci_hi_pct": (stats._exp(d + tq * se) - 1) * 100,
            "p_value": stats.effect_p(d, se, fit.df), "df": fit.df,
            "against": against, "level": level}


def split_text(c: Dict[str, Any], unit: str = "runs") -> str:
    """How a confounding key is spread over the factor's levels, in a few words:
    `64KiB runs tmpfs in 6 of 8, 1MiB runs ext4 in 6 of 8`."""
    parts = []
    for lv, vals in c["split"].items():
        total = sum(vals.values())
        top, count = max(vals.items(), key=lambda kv: (kv[1], kv[0]))
        parts.append(f"{lv} {unit} {top} in {count} of {total}")
    return ", ".join(parts)


def text(name: str, found: List[Dict[str, Any]], inside: Optional[Dict[str, Any]],
         confidence: float = 0.95, unit: str = "runs", subject: str = "") -> List[str]:
    """The lines an answer prints before a confounded effect: what it is confounded with,
    and the effect within the strata where there are any."""
    keys = [c["key"] for c in found]
    lines = [f"confounded with {', '.join(keys)}: {subject or 'the levels of ' + name} also "
             f"differ in "
             f"{'it' if len(keys) == 1 else 'them'} ("
             + "; ".join(f"{c['key']}: {split_text(c, unit)}" for c in found[:MOST]) + ")"]
    strat = (inside or {}).get("keys") or keys[:1]
    if inside is None:
        lines.append(f"no value of {', '.join(strat)} holds both levels with "
                     f"{MIN_SAMPLES} {unit} each: the effect cannot be told from "
                     f"{'its' if len(strat) == 1 else 'theirs'}")
        return lines
    each = ", ".join(f"{p['where']} {p['change_pct']:+.1f}%" for p in inside["strata"])
    lines.append(f"within {', '.join(strat)}: {inside['level']} vs {inside['against']} "
                 f"{inside['change_pct']:+.1f}% [{inside['change_ci_lo_pct']:+.1f}, "
                 f"{inside['change_ci_hi_pct']:+.1f}] ({confidence * 100:g}% interval, p "
                 f"{inside['p_value']:.2g}; {each})")
    return lines
