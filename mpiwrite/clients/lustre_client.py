"""The Lustre client: its facts are the node's Lustre facts (clients/lustre.py, read on every
node, whatever the target); counters per OSC and llite (lustre_counters.py); each file's
layout and OSTs from `lustre.lov` (lustre_layout.py); the only client that takes stripe
requests (run/stripeopts.py)."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from mpiwrite.clients.base import Client, client_string
from mpiwrite.sysroot import Reader
from mpiwrite.vocab import keys as keytable


class Lustre(Client):
    name = "lustre"
    catalogue = ("LUSTRE", "WRITEBACK")
    fstypes = ("lustre",)
    magics = {0x0BD00BD0: "lustre"}
    kind = "lustre"
    waits = ("osc_", "ptlrpc", "ll_", "cl_sync_io")  # its OSCs, its RPCs, llite, sync I/O
    striping = lov_layouts = rpc_counters = True
    volatile = ("device", "version_file")  # an OSC's or llite's instance name; where read
    own_keys = keytable.owned("lustre")  # lustre, checksums, checksum_type (vocab/keys.py)

    def node_text(self, node: Dict[str, Any]) -> str:
        lus = node.get("lustre") or {}
        return (f"client lustre {lus.get('version') or 'unknown'} ({lus.get('kernel', 'n/a')}), "
                f"checksums {lus.get('checksums')} {lus.get('checksum_type') or ''}".rstrip())

    def collect(self, reader, fs: Dict[str, Any], kernel: str,
                lustre: Dict[str, Any]) -> Dict[str, Any]:
        version = lustre.get("version")
        return {"name": "lustre", "version": version, "client": client_string("lustre", version)}

    def snapshot(self, sysroot: str, fs: Dict[str, Any],
                 client: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
        from mpiwrite.clients import lustre_counters

        return {"kind": "lustre", "data": lustre_counters.counters(Reader(sysroot or "/"))}

    def counter_delta(self, before: Dict[str, Any], after: Dict[str, Any]) -> Dict[str, Any]:
        from mpiwrite.clients import lustre_counters

        return lustre_counters.counter_delta(before, after)

    def own_processes(self, sysroot: str, fs: Dict[str, Any],
                      client: Dict[str, Any]) -> List[int]:
        """Its kernel threads: RPC engines, llite and lock threads, OSC work."""
        from mpiwrite.clients import ownprocs

        return ownprocs.threads(Reader(sysroot or "/"), ("ptlrpcd", "ll_", "ldlm_", "osc_"))

    def targets(self, path: str) -> Optional[Dict[str, Any]]:
        from mpiwrite.clients import lustre_layout

        return lustre_layout.rank_layout(path)


CLIENT = Lustre()
