"""What set a run's rate: the limits the verdict names (answers/limits.py; docs/measurement.md,
"Why this number").  A client's tunables say which of these they act on (clients/tunables.py,
`acts_on`), so `tune plan --from RECORD` can start from the limit a run met."""

from __future__ import annotations

from typing import Dict, Tuple

LINK = "link"  # the node's network link: its rate near the measured or nominal ceiling
CPU = "client cpu"  # the client's CPU: all cores busy, or its processes waiting for a CPU
TARGET = "target"  # one storage target slower than the others beyond noise
DIRTY = "dirty throttling"  # the kernel held the writers back for too many dirty pages
CACHE = "page cache"  # buffered rate above the link: the data did not leave the node
WRITER = "writer"  # the ranks ran (copied into memory) most of the time
STORAGE = "storage"  # the writers waited for the device or the servers, none singled out
NONE = "no single limit"

LIMITS: Tuple[str, ...] = (LINK, CPU, TARGET, DIRTY, CACHE, WRITER, STORAGE, NONE)

# What helps beside the client's tunables (the catalogue's `acts_on` gives those)
ADVICE: Dict[str, str] = {
    LINK: "more nodes (each brings its link), or fewer ranks a node where they crowd it",
    CPU: "cheaper checksums or none, more client threads; fewer ranks a node",
    TARGET: "striping over more targets, or the slow target's server examined",
    DIRTY: "larger dirty limits (vm.dirty_*, the client's dirty maximum), or --direct",
    CACHE: "--fsync (the default) or --direct, or more data than the node's memory",
    WRITER: "more ranks a node: each rank's copy into memory is the limit",
    STORAGE: "more targets or servers; the device's queue and request size",
    NONE: "a longer run, or --netcheck on several nodes, to see more",
}
