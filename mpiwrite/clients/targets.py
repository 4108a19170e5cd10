"""Which storage targets hold a file's data, as far as the client can tell (no MPI).

- Lustre: the OSTs of the file's layout (lustre_layout.py reads `lustre.lov`); named
  `OST0003` as `lfs getstripe` prints the index.
- GlusterFS: the FUSE client answers the virtual xattr `trusted.glusterfs.pathinfo` on the
  mount with the bricks that hold the file, e.g.
  `(<DISTRIBUTE:vol-dht> <POSIX(/b/brick1):server:/b/brick1/d/f>)`: one target per brick,
  named `server:/b/brick1` (a replicated volume lists each copy).
- CephFS: the file's layout xattrs name its data pool (`ceph.file.layout.pool`); which OSDs
  hold its objects needs the cluster's OSD map, which a client's file does not tell, so the
  target is the pool, and attribution stops there (docs/output.md).

A target list is bounded (at most MAX_TARGETS names of at most 256 characters): what comes
from the filesystem is untrusted like anything else from outside.
"""

from __future__ import annotations

import os
import re
from typing import Any, Dict, List, Optional

PATHINFO = "trusted.glusterfs.pathinfo"
CEPH_POOL = "ceph.file.layout.pool"
MAX_TARGETS = 64
_POSIX = re.compile(r"<POSIX\(([^()<>]{1,256})\):([^:<>\s]{1,256}):")


def parse_pathinfo(text: str) -> List[str]:
    """`server:/brick` for every brick the pathinfo names, in its order, each once."""
    out: List[str] = []
    for brick, host in _POSIX.findall(text or ""):
        name = f"{host}:{brick}"
        if name not in out:
            out.append(name)
        if len(out) == MAX_TARGETS:
            break
    return out


def lustre_targets(layout: Optional[Dict[str, Any]]) -> List[str]:
    """The OSTs of a Lustre layout (lustre_layout.parse_layout) as `OSTxxxx`."""
    osts = (layout or {}).get("ost_indices") or []
    return [f"OST{int(i):04x}" for i in osts[:MAX_TARGETS]
            if isinstance(i, int) and not isinstance(i, bool) and 0 <= i < 1 << 16]


def _xattr(path: str, name: str) -> Optional[str]:
    try:
        value = os.getxattr(path, name)
    except (OSError, AttributeError):
        return None
    return value[:1 << 16].decode("utf-8", "replace").strip("\x00 \n")


def bricks_of(path: str) -> Optional[Dict[str, Any]]:
    """The GlusterFS bricks that hold a file (one getxattr), or None."""
    info = _xattr(path, PATHINFO)
    if info:
        bricks = parse_pathinfo(info)
        if bricks:
            return {"layout": "glusterfs", "targets": bricks}
    return None


def pool_of(path: str) -> Optional[Dict[str, Any]]:
    """The CephFS data pool of a file (one getxattr), or None."""
    pool = _xattr(path, CEPH_POOL)
    if pool:
        return {"layout": "cephfs", "pool": pool[:256], "targets": [f"pool:{pool[:256]}"]}
    return None


def of_file(path: str) -> Optional[Dict[str, Any]]:
    """The targets of a file off Lustre (GlusterFS bricks, a CephFS pool), or None when the
    client does not say.  Two getxattr calls at most: call it outside the timed phase."""
    return bricks_of(path) or pool_of(path)


def targets_of(layout: Optional[Dict[str, Any]]) -> List[str]:
    """The target names a recorded layout gives (any of the kinds above)."""
    if not isinstance(layout, dict):
        return []
    named = layout.get("targets")
    if isinstance(named, list):
        return [str(t)[:256] for t in named[:MAX_TARGETS]]
    return lustre_targets(layout)
