"""The order a study's runs go in (docs/study.md, "Run order").

A run can leave something behind for the next: writeback still in flight, a client cache
still full, a setting's side effect.  A fixed cycle (interleaved: every point once, then again,
in the file's order) puts the same point before each point every time, so whatever the
previous run leaves is aliased with the factor that alternates fastest, and a verdict can be
confidently wrong (docs/verdicts.md).  The default order, `balanced`, keeps the repetitions as
blocks (every point once per repetition, so drift over the study spreads over all points alike)
and, within each block, takes a seeded permutation chosen so that over the study each level of
each axis is preceded by each level about as often as the levels' shares predict (the aim of a
Williams design, for any number of points and repetitions), the previous run's level then being
a covariate the analysis can estimate (answers/carryover.py) rather than an alias.

Every order is a pure function of the file and the seed: a resumed study runs the rest in the
same order.
"""

from __future__ import annotations

import hashlib
import json
import random
from typing import Any, Dict, List, Sequence, Tuple

ORDERS = ("balanced", "random", "interleaved", "sequential")
DEFAULT = "balanced"
CANDIDATES = 64  # permutations tried per repetition, at most
WORK = 400_000  # candidates x points x repetitions above which fewer candidates are tried


def default_seed(name: str, axes: Dict[str, List[Any]], listed: Sequence[Dict[str, Any]]) -> int:
    """The seed of a study file that names none: from its name and points, so that the same
    file always runs in the same order (and says which seed: `study plan`, every record)."""
    doc = json.dumps({"name": name, "axes": axes, "points": list(listed)}, sort_keys=True,
                     default=str)
    return int(hashlib.sha256(doc.encode()).hexdigest()[:8], 16)


def runs(order: str, points: Sequence[Dict[str, Any]], repeat: int,
         seed: int) -> List[Tuple[int, int]]:
    """(point index, repetition) in the order they run."""
    n = len(points)
    if order == "sequential":
        return [(p, r) for p in range(n) for r in range(repeat)]
    if order == "interleaved":
        return [(p, r) for r in range(repeat) for p in range(n)]
    if order == "random":
        out = [(p, r) for r in range(repeat) for p in range(n)]
        random.Random(seed).shuffle(out)
        return out
    return [(p, r) for r, block in enumerate(balanced(points, repeat, seed)) for p in block]


def _levels(points: Sequence[Dict[str, Any]]) -> List[List[int]]:
    """For each axis that varies: each point's level, as an index."""
    out = []
    for axis in (points[0] if points else {}):
        seen: Dict[str, int] = {}
        col = [seen.setdefault(repr(p[axis]), len(seen)) for p in points]
        if len(seen) > 1:
            out.append(col)
    return out


def balanced(points: Sequence[Dict[str, Any]], repeat: int, seed: int) -> List[List[int]]:
    """One permutation of the points per repetition, each the best of several seeded
    candidates by how evenly, over the study so far, every axis's levels follow each other
    (the run before the first of a block is the last of the block before)."""
    n = len(points)
    rng = random.Random(seed)
    if n <= 1:
        return [list(range(n)) for _ in range(repeat)]
    axes = _levels(points)
    # expected share of each (previous level, level) cell: the levels' shares, multiplied
    shares = []
    for col in axes:
        k = max(col) + 1
        f = [col.count(i) / n for i in range(k)]
        shares.append([[f[i] * f[j] for j in range(k)] for i in range(k)])
    counts = [[[0] * len(s) for s in s_] for s_ in shares]
    pair = [[0] * n for _ in range(n)]  # the points themselves: the tie-breaker
    tries = max(4, min(CANDIDATES, WORK // max(1, n * repeat * max(1, len(axes)))))
    out: List[List[int]] = []
    last = -1
    for _r in range(repeat):
        best, best_cost = None, None
        for _c in range(tries):
            perm = list(range(n))
            rng.shuffle(perm)
            cost = _cost(perm, last, axes, shares, counts, pair)
            if best_cost is None or cost < best_cost:
                best, best_cost = perm, cost
        prev = last
        for p in best:
            if prev >= 0:
                for a, col in enumerate(axes):
                    counts[a][col[prev]][col[p]] += 1
                pair[prev][p] += 1
            prev = p
        last = best[-1]
        out.append(best)
    return out


def _cost(perm: List[int], last: int, axes, shares, counts, pair) -> float:
    """How uneven the transition counts would be with this block added: for each axis the
    sum over cells of count^2 / expected share (smallest when the counts follow the shares),
    then the points' own pairs, a little."""
    added: Dict[Tuple[int, int, int], int] = {}
    pairs: Dict[Tuple[int, int], int] = {}
    prev = last
    for p in perm:
        if prev >= 0:
            for a, col in enumerate(axes):
                key = (a, col[prev], col[p])
                added[key] = added.get(key, 0) + 1
            pairs[(prev, p)] = pairs.get((prev, p), 0) + 1
        prev = p
    cost = 0.0
    for (a, i, j), k in added.items():
        now = counts[a][i][j]
        cost += ((now + k) ** 2 - now ** 2) / shares[a][i][j]
    for (i, j), k in pairs.items():
        now = pair[i][j]
        cost += 1e-3 * ((now + k) ** 2 - now ** 2)
    return cost


def transitions(order: Sequence[Tuple[int, int]], points: Sequence[Dict[str, Any]],
                axis: str) -> Dict[Tuple[str, str], int]:
    """How often each (previous level, level) of an axis follows in a run order: what
    `study plan` shows, and the tests check."""
    out: Dict[Tuple[str, str], int] = {}
    for (a, _), (b, _) in zip(order, order[1:]):
        key = (str(points[a][axis]), str(points[b][axis]))
        out[key] = out.get(key, 0) + 1
    return out


ALIASED = ("order interleaved: each point always follows the same point, so what a run leaves "
           "behind for the next (writeback in flight, a client cache) is aliased with the "
           "axis that alternates fastest, and its verdict can be confidently wrong; order = "
           "\"balanced\" (the default) varies what comes before each point")


def balance_lines(order_: Sequence[Tuple[int, int]], points: Sequence[Dict[str, Any]],
                  axes: Sequence[str]) -> List[str]:
    """Per axis of two or more levels, how often each level follows each level (what the
    analysis needs to tell a run's own level from its predecessor's)."""
    out = []
    for axis in axes:
        levels = list(dict.fromkeys(str(p[axis]) for p in points))
        if len(levels) < 2:
            continue
        t = transitions(order_, points, axis)
        cells = [t.get((a, b), 0) for a in levels for b in levels]
        never = [f"{b} after {a}" for a in levels for b in levels if not t.get((a, b))]
        if len(levels) <= 4:
            what = ", ".join(f"{b} after {a}: {t.get((a, b), 0)}" for a in levels
                             for b in levels)
        else:
            what = f"{min(cells)} to {max(cells)} times each"
        out.append(f"{axis}: {what}" + (f" (never {'; '.join(never[:4])}"
                                         f"{' ...' if len(never) > 4 else ''})" if never
                                         else ""))
    return out
