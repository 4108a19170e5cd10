"""The GlusterFS FUSE client: as any FUSE client (clients/fuse.py: daemon, version, its
translator graph from its log), and a file's targets are the bricks its pathinfo names."""

from __future__ import annotations

from typing import Any, Dict, Optional

from mpiwrite.clients.fuse import Fuse


class Gluster(Fuse):
    name = "glusterfs"
    subtypes = ("glusterfs",)

    def targets(self, path: str) -> Optional[Dict[str, Any]]:
        from mpiwrite.clients import targets

        return targets.bricks_of(path)


CLIENT = Gluster()
