"""Small statistics without scipy: Student t intervals, Welch's test, sample-size estimates.

The t distribution's CDF comes from the regularized incomplete beta function (continued
fraction, Lentz's method); its quantiles from bisection on the CDF.
"""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import NamedTuple, Sequence

import numpy as np


def _betacf(a: float, b: float, x: float) -> float:
    tiny, eps = 1e-300, 3e-16
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 400):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < eps:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta I_x(a, b)."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    lbeta = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
    front = math.exp(lbeta + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1) / (a + b + 2):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1 - x) / b


def t_cdf(t: float, df: float) -> float:
    if math.isinf(df):
        return NormalDist().cdf(t)
    x = df / (df + t * t)
    tail = 0.5 * betainc(df / 2, 0.5, x)
    return 1 - tail if t > 0 else tail


def t_ppf(p: float, df: float) -> float:
    """Quantile of Student's t (bisection; accurate to ~1e-10)."""
    if math.isinf(df) or df > 1e6:
        return NormalDist().inv_cdf(p)
    lo, hi = -1e3, 1e3
    for _ in range(200):
        mid = (lo + hi) / 2
        if t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12:
            break
    return (lo + hi) / 2


class Summary(NamedTuple):
    n: int
    mean: float
    std: float
    lo: float  # confidence interval of the mean
    hi: float
    min: float
    max: float


def describe(values: Sequence[float], confidence: float = 0.95) -> Summary:
    v = np.asarray([x for x in values if x == x], dtype=float)
    n = int(v.size)
    if n == 0:
        nan = float("nan")
        return Summary(0, nan, nan, nan, nan, nan, nan)
    mean = float(v.mean())
    std = float(v.std(ddof=1)) if n > 1 else float("nan")
    if n > 1:
        half = t_ppf(0.5 + confidence / 2, n - 1) * std / math.sqrt(n)
        lo, hi = mean - half, mean + half
    else:
        lo = hi = float("nan")
    return Summary(n, mean, std, lo, hi, float(v.min()), float(v.max()))


def _welch_df(va: float, na: int, vb: float, nb: int) -> float:
    sa, sb = va / na, vb / nb
    den = (sa * sa / (na - 1) if na > 1 else 0) + (sb * sb / (nb - 1) if nb > 1 else 0)
    return (sa + sb) ** 2 / den if den > 0 else float("inf")


class Comparison(NamedTuple):
    a: Summary
    b: Summary
    diff: float  # mean(b) - mean(a), MB/s
    diff_lo: float
    diff_hi: float
    pct: float  # (mean(b) / mean(a) - 1) * 100
    pct_lo: float
    pct_hi: float
    p_value: float
    df: float
    real: bool
    needed_per_group: int  # repetitions per configuration that would settle it (0: settled)


def compare(a: Sequence[float], b: Sequence[float], confidence: float = 0.95,
            power: float = 0.8) -> Comparison:
    """Welch's t-test of b against a, with intervals for the difference and the change."""
    sa, sb = describe(a, confidence), describe(b, confidence)
    nan = float("nan")
    if sa.n < 2 or sb.n < 2:
        return Comparison(sa, sb, sb.mean - sa.mean, nan, nan,
                          (sb.mean / sa.mean - 1) * 100 if sa.n and sb.n else nan, nan, nan,
                          nan, nan, False, max(0, 2 - min(sa.n, sb.n)) + 2)
    va, vb = sa.std ** 2, sb.std ** 2
    se = math.sqrt(va / sa.n + vb / sb.n)
    df = _welch_df(va, sa.n, vb, sb.n)
    diff = sb.mean - sa.mean
    tq = t_ppf(0.5 + confidence / 2, df)
    if se == 0:
        p = 0.0 if diff != 0 else 1.0
    else:
        p = 2 * (1 - t_cdf(abs(diff) / se, df))
    # percent change by the delta method: r = mb/ma - 1
    ratio = sb.mean / sa.mean
    se_r = math.sqrt(vb / (sb.n * sa.mean ** 2) + (sb.mean ** 2) * va / (sa.n * sa.mean ** 4))
    real = p < 1 - confidence
    needed = 0
    if not real:
        sd = math.sqrt((va + vb) / 2)
        z = NormalDist().inv_cdf(0.5 + confidence / 2) + NormalDist().inv_cdf(power)
        needed = int(math.ceil(2 * (z * sd / abs(diff)) ** 2)) if diff else -1
    return Comparison(sa, sb, diff, diff - tq * se, diff + tq * se, (ratio - 1) * 100,
                      (ratio - 1 - tq * se_r) * 100, (ratio - 1 + tq * se_r) * 100, p, df,
                      real, needed)
