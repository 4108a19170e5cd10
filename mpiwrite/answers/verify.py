"""`mpiwrite verify`: check data files kept with --keep, block by block, long after the run.

What a block must hold is taken from outside the block: the run id, iteration and rank from
the file name (layout.py names files `mpiwrite-<run id>-i<iter>-r<rank:06d>.dat` and
`mpiwrite-<run id>-i<iter>-shared.dat`), and the block size, bytes per rank, rank count and
file length from the run's record when one is found.  Each block's header and body are then
compared with what that rank wrote at that offset in that iteration, so a block copied from
another rank, iteration or offset, a truncated file, or a damaged header is a mismatch; a
damaged header cannot mislead the reader about where the next block starts.

Without a record, the block size (and a shared file's segment size) are inferred from the
headers that sit where they belong, by the greatest common divisor of their distances, so one
damaged header does not change them; the length cannot be checked and the output says so.
"""

from __future__ import annotations

import math
import os
import stat
from typing import Dict, Iterator, List, NamedTuple, Optional

from mpiwrite import files
from mpiwrite.errors import ConfigError, why
from mpiwrite.units import MiB
from mpiwrite.vocab import names, offsets, pattern

SCAN = 64 * MiB
MAX_BLOCK = 2**31  # what run/config.py allows


class FileReport(NamedTuple):
    path: str
    bytes: int
    blocks: int
    block_size: int
    mismatches: List[pattern.Mismatch]
    error: str
    length_checked: bool = False
    segment: int = 0  # shared file: bytes per rank (for naming a block as rank and index)

    def where(self, offset: int) -> str:
        """'block 5', or 'rank 1 block 0' in a shared file."""
        if self.segment and self.block_size:
            rank, rest = divmod(offset, self.segment)
            return f"rank {rank} block {rest // self.block_size}"
        return f"block {offset // self.block_size}" if self.block_size else "block ?"


class Expect(NamedTuple):
    """What a file must hold: from its name, and from the record where there is one."""

    run_id: str
    iteration: int
    rank: Optional[int]  # None: the shared file
    block_size: Optional[int] = None
    segment: Optional[int] = None  # bytes per rank (shared) or in the file (fpp)
    ranks: Optional[int] = None  # shared: how many segments
    pattern: str = "sequential"  # the record's --pattern (vocab/offsets.py)
    seed: int = 0
    written: Optional[Dict[int, int]] = None  # the record's bytes per rank in this iteration
    planned: int = 0  # blocks per rank the pattern placed (--size / --block-size)


def parse_name(path: str) -> Optional[Expect]:
    name = names.parse_data_file(os.path.basename(path))
    return Expect(*name) if name is not None else None


def data_files(paths) -> Iterator[str]:
    """Data files under the given files and folders; ConfigError (exit 2) for a path that does
    not exist or cannot be listed."""
    for p in paths:
        try:
            st = os.stat(p)
        except OSError as exc:
            raise ConfigError(f"PATHS: {p!r}: {why(exc)}") from None
        if not stat.S_ISDIR(st.st_mode):
            yield p
            continue

        def fail(exc: OSError):
            raise ConfigError(f"PATHS: cannot list {exc.filename!r}: {why(exc)}")

        for root, dirs, listed in os.walk(p, onerror=fail):
            dirs.sort()
            for f in sorted(listed):
                if names.looks_like_data_file(f):  # named or refused
                    yield os.path.join(root, f)


def from_record(exp: Expect, rec) -> Expect:
    """exp completed with the block size and lengths the run's record states."""
    p = rec.params()
    bs = p.get("block_size")
    size = p.get("size")
    pat = str(p.get("pattern") or "sequential")
    if pat not in offsets.PATTERNS:
        pat = "sequential"  # an edited record: checked as the contiguous layout
    seed = p.get("seed") if isinstance(p.get("seed"), int) else 0
    exp = exp._replace(pattern=pat, seed=seed)
    if pat != "sequential":
        rows = rec.ranks[rec.ranks["iteration"] == exp.iteration]
        exp = exp._replace(written={int(r): int(b) for r, b in zip(rows["rank"], rows["bytes"])},
                           planned=size // bs if isinstance(size, int) and bs else 0)
    if exp.rank is None:
        return exp._replace(block_size=bs, segment=size, ranks=int(rec.attrs.get("ranks", 0)))
    rows = rec.ranks[(rec.ranks["iteration"] == exp.iteration) & (rec.ranks["rank"] == exp.rank)]
    nbytes = int(rows["bytes"][0]) if len(rows) else size
    return exp._replace(block_size=bs, segment=nbytes)


def _consistent(data: bytes, key: int, iteration: int, base: int = 0) -> Dict[int, List[int]]:
    """rank -> positions where a header of this run and iteration says it sits there."""
    out: Dict[int, List[int]] = {}
    pos = data.find(pattern.MAGIC)
    while pos >= 0:
        hdr = pattern.read_header(data[pos:pos + pattern.HEADER.size])
        if hdr and hdr[1] == key and hdr[3] == iteration and hdr[2] == base + pos:
            out.setdefault(hdr[0], []).append(base + pos)
        pos = data.find(pattern.MAGIC, pos + 1)
    return out


def infer(exp: Expect, fd: int, size: int) -> Expect:
    """Block size (and a shared file's segment size) from the headers found in place."""
    key = pattern.run_key(exp.run_id)
    found = _consistent(os.pread(fd, min(size, SCAN), 0), key, exp.iteration)
    if exp.rank is not None:
        steps = [p for p in found.get(exp.rank, []) if p > 0]
        return exp._replace(block_size=_gcd(steps) or size, segment=None)
    starts = {r: min(ps) for r, ps in found.items()}
    steps = [p - starts[r] for r, ps in found.items() for p in ps if p > starts[r]]
    seg = (starts[1] - starts[0]) if 0 in starts and 1 in starts else None
    if seg is None and 0 in starts and len(starts) > 1:
        r = min(k for k in starts if k > 0)
        seg = (starts[r] - starts[0]) // r
    seg = seg if seg and seg > 0 else size
    bs = _gcd(steps) or seg
    n = len(starts)
    if n > 1 and bs == n * seg and all(starts.get(r) == r * seg for r in range(n)):
        # each rank's blocks n blocks apart, the ranks' first blocks side by side: strided
        planned = size // (n * seg)
        return exp._replace(block_size=seg, segment=planned * seg, ranks=n, pattern="strided",
                            written={r: planned * seg for r in range(n)}, planned=planned)
    return exp._replace(block_size=min(bs, seg), segment=seg, ranks=-(-size // seg))


def _gcd(values: List[int]) -> int:
    g = 0
    for v in values:
        g = math.gcd(g, v)
    return g


def verify_file(path: str, record=None, limit: int = 20) -> FileReport:
    """Check one data file; `record` (a RunRecord of its run) supplies sizes and lengths."""
    exp = parse_name(path)
    if exp is None:
        return FileReport(path, 0, 0, 0, [], "not named like an mpiwrite data file "
                          "(mpiwrite-<run id>-i<iteration>-r<rank>.dat or -shared.dat)")
    try:
        fd = files.open_regular(path)
    except OSError as exc:
        return FileReport(path, 0, 0, 0, [], why(exc))
    try:
        size = os.fstat(fd).st_size
        checked = record is not None and record.run_id == exp.run_id
        exp = from_record(exp, record) if checked else infer(exp, fd, size)
        if not exp.block_size or exp.block_size <= 0:
            return FileReport(path, size, 0, 0, [], "block size unknown")
        if exp.block_size > MAX_BLOCK:  # a record's claim, before anything is allocated
            return FileReport(path, size, 0, 0, [], f"the record's block size {exp.block_size} "
                              f"is beyond {MAX_BLOCK} (a run refuses it): an edited record?")
        if checked and exp.block_size > size:  # not even one block: nothing to read
            return FileReport(path, size, 0, exp.block_size, [pattern.Mismatch(
                0, f"blocks of {exp.block_size} bytes", f"{size} bytes (file length)")], "",
                True)
        return _check(fd, path, size, exp, checked, limit)
    except OSError as exc:
        return FileReport(path, 0, 0, 0, [], why(exc))
    finally:
        os.close(fd)


def _segments(exp: Expect, size: int, checked: bool):
    """(rank, start, bytes) of each rank's part of the file."""
    if exp.rank is not None:
        return [(exp.rank, 0, exp.segment if checked and exp.segment is not None else size)]
    seg = exp.segment or size
    n = exp.ranks or -(-size // seg)
    # only the parts that start inside the file (a record may claim 10^7 ranks): the length
    # check names what is missing beyond it
    inside = min(n, -(-size // seg)) if seg > 0 else 0
    return [(r, r * seg, seg if checked else min(seg, size - r * seg)) for r in range(inside)]


def _claimed_length(exp: Expect, segs, checked: bool) -> int:
    if checked and exp.rank is None and exp.ranks and exp.segment:
        return exp.ranks * exp.segment
    return segs[-1][1] + segs[-1][2] if segs else 0


def _blocks(exp: Expect, rank: int, start: int, nbytes: int, bs: int):
    """(offset, length) of the blocks `rank` wrote: in its segment one after another, or where
    its pattern put them (strided: interleaved with the other ranks'; random: the first blocks
    of its seeded order), as many as the record says it wrote."""
    if exp.pattern == "sequential" or not exp.written or not exp.ranks and exp.rank is None:
        return pattern.blocks(start, nbytes, bs)
    done = min(exp.written.get(rank, 0) // bs, exp.planned)
    offs = offsets.offsets(exp.pattern, rank, exp.ranks or 1, start, exp.planned, bs, exp.seed)
    return ((off, bs) for off in sorted(offs[:done]))


def _check(fd: int, path: str, size: int, exp: Expect, checked: bool,
           limit: int) -> FileReport:
    key = pattern.run_key(exp.run_id)
    bs = exp.block_size
    segs = _segments(exp, size, checked)
    shared = segs[1][1] if exp.rank is None and len(segs) > 1 else 0
    mismatches: List[pattern.Mismatch] = []
    expected_len = _claimed_length(exp, segs, checked)
    if checked and size != expected_len:
        mismatches.append(pattern.Mismatch(min(size, expected_len), f"{expected_len} bytes",
                                           f"{size} bytes (file length)"))
    buf = bytearray(bs)
    view = memoryview(buf)
    bodies: Dict[int, bytes] = {}
    blocks = 0
    for rank, start, nbytes in segs:
        body = bodies.get(rank)
        if body is None:
            body = bodies[rank] = pattern.body_bytes(bs, key, rank)
        for off, n in _blocks(exp, rank, start, max(0, min(nbytes, size - start)), bs):
            got = os.preadv(fd, [view[:n]], off)
            blocks += 1
            if got < n:
                mismatches.append(pattern.Mismatch(off + got, f"{n} bytes", f"{got} bytes"))
            else:
                bad = pattern.check_block(view[:n], off, body, key, rank, exp.iteration)
                if bad:
                    mismatches.append(bad)
            if len(mismatches) >= limit:
                return FileReport(path, size, blocks, bs, mismatches, "", checked, shared)
    return FileReport(path, size, blocks, bs, mismatches, "", checked, shared)
