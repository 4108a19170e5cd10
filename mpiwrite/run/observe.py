"""What a node's filesystem client and CPUs did during the write phase, as its leader sees
them, and what each rank's latency histograms and Lustre layout say: snapshots before the
phase, deltas after it, and the gathers that bring them to rank 0's ledger.
"""

from __future__ import annotations

import json
from array import array
from typing import Dict

from mpiwrite.run import rows


def fs_kind(fstype: str) -> str:
    """`lustre` (layouts name OSTs), `local` (no client places files on targets: the layout
    gather is made for iteration 0 only), or `other` (a client that may tell)."""
    from mpiwrite.clients.registry import LOCAL

    return "lustre" if fstype in ("lustre", "mixed") else "local" if fstype in LOCAL else \
        "other"


class NodeWatch:
    """One rank's part; only node leaders read counters (`node_fs`: their target's facts)."""

    def __init__(self, team, cfg):
        self.team, self.cfg = team, cfg
        self.node_fs: Dict = {}  # leaders: the target's filesystem facts
        self.node_client: Dict = {}  # leaders: its client's facts (ceph-fuse: admin socket)
        self.on_lustre = False  # the same answer on every rank (rank 0's), for the layout gather
        self.local = False  # likewise: a local filesystem, whose files no client places

    def before(self):
        """Node leaders: (CPU counters, client counters: Lustre osc/llite, NFS mountstats,
        ceph-fuse perf dump) before the phase; else None."""
        if not self.team.is_leader:
            return None
        from mpiwrite.clients import registry as fsclients  # leaders import them at set-up
        from mpiwrite.facts import nodeinfo

        return nodeinfo.cpu_line(), fsclients.snapshot(self.cfg.sysroot, self.node_fs,
                                                       self.node_client)

    def after(self, before):
        """((busy, iowait) fractions of the node's CPUs, client counter delta) once every rank
        of the node has finished; (NaN, NaN), None on other ranks."""
        if before is None:
            return (rows.NAN, rows.NAN), None
        from mpiwrite.clients import registry as fsclients
        from mpiwrite.facts import nodeinfo

        cpu, client = before
        return (rows.cpu_fractions(cpu, nodeinfo.cpu_line()),
                fsclients.delta(client, fsclients.snapshot(self.cfg.sysroot, self.node_fs,
                                                           self.node_client)))

    def gather(self, it: int, delta, path: str, created: bool, res, ledger) -> None:
        """Counter deltas of every node; each rank's file layout and the storage targets of its
        data where the client tells (every iteration: each writes new files, which may land on
        other targets; a getxattr or two per rank, after the timed phase; facts/targets.py; on
        a local filesystem iteration 0's only); every node's write() and fsync() latency
        histograms."""
        team = self.team
        if team.is_leader:
            texts = team.gather_texts(json.dumps(delta), team.leaders)
            if texts is not None:
                ledger.client_counters += [
                    {"iteration": it, "node": i, "delta": json.loads(t)}
                    for i, t in enumerate(texts) if t and t != "null"]
        if it == 0 or not self.local:  # every rank alike: the gather is collective
            self._gather_layouts(it, path, created, ledger)
        self._gather_latency(it, res, ledger)

    def _gather_layouts(self, it: int, path: str, created: bool, ledger) -> None:
        """Every iteration's; on a local filesystem iteration 0's only: no client tells
        targets there, and the gather cost 2.4 s in 300 iterations of 8 ranks on 2 cores (8
        ms an iteration; 7 alternated rounds, each slower with it)."""
        team = self.team
        lay = None
        if created or (self.cfg.layout == "shared" and it == 0):  # one shared file: once
            if self.on_lustre:  # each module only where it is used (start-up metadata)
                from mpiwrite.clients import lustre_layout

                lay = lustre_layout.rank_layout(path)
            else:
                from mpiwrite.clients import targets

                lay = targets.of_file(path)
        texts = team.gather_texts(json.dumps(lay))
        if texts is not None:
            ledger.layouts += [{"iteration": it, "rank": r, "layout": json.loads(t)}
                               for r, t in enumerate(texts) if t and t != "null"]
            if self.on_lustre and it == 0:
                from mpiwrite.facts import nodeinfo

                ledger.extra["stripe"] = nodeinfo.stripe_of(path)

    def _gather_latency(self, it: int, res, ledger) -> None:
        """One node reduction and one gather of the leaders' sums."""
        from mpiwrite.engines import latency

        lat = res.latency
        mine = array("d", bytes(8 * (2 * latency.NBUCKETS + 2)))
        if lat is not None:
            mine = array("d", [*lat.write, *lat.fsync, lat.write_max, lat.fsync_max])
        # maxima as sums would be wrong: take them per rank from the rank table instead
        sums = self.team.node_sums(mine)
        if sums is not None and self.team.rank == 0:
            import numpy as np

            ledger.add_latency(it, sums[:, :latency.NBUCKETS].astype(np.int64),
                               sums[:, latency.NBUCKETS:2 * latency.NBUCKETS].astype(np.int64))
