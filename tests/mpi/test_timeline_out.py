"""`mpiwrite timeline RECORD`: a real run's per-rank and per-node bytes and rates over time,
on its common timeline, as CSV and JSON lines, with dates from rank 0's wall clock."""

import csv
import datetime
import io
import json
import os
import time

import numpy as np
import pytest
from common import FIXTURES, cli, mpirun, only_record, records_in

pytestmark = [pytest.mark.mpi, pytest.mark.timeout(180)]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """Two ranks, two iterations, a sample every 20 ms (what the timeline is made of)."""
    d = tmp_path_factory.mktemp("tl")
    before = time.time()
    out = mpirun(2, ["run", str(d / "data"), "-s", "24M", "-b", "64k", "-i", "2",
                     "--fsync-every", "8", "--sample-interval", "0.02", "--results",
                     str(d / "res"), "--progress-interval", "0"], cwd=str(d))
    assert out.returncode == 0, out.stderr
    return d, records_in(str(d / "res"))[0], before, time.time()


def _csv(text):
    return list(csv.DictReader(io.StringIO(text)))


def test_each_ranks_intervals_add_up_to_its_bytes_in_time_order_with_dates(run):
    d, path, before, after = run
    rec = only_record(str(d / "res"))
    # a sixth of the shortest iteration: several intervals a rank however fast the disk is
    span = float(np.min(rec.iterations["t_last_done"] - rec.iterations["t_first_start"]))
    step = max(0.001, span / 6)
    got = cli(["timeline", path, "--interval", f"{step:.6f}s"], cwd=str(d))
    assert got.returncode == 0, got.stderr
    rows = _csv(got.stdout)
    assert list(rows[0]) == ["iteration", "rank", "node", "host", "t_start", "t_end",
                             "time_start", "bytes", "MB_per_s"]
    for it in (0, 1):
        for rank in (0, 1):
            mine = [r for r in rows if r["iteration"] == str(it) and r["rank"] == str(rank)]
            want = rec.ranks[(rec.ranks["iteration"] == it) & (rec.ranks["rank"] == rank)]
            # whole bytes an interval that add up to the rank's exactly
            assert sum(int(r["bytes"]) for r in mine) == int(want["bytes"][0])
            starts = [float(r["t_start"]) for r in mine]
            assert starts == sorted(starts) and len(mine) >= 2
            for a, b in zip(mine, mine[1:]):  # contiguous: each ends where the next starts
                assert float(a["t_end"]) == pytest.approx(float(b["t_start"]), abs=1e-6)
            width = float(mine[0]["t_end"]) - float(mine[0]["t_start"])
            assert float(mine[0]["MB_per_s"]) == pytest.approx(
                int(mine[0]["bytes"]) / width / 1e6, rel=5e-3, abs=1e-3)  # times to 1 us
    # the dates: rank 0's wall clock at the zero of the timeline, plus t
    zero = float(rec.attrs["origin_unix"])
    assert before - 1 <= zero <= after + 1
    for r in rows[:4]:
        stamp = datetime.datetime.strptime(r["time_start"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(
            tzinfo=datetime.timezone.utc).timestamp()
        assert stamp == pytest.approx(zero + float(r["t_start"]), abs=0.002)


def test_by_node_is_the_sum_of_its_ranks_and_jsonl_is_one_object_a_line(run):
    d, path, _b, _a = run
    ranks = _csv(cli(["timeline", path, "--interval", "0.05s"], cwd=str(d)).stdout)
    got = cli(["timeline", path, "--by", "node", "--format", "jsonl", "--interval", "0.05s"],
              cwd=str(d))
    assert got.returncode == 0, got.stderr
    nodes = [json.loads(line) for line in got.stdout.splitlines()]
    assert nodes and all(n["ranks"] == 2 and n["node"] == 0 for n in nodes)
    for n in nodes:
        same = [r for r in ranks if r["iteration"] == str(n["iteration"])
                and float(r["t_start"]) == pytest.approx(n["t_start"], abs=1e-6)]
        assert len(same) == 2 and n["bytes"] == pytest.approx(
            sum(int(r["bytes"]) for r in same), abs=2)
    # the default interval is the run's --sample-interval (0.02 s)
    default = _csv(cli(["timeline", path], cwd=str(d)).stdout)
    widths = [float(r["t_end"]) - float(r["t_start"]) for r in default]
    assert np.median(widths) == pytest.approx(0.02, abs=1e-6)


@pytest.mark.parametrize("args, says", [
    (["--interval", "0"], "--interval: '0' must be from 1ms to 1 day"),
    (["--interval", "nan"], "--interval"),
    (["--iteration", "7"], "--iteration: 7 is not one of the record's iterations (0, 1)"),
    (["--by", "host"], "Invalid value for '--by'"),
])
def test_bad_input_is_one_line_and_exit_2(run, args, says):
    d, path, _b, _a = run
    got = cli(["timeline", path] + args, cwd=str(d))
    assert got.returncode == 2 and says in got.stderr, got.stderr
    assert got.stdout == "" and got.stderr.count("\n") == 1, got.stderr


def test_an_imported_run_has_no_samples_and_a_planted_link_is_never_written(run, tmp_path):
    d, path, _b, _a = run
    imp = tmp_path / "imp"
    got = cli(["import", str(FIXTURES / "import" / "fpp-write-i2.txt"), "--results", str(imp)],
              cwd=str(tmp_path))
    assert got.returncode == 0, got.stderr
    got = cli(["timeline", records_in(str(imp))[0]], cwd=str(tmp_path))
    assert got.returncode == 2 and "holds no throughput samples" in got.stderr, got.stderr
    victim = tmp_path / "victim"
    victim.write_text("theirs")
    os.symlink(victim, tmp_path / "out.csv")
    got = cli(["timeline", path, "-o", str(tmp_path / "out.csv")], cwd=str(tmp_path))
    assert got.returncode != 0 and victim.read_text() == "theirs", got.stderr
    fresh = tmp_path / "fresh.csv"
    got = cli(["timeline", path, "-o", str(fresh)], cwd=str(tmp_path))
    assert got.returncode == 0 and fresh.read_text().startswith("iteration,rank,")


def test_a_16_rank_run_has_one_row_per_rank_per_interval_summing_to_the_record(tmp_path):
    """`timeline` of a 16-rank run (oversubscribed on this machine)
    writes one row per rank per interval, and its bytes add up to each rank's and to each
    iteration's bytes in the record, exactly; by node, one row per interval with all 16."""
    out = mpirun(16, ["run", str(tmp_path / "data"), "-s", "4M", "-b", "64k", "-i", "2",
                      "--fsync-every", "8", "--sample-interval", "0.02", "--results",
                      str(tmp_path / "res"), "--progress-interval", "0"], cwd=str(tmp_path),
                 timeout=170)
    assert out.returncode == 0, out.stderr
    rec = only_record(str(tmp_path / "res"))
    path = records_in(str(tmp_path / "res"))[0]
    assert rec.attrs["ranks"] == 16
    got = cli(["timeline", path, "--interval", "0.01s"], cwd=str(tmp_path))
    assert got.returncode == 0, got.stderr
    rows = _csv(got.stdout)
    for it in (0, 1):
        mine = [r for r in rows if r["iteration"] == str(it)]
        intervals = sorted({(float(r["t_start"]), float(r["t_end"])) for r in mine})
        assert len(intervals) >= 2
        for span in intervals:  # every rank once in every interval, none twice
            at = [int(r["rank"]) for r in mine
                  if (float(r["t_start"]), float(r["t_end"])) == span]
            assert sorted(at) == list(range(16)), (it, span, at)
        assert len(mine) == 16 * len(intervals)
        want = rec.ranks[rec.ranks["iteration"] == it]
        for rank in range(16):
            got_bytes = sum(int(r["bytes"]) for r in mine if r["rank"] == str(rank))
            assert got_bytes == int(want["bytes"][want["rank"] == rank][0]) == 4 * 2**20
        total = int(rec.iterations["bytes"][rec.iterations["iteration"] == it][0])
        assert sum(int(r["bytes"]) for r in mine) == total == 16 * 4 * 2**20
    nodes = _csv(cli(["timeline", path, "--interval", "0.01s", "--by", "node"],
                     cwd=str(tmp_path)).stdout)
    assert nodes and all(n["ranks"] == "16" for n in nodes)
    assert sum(int(n["bytes"]) for n in nodes) == int(rec.iterations["bytes"].sum())
