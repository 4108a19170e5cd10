"""Local filesystems (ext4, XFS, Btrfs, ...) and memory filesystems (tmpfs, ramfs): no client
between the ranks and the storage, so no client facts (`none`), no counters, no targets."""

from __future__ import annotations

from typing import Any, Dict, Optional

from mpiwrite.clients.base import Client


class Local(Client):
    name = "local"
    catalogue = ("WRITEBACK", "BLOCK")
    fstypes = ("ext2", "ext3", "ext4", "xfs", "btrfs", "overlay", "zfs", "f2fs", "squashfs",
               "vfat", "ntfs", "ntfs3", "jfs", "reiserfs", "devtmpfs", "rootfs", "nilfs2",
               "bcachefs", "exfat")
    magics = {0xEF53: "ext4", 0x58465342: "xfs", 0x9123683E: "btrfs", 0x794C7630: "overlay",
              0x5346544E: "ntfs", 0x2FC12FC1: "zfs", 0x73717368: "squashfs"}
    local = True

    def unknown_client(self, fstype: str) -> str:
        return "none"

    def collect(self, reader, fs: Dict[str, Any], kernel: str,
                lustre: Dict[str, Any]) -> Dict[str, Any]:
        return {"name": "none", "version": None, "client": "none"}

    def targets(self, path: str) -> Optional[Dict[str, Any]]:
        return None  # no client places its files (and asks no xattr)

    def node_text(self, node: Dict[str, Any]) -> str:
        return f"client none ({'memory' if self.in_memory else 'local'} filesystem)"


class Memory(Local):
    """The CPU copies the data: a busy client CPU is by design, not a finding."""

    name = "memory"
    fstypes = ("tmpfs", "ramfs")
    magics = {0x01021994: "tmpfs"}
    in_memory = True
    catalogue = ()  # no writeback, no disk


LOCAL = Local()
MEMORY = Memory()
