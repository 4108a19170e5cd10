"""Small statistics without scipy: Student t intervals, Welch's test, sample-size estimates.

The t distribution's CDF comes from the regularized incomplete beta function (continued
fraction, Lentz's method); its quantiles from bisection on the CDF.
"""

from __future__ import annotations

import functools
import math
from statistics import NormalDist
from typing import NamedTuple, Optional, Sequence

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


@functools.lru_cache(maxsize=4096)  # the same few (p, df) over and over: a run's n - 1
def t_ppf(p: float, df: float) -> float:
    """Quantile of Student's t (bisection on the tail; relative accuracy ~1e-12).

    The bracket grows until it holds the quantile: t_ppf(1 - 1e-9, 1) is about 3.2e8."""
    if not 0 < p < 1:
        return math.nan if not 0 <= p <= 1 else math.copysign(math.inf, p - 0.5)
    if math.isinf(df) or df > 1e6:
        return NormalDist().inv_cdf(p)
    if p < 0.5:
        return -t_ppf(1 - p, df)
    if p == 0.5:
        return 0.0
    tail = 1 - p  # find t > 0 with P(T > t) = tail, which keeps precision for p near 1

    def upper(t: float) -> float:
        return 0.5 * betainc(df / 2, 0.5, df / (df + t * t))

    lo, hi = 0.0, 1.0
    while upper(hi) > tail and hi < 1e300:
        lo, hi = hi, hi * 2
    # Newton's steps on the tail (its slope is the density), kept inside the bracket, which
    # every step narrows; a step that would leave it bisects instead.  About 6 evaluations
    # where bisection alone took 45 (explain over 200 tags computes thousands of intervals).
    log_norm = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
    t = (lo + hi) / 2
    for _ in range(400):
        gap = upper(t) - tail  # > 0: t is below the quantile
        if gap > 0:
            lo = t
        else:
            hi = t
        density = math.exp(log_norm - (df + 1) / 2 * math.log1p(t * t / df))
        step = gap / density if density > 0 else math.inf
        nxt = t + step
        if not lo < nxt < hi:
            nxt = (lo + hi) / 2
        if abs(nxt - t) <= 1e-14 * nxt or hi - lo <= 1e-13 * hi:
            return nxt
        t = nxt
    return t


def chi2_sf(x: float, df: float) -> float:
    """P(X >= x) for a chi-square with df degrees of freedom: the regularized upper incomplete
    gamma Q(df/2, x/2), by its series below a + 1 and its continued fraction above."""
    if not x > 0:
        return 1.0
    a, z = df / 2.0, x / 2.0
    log_front = a * math.log(z) - z - math.lgamma(a)
    if z < a + 1:
        term = total = 1.0 / a
        for n in range(1, 1000):
            term *= z / (a + n)
            total += term
            if abs(term) < abs(total) * 1e-15:
                break
        return min(1.0, max(0.0, 1.0 - total * math.exp(log_front)))
    tiny = 1e-300
    b = z + 1.0 - a
    c, d = 1.0 / tiny, 1.0 / b
    h = d
    for i in range(1, 1000):
        an = -i * (i - a)
        b += 2.0
        d = an * d + b
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = b + an / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-15:
            break
    return min(1.0, max(5e-324, math.exp(log_front) * h))


def f_sf(f: float, d1: float, d2: float) -> float:
    """P(F >= f) for Fisher's F with (d1, d2) degrees of freedom."""
    if not f > 0:
        return 1.0
    return min(1.0, max(betainc(d2 / 2, d1 / 2, d2 / (d2 + d1 * f)), 5e-324))


def two_sided_p(t: float, df: float) -> float:
    """P(|T| >= |t|) for Student's t with df degrees of freedom, from the tail itself (not
    1 - cdf, which rounds to 0 past 1e-16): never 0 for a finite t."""
    if math.isinf(df):
        return min(1.0, max(2 * NormalDist().cdf(-abs(t)), 5e-324))
    return min(1.0, max(betainc(df / 2, 0.5, df / (df + t * t)), 5e-324))


class Summary(NamedTuple):
    """n, the arithmetic mean with its Student t interval (lo, hi), and where every value is
    positive the geometric mean with its own interval (glo, ghi: the t interval of the mean
    of the logs, taken back).  Each interval belongs to one figure: lo and hi never sit
    beside the geometric mean, nor glo and ghi beside the arithmetic one."""
    n: int
    mean: float  # arithmetic
    std: float
    lo: float  # Student t interval of the arithmetic mean
    hi: float
    min: float
    max: float
    gmean: float = float("nan")  # geometric mean (nan unless every value is positive)
    ratio: bool = False  # whether the values are on the ratio scale (gmean, glo, ghi exist)
    glo: float = float("nan")  # Student t interval of the geometric mean (from the logs)
    ghi: float = float("nan")


def on_ratio_scale(*sides: Sequence[float]) -> bool:
    """Whether values are read on the ratio scale: every one positive (a rate, CPU s/GB).
    Their comparisons are then ratios, from the log of the values: a change never below
    -100%, an interval of the geometric mean never below zero."""
    vals = [x for side in sides for x in side if x == x]
    return bool(vals) and all(x > 0 and math.isfinite(x) for x in vals)


def describe(values: Sequence[float], confidence: float = 0.95,
             ratio: bool = True) -> Summary:
    """n, mean, sd, min, max, the Student t interval of the arithmetic mean; with `ratio`
    and every value positive also the geometric mean and its interval (the t interval of
    the mean of log(values), taken back: always positive)."""
    v = np.asarray([x for x in values if x == x], dtype=float)
    n = int(v.size)
    nan = float("nan")
    if n == 0:
        return Summary(0, nan, nan, nan, nan, nan, nan)
    mean = float(v.mean())
    std = float(v.std(ddof=1)) if n > 1 else nan
    use_log = ratio and on_ratio_scale(v)
    gmean = float(np.exp(np.log(v).mean())) if use_log else nan
    lo = hi = glo = ghi = nan
    if n > 1:
        tq = t_ppf(0.5 + confidence / 2, n - 1)
        half = tq * std / math.sqrt(n)
        lo, hi = mean - half, mean + half
        if use_log:
            lv = np.log(v)
            lhalf = tq * float(lv.std(ddof=1)) / math.sqrt(n)
            glo, ghi = float(np.exp(lv.mean() - lhalf)), float(np.exp(lv.mean() + lhalf))
    return Summary(n, mean, std, lo, hi, float(v.min()), float(v.max()), gmean, use_log,
                   glo, ghi)


def _welch_df(va: float, na: int, vb: float, nb: int) -> float:
    sa, sb = va / na, vb / nb
    den = (sa * sa / (na - 1) if na > 1 else 0) + (sb * sb / (nb - 1) if nb > 1 else 0)
    return (sa + sb) ** 2 / den if den > 0 else float("inf")


class Comparison(NamedTuple):
    a: Summary
    b: Summary
    diff: float  # b - a in the unit of the values (MB/s, CPU s/GB): of the means compared
    # (geometric on the ratio scale, arithmetic otherwise)
    diff_lo: float
    diff_hi: float
    pct: float  # (mean(b) / mean(a) - 1) * 100
    pct_lo: float  # the difference's interval in percent of mean(a): same test, same t
    pct_hi: float
    p_value: float
    df: float
    real: bool
    needed_per_side: int  # repetitions per side that would settle a difference this size
    more_per_side: int  # how many more than the smaller side has (0: settled or identical)
    scale: str = "difference"  # "ratio": the test and intervals on the log of the values


def needed_per_side(diff: float, sd: float, confidence: float = 0.95,
                    power: float = 0.8) -> int:
    """Smallest n per side at which a two-sided t-test at `confidence` detects `diff` with
    probability `power` when both sides have standard deviation `sd` (t quantiles with the
    Welch degrees of freedom for equal sides, 2n - 2, not the normal approximation)."""
    if not diff or not math.isfinite(diff):
        return 0
    if sd <= 0:
        return 2
    zn = NormalDist().inv_cdf(0.5 + confidence / 2) + NormalDist().inv_cdf(power)
    n = max(2, int(math.ceil(2 * (zn * sd / abs(diff)) ** 2)))  # t quantiles only add to it
    if n >= 10**6:
        return 10**6
    while True:
        df = 2 * n - 2
        z = t_ppf(0.5 + confidence / 2, df) + t_ppf(power, df)
        if abs(diff) / (sd * math.sqrt(2 / n)) >= z:
            return n
        n += 1


def compare(a: Sequence[float], b: Sequence[float], confidence: float = 0.95,
            power: float = 0.8, ratio: bool = True) -> Comparison:
    """Welch's t-test of b against a.

    On the ratio scale (`ratio` and every value positive: rates, CPU s/GB) the test is on the
    log of the values: the change is the ratio of the geometric means, its interval the log
    interval taken back, so it never goes below -100% ("-37% [-53, -21]").  Otherwise on the
    values, the percent interval the difference's divided by mean(a).  Either way one t, one
    df: the absolute interval, the percent interval and the verdict agree (each excludes
    zero exactly when p < 1 - confidence).  `diff` is on the verdict's scale too: the
    difference of the arithmetic means with their Welch interval, or on the ratio scale the
    difference of the geometric means, gmean(b) - gmean(a), with the ratio's interval at
    gmean(a).  Every interval belongs to the figure it is named for, and all agree with p.
    """
    use_log = ratio and on_ratio_scale(a, b)
    sa, sb = describe(a, confidence, ratio), describe(b, confidence, ratio)
    nan = float("nan")
    if sa.n < 2 or sb.n < 2:
        need = 2
        pct = (sb.mean / sa.mean - 1) * 100 if sa.n and sb.n and sa.mean else nan
        if use_log and sa.n and sb.n:
            pct = (sb.gmean / sa.gmean - 1) * 100
        return Comparison(sa, sb, sb.mean - sa.mean, nan, nan, pct, nan, nan, nan, nan, False,
                          need, need - min(sa.n, sb.n), "ratio" if use_log else "difference")
    if use_log:
        la = np.log(np.asarray([x for x in a if x == x], dtype=float))
        lb = np.log(np.asarray([x for x in b if x == x], dtype=float))
        ma, mb = float(la.mean()), float(lb.mean())
        va, vb = float(la.var(ddof=1)), float(lb.var(ddof=1))
    else:
        ma, mb, va, vb = sa.mean, sb.mean, sa.std ** 2, sb.std ** 2
    se = math.sqrt(va / sa.n + vb / sb.n)
    df = _welch_df(va, sa.n, vb, sb.n)
    d = mb - ma
    if se == 0:
        p = 0.0 if d != 0 else 1.0
        lo = hi = d
    else:
        p = two_sided_p(d / se, df)
        tq = t_ppf(0.5 + confidence / 2, df)
        lo, hi = d - tq * se, d + tq * se
    real = bool(p < 1 - confidence)  # the same t and df: exactly when [lo, hi] excludes 0
    need = more = 0
    if not real and d:
        need = needed_per_side(d, math.sqrt((va + vb) / 2), confidence, power)
        more = max(1, need - min(sa.n, sb.n))
        need = min(sa.n, sb.n) + more
    diff = sb.mean - sa.mean
    if use_log:
        pct, pct_lo, pct_hi = ((_exp(x) - 1) * 100 for x in (d, lo, hi))
        diff = sb.gmean - sa.gmean
        diff_lo, diff_hi = sa.gmean * pct_lo / 100, sa.gmean * pct_hi / 100
        return Comparison(sa, sb, diff, diff_lo, diff_hi, pct, pct_lo, pct_hi, p, df, real,
                          need, more, "ratio")
    scale = 100 / sa.mean if sa.mean else nan
    return Comparison(sa, sb, diff, lo, hi, diff * scale, lo * scale, hi * scale, p, df,
                      real, need, more, "difference")


class Fit(NamedTuple):
    """A least-squares fit: coefficients, their covariance (residual variance x (X'X)^+,
    right for every estimable coefficient and contrast), residual df, rank, which columns'
    coefficients are estimable, the residual sd, and the projection onto the row space of X
    (`project`: a contrast w is estimable exactly when project @ w == w)."""
    coef: np.ndarray
    cov: np.ndarray
    df: int
    rank: int
    estimable: np.ndarray  # per column: whether its coefficient is estimable
    sigma: float  # residual standard deviation (nan for df < 1)
    project: np.ndarray
    raw: np.ndarray  # the minimum-norm solution, every column (for estimable contrasts)
    raw_cov: np.ndarray  # sigma^2 (X'X)^+, every column

    def can_estimate(self, w: np.ndarray) -> bool:
        w = np.asarray(w, dtype=float)
        scale = max(1.0, float(np.abs(w).max()))
        return bool(np.allclose(self.project @ w, w, atol=1e-8 * scale))

    def contrast(self, w: np.ndarray):
        """(w.b, its variance) of an estimable contrast, else None."""
        w = np.asarray(w, dtype=float)
        if not self.can_estimate(w):
            return None
        return float(w @ self.raw), float(w @ self.raw_cov @ w)


def ols(x: np.ndarray, y: np.ndarray) -> Fit:
    """y = X b + e by least squares, from one singular value decomposition.  A column that
    is a linear combination of the others (aliased: a factor with the previous run's level
    in a fixed cycle) is not estimable: its coefficient and variance are nan, and the
    others are what any full-rank basis would give (the minimum-norm solution agrees with
    every basis on the estimable ones)."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    n, k = x.shape
    if k == 0 or n == 0:
        nan_k = np.full((k, k), np.nan)
        return Fit(np.full(k, np.nan), nan_k, n, 0, np.zeros(k, bool), math.nan,
                   np.zeros((k, k)), np.full(k, np.nan), nan_k)
    u, sv, vt = np.linalg.svd(x, full_matrices=False)
    tol = sv.max() * max(n, k) * np.finfo(float).eps if sv.size else 0.0
    r = int(np.sum(sv > tol))
    vr, ur, sr = vt[:r].T, u[:, :r], sv[:r]
    project = vr @ vr.T
    est = np.abs(np.diag(project) - 1.0) < 1e-8
    b = vr @ ((ur.T @ y) / sr)
    resid = y - x @ b
    df = int(n - r)
    sigma = math.sqrt(float(resid @ resid) / df) if df > 0 else math.nan
    xtx_pinv = (vr / sr ** 2) @ vr.T
    cov = xtx_pinv * sigma ** 2 if df > 0 else np.full((k, k), np.nan)
    coef = np.where(est, b, np.nan)
    return Fit(coef, np.where(np.outer(est, est), cov, np.nan), df, r, est, sigma, project,
               b, cov)


TINY = 1e-9  # a log-scale effect below this is rounding (a millionth of a percent): none


def effect_p(b: float, se: float, df: int) -> float:
    """Two-sided p of coefficient b with standard error se: 1 for an effect that is only
    rounding (all runs equal to the last digit gave "p 0.04, real" from 1e-16)."""
    if abs(b) < TINY:
        return 1.0
    if not se > 0:
        return 0.0
    return two_sided_p(b / se, df)


OUTLIER = 5.0  # residuals beyond this many robust standard deviations are outliers
OUTLIER_DF = 20  # and the fit has at least this many residual degrees of freedom, and as
# many as half its runs: with fewer, a robust fit lays most residuals near zero and any run
# looks far (18 runs of a 6-point study: 2 ordinary runs "5 sd" out)


def outlier_check(n: int, df: int) -> bool:
    """Whether a fit of n runs with df residual degrees of freedom may look for outliers."""
    return df >= max(OUTLIER_DF, n / 2)


def outliers(resid: Sequence[float], limit: float = OUTLIER,
             x: Optional[np.ndarray] = None) -> np.ndarray:
    """Which residuals are beyond `limit` robust standard deviations below the fit: a run at
    a third of the rate (a stall) among runs 5% apart.  With the design `x`, each residual
    is divided by sqrt(1 - its leverage) and the scale (1.4826 x the median absolute deviation) is
    widened by sqrt(n / (n - parameters)): a fit of many parameters leaves residuals smaller
    than the noise, which must not make ordinary runs look far.  Under normal noise a run is
    beyond 5 sd about once in 1.7 million; none when the deviation is 0."""
    r = np.asarray(resid, dtype=float)
    n = r.size
    if n < 4:
        return np.zeros(n, dtype=bool)
    p = 0
    if x is not None and x.size:
        x = np.asarray(x, dtype=float)
        h = np.einsum("ij,ji->i", x, np.linalg.pinv(x))
        p = int(np.linalg.matrix_rank(x))
        r = r / np.sqrt(np.clip(1 - h, 1e-6, None))
    if n - p < 3:
        return np.zeros(n, dtype=bool)
    centre = float(np.median(r))
    scale = 1.4826 * float(np.median(np.abs(r - centre))) * math.sqrt(n / (n - p))
    if not scale > 0:
        return np.zeros(n, dtype=bool)
    # a stall is a slow run: only the slow side (a stall also pulls its block's and its
    # point's fits down, and the others of them then look fast: never left out for it)
    return (r - centre) < -limit * scale


def robust_residuals(x: np.ndarray, y: np.ndarray, rounds: int = 30) -> np.ndarray:
    """Residuals of a robust fit of y on X: iteratively reweighted least squares with Huber's
    weights (convex: one answer whatever the start), the scale at each step 1.4826 x the
    median absolute residual.  An ordinary fit spreads a few stalls over every run of their
    point; these residuals leave them standing out.  (Tukey's bisquare after it, tried too,
    found 'outliers' in a fifth of studies without any: a redescending fit of 21 parameters
    to 60 runs has more than one answer.)"""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    w = np.ones(y.size)
    r = y.copy()
    for _ in range(rounds):
        sw = np.sqrt(w)
        b, *_ = np.linalg.lstsq(x * sw[:, None], y * sw, rcond=None)
        r = y - x @ b
        scale = 1.4826 * float(np.median(np.abs(r - np.median(r))))
        if not scale > 0:
            break
        w = np.minimum(1.0, 1.345 / np.maximum(np.abs(r / scale), 1e-12))
    return r


def holm(p_values: Sequence) -> list:
    """Holm's step-down correction of p-values for the number tested (None: not tested,
    left None): the k-th smallest p times (m - k + 1), never below an earlier one, at most 1.
    Controls the chance of any false "clear" among the m at the level asked."""
    tested = sorted((p, i) for i, p in enumerate(p_values) if p is not None and p == p)
    m = len(tested)
    out = [None if p is None or p != p else p for p in p_values]
    running = 0.0
    for k, (p, i) in enumerate(tested):
        running = max(running, min(1.0, (m - k) * p))
        out[i] = running
    return out


def min_permutation_p(sizes: Sequence[int]) -> float:
    """The smallest p any permutation test of groups of these sizes can give: relabellings
    that keep the statistic (groups of equal size swapped) over the distinct splits (the
    multinomial).  3 runs against 3: 2 / 20 = 0.1, never below 0.05."""
    sizes = [int(x) for x in sizes if x > 0]
    if len(sizes) < 2:
        return 1.0
    log_splits = math.lgamma(sum(sizes) + 1) - sum(math.lgamma(x + 1) for x in sizes)
    same = sum(math.lgamma(sizes.count(x) + 1) for x in set(sizes))
    return min(1.0, math.exp(same - log_splits))


# ---------------------------------------------------------------- variance explained
# `explain` asks how much of a metric's variation a key accounts for: eta squared (the share
# of the sum of squares between the key's groups), optionally within strata (the levels of
# another key), with a permutation p-value.  Permutations are drawn from a seeded generator,
# so the same records always give the same p; the smallest p is 1 / (permutations + 1).

PERMUTATIONS = 2000
SEED = 20080606  # any fixed number: the output must not change from one call to the next
_BLOCK = 2_000_000  # permuted samples held at once (16 MB of float64)
_MANY_CELLS = 64  # beyond this many cells, sums by bincount rather than a one-hot product


def _codes(labels: Sequence) -> np.ndarray:
    return np.unique(np.asarray([str(x) for x in labels], dtype=object),
                     return_inverse=True)[1].reshape(-1)


class Share(NamedTuple):
    share: float  # eta squared: SS between the groups / SS total (within strata), 0..1
    p_value: float  # permutation p (nan when there is nothing to permute)
    permutations: int


def _cell_term(y: np.ndarray, cells: np.ndarray, ncells: int) -> np.ndarray:
    """sum over cells of (cell sum)^2 / cell size, for each row of y (rows: permutations).
    Many cells (the ranks of a run, its hosts): sums by bincount, O(samples) instead of
    O(samples x cells) (a 3,072-sample run's rank x target cells took 14 s as a product)."""
    if ncells > _MANY_CELLS:
        rows = y.reshape(-1, y.shape[-1])
        size = np.bincount(cells, minlength=ncells)
        at = (np.arange(rows.shape[0])[:, None] * ncells + cells[None, :]).ravel()
        sums = np.bincount(at, weights=rows.ravel(), minlength=rows.shape[0] * ncells)
        sums = sums.reshape(rows.shape[0], ncells)
        out = (sums * sums / np.maximum(size, 1)).sum(axis=-1)
        return out.reshape(y.shape[:-1])
    onehot = np.zeros((y.shape[-1], ncells))
    onehot[np.arange(y.shape[-1]), cells] = 1.0
    sums = y @ onehot
    return (sums * sums / np.maximum(onehot.sum(axis=0), 1)).sum(axis=-1)


def variance_share(values: Sequence[float], labels: Sequence,
                   strata: Sequence = None, permutations: int = PERMUTATIONS,
                   seed: int = SEED) -> Share:
    """Eta squared of `labels` over `values`, and its permutation p-value.

    With `strata`, both are taken within each stratum (the effect of `labels` once the
    strata's own means are taken out: the partial share), and the values are permuted only
    within their stratum.  The statistic is the sum of squares between the cells of labels
    within strata; its denominator, the sum of squares within strata, is the same for every
    permutation.  p = (1 + permutations at least as large) / (1 + permutations)."""
    y = np.asarray(values, dtype=float)
    n = y.size
    lab = _codes(labels)
    st = _codes(strata) if strata is not None else np.zeros(n, dtype=int)
    nst = int(st.max()) + 1 if n else 0
    cells = st * (int(lab.max()) + 1 if n else 1) + lab
    cells = np.unique(cells, return_inverse=True)[1].reshape(-1)
    ncells = int(cells.max()) + 1 if n else 0
    if n < 3 or ncells <= nst:
        return Share(0.0, math.nan, 0)
    y = y - y.mean()  # the sums of squares do not depend on the origin; this keeps precision
    strat_term = float(_cell_term(y, st, nst))
    total = float((y * y).sum()) - strat_term  # SS within strata
    observed = float(_cell_term(y, cells, ncells)) - strat_term
    if total <= 1e-12 * max(float((y * y).sum()), 1e-300):
        return Share(0.0, math.nan, 0)
    rng = np.random.default_rng(seed)
    groups = [np.flatnonzero(st == s) for s in range(nst)]
    ge, done, block = 0, 0, max(1, _BLOCK // n)
    tol = 1e-9 * abs(observed) + 1e-12 * total
    while done < permutations:
        b = min(block, permutations - done)
        idx = np.tile(np.arange(n), (b, 1))
        for g in groups:
            if g.size > 1:
                idx[:, g] = rng.permuted(np.tile(g, (b, 1)), axis=1)
        stat = _cell_term(y[idx], cells, ncells) - strat_term
        ge += int(np.sum(stat >= observed - tol))
        done += b
    share = min(1.0, max(0.0, observed / total))
    return Share(share, (1 + ge) / (1 + permutations), permutations)


def _exp(x: float) -> float:
    """exp, infinite past the largest float (a ratio of 10^308: crafted rates, not real ones)."""
    try:
        return math.exp(x)
    except OverflowError:
        return math.inf
