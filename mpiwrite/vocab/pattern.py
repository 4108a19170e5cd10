"""The data written: never all zeros, cheap to make, checkable later.

Each block starts with a 32-byte header ``magic, rank, run key, file offset, iteration`` and is
followed by bytes drawn once per (run, rank) from a seeded generator.  The buffer is filled once;
the writer patches only the 8-byte offset before each write.  A reader that knows the run key
and rank can check every byte of every block.
"""

from __future__ import annotations

import mmap
import struct
from typing import TYPE_CHECKING, Iterator, NamedTuple, Optional

if TYPE_CHECKING:
    import numpy as np

MAGIC = b"MPIW"
HEADER = struct.Struct("<4sIQQI4x")  # magic, rank, run key, offset, iteration: 32 bytes
OFFSET_AT = 16  # where the offset sits inside the header
OFFSET = struct.Struct("<Q")
assert HEADER.size == 32


def run_key(run_id: str) -> int:
    """A 64-bit key derived from the run id, stored in every block header (a run's rank 0
    derives it and sends it: hashlib, with OpenSSL, is not loaded on the other ranks)."""
    import hashlib

    return int.from_bytes(hashlib.sha256(run_id.encode()).digest()[:8], "little")


def body(block_size: int, key: int, rank: int) -> np.ndarray:
    """The block's bytes after its header (from byte 0: the header overwrites the first 32).
    numpy is imported here, not above: a run's ranks other than the node leaders receive
    their bodies from their leader and never load numpy (docs/scaling.md)."""
    import numpy as np

    rng = np.random.default_rng([key & 0xFFFFFFFF, key >> 32, rank])
    return rng.integers(0, 256, size=block_size, dtype=np.uint8)


def make_buffer(block_size: int, key: int, rank: int, iteration: int,
                fill: bool = True) -> mmap.mmap:
    """A page-aligned buffer (mmap, so O_DIRECT accepts it) holding one block's pattern;
    with fill=False only the header (the body is received into it: set_header after)."""
    buf = mmap.mmap(-1, block_size)
    if fill:
        import numpy as np

        np.frombuffer(buf, dtype=np.uint8)[:] = body(block_size, key, rank)
    HEADER.pack_into(buf, 0, MAGIC, rank, key, 0, iteration)
    return buf


def body_bytes(block_size: int, key: int, rank: int) -> bytes:
    return body(block_size, key, rank).tobytes()


def as_bytes(expect_body) -> bytes:
    """A body (numpy's array, or bytes received from a node leader) as bytes-like."""
    return expect_body if isinstance(expect_body, (bytes, bytearray)) else \
        memoryview(expect_body).cast("B").tobytes()


class Mismatch(NamedTuple):
    offset: int
    expected: str
    found: str


def check_block(data: bytes, offset: int, expect_body, key: int, rank: int,
                iteration: int) -> Optional[Mismatch]:
    """Compare one block read back with what was written; None when it matches.
    `expect_body`: bytes or bytearray (as_bytes; else converted here, at a copy a block)."""
    n = len(data)
    want_hdr = HEADER.pack(MAGIC, rank, key, offset, iteration)
    hdr_len = min(n, HEADER.size)
    if data[:hdr_len] != want_hdr[:hdr_len]:
        for i in range(hdr_len):
            if data[i] != want_hdr[i]:
                return Mismatch(offset + i, f"0x{want_hdr[i]:02x}", f"0x{data[i]:02x}")
    if n > HEADER.size:
        want = as_bytes(expect_body)
        got = memoryview(data)[HEADER.size:n]
        if not want.startswith(got, HEADER.size):  # one memcmp, no copy
            lo, hi = 0, len(got)  # got[:lo] matches; the first difference lies in [lo, hi)
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if want.startswith(got[lo:mid], HEADER.size + lo):
                    lo = mid
                else:
                    hi = mid
            return Mismatch(offset + HEADER.size + lo, f"0x{want[HEADER.size + lo]:02x}",
                            f"0x{got[lo]:02x}")
    return None


def read_header(data: bytes) -> Optional[tuple]:
    """(rank, key, offset, iteration) from a block's first bytes, or None if not ours."""
    if len(data) < HEADER.size:
        return None
    magic, rank, key, offset, iteration = HEADER.unpack_from(data, 0)
    if magic != MAGIC:
        return None
    return rank, key, offset, iteration


def blocks(start: int, nbytes: int, block_size: int) -> Iterator[tuple]:
    """(offset, length) of each block of a segment, the last possibly short."""
    off, end = start, start + nbytes
    while off < end:
        n = min(block_size, end - off)
        yield off, n
        off += n
