"""The read phase (--read): every rank reads a file another rank wrote, timed like the writes."""

import json
import os
import subprocess

import numpy as np
import pytest
from common import (
    MPIEXEC,
    MPIWRITE,
    bounded,
    clean_env,
    mounted,
    mpirun,
    needs_root,
    only_record,
)

from mpiwrite.engines.posix import ReadPlan, StreamPlan, read_stream, write_stream
from mpiwrite.formats import summary
from mpiwrite.vocab import pattern
from mpiwrite.vocab.status import Status

QUIET = ["--progress-interval", "0"]


# ----------------------------------------------------------------------------- one stream
def _written(tmp_path, nbytes=5 * 65536 + 1000, bs=65536, key=7, rank=3, it=1):
    buf = pattern.make_buffer(bs, key, rank, it)
    path = str(tmp_path / "f.dat")
    res = write_stream(StreamPlan(path=path, create=True, offset=0, nbytes=nbytes,
                                  block_size=bs), buf)
    assert not res.failed and res.bytes == nbytes
    return path, nbytes, bs


def test_read_stream_reads_and_checks_every_block(tmp_path):
    import mmap

    path, nbytes, bs = _written(tmp_path)
    res = read_stream(ReadPlan(path, 0, nbytes, bs, check=(7, 3, 1)), mmap.mmap(-1, bs))
    assert not res.failed and res.bytes == nbytes and res.mismatches == 0
    assert res.blocks == 6 and res.t_close_end >= res.t_write_start
    with open(path, "r+b") as fh:  # one byte of block 2's body changed
        fh.seek(2 * bs + 100)
        was = fh.read(1)
        fh.seek(2 * bs + 100)
        fh.write(b"\xff" if was != b"\xff" else b"\x00")
    res = read_stream(ReadPlan(path, 0, nbytes, bs, check=(7, 3, 1)), mmap.mmap(-1, bs))
    assert res.mismatches == 1 and res.first.offset == 2 * bs + 100


def test_read_stream_fails_on_a_short_or_missing_file(tmp_path):
    import mmap

    path, nbytes, bs = _written(tmp_path)
    os.truncate(path, nbytes // 2)
    res = read_stream(ReadPlan(path, 0, nbytes, bs), mmap.mmap(-1, bs))
    assert res.failed and res.error_phase == "read" and "short file" in res.error_text
    res = read_stream(ReadPlan(str(tmp_path / "nope"), 0, nbytes, bs), mmap.mmap(-1, bs))
    assert res.failed and res.error_phase == "open" and res.error_errno == 2


# ----------------------------------------------------------------------------- runs
@pytest.mark.mpi
def test_every_rank_reads_the_file_of_the_rank_n_away(tmp_path):
    out = mpirun(3, ["run", "d", "-s", "3M", "-b", "256k", "--results", "r", "--read",
                     "--read-shift", "1", "--verify", "-i", "2", "--json", "-"] + QUIET,
                 cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    rec = only_record(tmp_path / "r")
    for it in (0, 1):
        r = rec.ranks[rec.ranks["iteration"] == it]
        assert r["read_source_rank"].tolist() == [1, 2, 0]
        assert (r["read_bytes"] == r["bytes"][[1, 2, 0]]).all()
        assert (r["read_status"] == Status.OK).all() and (r["verify_mismatches"] == 0).all()
        assert (r["t_read_start"] >= r["t_close_end"].max() - 1e-3).all()  # after the writes
        assert np.isfinite(r["read_MB_per_s"]).all()
    for it in doc["iterations"]:
        assert it["read_bytes"] == 3 * 3 * 2**20 and it["read_aggregate_MB_per_s"] > 0
    assert (rec.samples["phase"] == summary.PHASE_READ).any()
    assert os.listdir(tmp_path / "d") == [] if (tmp_path / "d").exists() else True


@pytest.mark.mpi
def test_default_shift_on_one_node_warns_that_the_cache_may_serve_the_reads(tmp_path):
    out = mpirun(2, ["run", "d", "-s", "1M", "--no-record", "--read"] + QUIET, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    warned = [ln for ln in out.stderr.splitlines() if "--read" in ln]
    assert warned and "read shift 2" in warned[0] and "own file" in warned[0]


@pytest.mark.mpi
@pytest.mark.parametrize("args,option", [
    (["--read-shift", "1"], "--read-shift"), (["--drop-cache"], "--drop-cache"),
    (["--read", "--verify-shift", "1"], "--verify-shift"), (["--read", "--read-shift", "-1"],
                                                           "--read-shift"),
])
def test_read_options_are_checked(tmp_path, args, option):
    out = mpirun(2, ["run", "d", "-s", "1M"] + args + QUIET, cwd=tmp_path, timeout=60)
    assert out.returncode == 2 and option in out.stderr
    assert not (tmp_path / "d").exists()


@pytest.mark.mpi
@needs_root
def test_a_file_no_other_rank_can_see_ends_the_read_phase_collectively(tmp_path):
    """Rank 1 writes into a tmpfs of its own (a node-local target): the rank that reads its
    file finds nothing there, and the run ends with one message naming the read."""
    args = ["run", "d", "-s", "1M", "--results", "r", "--read", "--read-shift", "1"] + QUIET
    (tmp_path / "d").mkdir()
    private = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
               'mount -t tmpfs -o size=16m tmpfs d && exec "$0" "$@"', MPIWRITE] + args
    cmd = [MPIEXEC, "-n", "1", MPIWRITE] + args + [":", "-n", "1"] + private + \
        [":", "-n", "1", MPIWRITE] + args
    out = bounded(cmd, 60, cwd=tmp_path, env=clean_env())
    assert out.returncode == 1, out.stderr
    last = out.stderr.strip().splitlines()[-1]
    assert "read open" in last and "No such file" in last, out.stderr
    rec = only_record(tmp_path / "r")
    assert rec.status == "failed"
    assert (rec.ranks["read_status"] == Status.FAILED).any()
    assert os.listdir(tmp_path / "d") == []


@pytest.mark.mpi
@needs_root
def test_read_phase_on_a_loop_disk_with_drop_cache(tmp_path):
    img, mnt = tmp_path / "img", tmp_path / "disk"
    with mounted(img, "tmpfs", "size=200m"):
        image = str(img / "disk.img")
        subprocess.run(["truncate", "-s", "160m", image], check=True)
        subprocess.run(["mkfs.ext4", "-q", "-F", image], check=True)
        mnt.mkdir()
        subprocess.run(["mount", "-o", "loop", image, str(mnt)], check=True)
        try:
            out = mpirun(3, ["run", str(mnt), "-s", "16M", "--results", "r", "--read",
                             "--read-shift", "1", "--drop-cache", "--verify"] + QUIET,
                         cwd=tmp_path)
            left = os.listdir(mnt)
        finally:
            subprocess.run(["umount", str(mnt)], check=False)
    assert out.returncode == 0, out.stderr
    rec = only_record(tmp_path / "r")
    assert (rec.ranks["read_bytes"] == 16 * 2**20).all()
    assert (rec.ranks["verify_mismatches"] == 0).all()
    assert sorted(left) == ["lost+found"]


@pytest.mark.mpi
def test_report_and_compare_take_the_read_phase_as_a_metric(tmp_path):
    from common import cli

    for tag in ("a", "a", "b", "b"):
        out = mpirun(2, ["run", "d", "-s", "2M", "--results", "r", "--read", "--read-shift",
                         "1", "--tag", f"side={tag}"] + QUIET, cwd=tmp_path)
        assert out.returncode == 0, out.stderr
    rep = cli(["report", "r", "--by", "side", "--metric", "read", "--format", "json"],
              cwd=tmp_path)
    assert rep.returncode == 0, rep.stderr
    rows = json.loads(rep.stdout)["rows"]
    assert len(rows) == 2 and all(r["n"] == 2 and r["mean_MB_per_s"] > 0 for r in rows)
    cmp = cli(["compare", "side=a", "side=b", "--in", "r", "--metric", "read", "--json"],
              cwd=tmp_path)
    assert cmp.returncode == 0, cmp.stderr
    assert json.loads(cmp.stdout)["metric"] == "read"


@pytest.mark.mpi
def test_runs_without_reads_are_no_read_samples_and_null_runs_are_never_pooled(tmp_path):
    from common import cli

    for args in (["--read", "--read-shift", "1"], ["--read", "--read-shift", "1"], []):
        out = mpirun(2, ["run", "d", "-s", "2M", "--results", "r", "--tag", "g=x"] + args
                     + QUIET, cwd=tmp_path)
        assert out.returncode == 0, out.stderr
    rep = cli(["report", "r", "--by", "g", "--metric", "read", "--format", "json"], cwd=tmp_path)
    assert rep.returncode == 0, rep.stderr
    (row,) = json.loads(rep.stdout)["rows"]
    assert row["runs"] == 2  # the run without a read phase is no sample of it
    rec_rates = [r for r in json.loads(rep.stdout)["rows"]]
    assert rec_rates[0]["rank_mean_MB_per_s"] > 0
    out = mpirun(2, ["run", "d", "-s", "2M", "--results", "r", "--tag", "g=x", "--engine",
                     "null"] + QUIET, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    rep = cli(["report", "r", "--by", "g"], cwd=tmp_path)
    assert rep.returncode == 2 and "engine" in rep.stderr  # no I/O is not a measurement
    cmp = cli(["compare", "g=x", "engine=null", "--in", "r"], cwd=tmp_path)
    assert cmp.returncode == 2 and "engine=" in cmp.stderr and "--by" not in cmp.stderr


@pytest.mark.mpi
def test_null_engine_has_nothing_to_verify(tmp_path):
    out = mpirun(2, ["run", "d", "-s", "1M", "--engine", "null", "--read", "--verify"] + QUIET,
                 cwd=tmp_path, timeout=60)
    assert out.returncode == 2 and "--verify" in out.stderr
    # nor anything to read back: a read of nothing is no figure (it recorded 381,161 MB/s)
    out = mpirun(2, ["run", "d", "-s", "1M", "--engine", "null", "--read"] + QUIET,
                 cwd=tmp_path, timeout=60)
    assert out.returncode == 2 and "--read" in out.stderr and "nothing" in out.stderr
    assert not os.path.exists(tmp_path / "results")
