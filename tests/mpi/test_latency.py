"""Per-call latency histograms: the log the write loop fills, and what a run records."""

import json

import numpy as np
import pytest
from common import mpirun, only_record

from mpiwrite.engines import latency


def test_buckets_are_log_scale_with_a_known_grain():
    for seconds in (1e-7, 3e-6, 0.01, 2.5):
        b = latency.buckets([seconds])[0]
        mid = latency.bucket_seconds(b)
        assert abs(np.log2(mid / seconds)) <= 0.5 / latency.SUB + 1e-9  # within half a bucket


def test_fold_turns_readings_into_latencies_less_the_marked_time():
    log = latency.Log(start=10.0)
    readings = [10.001, 10.002, 10.103, 10.104]  # the third includes 0.1 s of fsync
    for i, t in enumerate(readings):
        log.stamps[i] = t
    log.marks.append((2, 0.1))
    log.fold(len(readings))
    assert sum(log.write) == 4 and log.write_max == pytest.approx(0.001, abs=1e-9)
    p = latency.percentiles(log.write, log.write_max)
    assert p["p50"] <= p["max"] == pytest.approx(0.001)


def test_a_mark_at_the_fold_boundary_belongs_to_the_next_reading():
    log = latency.Log(start=0.0)
    for i in range(4):
        log.stamps[i] = (i + 1) * 0.001
    log.marks.append((4, 0.5))  # the fsync after reading 3, before reading 4
    log.fold(4)
    assert log.marks == [(0, 0.5)]
    log.stamps[0] = 0.004 + 0.5 + 0.001
    log.fold(1)
    assert log.write_max == pytest.approx(0.001)


def test_the_write_loop_counts_every_call_across_folds(tmp_path):
    """More blocks than the readings list holds (the loop folds mid-stream), an fsync every
    1,000 blocks and a tail: every write() and fsync() call is in the histograms once."""
    from mpiwrite.engines import posix as writer

    bs, nblocks = 512, 2 * latency.CAPACITY + 1037
    plan = writer.StreamPlan(path=str(tmp_path / "f"), create=True, offset=0,
                             nbytes=nblocks * bs + 100, block_size=bs, fsync_every=1000)
    res = writer.write_stream(plan, bytearray(bs))
    assert not res.failed and res.bytes == nblocks * bs + 100
    assert sum(res.latency.write) == nblocks  # the tail is written outside the loop
    assert sum(res.latency.fsync) == res.fsyncs == nblocks // 1000 + 1
    # every mark was applied to its reading (one for a poll after the last block may remain)
    assert all(i == 0 for i, _ in res.latency.marks)


def test_a_stream_stopped_by_its_time_limit_counts_the_calls_it_made(tmp_path):
    from mpiwrite.engines import posix as writer

    plan = writer.StreamPlan(path=str(tmp_path / "f"), create=True, offset=0, nbytes=None,
                             block_size=512, time_limit=0.1, fsync=False)
    res = writer.write_stream(plan, bytearray(512))
    assert res.stopped_by == "time" and res.blocks > 0
    assert sum(res.latency.write) == res.blocks


def test_percentiles_never_exceed_the_exact_maximum():
    hist = np.zeros(latency.NBUCKETS, dtype=np.int64)
    hist[latency.buckets([0.03])[0]] = 10
    p = latency.percentiles(hist, 0.029)
    assert all(p[k] <= 0.029 for k in ("p50", "p90", "p99", "p999"))


@pytest.mark.mpi
def test_a_run_records_every_write_and_fsync_call(tmp_path):
    """2 ranks x 512 blocks, an fsync every 16 blocks: the node histogram holds 1,024 write
    calls and 64 fsync calls, and the figures are ordered p50 <= p99 <= max."""
    out = mpirun(2, ["run", "d", "-s", "32M", "-b", "64k", "--fsync-every", "16", "--results",
                     "r", "--json", "-", "--progress-interval", "0"], cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    rec = only_record(tmp_path / "r")
    assert len(rec.latency) == 1  # one node, one iteration
    h = rec.latency[0]["histograms"]
    assert sum(h["write"].values()) == 1024 and sum(h["fsync"].values()) == 64
    it = json.loads(out.stdout)["iterations"][0]
    assert 0 < it["write_latency_p50_seconds"] <= it["write_latency_p99_seconds"] \
        <= it["write_latency_max_seconds"]
    assert it["fsync_latency_p50_seconds"] <= it["fsync_latency_max_seconds"]
    r = rec.ranks
    assert (r["write_latency_p99_seconds"] <= r["write_latency_max_seconds"]).all()
    assert np.isfinite(r["fsync_latency_max_seconds"]).all()


@pytest.mark.mpi
def test_the_benchmark_knob_turns_accounting_off(tmp_path):
    out = mpirun(1, ["run", "d", "-s", "4M", "--results", "r", "--progress-interval", "0"],
                 cwd=tmp_path, env={"MPIWRITE_NO_ACCOUNTING": "1"})
    assert out.returncode == 0, out.stderr
    rec = only_record(tmp_path / "r")
    assert rec.latency == [] and np.isnan(rec.ranks["cpu_user_seconds"]).all()


@pytest.mark.mpi
def test_show_prints_latency_cpu_read_and_ior_figures(tmp_path):
    from common import cli

    out = mpirun(2, ["run", "d", "-s", "8M", "-b", "64k", "--fsync-every", "8", "--read",
                     "--read-shift", "1", "--results", "r", "--progress-interval", "0"],
                 cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    rec = only_record(tmp_path / "r")
    text = cli(["show", rec.path], cwd=tmp_path).stdout
    assert "write() p50/p99/max" in text and "fsync() max" in text
    assert "open included (IOR)" in text and "read " in text
    assert "CPU" in text and "busy" in text and "p99 ms" in text


def test_cpu_seconds_are_finer_than_clock_ticks(tmp_path):
    """A stream of a few milliseconds still has CPU seconds above 0 (times() counts 10 ms
    ticks and said 0 for it), and no more than its wall time allows."""
    from mpiwrite.engines import posix as writer

    plan = writer.StreamPlan(path=str(tmp_path / "f"), create=True, offset=0,
                             nbytes=2 * 2**20, block_size=4096, fsync=False)
    res = writer.write_stream(plan, bytearray(4096))
    cpu = res.cpu_user + res.cpu_system
    wall = res.t_close_end - res.t_write_start
    assert 0 < cpu <= 2 * wall + 0.05, (cpu, wall)  # the process's other threads count too


def test_a_fold_mid_stream_is_not_a_write_latency(tmp_path, monkeypatch):
    """The loop folds its readings every CAPACITY blocks; the fold's own time must not land in
    the next write's latency (a slow fold made write_max the fold's, found in review)."""
    import time

    from mpiwrite.engines import posix as writer

    fold = latency.Log.fold

    def slow_fold(self, n):
        fold(self, n)
        time.sleep(0.05)

    monkeypatch.setattr(latency.Log, "fold", slow_fold)
    bs = 512
    plan = writer.StreamPlan(path=str(tmp_path / "f"), create=True, offset=0,
                             nbytes=(latency.CAPACITY + 10) * bs, block_size=bs, fsync=False)
    res = writer.write_stream(plan, bytearray(bs))
    assert sum(res.latency.write) == latency.CAPACITY + 10
    assert res.latency.write_max < 0.04, res.latency.write_max


def test_the_plain_and_the_numpy_fold_give_the_same_histogram():
    """Ranks writing blocks of VECTOR_BELOW or more fold in plain Python (they never load
    numpy); smaller blocks fold with numpy: the same readings make the same histogram."""
    import random

    rng = random.Random(7)
    logs = [latency.Log(start=1.0, vector=v) for v in (False, True)]
    t = 1.0
    for i in range(latency.CAPACITY):
        t += rng.lognormvariate(-12, 3)  # 0.1 us to seconds
        for log in logs:
            log.stamps[i] = t
    for log in logs:
        log.marks.append((5, 1e-3))  # more than that reading's latency: left out as negative
        log.fold(latency.CAPACITY)
    assert logs[0].write == logs[1].write and logs[0].write_max == logs[1].write_max
    assert sum(logs[0].write) < latency.CAPACITY and len(set(logs[0].write)) > 10
