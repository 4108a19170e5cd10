"""Two-level screening designs for `mpiwrite tune plan` (docs/tune.md): k factors in about k+1
points, not 2^k.

- 2^p runs (the smallest power of two above k), unless a Plackett-Burman design is
  shorter: the columns of a 2^p full
  factorial (a Sylvester Hadamard matrix), the factors on the base columns first and then on
  their interactions: a regular fractional factorial, each main effect aliased exactly with
  the interactions whose column is its own (`aliases` lists the two-factor ones).
- else (k from 8 to 11, 16 to 23) a Plackett-Burman design of 12, 20 or 24 runs (cyclic
  generators): every main effect is partly aliased with every two-factor interaction not
  involving it.

Every column is balanced (as many +1 as -1) and every two columns are orthogonal, so each
main effect is estimated from all runs, at the same precision, free of the others' main
effects (interactions aside: that is where a screening design stops).
"""

from __future__ import annotations

import itertools
from typing import Dict, List, NamedTuple

PB = {  # the first row of a cyclic Plackett-Burman design of N runs (the last row all -1)
    12: "++-+++---+-",
    20: "++--++++-+-+----++-",
    24: "+++++-+-++--++--+-+----",
}


class Design(NamedTuple):
    rows: List[List[int]]  # runs x factors, each -1 (the low level) or +1 (the high level)
    kind: str  # "2^(k-q) fractional factorial", "full factorial", "Plackett-Burman N"
    aliases: List[str]  # what each main effect cannot be told apart from


def _sylvester(p: int) -> List[List[int]]:
    """The 2^p runs of a full factorial: column j of the base factors is bit j."""
    return [[1 if (r >> j) & 1 else -1 for j in range(p)] for r in range(2 ** p)]


def design(names: List[str]) -> Design:
    k = len(names)
    if k < 1:
        raise ValueError("a design needs at least one factor")
    p = 1
    while 2 ** p < k + 1:
        p += 1
    shorter = [n for n in PB if k + 1 <= n < 2 ** p]
    if not shorter:
        return _fractional(names, p)
    n = min(shorter)
    gen = [1 if c == "+" else -1 for c in PB[n]]
    rows = [[gen[(j - i) % (n - 1)] for j in range(k)] for i in range(n - 1)] + [[-1] * k]
    return Design(rows, f"Plackett-Burman {n}",
                  [f"every main effect is partly aliased with every two-factor interaction "
                   f"of the other factors (Plackett-Burman {n}): an interaction shows as a "
                   "share of other factors' main effects"] if k > 2 else [])


def _fractional(names: List[str], p: int) -> Design:
    """The factors on the columns of a 2^p factorial: base columns, then their products."""
    k = len(names)
    # the extra factors on the highest interactions first: 4 factors in 8 runs as D = ABC
    # (no main effect aliased with a two-factor interaction), not D = AB
    words = [frozenset([j]) for j in range(p)] + [
        frozenset(c) for size in range(p, 1, -1)
        for c in itertools.combinations(range(p), size)]
    words = words[:k]
    base = _sylvester(p)
    rows = [[_product(run, w) for w in words] for run in base]
    col: Dict[frozenset, str] = {w: names[i] for i, w in enumerate(words)}
    aliases = []
    for i, w in enumerate(words):
        pairs = [f"{col[a]} x {col[b]}" for a, b in itertools.combinations(words, 2)
                 if a ^ b == w]
        if pairs:
            aliases.append(f"{names[i]} = {' = '.join(pairs)}")
    if k > p and not aliases:
        aliases.append("no main effect is aliased with a two-factor interaction; two-factor "
                       "interactions are aliased with each other")
    kind = "full factorial" if k == p else f"2^({k}-{k - p}) fractional factorial"
    return Design(rows, kind, aliases)


def _product(run: List[int], word: frozenset) -> int:
    x = 1
    for j in word:
        x *= run[j]
    return x
