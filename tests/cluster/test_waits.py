"""Where the write streams' time went (run/waits.py, answers/waits.py) and the limit verdict
it leads to (answers/limits.py), on storage whose limit is known: a loop disk throttled by
blkio with a small dirty-page limit of its own (a buffered writer is held by the kernel's
dirty throttling, and `tune plan --from` takes the tunables acting on it), the same disk
under O_DIRECT (the writer waits for the device: the storage), and tmpfs (the writer only
runs: the writer)."""

import os

import pytest
from common import MPIEXEC, MPIWRITE, bounded, clean_env, cli, needs_root, only_record
from test_timeline import throttled_disk

from mpiwrite.answers import limits, waits
from mpiwrite.vocab import limits as named
from mpiwrite.vocab import waits as kinds

pytestmark = [pytest.mark.mpi, pytest.mark.timeout(300)]
QUIET = ["--progress-interval", "0"]


def _run(prefix, args, cwd, n=1):
    out = bounded(prefix + [MPIEXEC, "-n", str(n), MPIWRITE, "run"] + args + QUIET, 180,
                  cwd=cwd, env=clean_env())
    assert out.returncode == 0, out.stderr
    return only_record(os.path.join(cwd, "r"))


def _largest(rec):
    shares = [s for s in waits.per_rank(rec, 0) if s is not None]
    assert shares, rec._json("waits", None)
    mean = {c: sum(s[c] for s in shares) / len(shares) for c in kinds.CLASSES}
    assert abs(sum(mean.values()) - 1) < 1e-9
    return max(mean, key=mean.get), mean


@needs_root
def test_a_buffered_writer_held_by_dirty_throttling_and_a_direct_one_by_the_device(tmp_path):
    with throttled_disk(str(tmp_path / "disk"), rate=50 << 20, dirty_bytes=4 << 20,
                        writeback=True) as (mnt, inside):
        (tmp_path / "buffered").mkdir()
        rec = _run(inside, [os.path.join(mnt, "b"), "-s", "64M", "--results", "r"],
                   str(tmp_path / "buffered"), n=2)
        _largest_class, mean = _largest(rec)
        # the writer waits in dirty throttling more than in anything else it waits in (the
        # flusher's writeback throttled too: without, the loop disk's flush was as fast as
        # tmpfs, and in a full suite the writer ran 71% of its samples, held 23%)
        waiting = {c: v for c, v in mean.items() if c != kinds.RUNNING}
        assert max(waiting, key=waiting.get) == kinds.DIRTY and mean[kinds.DIRTY] >= 0.3, mean
        assert "balance_dirty_pages" in waits.channels(rec, 0, kinds.DIRTY)
        show = cli(["show", rec.path], cwd=tmp_path).stdout
        assert "where the write streams' time went" in show and "dirty throttling" in show
        got = limits.of_record(rec)
        print(f"limit: {got['limit']} ({got['confidence']}): {got['evidence']}")
        assert got["limit"] == named.DIRTY and got["differ"] == [], got
        assert "limit: dirty throttling" in show and "balance_dirty_pages" in show
        assert "vm.dirty_ratio" in got["try"] and "scheduler" not in got["try"], got
        # tune plan --from: the factors are the local client's tunables acting on it
        plan = cli(["tune", "plan", mnt, "-o", str(tmp_path / "t.toml"), "--from", rec.path,
                    "--budget", "1h", "--run", "size=1MiB"], cwd=tmp_path)
        assert plan.returncode == 0, plan.stderr
        assert "the run's limit: dirty throttling" in plan.stdout, plan.stdout
        factors = plan.stdout.split("factors:")[-1]
        assert "vm.dirty_ratio" in factors and "nr_requests" not in factors, plan.stdout
        both = cli(["tune", "plan", mnt, "-o", str(tmp_path / "u.toml"), "--from", rec.path,
                    "--param", "vm.dirty_ratio=20,5"], cwd=tmp_path)
        assert both.returncode == 2 and "not both" in both.stderr, both.stderr

        (tmp_path / "direct").mkdir()
        rec = _run(inside, [os.path.join(mnt, "d"), "-s", "32M", "--direct", "--results", "r"],
                   str(tmp_path / "direct"))
        largest, mean = _largest(rec)
        assert largest == kinds.WRITEBACK and mean[kinds.DIRTY] == 0, (mean, rec._json(
            "waits", None))
        got = limits.of_record(rec)
        print(f"limit: {got['limit']} ({got['confidence']}): {got['evidence']}")
        assert got["limit"] == named.STORAGE and "writeback" in got["evidence"], got


def test_a_writer_into_memory_only_runs(tmp_path):
    shm = "/dev/shm"
    if not os.path.isdir(shm) or os.statvfs(shm).f_bavail * os.statvfs(shm).f_frsize < 1 << 30:
        pytest.skip("no tmpfs at /dev/shm with 1 GiB free")
    target = os.path.join(shm, f"mpiwrite-waits-{os.getpid()}")
    try:
        rec = _run([], [target, "-s", "512M", "--results", "r"], str(tmp_path))
    finally:
        bounded(["rm", "-rf", target], 60)
    largest, mean = _largest(rec)
    assert largest == kinds.RUNNING and mean[kinds.RUNNING] > 0.8, mean
    # one rank on a node of several cores: the writer's own copying is the limit (on one
    # core it would be the client's CPU, its cores full)
    got = limits.of_record(rec)
    print(f"limit: {got['limit']} ({got['confidence']}): {got['evidence']}")
    cores = rec.nodes[0].get("cores") or 1
    assert got["limit"] == (named.WRITER if cores > 1 else named.CPU), got
    assert "running" in got["evidence"], got
    tune = cli(["tune", "plan", shm, "-o", str(tmp_path / "t.toml"), "--from", rec.path],
               cwd=tmp_path)
    assert tune.returncode == 2 and "no tunable" in tune.stderr, tune.stderr
