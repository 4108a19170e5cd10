"""The data written: never all zeros, cheap to make, checkable later.

Each block starts with a 32-byte header ``magic, rank, run key, file offset, iteration`` and is
followed by bytes drawn once per (run, rank) from a seeded generator.  The buffer is filled once;
the writer patches only the 8-byte offset before each write.  A reader that knows the run key
and rank can check every byte of every block.
"""

from __future__ import annotations

import hashlib
import mmap
import struct
from typing import Iterator, NamedTuple, Optional

import numpy as np

MAGIC = b"MPIW"
HEADER = struct.Struct("<4sIQQI4x")  # magic, rank, run key, offset, iteration: 32 bytes
OFFSET_AT = 16  # where the offset sits inside the header
OFFSET = struct.Struct("<Q")
assert HEADER.size == 32


def run_key(run_id: str) -> int:
    """A 64-bit key derived from the run id, stored in every block header."""
    return int.from_bytes(hashlib.sha256(run_id.encode()).digest()[:8], "little")


def body(block_size: int, key: int, rank: int) -> np.ndarray:
    rng = np.random.default_rng([key & 0xFFFFFFFF, key >> 32, rank])
    return rng.integers(0, 256, size=block_size, dtype=np.uint8)


def make_buffer(block_size: int, key: int, rank: int, iteration: int) -> mmap.mmap:
    """A page-aligned buffer (mmap, so O_DIRECT accepts it) holding one block's pattern."""
    buf = mmap.mmap(-1, block_size)
    np.frombuffer(buf, dtype=np.uint8)[:] = body(block_size, key, rank)
    HEADER.pack_into(buf, 0, MAGIC, rank, key, 0, iteration)
    return buf


class Mismatch(NamedTuple):
    offset: int
    expected: str
    found: str


def check_block(data: bytes, offset: int, expect_body: np.ndarray, key: int, rank: int,
                iteration: int) -> Optional[Mismatch]:
    """Compare one block read back with what was written; None when it matches."""
    n = len(data)
    want_hdr = HEADER.pack(MAGIC, rank, key, offset, iteration)
    hdr_len = min(n, HEADER.size)
    if data[:hdr_len] != want_hdr[:hdr_len]:
        for i in range(hdr_len):
            if data[i] != want_hdr[i]:
                return Mismatch(offset + i, f"0x{want_hdr[i]:02x}", f"0x{data[i]:02x}")
    if n > HEADER.size:
        got = np.frombuffer(data, dtype=np.uint8, count=n - HEADER.size, offset=HEADER.size)
        want = expect_body[HEADER.size:n]
        diff = np.flatnonzero(got != want)
        if diff.size:
            i = int(diff[0])
            return Mismatch(offset + HEADER.size + i, f"0x{int(want[i]):02x}",
                            f"0x{int(got[i]):02x}")
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
