"""The filesystem clients, by name, in the order they are asked whether they serve a mount.

CLIENTS holds `"module:attr"` strings: a client's module is imported when it is asked for
(ReFrame's backend lists), so a node imports the client of its own mount, and a rank other
than 0 the one client rank 0 names (docs/scaling.md).  A new client is one module in
clients/ (a clients.base.Client) and one line here; tests/unit/test_clients.py runs every
registered client over its sysroot fixture.

Callers ask the client object (`for_mount(fstype, source)`, `get(name)`, `for_kind(kind)`)
for its facts, counters, lines and targets; no module outside clients/ compares a mount's
type with a filesystem's name (tests/cli/test_house.py reads the AST).
"""

from __future__ import annotations

import importlib
from typing import Any, Dict, List, Optional, Tuple

CLIENTS = {  # name -> "module:attr"; the first that matches a mount serves it
    "memory": "mpiwrite.clients.local:MEMORY",
    "local": "mpiwrite.clients.local:LOCAL",
    "lustre": "mpiwrite.clients.lustre_client:CLIENT",
    "nfs": "mpiwrite.clients.nfs:CLIENT",
    "gpfs": "mpiwrite.clients.gpfs:CLIENT",
    "beegfs": "mpiwrite.clients.beegfs:CLIENT",
    "cephfs": "mpiwrite.clients.cephfs:CLIENT",
    "glusterfs": "mpiwrite.clients.gluster:CLIENT",
    "ceph-fuse": "mpiwrite.clients.ceph_fuse:CLIENT",
    "dfuse": "mpiwrite.clients.dfuse:CLIENT",
    "fuse": "mpiwrite.clients.fuse:CLIENT",
    "mixed": "mpiwrite.clients.other:MIXED",  # nodes on different filesystems (a run key)
    "other": "mpiwrite.clients.other:OTHER",  # last: whatever none of the above serves
}
_loaded: Dict[str, Any] = {}
# Node facts that name the node, the run or the mount, never a setting; the clients add
# theirs (Client.volatile)
NOT_FACT_KEYS = ("host", "sysroot", "raw", "unknown", "fs.path", "fs.mount_point", "fs.fs_magic")


def get(name: str):
    """The client registered under name (KeyError if none)."""
    client = _loaded.get(name)
    if client is None:
        module, _, attr = CLIENTS[name].partition(":")
        client = _loaded[name] = getattr(importlib.import_module(module), attr)
    return client


def every() -> List[Any]:
    """Every registered client, in order (imports them all: for answers, not for a rank)."""
    return [get(name) for name in CLIENTS]


def for_mount(fstype: Optional[str], source: Optional[str] = None):
    """The client that serves a mount of this type (and source: a plain `fuse` mount names
    its daemon there): the first in CLIENTS that matches; `other` at the end matches all."""
    fstype = str(fstype or "")
    for name in CLIENTS:
        client = get(name)
        if client.matches(fstype, source):
            return client
    return get("other")


def for_kind(kind: Optional[str]):
    """The client whose counter snapshots are of this kind (the record's `kind`), or `other`
    (no counters) for None or a kind no client makes any more."""
    if kind is not None:
        for name in CLIENTS:
            if get(name).kind == kind:
                return get(name)
    return get("other")


def for_fs(fs: Optional[Dict[str, Any]]):
    """The client of a node's target filesystem facts (facts['fs'])."""
    fs = fs if isinstance(fs, dict) else {}
    return for_mount(fs.get("fstype"), fs.get("mount_source"))


def for_run(fstype_key: str, fs: Optional[Dict[str, Any]]):
    """The run's client as rank 0 names it: its node's (fs: facts['fs']), or `mixed` when the
    nodes' filesystems differ (the run key `fstype`)."""
    if get("mixed").matches(fstype_key):
        return get("mixed")
    return for_fs(fs) if fs else for_mount(fstype_key)


def node_text(node: Dict[str, Any]) -> str:
    """One node's client facts for `show`: the client that served the target, in its own
    terms, and a Lustre client the node has beside it (its version and checksums are node
    facts of every record, whatever filesystem the run wrote to)."""
    served = for_fs(node.get("fs"))
    text = served.node_text(node)
    lustre = get("lustre")
    if served is not lustre and (node.get("lustre") or {}).get("version"):
        text += "; also " + lustre.node_text(node)
    return text


def magic_name(magic: Optional[int], client=None) -> Optional[str]:
    """The filesystem a statfs f_type stands for: asked of the mount's client first, then of
    every client (only for a magic its own client does not know)."""
    if not magic:
        return None
    if client is not None and magic in client.magics:
        return client.magics[magic]
    for c in every():
        if magic in c.magics:
            return c.magics[magic]
    return None


def volatile() -> Tuple[str, ...]:
    """Every fact name that identifies rather than sets: never a grouping key."""
    names = list(NOT_FACT_KEYS)
    for c in every():
        names += [n for n in c.volatile if n not in names]
    return tuple(names)


def collect(reader, fs: Dict[str, Any], kernel: str, lustre_facts: Dict[str, Any]):
    """The node's `client` fact: its target's client's facts."""
    return for_fs(fs).collect(reader, fs, kernel, lustre_facts)


def snapshot(sysroot: str, fs: Dict[str, Any],
             client: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """The target's client counters now, for `delta` (fs and client: facts['fs'] and
    facts['client'] of this node; the client's facts say where its admin socket is)."""
    return for_fs(fs).snapshot(sysroot, fs, client)


def delta(before: Dict[str, Any], after: Dict[str, Any]) -> Dict[str, Any]:
    """What the client did between two snapshots (of any kind)."""
    return for_kind(after.get("kind")).delta(before, after)


def legacy_client(keys: Dict[str, Any]) -> str:
    """The `client` run key of a record written before it existed (schema 1 without it), from
    its `lustre` and `fstype` keys: '2.15.5' -> 'lustre 2.15.5'; no Lustre on a local
    filesystem -> 'none'; no Lustre on NFS -> 'nfs unknown' (the version was not recorded)."""
    from mpiwrite.clients.base import client_string

    if "client" in keys:
        return str(keys["client"])
    lus = str(keys.get("lustre", "unknown"))
    fstype = str(keys.get("fstype", "unknown"))
    if "mixed" in (lus, fstype):
        return "mixed"
    if lus not in ("none", "unknown", "n/a"):
        return client_string("lustre", lus)
    return for_mount(fstype).unknown_client(fstype)
