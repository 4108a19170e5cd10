"""The kernel's own wait channels a writer sleeps in, by what they mean (answers/waits.py).

Prefixes of /proc/PID/wchan names; a client's own channels (its RPCs, its FUSE requests) are
its module's (clients/ `waits`, `waits_are`).  Names differ between kernel versions (a page's
wait became a folio's in 5.16), so each class lists the families it has been seen under.
"""

from __future__ import annotations

from typing import Dict, Tuple

RUNNING, DIRTY, WRITEBACK, NETWORK, FUSE, OTHER = (
    "running", "dirty throttling", "writeback", "network", "fuse request", "other")
CLASSES: Tuple[str, ...] = (RUNNING, DIRTY, WRITEBACK, NETWORK, FUSE, OTHER)

KERNEL: Dict[str, Tuple[str, ...]] = {
    # the writer is made to wait because the node holds too many dirty pages
    DIRTY: ("balance_dirty_pages",),
    # fsync and O_DIRECT waiting for the device and the filesystem's journal
    WRITEBACK: ("folio_wait", "wait_on_page", "__folio_lock", "__lock_page", "filemap_",
                "file_write_and_wait", "fsync_buffers_list", "jbd2_", "blk_", "io_schedule",
                "wait_for_completion_io", "submit_bio", "xlog_", "xfs_log", "xfs_file_fsync",
                "ext4_sync", "sync_inode", "writeback_", "__iomap_dio_rw", "iomap_dio",
                "bit_wait_io", "rq_qos_wait", "wbt_wait"),
    # a socket: a network filesystem's kernel client waiting for its server
    NETWORK: ("sk_wait_data", "sk_stream_wait", "tcp_", "inet_", "unix_stream", "rdma_"),
}
