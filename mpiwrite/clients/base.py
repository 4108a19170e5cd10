"""A filesystem client: everything mpiwrite knows about one kind of mount, in one object.

A client says which mounts it serves (`matches`: the mount table's type and source; `magics`:
statfs f_type values and their names), reads its facts (`collect`: the node's `client`
fact), snapshots its counters around the timed phase and takes their difference (`snapshot`,
`delta`: the record's `client_counters`), says itself in lines (`describe` for `env`,
`counter_text` for `show`), names the storage targets of a file (`targets`), and says what
`compare` should list besides the run keys (`differences`) and which of its facts name a
thing rather than a setting (`volatile`: never grouping keys).  Its capabilities are flags,
never compared by name: `local` (no client places files: layouts are gathered once),
`in_memory` (writing is the CPU's copy), `striping` (it takes --stripe-count and friends),
`lov_layouts` (its files carry `lustre.lov`), `rpc_counters` (its deltas count write RPCs).
The registry (clients/registry.py) finds one lazily; nothing here is imported until asked.
"""

from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Tuple


def client_string(name: str, version: Optional[str]) -> str:
    """'nfs 4.2', 'gpfs 5.1.9.0', 'glusterfs unknown' (a client whose version was not found)."""
    return f"{name} {version or 'unknown'}"


class Client:
    name = ""  # the registry's name
    fstypes: Tuple[str, ...] = ()  # mount table types it serves
    magics: Dict[int, str] = {}  # statfs(2) f_type -> the name it stands for
    kind: Optional[str] = None  # the `kind` of its counter snapshots (stored in records)
    local = False
    in_memory = False
    striping = False
    lov_layouts = False
    rpc_counters = False
    volatile: Tuple[str, ...] = ()  # fact names that identify (a pid, a socket), not settings
    catalogue: Tuple[str, ...] = ()  # the parts of clients/tunables.py it offers
    own_keys: Tuple[str, ...] = ()  # the run keys that are its settings (shown with it)
    # the kernel's wait channels (prefixes, /proc/PID/wchan) where a writer waits for this
    # client's server or daemon (FUSE's request, Lustre's RPCs, NFS's SUNRPC layer)
    waits: Tuple[str, ...] = ()
    # what waiting in them is (answers/waits.py): the server, over the network, or the
    # client's own daemon's answer to a FUSE request ("fuse")
    waits_are: str = "network"

    @property
    def tunables(self) -> Dict[str, Any]:
        """The settings `mpiwrite tune` may change, by name (clients/tunables.Tunable),
        loaded when asked (a rank's start-up imports none of the catalogue)."""
        if not self.catalogue:
            return {}
        from mpiwrite.clients import tunables

        return tunables.merged(*(getattr(tunables, part) for part in self.catalogue))

    def matches(self, fstype: str, source: Optional[str] = None) -> bool:
        return fstype in self.fstypes

    def holds(self, state: str, wchan: str) -> bool:
        """A writer in this state and wait channel is in the kernel for this client: state D,
        or one of its wait channels (FUSE waits interruptibly, state S, until a signal comes;
        then killably, D)."""
        return state == "D" or bool(self.waits) and wchan.startswith(self.waits)

    def unknown_client(self, fstype: str) -> str:
        """The `client` value when only the mount's type is known (old records)."""
        return client_string(fstype, None)

    def collect(self, reader, fs: Dict[str, Any], kernel: str,
                lustre: Dict[str, Any]) -> Dict[str, Any]:
        """The node's `client` fact for the mount `fs` (facts['fs'])."""
        fstype = str(fs.get("fstype") or "unknown")
        return {"name": fstype, "version": None, "client": self.unknown_client(fstype)}

    def snapshot(self, sysroot: str, fs: Dict[str, Any],
                 client: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
        """Its counters now ({'kind', 'data'}); {'kind': None} when it has none."""
        return {"kind": None, "data": {}}

    def delta(self, before: Dict[str, Any], after: Dict[str, Any]) -> Dict[str, Any]:
        """What it did between two snapshots: `write_bytes` in every kind (None when unknown)
        beside the kind's own details."""
        kind = after.get("kind")
        if kind != before.get("kind") or kind is None:
            return {"kind": kind, "write_bytes": None}
        return {"kind": kind, **self.counter_delta(before["data"], after["data"])}

    def counter_delta(self, before: Dict[str, Any], after: Dict[str, Any]) -> Dict[str, Any]:
        return {"write_bytes": None}

    def describe(self, client: Dict[str, Any]) -> List[str]:
        """`env`'s `client` line, and the settings that decide writes."""
        lines = [f"client         {client.get('client', 'unknown')}"]
        detail = self.detail(client)
        if detail:
            lines.insert(1, "  " + ", ".join(detail))
        return lines

    def detail(self, client: Dict[str, Any]) -> List[str]:
        return []

    def node_text(self, node: Dict[str, Any]) -> str:
        """One node's facts of this client for `show`: the client and the settings that
        decide writes, in its own terms (`node`: the node's facts)."""
        client = node.get("client") or {}
        return ", ".join([f"client {client.get('client') or self.unknown_client(self.name)}"]
                         + self.detail(client))

    def counter_text(self, d: Dict[str, Any]) -> str:
        """One node's counter delta in words: what it sent, in how many write RPCs."""
        kind = d.get("kind")
        if kind is None:
            return "no counters for this client"
        if number(d.get("write_bytes")) is None:
            return f"{kind}: no counters ({d.get('why') or 'unknown'})"
        rpcs = number(d.get("write_rpcs"))
        return (f"{kind}: sent {size_text(d['write_bytes'])}"
                + (f" in {int(rpcs)} write RPCs{per(d['write_bytes'], rpcs, 'RPC')}"
                   if rpcs is not None else ""))

    def differences(self, a_runs, b_runs) -> Dict[str, Dict[str, List[str]]]:
        """What it did differently between two groups of runs, from its counters, beyond the
        write RPC size (answers/differences.py): {description: {'a': [...], 'b': [...]}}."""
        return {}

    def targets(self, path: str) -> Optional[Dict[str, Any]]:
        """The layout of a rank's file and the targets that hold it, or None."""
        return None

    def own_processes(self, sysroot: str, fs: Dict[str, Any],
                      client: Dict[str, Any]) -> List[int]:
        """The pids of the client's own processes, whose CPU time the ranks never see (a FUSE
        daemon; Lustre's or NFS's kernel threads: clients/ownprocs.py)."""
        return []

    def in_force(self, sysroot: str, fs: Dict[str, Any],
                 client: Dict[str, Any]) -> Dict[str, Optional[str]]:
        """Client facts that can change under a running client (a GlusterFS graph), read
        before and after each timed phase: a change is a warning and flags the run."""
        return {}


def grown(a: Optional[int], b: Optional[int]) -> Optional[int]:
    """b - a of a counter; None when unknown or when it went backwards (reset, remount)."""
    if a is None or b is None or b < a:
        return None
    return b - a


def number(x) -> Optional[float]:
    """A counter from a record (someone else's JSON): a finite number, else None."""
    if isinstance(x, bool) or not isinstance(x, (int, float)) or x != x or abs(x) == math.inf:
        return None
    return x


def size_text(x) -> str:
    from mpiwrite.units import format_size

    v = number(x)
    return format_size(v) if v is not None and v >= 0 else "?"


def per(total, count, unit: str) -> str:
    from mpiwrite.units import format_size

    t, c = number(total), number(count)
    return f" ({format_size(t / c)} per {unit})" if t is not None and c else ""


def ms(seconds) -> str:
    v = float(seconds)
    return f"{v * 1e3:.3g} ms" if v == v else "-"
