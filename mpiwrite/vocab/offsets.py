"""Where each block of a rank's stream goes: the write patterns (IOR's segments and -z).

- sequential: the rank's blocks one after another from its first offset (a file of its own,
  or its contiguous segment of a shared file);
- strided: a shared file of interleaved blocks, block i of rank r at (i x ranks + r) x block
  (IOR's -s segments with -t = -b; IO500's ior-hard);
- random: the blocks of the rank's own region (as sequential) in a seeded random order, each
  exactly once (a permutation), so the bytes written and the blocks read back are exact.

Pure functions: the writer, the read phase, --verify and `verify` derive the same offsets
from the rank, the block and the recorded seed.  random.Random, not numpy: ranks other than
the node leaders never load numpy (docs/scaling.md).
"""

from __future__ import annotations

from array import array
from typing import Sequence

PATTERNS = ("sequential", "strided", "random")


def offsets(pattern: str, rank: int, nranks: int, first: int, nblocks: int, block_size: int,
            seed: int = 0) -> Sequence[int]:
    """The offsets of a rank's `nblocks` whole blocks, in the order they are written.
    `first`: where its region starts (sequential and random)."""
    bs = block_size
    if pattern == "strided":
        stride = nranks * bs
        return range(rank * bs, rank * bs + nblocks * stride, stride)
    if pattern == "random":
        import random  # here: a sequential run's ranks never load it (start-up's file calls)

        order = array("q", range(nblocks))
        random.Random(f"mpiwrite {seed} {rank}").shuffle(order)
        return array("q", (first + i * bs for i in order))
    if pattern != "sequential":
        raise ValueError(f"unknown pattern {pattern!r}")
    return range(first, first + nblocks * bs, bs)


def owner(pattern: str, offset: int, block_size: int, nranks: int, segment: int) -> int:
    """The rank whose block sits at `offset` in a shared file (segment: bytes per rank)."""
    if pattern == "strided":
        return (offset // block_size) % nranks
    return offset // segment if segment else 0
