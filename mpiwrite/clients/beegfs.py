"""BeeGFS: the client module's running configuration and version.

/proc/fs/beegfs/<session id>/config prints `key = value` lines (client_module ProcFsHelper:
cfgFile, connUseRDMA, tuneFileCacheType, tuneRemoteFSync, sysMgmtdHost, ...), one folder per
mount.  The module's version is /sys/module/beegfs/version (MODULE_VERSION), else the
beegfs-client package.
"""

from __future__ import annotations

from typing import Any, Dict, List

from mpiwrite.clients.base import Client
from mpiwrite.clients.common import settle_version
from mpiwrite.sysroot import Reader, first_line, key_values

WRITE_KEYS = ("tuneFileCacheType", "tuneFileCacheBufSize", "tuneRemoteFSync",
              "tuneUseGlobalFileLocks", "tuneUseBufferedAppend", "tuneCoherentBuffers",
              "connUseRDMA", "connMaxInternodeNum", "connRDMABufSize", "connRDMABufNum",
              "sysMgmtdHost", "sysSyncOnClose", "sysSessionCheckOnClose", "quotaEnabled",
              "cfgFile")


def collect(reader: Reader, fs: Dict[str, Any]) -> Dict[str, Any]:
    info: Dict[str, Any] = {"name": "beegfs", "mount_source": fs.get("mount_source")}
    sessions = []
    for rel in reader.glob("proc/fs/beegfs/*/config"):
        text, _ = reader.read(rel)
        if text is None:
            continue
        kv = key_values(text, "=")
        sessions.append({"session": rel.split("/")[-2],
                         **{k: kv[k] for k in WRITE_KEYS if k in kv}})
    info["sessions"] = sessions
    if sessions:
        info["config"] = {k: v for k, v in sessions[0].items() if k != "session"}
    else:
        reader.unknown["beegfs.config"] = "/proc/fs/beegfs/*/config: none"
    version = first_line(reader.read("sys/module/beegfs/version")[0]) or None
    return settle_version(reader, info, "beegfs", version, "/sys/module/beegfs/version",
                          ("beegfs-client",), "no /sys/module/beegfs/version, no beegfs-client")


class Beegfs(Client):
    """The BeeGFS client: its per-session config under /proc/fs/beegfs."""

    name = "beegfs"
    fstypes = ("beegfs",)
    magics = {0x19830326: "beegfs"}

    def collect(self, reader, fs: Dict[str, Any], kernel: str,
                lustre: Dict[str, Any]) -> Dict[str, Any]:
        return collect(reader, fs)

    def detail(self, client: Dict[str, Any]) -> List[str]:
        return [f"{k}={v}" for k, v in (client.get("config") or {}).items()]


CLIENT = Beegfs()
