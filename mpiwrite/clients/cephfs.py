"""The CephFS kernel client: its mount options (secrets hidden) and version (clients/ceph.py
reads them); a file's target is its data pool, from the layout xattr (clients/targets.py)."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from mpiwrite.clients.base import Client


class CephKernel(Client):
    name = "cephfs"
    catalogue = ("WRITEBACK",)
    fstypes = ("ceph",)
    magics = {0x00C36400: "ceph"}
    waits = ("ceph_",)  # its requests to the MDS and the OSDs (ceph_osdc_...)

    def collect(self, reader, fs: Dict[str, Any], kernel: str,
                lustre: Dict[str, Any]) -> Dict[str, Any]:
        from mpiwrite.clients import ceph

        return ceph.collect(reader, fs, kernel)

    def detail(self, client: Dict[str, Any]) -> List[str]:
        return [f"{k}={v}" for k, v in (client.get("options") or {}).items()]

    def targets(self, path: str) -> Optional[Dict[str, Any]]:
        from mpiwrite.clients import targets

        return targets.pool_of(path)


CLIENT = CephKernel()
