"""What a node's filesystem client and CPUs did during the write phase, as its leader sees
them, and what each rank's latency histograms and Lustre layout say: snapshots before the
phase, deltas after it, and the gathers that bring them to rank 0's ledger.

Beside the counters, each node's delta holds the CPU seconds of the client's own processes
over the phase (`client_cpu`: a FUSE daemon, Lustre's or NFS's kernel threads), the client
facts that must not change under a run read before and after (`in_force`: a GlusterFS graph),
and in a study the settings asked, seen before and seen after (`settings`); rank 0's ledger
flags the run when a setting was not in force everywhere or a fact changed.
"""

from __future__ import annotations

import json
from array import array
from typing import Dict

from mpiwrite.run import rows


class NodeWatch:
    """One rank's part; only node leaders read counters (`node_fs`: their target's facts)."""

    def __init__(self, team, cfg, settings=None):
        self.team, self.cfg = team, cfg
        self.settings = settings  # a study's: leaders read its values after each phase
        self.own_pids = None  # leaders: the client's own processes (found once)
        self.node_fs: Dict = {}  # leaders: the target's filesystem facts
        self.node_client: Dict = {}  # leaders: its client's facts (ceph-fuse: admin socket)
        self.mine = None  # leaders: the client of their node's target (its counters)
        self.client = None  # the run's client, rank 0's on every rank (the layout gather)

    def run_client(self, fstype_key: str) -> str:
        """Rank 0: the name of the run's client (its node's, or `mixed`), to broadcast."""
        from mpiwrite.clients import registry

        return registry.for_run(fstype_key, self.node_fs).name

    def use(self, name: str) -> None:
        """The run's client, as rank 0 names it (every rank takes the same branches at the
        layout gather); '' (no record kept) asks the files as of an unknown filesystem."""
        from mpiwrite.clients import registry

        self.client = registry.get(name or "other")

    def _mine(self):
        if self.mine is None:
            from mpiwrite.clients import registry  # leaders import it at set-up

            self.mine = registry.for_fs(self.node_fs)
        return self.mine

    def before(self):
        """Node leaders: (CPU counters, client counters: Lustre osc/llite, NFS mountstats,
        ceph-fuse perf dump) before the phase; else None."""
        if not self.team.is_leader:
            return None
        from mpiwrite.facts import nodeinfo  # leaders import it at set-up

        return (nodeinfo.cpu_line(), self._mine().snapshot(self.cfg.sysroot, self.node_fs,
                                                           self.node_client), self._own())

    def _own(self):
        """(the client's own processes' CPU seconds, its facts that must stay) now."""
        from mpiwrite.clients import ownprocs
        from mpiwrite.sysroot import Reader

        mine, root = self._mine(), self.cfg.sysroot or "/"
        if self.own_pids is None:
            self.own_pids = mine.own_processes(root, self.node_fs, self.node_client)
        reader = Reader(root)
        return ((ownprocs.seconds(reader, self.own_pids), ownprocs.waited(reader, self.own_pids)),
                mine.in_force(root, self.node_fs, self.node_client))

    def after(self, before):
        """((busy, iowait) fractions of the node's CPUs, client counter delta) once every rank
        of the node has finished; (NaN, NaN), None on other ranks."""
        if before is None:
            return (rows.NAN, rows.NAN), None
        from mpiwrite.clients import ownprocs
        from mpiwrite.facts import nodeinfo

        cpu, client, (own, facts) = before
        mine = self._mine()
        fractions = rows.cpu_fractions(cpu, nodeinfo.cpu_line())
        delta = mine.delta(client, mine.snapshot(self.cfg.sysroot, self.node_fs,
                                                 self.node_client))
        own_after, facts_after = self._own()
        if self.own_pids:
            spent = ownprocs.spent(own[0], own_after[0])
            delta["client_cpu"] = {"seconds": round(sum(spent.values()), 3),
                                   "processes": spent,
                                   # seconds they waited for a CPU (a quota, busy cores)
                                   "waited": ownprocs.spent(own[1], own_after[1])}
        if facts:
            delta["in_force"] = {"before": facts, "after": facts_after}
        probe = self.settings() if self.settings is not None else None
        if probe is not None:
            delta["settings"] = probe
        return fractions, delta

    def gather(self, it: int, delta, path: str, created: bool, res, ledger) -> None:
        """Counter deltas of every node; each rank's file layout and the storage targets of its
        data where the client tells (every iteration: each writes new files, which may land on
        other targets; a getxattr or two per rank, after the timed phase; Client.targets; on
        a local filesystem iteration 0's only); every node's write() and fsync() latency
        histograms."""
        team = self.team
        if team.is_leader:
            texts = team.gather_texts(json.dumps(delta), team.leaders)
            if texts is not None:
                rows_now = [{"iteration": it, "node": i, "delta": json.loads(t)}
                            for i, t in enumerate(texts) if t and t != "null"]
                ledger.client_counters += rows_now
                for problem in not_in_force(rows_now, ledger.hosts):  # the run: unsettled
                    ledger.not_in_force.append(problem)
                    ledger.warn(f"not in force: {problem}; the run is marked unsettled "
                                "(reports leave it out)")
        if it == 0 or not self.client.local:  # every rank alike: the gather is collective
            self._gather_layouts(it, path, created, ledger)
        self._gather_latency(it, res, ledger)

    def _gather_layouts(self, it: int, path: str, created: bool, ledger) -> None:
        """Every iteration's; on a local filesystem iteration 0's only: no client tells
        targets there, and the gather cost 2.4 s in 300 iterations of 8 ranks on 2 cores (8
        ms an iteration; 7 alternated rounds, each slower with it)."""
        team = self.team
        lay = None
        if created or (self.cfg.layout == "shared" and it == 0):  # one shared file: once
            lay = self.client.targets(path)  # its modules only where used (start-up)
        texts = team.gather_texts(json.dumps(lay))
        if texts is not None:
            ledger.layouts += [{"iteration": it, "rank": r, "layout": json.loads(t)}
                               for r, t in enumerate(texts) if t and t != "null"]
            if self.client.lov_layouts and it == 0:
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


def not_in_force(node_rows, hosts) -> list:
    """What was not in force everywhere during a phase, one line each: a setting a node did
    not show as asked (before or after), a client fact that changed (a graph switch)."""
    out = []
    for row in node_rows:
        d, it = row["delta"], row["iteration"]
        host = hosts[row["node"]] if row["node"] < len(hosts) else f"node {row['node']}"
        s = d.get("settings") or {}
        for name, asked in (s.get("asked") or {}).items():
            for when in ("before", "after"):
                seen = (s.get(when) or {}).get(name, asked)
                if seen != asked:
                    out.append(f"setting {name}={asked} was {seen} on {host} {when} the timed "
                               f"phase of iteration {it}")
        f = d.get("in_force") or {}
        for name, was in (f.get("before") or {}).items():
            now = (f.get("after") or {}).get(name)
            if now != was:
                out.append(f"{name} changed on {host} during iteration {it} ({was} -> {now})")
    return out
