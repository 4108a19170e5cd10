"""Where each rank's file lives on Lustre, and setting the run directories' default striping.

The `lustre.lov` xattr (lustre_user.h) is little-endian:
  lov_user_md_v1: u32 magic 0x0BD10BD0, u32 pattern, 16-byte object id, u32 stripe_size,
                  u16 stripe_count, u16 stripe_offset, then 24 bytes per stripe
                  (16-byte object id, u32 generation, u32 ost_idx)
  lov_user_md_v3: magic 0x0BD30BD0, the same header, a 16-byte pool name, then the stripes
  lov_comp_md_v1 (PFL, magic 0x0BD60BD0): u32 magic, u32 size, u32 layout_gen, u16 flags,
                  u16 entry_count, u16 mirror_count, 6 + 8 bytes padding (32 in all), then
                  48-byte entries (u32 id, u32 flags, u64 extent start, u64 extent end,
                  u32 offset, u32 size, u32 layout_gen, u64 timestamp, u32 padding), each
                  pointing at a v1/v3 blob at `offset` from the start.
Setting a directory's default layout: `lfs setstripe -c N -S SIZE -i OST DIR` where lfs
exists, else the same xattr written with a v1 header and no stripes.
"""

from __future__ import annotations

import os
import struct
from typing import Any, Dict, List, Optional

MAGIC_V1, MAGIC_V3, MAGIC_COMP = 0x0BD10BD0, 0x0BD30BD0, 0x0BD60BD0
LCME_FL_INIT = 0x10  # a component whose objects exist
HEADER = 32
STRIPE = 24
COMP_ENTRY = 48
MAX_STRIPES = 2000  # LOV_MAX_STRIPE_COUNT
LFS_TIMEOUT = 60.0


def parse_md(data: bytes, base: int = 0) -> Optional[Dict[str, Any]]:
    """One v1/v3 layout at `base`: pattern, stripe size and count, pool, OST indices."""
    if len(data) < base + HEADER:
        return None
    magic, pattern = struct.unpack_from("<II", data, base)
    if magic not in (MAGIC_V1, MAGIC_V3):
        return None
    size, count, offset = struct.unpack_from("<IHH", data, base + 24)
    pos = base + HEADER
    out: Dict[str, Any] = {"layout": "v1" if magic == MAGIC_V1 else "v3", "pattern": pattern,
                           "stripe_size": size, "stripe_count": count, "stripe_offset": offset}
    if magic == MAGIC_V3:
        pool = data[pos:pos + 16].split(b"\0", 1)[0]
        out["pool"] = pool.decode("ascii", "replace")
        pos += 16
    osts: List[int] = []
    for i in range(min(count, MAX_STRIPES)):
        at = pos + i * STRIPE
        if at + STRIPE > len(data):
            break
        osts.append(struct.unpack_from("<I", data, at + 20)[0])
    out["ost_indices"] = osts
    return out


def parse_layout(data: bytes) -> Optional[Dict[str, Any]]:
    """A file's layout from its lustre.lov xattr: plain (v1/v3) or composite (PFL), with the
    OSTs its instantiated components write to (`ost_indices`, in order, without repeats)."""
    if len(data) < 8:
        return None
    magic = struct.unpack_from("<I", data, 0)[0]
    if magic != MAGIC_COMP:
        return parse_md(data)
    if len(data) < HEADER:
        return None
    count = struct.unpack_from("<H", data, 14)[0]
    comps = []
    osts: List[int] = []
    for i in range(min(count, 64)):
        at = HEADER + i * COMP_ENTRY
        if at + COMP_ENTRY > len(data):
            break
        cid, flags, start, end, off, _size = struct.unpack_from("<IIQQII", data, at)
        md = parse_md(data, off) if off < len(data) else None
        comp = {"id": cid, "init": bool(flags & LCME_FL_INIT), "start": start,
                "end": None if end == 2**64 - 1 else end, **(md or {})}
        comps.append(comp)
        if comp["init"]:
            osts += [o for o in comp.get("ost_indices", []) if o not in osts]
    return {"layout": "composite", "components": comps, "ost_indices": osts}


def rank_layout(path: str) -> Optional[Dict[str, Any]]:
    """This rank's file layout (stripe count, size, OSTs) from its lustre.lov xattr; None
    off Lustre.  One getxattr: call it after the file is written, outside the timed phase."""
    try:
        return parse_layout(os.getxattr(path, "lustre.lov"))
    except (OSError, AttributeError):
        return None


def lov_v1(count: Optional[int], size: Optional[int], ost: Optional[int]) -> bytes:
    """A v1 lov_user_md with no stripes: a default layout for a directory (0 = the
    filesystem default for count and size, -1 (0xFFFF) = any OST, -1 count = all OSTs)."""
    c = 0 if count is None else (count & 0xFFFF)
    o = 0xFFFF if ost is None else (ost & 0xFFFF)
    return struct.pack("<II16sIHH", MAGIC_V1, 1, b"\0" * 16, size or 0, c, o)


def setstripe_argv(lfs: str, path: str, count: Optional[int], size: Optional[int],
                   ost: Optional[int]) -> List[str]:
    argv = [lfs, "setstripe"]
    if count is not None:
        argv += ["-c", str(count)]
    if size is not None:
        argv += ["-S", str(size)]
    if ost is not None:
        argv += ["-i", str(ost)]
    return argv + [path]


def apply_stripe(path: str, count: Optional[int] = None, size: Optional[int] = None,
                 ost: Optional[int] = None, lfs: Optional[str] = None) -> str:
    """Set the default layout of directory `path` (inherited by files created in it):
    `lfs setstripe` where lfs is on PATH (or given), else the lustre.lov xattr.  Returns how
    ('lfs' or 'xattr'); raises OSError with the reason when neither works."""
    import shutil  # here, not above: every rank on Lustre imports this module, rank 0 runs this

    from mpiwrite.procs import run_bounded

    lfs = lfs or shutil.which("lfs")
    if lfs:
        got = run_bounded(setstripe_argv(lfs, path, count, size, ost), LFS_TIMEOUT,
                          merge_stderr=True)
        if not got.ok:
            text = got.text().strip().splitlines()
            raise OSError(f"lfs setstripe {path}: {got.why(LFS_TIMEOUT)}"
                          + (f": {text[-1]}" if text and got.code else ""))
        return "lfs"
    os.setxattr(path, "lustre.lov", lov_v1(count, size, ost))
    return "xattr"
