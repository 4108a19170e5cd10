"""DAOS dfuse (`dfuse on /mnt/dfuse type fuse.daos`): registered so that its mounts have a
client of their own; for now it says what any FUSE client says (clients/fuse.py).  Its pool
and container, its caching options and its counters are for the issue that adds it."""

from __future__ import annotations

from mpiwrite.clients.fuse import Fuse


class Dfuse(Fuse):
    name = "dfuse"
    subtypes = ("daos", "dfuse")


CLIENT = Dfuse()
