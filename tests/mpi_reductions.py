"""Run under mpiexec: the typed reductions of parallel.Team against pickled reference gathers.

Each rank makes deterministic data from its rank (some ranks have none); rank 0 compares the
typed results with mpi4py's plain object gathers and exits 1 naming what differs.
"""

import sys

import numpy as np
from mpi4py import MPI

from mpiwrite.run.parallel import Team
from mpiwrite.vocab import pattern

team = Team(MPI)
world = MPI.COMM_WORLD
rank = team.rank
rng = np.random.default_rng(rank)
row = rng.uniform(size=5)
nsamp = 0 if rank % 3 == 1 else int(rng.integers(1, 7))  # some ranks have no samples
samples = rng.uniform(size=2 * nsamp)
text = "" if rank % 4 == 2 else f"rank {rank} on {team.host}: ünïcode ✓"

got_rows = team.gather_rows(row)
got_samples = team.gatherv(samples)
got_texts = team.gather_texts(text)
ref_rows = world.gather(row, root=0)
ref_samples = world.gather(samples, root=0)
ref_texts = world.gather(text, root=0)
ref_nodes = world.gather((team.host, team.node, team.local_rank, team.local_size), root=0)
got_max = team.allreduce_max(float(rank))
got_sum = team.allreduce_sum(rank)
offsets = team.clock_offsets()
b = team.bcast_text("broadcast ✓" if rank == 0 else None)

# pattern bodies from each node's leader: this rank's and the next rank's (verify's source)
bs = 4096 + 17
needs = sorted({rank, (rank + 1) % team.size})
into = {r: bytearray(bs) for r in needs}
team.node_bodies(needs, lambda r: pattern.body(bs, 99, r), into, bs)

problems = []
for r in needs:
    if bytes(into[r]) != pattern.body(bs, 99, r).tobytes():
        problems.append(f"rank {rank}: node_bodies for rank {r}")
if b != "broadcast ✓":
    problems.append(f"rank {rank}: bcast_text")
if got_max != team.size - 1 or got_sum != team.size * (team.size - 1) // 2:
    problems.append(f"rank {rank}: allreduce")
allp = world.gather(problems, root=0)
if rank == 0:
    problems = [p for ps in allp for p in ps]
    if not np.array_equal(got_rows, np.array(ref_rows)):
        problems.append("gather_rows")
    flat, counts = got_samples
    if not (np.array_equal(flat, np.concatenate(ref_samples))
            and list(counts) == [len(s) for s in ref_samples]):
        problems.append("gatherv")
    if got_texts != ref_texts:
        problems.append("gather_texts")
    hosts = sorted({h for h, *_ in ref_nodes})
    for h, node, _local, local_size in ref_nodes:
        if hosts[node] != h:
            problems.append(f"node index of {h}")
        if local_size != sum(1 for x in ref_nodes if x[0] == h):
            problems.append(f"local size on {h}")
    # one machine, one clock: the true offset (0) lies within each estimate's own stated
    # uncertainty (half the best round trip), however busy the machine is; 1 ms of slack
    if offsets is None or offsets.shape != (len(hosts), 2) \
            or (abs(offsets[:, 0]) > offsets[:, 1] + 1e-3).any():
        problems.append(f"clock offsets {offsets}")
    print(f"{team.size} ranks on {len(hosts)} nodes: {'; '.join(problems) or 'ok'}")
    sys.exit(1 if problems else 0)
