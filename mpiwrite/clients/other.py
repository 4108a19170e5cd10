"""What no registered client serves: a filesystem mpiwrite has no client for (its type is its
name, its version unknown), and a run whose nodes are on different filesystems (`mixed`)."""

from __future__ import annotations

from typing import Any, Dict, Optional

from mpiwrite.clients.base import Client


class Other(Client):
    """Any mount: the registry's last entry.  Its files' targets are whatever the client
    tells (a GlusterFS pathinfo, a CephFS pool), as asked of any file."""

    name = "other"
    magics = {0xFF534D42: "cifs", 0x6E667364: "nfsd"}

    def matches(self, fstype: str, source: Optional[str] = None) -> bool:
        return True

    def targets(self, path: str) -> Optional[Dict[str, Any]]:
        from mpiwrite.clients import targets

        return targets.of_file(path)


class Mixed(Client):
    """Nodes on different filesystems (the run key `fstype` is `mixed`): no striping, and each
    rank's layout read as on Lustre (one getxattr; nothing where there is none)."""

    name = "mixed"
    lov_layouts = True

    @property
    def waits(self):  # type: ignore[override]
        """Any registered client's: the nodes' clients differ."""
        from mpiwrite.clients import registry

        return tuple(w for c in registry.every() if c is not self for w in c.waits)

    def matches(self, fstype: str, source: Optional[str] = None) -> bool:
        return fstype == "mixed"

    def targets(self, path: str) -> Optional[Dict[str, Any]]:
        from mpiwrite.clients import lustre_layout

        return lustre_layout.rank_layout(path)


OTHER = Other()
MIXED = Mixed()
