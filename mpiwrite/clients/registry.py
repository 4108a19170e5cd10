"""The filesystem client that serves the target, and its version: the `client` node fact.

`collect(reader, fs, kernel, lustre_facts)` dispatches on the mount's type: Lustre (lustre.py
has read it already), NFS, FUSE (GlusterFS, ceph-fuse with its admin socket's answers, ...),
BeeGFS, GPFS, the CephFS kernel client; a local filesystem is `none`.  Every value is a
`name version` string ('nfs 4.2', 'glusterfs 10.3', 'none'), a grouping key for reports.
Nothing here fails a run.
"""

from __future__ import annotations

from typing import Any, Dict, Optional

from mpiwrite.clients import beegfs, ceph, fuse, gpfs, nfs
from mpiwrite.clients.common import client_string
from mpiwrite.facts.sysroot import Reader

LOCAL = {"ext2", "ext3", "ext4", "xfs", "btrfs", "tmpfs", "ramfs", "overlay", "zfs", "f2fs",
         "squashfs", "vfat", "ntfs", "ntfs3", "jfs", "reiserfs", "devtmpfs", "rootfs", "nilfs2",
         "bcachefs", "exfat"}


def collect(reader: Reader, fs: Dict[str, Any], kernel: str,
            lustre_facts: Dict[str, Any]) -> Dict[str, Any]:
    fstype = str(fs.get("fstype") or "unknown")
    if fstype == "lustre":
        version = lustre_facts.get("version")
        return {"name": "lustre", "version": version, "client": client_string("lustre", version)}
    if fstype in ("nfs", "nfs4"):
        return nfs.collect(reader, fs)
    if fstype.startswith(("fuse.", "fuseblk.")) or fstype in ("fuse", "fuseblk", "glusterfs"):
        return fuse.collect(reader, fs)
    if fstype == "beegfs":
        return beegfs.collect(reader, fs)
    if fstype == "gpfs":
        return gpfs.collect(reader, fs)
    if fstype == "ceph":
        return ceph.collect(reader, fs, kernel)
    if fstype in LOCAL:
        return {"name": "none", "version": None, "client": "none"}
    return {"name": fstype, "version": None, "client": client_string(fstype, None)}


def snapshot(sysroot: str, fs: Dict[str, Any],
             client: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """The target's client counters now, for `delta` around the timed phase (node leaders,
    outside the hot loop): Lustre OSC/llite counters, the NFS mount's byte and WRITE
    counters, or a ceph-fuse client's `perf dump` counters through its admin socket;
    {'kind': None} for the others.  fs and client are facts['fs'] and facts['client'] of
    this node (the client's facts say where its admin socket is)."""
    from mpiwrite.clients import lustre_counters

    reader = Reader(sysroot or "/")
    fstype = str(fs.get("fstype") or "")
    if fstype == "lustre":
        return {"kind": "lustre", "data": lustre_counters.counters(reader)}
    if fstype in ("nfs", "nfs4"):
        return {"kind": "nfs", "data": nfs.counters(reader, str(fs.get("mount_point") or ""))}
    if fstype.startswith("fuse") and fuse.binary(fuse.subtype(
            fstype, fs.get("mount_source"))) == "ceph-fuse":
        return {"kind": "ceph", "data": ceph.counters(sysroot, client or {})}
    return {"kind": None, "data": {}}


def delta(before: Dict[str, Any], after: Dict[str, Any]) -> Dict[str, Any]:
    """What the client did between two snapshots; `write_bytes` is its total in every kind
    (None when unknown), beside the kind's own details."""
    from mpiwrite.clients import lustre_counters

    kind = after.get("kind")
    if kind != before.get("kind") or kind is None:
        return {"kind": kind, "write_bytes": None}
    if kind == "lustre":
        return {"kind": kind, **lustre_counters.counter_delta(before["data"], after["data"])}
    if kind == "ceph":
        return {"kind": kind, **ceph.counter_delta(before["data"], after["data"])}
    out: Dict[str, Any] = {"kind": kind, "bytes": {}, "ops": {}}
    b0, b1 = before["data"].get("bytes") or {}, after["data"].get("bytes") or {}
    for k, v in b1.items():
        out["bytes"][k] = lustre_counters._diff(b0.get(k), v)
    for op, row in (after["data"].get("ops") or {}).items():
        old = (before["data"].get("ops") or {}).get(op) or {}
        out["ops"][op] = {k: lustre_counters._diff(old.get(k), v) for k, v in row.items()}
    nw, dw = out["bytes"].get("normal_write"), out["bytes"].get("direct_write")
    out["write_bytes"] = None if nw is None or dw is None else nw + dw
    out["write_rpcs"] = (out["ops"].get("WRITE") or {}).get("ops")
    return out


def legacy_client(keys: Dict[str, Any]) -> str:
    """The `client` run key of a record written before it existed (schema 1 without it), from
    its `lustre` and `fstype` keys: '2.15.5' -> 'lustre 2.15.5'; no Lustre on a local
    filesystem -> 'none'; no Lustre on NFS -> 'nfs unknown' (the version was not recorded)."""
    if "client" in keys:
        return str(keys["client"])
    lus = str(keys.get("lustre", "unknown"))
    fstype = str(keys.get("fstype", "unknown"))
    if lus == "mixed" or fstype == "mixed":
        return "mixed"
    if lus not in ("none", "unknown", "n/a"):
        return client_string("lustre", lus)
    if fstype in LOCAL:
        return "none"
    name = "nfs" if fstype in ("nfs", "nfs4") else fstype
    return client_string(name, None)
