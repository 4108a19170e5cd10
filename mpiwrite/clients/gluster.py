"""The GlusterFS FUSE client: as any FUSE client (clients/fuse.py: daemon, version, its
translator graph from its log), and a file's targets are the bricks its pathinfo names."""

from __future__ import annotations

from typing import Any, Dict, Optional

from mpiwrite.clients.fuse import Fuse


class Gluster(Fuse):
    name = "glusterfs"
    catalogue = ("GLUSTER",)
    subtypes = ("glusterfs",)

    def in_force(self, sysroot: str, fs: Dict[str, Any],
                 client: Dict[str, Any]) -> Dict[str, Optional[str]]:
        """Which graph it runs: a graph switch (a `volume set`) inside a timed phase is
        flagged."""
        from mpiwrite.clients import tuning

        where = tuning.Where("", sysroot or "/", fs, client)
        return {"glusterfs graph": tuning.graph_mark(where)}

    def targets(self, path: str) -> Optional[Dict[str, Any]]:
        from mpiwrite.clients import targets

        return targets.bricks_of(path)


CLIENT = Gluster()
