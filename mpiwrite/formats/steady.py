"""Whether and when an iteration's aggregate rate became steady (`run --steady`), by fio's
criteria (its `steadystate=` and `ss_dur`): docs/measurement.md, "Steady state".

The aggregate rate is taken per `step` (the run's --sample-interval) from every rank's
samples on the common timeline (summary.bytes_at: linear between a rank's samples), up to the
first rank's last write; a window
of `dur` seconds slides over it, a step at a time, and the first window that meets the
criterion makes the iteration steady at its end:

- `bw_slope:PCT`: the slope of the least-squares line through the window's rates, as a
  percentage of their mean per second (fio's with its one-second samples), at most PCT;
- `bw:PCT`: every rate of the window within PCT percent of their mean.

Pure numpy over the record's tables; what the samples count (bytes `write()` accepted, or
durable ones under --direct or --fsync-every) is what the rates are.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, NamedTuple, Optional

import numpy as np

from mpiwrite.formats.summary import bytes_at
from mpiwrite.units import finite, parse_time

KINDS = ("bw_slope", "bw")
DEFAULT_DUR = 10.0
_SPEC = re.compile(r"^(bw_slope|bw):([0-9]+(?:\.[0-9]+)?)%?(?::(.+))?\Z")


class Spec(NamedTuple):
    kind: str
    pct: float
    dur: float

    def __str__(self) -> str:
        return f"{self.kind}:{self.pct:g}%:{self.dur:g}s"


def parse(text: str) -> Spec:
    """'bw_slope:0.5%', 'bw:5:20s' (the window: 10s if not given); ValueError says why not."""
    m = _SPEC.match(str(text).strip())
    if not m:
        raise ValueError(f"{text!r} is not bw_slope:PCT[:DURATION] or bw:PCT[:DURATION] "
                         "(e.g. bw_slope:0.5%:10s)")
    pct = float(m.group(2))
    dur = parse_time(m.group(3)) if m.group(3) else DEFAULT_DUR
    if not 0 < pct <= 100:
        raise ValueError(f"{text!r}: the percentage must be above 0 and at most 100")
    if not dur > 0:
        raise ValueError(f"{text!r}: the window must be a positive duration")
    return Spec(m.group(1), pct, dur)


def rates(ranks: np.ndarray, samples: Optional[np.ndarray], step: float):
    """(window ends' times from the first write start, aggregate MB/s per step, whether each
    step was observed) of one iteration, up to the first rank's last write (after it, fewer
    ranks write, and no sample is taken in the final fsync: between the last sample and the
    close there is no rate).  A step is observed when every rank has a point (its start, a
    sample, its last write's end) at most 2 steps before and after it: between two points
    far apart the rate is a straight line drawn through what nobody saw (a writer held in a
    ramp's fsync, a stall), and a straight line is as steady as a rate can look."""
    good = ranks[np.isfinite(ranks["t_write_start"]) & np.isfinite(ranks["t_write_end"])
                 & np.isfinite(ranks["t_close_end"])]
    none = np.zeros(0), np.zeros(0), np.zeros(0, dtype=bool)
    if not len(good) or not step > 0:
        return none
    t0, first = float(good["t_write_start"].min()), float(good["t_write_end"].min())
    n = int((first - t0) / step)
    if n < 2:
        return none
    grid = t0 + step * np.arange(n + 1)
    total = np.array([bytes_at(float(t), samples, good) for t in grid])
    mids = (grid[:-1] + grid[1:]) / 2
    seen = np.ones(n, dtype=bool)
    for r in good:
        mine = samples["t"][samples["rank"] == r["rank"]] if samples is not None and \
            len(samples) else np.zeros(0)
        points = np.sort(np.concatenate([[r["t_write_start"], r["t_write_end"]], mine]))
        at = np.searchsorted(points, mids)
        inside = (at > 0) & (at < len(points))
        gap = np.full(n, np.inf)
        gap[inside] = points[at[inside]] - points[at[inside] - 1]
        seen &= gap <= 2 * step + 1e-9
    return grid[1:] - t0, np.diff(total) / step / 1e6, seen


def criterion(spec: Spec, t: np.ndarray, y: np.ndarray) -> float:
    """The window's figure in percent: its slope per second over its mean, or its largest
    deviation from its mean, over the mean."""
    mean = float(np.mean(y))
    if not mean > 0:
        return float("inf")
    if spec.kind == "bw":
        return float(np.max(np.abs(y - mean)) / mean * 100)
    slope = float(np.polyfit(t, y, 1)[0])
    return abs(slope) / mean * 100


def detect(spec: Spec, ranks: np.ndarray, samples: Optional[np.ndarray],
           step: float) -> Dict[str, Any]:
    """{criterion, steady, at_seconds (from the first write start, or None), figure_pct (at
    that window, or the smallest seen), rate_MB_per_s (that window's mean), windows}."""
    t, y, seen = rates(ranks, samples, step)
    width = max(2, int(round(spec.dur / step)))
    out: Dict[str, Any] = {"criterion": str(spec), "steady": False, "at_seconds": None,
                           "figure_pct": None, "rate_MB_per_s": None, "windows": 0,
                           "unobserved": 0}
    best = None
    for end in range(width, len(y) + 1):
        if not seen[end - width:end].all():  # a rate nobody saw: no verdict from it
            out["unobserved"] += 1
            continue
        yy, tt = y[end - width:end], t[end - width:end]
        fig = criterion(spec, tt, yy)
        out["windows"] += 1
        if best is None or fig < best[0]:
            best = (fig, float(np.mean(yy)))
        if fig <= spec.pct:
            out.update(steady=True, at_seconds=round(float(tt[-1]), 3),
                       figure_pct=round(fig, 4), rate_MB_per_s=round(float(np.mean(yy)), 3))
            return out
    if best is not None:
        out.update(figure_pct=round(best[0], 4), rate_MB_per_s=round(best[1], 3))
    return out


def text(found: Dict[str, Any]) -> str:
    """One line: 'steady from 12s (bw_slope 0.21% <= 0.5% over 10s, 812.4 MB/s)' or why not."""
    parts = str(found.get("criterion", "")).split(":")
    kind, pct, dur = parts if len(parts) == 3 else ("?", "?", "?")
    if found.get("steady"):
        return (f"steady from {found['at_seconds']:g}s ({kind} {found['figure_pct']:.3g}% <= "
                f"{pct} over {dur}, {found['rate_MB_per_s']:.1f} MB/s)")
    unseen = found.get("unobserved") or 0
    left = (f"; {unseen} window(s) left out: a writer went more than 2 samples without one "
            "(a ramp's fsync, a stall), and a rate drawn across that gap says nothing"
            if unseen else "")
    if not found.get("windows"):
        if unseen:
            return f"never steady: no {dur} window of {kind} was observed throughout{left}"
        return (f"never steady: shorter than one {dur} window of {kind} (a longer --time, or "
                "a shorter window)")
    return (f"never steady: the smallest {kind} over {found['windows']} window(s) of {dur} was "
            f"{found['figure_pct']:.3g}%, above {pct}{left}")


def stored(rec, iteration: int) -> List[Dict[str, Any]]:
    """The record's --steady finding of an iteration, checked (an attribute is untrusted)."""
    out = []
    got = rec._json("steady", None)
    for found in got if isinstance(got, list) else []:
        if not isinstance(found, dict) or found.get("iteration") != iteration:
            continue
        names = ("at_seconds", "figure_pct", "rate_MB_per_s")
        nums = {k: finite(found.get(k)) for k in names}
        windows = found.get("windows")
        unseen = found.get("unobserved", 0)  # absent from records before it
        if type(unseen) is not int or not 0 <= unseen <= 10**9 \
                or not isinstance(found.get("steady"), bool) or not isinstance(
                found.get("criterion"), str) or type(windows) is not int \
                or not 0 <= windows <= 10**9 \
                or any(nums[k] is None and found.get(k) is not None for k in names) \
                or ((found["steady"] or windows) and nums["figure_pct"] is None) \
                or (found["steady"] and None in nums.values()):
            continue
        out.append({**found, **nums, "criterion": found["criterion"][:64]})
    return out


def never_steady(runs) -> List[Any]:
    """The runs with an iteration that never became steady by their --steady criterion."""
    return [r for r in runs if any(not f["steady"] for i in r.iterations["iteration"]
                                   for f in stored(r, int(i)))]
