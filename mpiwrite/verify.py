"""`mpiwrite verify`: check data files kept with --keep, block by block, long after the run.

Each block's header says which run, rank and offset it belongs to; the body is derived from the
run key and rank.  The block size is found from where the second header sits.
"""

from __future__ import annotations

import os
from typing import Dict, Iterator, List, NamedTuple, Optional

import numpy as np

from mpiwrite import pattern

SCAN = 64 * 2**20


class FileReport(NamedTuple):
    path: str
    bytes: int
    blocks: int
    block_size: int
    mismatches: List[pattern.Mismatch]
    error: str


def data_files(paths) -> Iterator[str]:
    for p in paths:
        if os.path.isdir(p):
            for root, _dirs, files in os.walk(p):
                for f in sorted(files):
                    if f.startswith("mpiwrite-") and f.endswith(".dat"):
                        yield os.path.join(root, f)
        else:
            yield p


def block_size_of(fh, size: int) -> Optional[int]:
    head = os.pread(fh.fileno(), pattern.HEADER.size, 0)
    parsed = pattern.read_header(head)
    if parsed is None:
        return None
    data = os.pread(fh.fileno(), min(size, SCAN), 0)
    key_bytes = head[8:16]
    pos = 1
    while True:
        pos = data.find(pattern.MAGIC, pos)
        if pos < 0:
            return size  # a single block
        if data[pos + 8:pos + 16] == key_bytes:
            hdr = pattern.read_header(data[pos:pos + pattern.HEADER.size])
            if hdr and hdr[2] == pos:
                return pos
        pos += 1


def verify_file(path: str, limit: int = 20) -> FileReport:
    mismatches: List[pattern.Mismatch] = []
    try:
        size = os.path.getsize(path)
        with open(path, "rb", buffering=0) as fh:
            bs = block_size_of(fh, size)
            if bs is None:
                return FileReport(path, size, 0, 0, [], "not an mpiwrite data file")
            bodies: Dict[tuple, np.ndarray] = {}
            buf = bytearray(bs)
            view = memoryview(buf)
            blocks = 0
            for off, n in pattern.blocks(0, size, bs):
                got = os.preadv(fh.fileno(), [view[:n]], off)
                hdr = pattern.read_header(bytes(view[:pattern.HEADER.size]))
                blocks += 1
                if hdr is None or got < n:
                    mismatches.append(pattern.Mismatch(off, "block header", "no header"))
                    continue
                rank, key, _offset, iteration = hdr
                body = bodies.get((key, rank))
                if body is None:
                    body = bodies[(key, rank)] = pattern.body(bs, key, rank)
                bad = pattern.check_block(view[:n], off, body, key, rank, iteration)
                if bad:
                    mismatches.append(bad)
                if len(mismatches) >= limit:
                    break
            return FileReport(path, size, blocks, bs, mismatches, "")
    except OSError as exc:
        return FileReport(path, 0, 0, 0, [], exc.strerror or str(exc))
