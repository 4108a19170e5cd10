"""Synthetic records with known figures, written with the real record writer."""

import json

import numpy as np

from mpiwrite.formats import summary
from mpiwrite.records import h5 as records
from mpiwrite.vocab.status import Status


def node(host="n1", lustre="1.6.5", checksums="off", kernel="2.6.18", patched="patchless",
         cpu=None):
    extra = {"cpu_model": cpu} if cpu else {}
    return {"host": host, "kernel": kernel, "fs": {"fstype": "lustre"}, **extra,
            "lustre": {"present": True, "version": lustre, "checksums": checksums,
                       "checksum_type": "adler", "kernel": patched},
            "mem_total_bytes": 16 * 2**30, "raw": {"/proc/fs/lustre/version": f"lustre: {lustre}"}}


def make(path, values, run_id, tags=None, nodes=1, ranks_per_node=2, status="complete",
         params=None, hosts=None, start_time=None, rank_rates=None, layouts=None, cpus=None,
         per_rank=2**30, node_facts=None, attrs=None, **keys):
    """A record whose iterations have exactly these aggregate MB/s values; or, with
    `rank_rates` (per iteration, per rank MB/s), ranks with exactly these rates.  `layouts`:
    the record's rank_layouts rows; `cpus`: a CPU model per node; `node_facts`: each node's
    facts instead of node()'s Lustre client."""
    if rank_rates is not None:
        values = [float(np.mean(x)) for x in rank_rates]  # only spaces the iterations
    n = nodes * ranks_per_node
    rank_rows, iters = [], []
    for it, v in enumerate(values):
        r = np.zeros(n, dtype=summary.RANK_DTYPE)
        r["iteration"], r["rank"], r["node"] = it, np.arange(n), np.arange(n) // ranks_per_node
        r["bytes"] = per_rank
        span = n * per_rank / (v * 1e6)
        start = it * 10 * span
        r["t_open_start"] = start - 0.001
        r["t_write_start"] = start
        r["t_write_end"] = start + span * 0.9
        r["t_fsync_end"] = start + span * np.linspace(0.95, 1.0, n)
        if rank_rates is not None:
            r["t_fsync_end"] = start + per_rank / (np.asarray(rank_rates[it], float) * 1e6)
            r["t_write_end"] = start + (r["t_fsync_end"] - start) * 0.9
        r["t_close_end"] = r["t_fsync_end"]
        r["verify_seconds"] = np.nan
        summary.fill_rates(r)
        rank_rows.append(r)
        iters.append(summary.iteration_summary(r, None, Status.OK))
    cfg = {"block_size": 2**20, "size": per_rank, "layout": "fpp", "fsync": True,
           "fsync_every": 0, "direct": False, "target": "/mnt/lustre/x", **(params or {})}
    hosts = hosts or [f"n{i + 1}" for i in range(nodes)]
    nd = [node(host=hosts[i], **keys, **({"cpu": cpus[i]} if cpus else {}))
          for i in range(nodes)] if node_facts is None else node_facts
    from mpiwrite.formats.nodekeys import common_keys

    rec = records.RunRecord(
        attrs={"run_id": run_id, "status": status,
               "start_time": start_time or f"2026-01-01T00:00:{len(run_id) % 60:02d}Z",
               "params": json.dumps(cfg), "tags": json.dumps(tags or {}),
               "keys": json.dumps(common_keys(nd)), "ranks": n, "nodes": nodes,
               "host": hosts[0], "command_line": "mpiwrite run (synthetic)", "warnings": "[]",
               **(attrs or {})},
        ranks=np.concatenate(rank_rows), iterations=np.array(iters, dtype=summary.ITER_DTYPE),
        samples=np.zeros(0, summary.SAMPLE_DTYPE), nodes=nd, errors=[], layouts=layouts or [])
    records.write(rec, str(path))
    return str(path)


# The original study: three client configurations (Lustre 1.6.4.3; 1.6.5 with checksums off
# and on), with the MB/s that lmdd measured.  `python tests/synth.py DIR` writes five runs of
# two iterations each, with 1% noise, as test_report.py's fixture does and the README shows.
ORIGINAL = {"1.6.4.3": (832.0, "1.6.4.3", "off"), "1.6.5-off": (681.0, "1.6.5", "off"),
            "1.6.5-on": (326.0, "1.6.5", "on")}


def original_study(folder, runs: int = 5, seed: int = 7):
    import os

    rng = np.random.default_rng(seed)
    os.makedirs(folder, exist_ok=True)
    for name, (mbps, lustre, checksums) in ORIGINAL.items():
        for rep in range(runs):
            vals = mbps * (1 + 0.01 * rng.standard_normal(2))
            make(os.path.join(folder, f"{name}-{rep}.h5"), vals, f"{name}-{rep}",
                 tags={"build": name, "rep": str(rep)}, lustre=lustre, checksums=checksums)


# The original study as a history with every node fact it had (for `explain`): Lustre 1.6.4.3
# ran on its patched kernel, 1.6.5 on a patchless one (kernel and lustre change together: no
# run separates them); checksums were tried on 1.6.5 only; each configuration ran on both CPU
# types, four nodes of each (two a run), and the Opterons are 8% slower, an effect small beside
# the checksums' and visible only within a configuration.  Two nodes a run, 2% noise.
KERNELS = {"1.6.4.3": ("2.6.18-53.1.13.el5_lustre.1.6.4.3", "patched"),
           "1.6.5": ("2.6.18-92.1.10.el5", "patchless")}
CPUS = {"Intel Xeon 5160": 1.0, "AMD Opteron 2218": 0.92}


def explain_study(folder, runs: int = 5, seed: int = 11, noise: float = 0.02):
    """Writes 3 configurations x 2 CPU types x `runs` records; returns their count."""
    import os

    rng = np.random.default_rng(seed)
    os.makedirs(folder, exist_ok=True)
    count = 0
    for name, (mbps, lustre, checksums) in ORIGINAL.items():
        kernel, patched = KERNELS[lustre]
        for c, (cpu, factor) in enumerate(CPUS.items()):
            for rep in range(runs):
                pool = [f"{'ia'[c]}{k}" for k in range(1, 5)]
                first = int(rng.integers(0, 4))
                hosts = [pool[first], pool[(first + 1) % 4]]
                vals = mbps * factor * (1 + noise * rng.standard_normal(2))
                run_id = f"2008{count:04d}T000000Z-{name}-{c}{rep}"
                make(os.path.join(folder, f"{name}-{c}-{rep}.h5"), vals, run_id,
                     tags={"job": str(1000 + count)}, nodes=2, hosts=hosts,
                     start_time=f"2008-06-{1 + count // 24:02d}T{count % 24:02d}:00:00Z",
                     lustre=lustre, checksums=checksums, kernel=kernel, patched=patched,
                     cpu=cpu)
                count += 1
    return count


# One run on a distributed volume of 2 bricks (GlusterFS-like): 3 hosts x 4 ranks, 3
# iterations; each iteration's files land on a brick by name (so a rank's brick changes
# between iterations), brick1 is 40% slower, 3% noise; the third host has another CPU model
# (no effect).  For `explain RUN` and `show --by target`: brick1 must be named.
BRICKS = ("srv0:/b/brick0", "srv1:/b/brick1")


def bricks_run(path, seed: int = 5, slow: float = 0.6, iterations: int = 3, per_host: int = 4):
    rng = np.random.default_rng(seed)
    nranks = 3 * per_host
    where = [[int(rng.integers(0, 2)) for _r in range(nranks)] for _it in range(iterations)]
    rates = [[400.0 * (slow if where[it][r] else 1.0) * (1 + 0.03 * rng.standard_normal())
              for r in range(nranks)] for it in range(iterations)]
    layouts = [{"iteration": it, "rank": r,
                "layout": {"layout": "glusterfs", "targets": [BRICKS[where[it][r]]]}}
               for it in range(iterations) for r in range(nranks)]
    make(path, None, "20261201T120000Z-b71c45", nodes=3, ranks_per_node=per_host,
         hosts=["h0", "h1", "h2"], rank_rates=rates, layouts=layouts,
         cpus=["Intel Xeon 5160", "Intel Xeon 5160", "AMD Opteron 2218"],
         params={"target": "/mnt/gluster/x"})
    return where, rates


# A site's IOR history beside mpiwrite runs of the same configuration (README): IOR's
# `-a POSIX -w -F -e -b 64m -t 1m` on 2 tasks of one node (tests/fixtures/import/, real),
# and three mpiwrite runs of 2 ranks, fpp, fsync'd, 1 MiB blocks, 64 MiB a rank, 3 iterations,
# on the same kind of node (a tmpfs /scratch), figures invented near IOR's, 2% noise.
def tmpfs_node(host="vm"):
    return {"host": host, "kernel": "6.1.0-28-amd64", "cpu_model": "AMD EPYC", "cores": 2,
            "fs": {"fstype": "tmpfs"}, "lustre": {"present": False},
            "mem_total_bytes": 25 * 2**30, "raw": {}}


def ior_site(folder, runs: int = 3, seed: int = 3, mbps: float = 4300.0):
    import os

    rng = np.random.default_rng(seed)
    os.makedirs(folder, exist_ok=True)
    for rep in range(runs):
        vals = mbps * (1 + 0.02 * rng.standard_normal(3))
        make(os.path.join(folder, f"mpiwrite-{rep}.h5"), vals,
             f"20261201T10{rep:02d}00Z-5173{rep:02d}", tags={"site": "a"}, nodes=1,
             ranks_per_node=2, hosts=["vm"], per_rank=64 * 2**20, node_facts=[tmpfs_node()],
             start_time=f"2026-12-01T10:{rep:02d}:00Z",
             params={"target": "/scratch/mpiwrite", "block_size": 2**20},
             attrs={"mpi_library": "MPICH Version: 5.0.2"})


# The original study as lmdd lines : 8 configurations (Lustre build with its kernel,
# checksums, CPU) x 5 repetitions of `lmdd of=/lustre/f bs=1m time=200 fsync=1`, each
# configuration's lines imported with its tags.  lmdd ran for 200 s, so its MB are the rate
# times 200: with rates to whole MB/s, repeated lines repeat their bytes (an outcome that
# splits the runs like a setting would).
LMDD_RATES = {("1.6.4.3", "off"): 832.0, ("1.6.4.3", "on"): 400.0, ("1.6.5", "off"): 681.0,
              ("1.6.5", "on"): 326.0}
LMDD_KERNELS = {"1.6.4.3": "patched", "1.6.5": "patchless"}


LMDD_DATES = {"1.6.4.3": "2008-06-02", "1.6.5": "2008-07-15"}  # each build on its own day


def lmdd_seed(folder, cli, cwd, seed: int = 32, noise: float = 0.01, command: str =
              "lmdd of=/lustre/f bs=1m time=200 fsync=1", dated: bool = False):
    """Imports the 40 runs into `folder` with `cli` (tests/common.cli); returns the count.
    `command=""`: the lines alone, as a site keeps them (no --command); `dated`: a date tag
    too, each build's own."""
    import os

    rng = np.random.default_rng(seed)
    count = 0
    for (build, csum), mbps in LMDD_RATES.items():
        for cpu, factor in (("xeon", 1.0), ("opteron", 0.92)):
            lines = []
            for _rep in range(5):
                rate = round(mbps * factor * (1 + noise * rng.standard_normal()))
                lines.append(f"{rate * 200:.4f} MB in 200.0000 secs, {rate:.4f} MB/sec")
            text = os.path.join(str(cwd), f"lmdd-{build}-{csum}-{cpu}.txt")
            with open(text, "w") as f:
                f.write("\n".join(lines) + "\n")
            out = cli(["import", "--from", "lmdd"] + (["--command", command] if command
                                                      else [])
                      + ["--results", str(folder), "--tag", f"cpu={cpu}", "--tag",
                         f"kern={LMDD_KERNELS[build]}", "--tag", f"build={build}", "--tag",
                         f"csum={csum}"]
                      + (["--tag", f"date={LMDD_DATES[build]}"] if dated else []) + [text],
                      cwd=cwd)
            assert out.returncode == 0, out.stderr
            count += len(lines)
    return count


def study_records(study_file, mean_of, seed: int = 1, noise: float = 0.02, generation: int = 1,
                  repeat=None, carry=None):
    """The records `study run STUDY_FILE` would leave, without MPI: every point's runs
    (its `repeat`, or `repeat`), tagged as execute.point_tags tags them and with the run
    parameters `run` parses from the point, each of one iteration at `mean_of(point)` MB/s
    times (1 + noise x a normal draw).  With `carry(point, previous point or None)` the runs
    are made in the study's run order, each tagged with its place and the point before it
    (as one launch runs them), its rate times carry's factor.  Returns the number written."""
    if carry is not None:
        return _ordered_records(study_file, mean_of, carry, seed, noise, generation)
    import os

    from mpiwrite.study import execute, resume
    from mpiwrite.study.plan import load
    from mpiwrite.study.points import check

    st = load(str(study_file))
    problems, configs = check(st)
    assert not problems, problems
    keys = resume.point_keys(st, configs)
    rng = np.random.default_rng(seed)
    os.makedirs(st.results, exist_ok=True)
    count = 0
    for i, point in enumerate(st.points()):
        tags = execute.point_tags(st, i, point, keys[i])
        params = json.loads(configs[i].to_json())
        for rep in range(repeat or st.repeat):
            t = dict(tags, study_repeat=str(rep), study_generation=str(generation))
            value = mean_of(point) * (1 + noise * rng.standard_normal())
            make(os.path.join(st.results, f"g{generation}-p{i}-r{rep}.h5"), [value],
                 f"20260101T0000{count:02d}Z-{st.name}-g{generation}-p{i}-r{rep}", tags=t,
                 params=dict(params, tags=t), nodes=int(point.get("nodes", 1)),
                 ranks_per_node=int(point.get("ranks_per_node", 2)),
                 start_time=f"2026-01-01T{count // 60 % 24:02d}:{count % 60:02d}:00Z")
            count += 1
    return count


def _ordered_records(study_file, mean_of, carry, seed, noise, generation):
    import os

    from mpiwrite.study import execute, resume
    from mpiwrite.study.plan import load
    from mpiwrite.study.points import check

    st = load(str(study_file))
    problems, configs = check(st)
    assert not problems, problems
    keys = resume.point_keys(st, configs)
    points = st.points()
    rng = np.random.default_rng(seed)
    os.makedirs(st.results, exist_ok=True)
    before = None
    for seq, (i, rep) in enumerate(st.runs()):
        tags = dict(execute.point_tags(st, i, points[i], keys[i]), study_repeat=str(rep),
                    study_generation=str(generation), study_order=st.order,
                    study_seed=str(st.order_seed()), study_seq=str(seq),
                    study_prev_key=keys[before] if before is not None else "none")
        params = json.loads(configs[i].to_json())
        value = mean_of(points[i]) * carry(points[i], points[before] if before is not None
                                           else None) * (1 + noise * rng.standard_normal())
        make(os.path.join(st.results, f"g{generation}-s{seq}.h5"), [value],
             f"20260101T{seq // 3600 % 24:02d}{seq // 60 % 60:02d}{seq % 60:02d}Z-{st.name}-"
             f"g{generation}-s{seq}", tags=tags, params=dict(params, tags=tags),
             nodes=int(points[i].get("nodes", 1)),
             ranks_per_node=int(points[i].get("ranks_per_node", 2)),
             start_time=f"2026-01-01T{seq // 3600 % 24:02d}:{seq // 60 % 60:02d}:"
                        f"{seq % 60:02d}Z")
        before = i
    return len(st.runs())


if __name__ == "__main__":
    import sys

    folder = sys.argv[1] if len(sys.argv) > 1 else "original-study"
    if sys.argv[2:] == ["explain"]:
        explain_study(folder)
    elif sys.argv[2:] == ["ior-site"]:
        ior_site(folder)
    else:
        original_study(folder)
