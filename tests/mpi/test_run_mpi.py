"""`mpiexec -n N mpiwrite run` end to end: what is on disk, in the record and on screen."""

import json
import os

import numpy as np
import pytest
from common import mpirun, only_record

from mpiwrite.vocab.status import Status


@pytest.mark.mpi
@pytest.mark.parametrize("n", [1, 2, 3, 4, 16])
def test_bytes_on_disk_equal_bytes_recorded(tmp_path, n):
    out = mpirun(n, ["run", "data", "-s", "3M", "-b", "256k", "--keep", "--results", "res",
                     "--progress-interval", "0"], cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    rec = only_record(tmp_path / "res")
    assert rec.status == "complete" and rec.attrs["ranks"] == n
    files = sorted(os.listdir(tmp_path / "data"))
    assert len(files) == n and all(rec.run_id in f for f in files)
    on_disk = sum(os.path.getsize(tmp_path / "data" / f) for f in files)
    assert on_disk == int(rec.ranks["bytes"].sum()) == n * 3 * 2**20
    assert (rec.ranks["fsyncs"] == 1).all()
    assert (rec.ranks["status"] == Status.OK).all()


@pytest.mark.mpi
def test_aggregate_recomputes_from_per_rank_rows(tmp_path):
    out = mpirun(4, ["run", "d", "-s", "8M", "-i", "2", "--results", "r", "--json", "-",
                     "--progress-interval", "0"], cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)  # stdout holds only the JSON
    rec = only_record(tmp_path / "r")
    assert len(rec.iterations) == 2
    for it in rec.iterations:
        rows = rec.ranks[rec.ranks["iteration"] == it["iteration"]]
        span = rows["t_close_end"].max() - rows["t_write_start"].min()
        assert it["aggregate_MB_per_s"] == pytest.approx(rows["bytes"].sum() / span / 1e6)
        per = rows["bytes"] / (rows["t_close_end"] - rows["t_write_start"]) / 1e6
        np.testing.assert_allclose(rows["MB_per_s"], per)
        # fsync only at the end: bytes of ranks still writing were not known to be durable
        assert np.isnan(it["first_done_MB_per_s"]) and it["tail_seconds"] >= 0
    assert doc["status"] == "complete" and doc["record"] == rec.path
    agg = [it["aggregate_MB_per_s"] for it in doc["iterations"]]
    assert doc["summary"]["aggregate"]["mean_MB_per_s"] == pytest.approx(np.mean(agg))
    assert doc["summary"]["aggregate"]["std_MB_per_s"] == pytest.approx(np.std(agg, ddof=1))


@pytest.mark.mpi
def test_screen_shows_header_iterations_summary(tmp_path):
    out = mpirun(3, ["run", "d", "-s", "4M", "-i", "2", "--results", "r", "--tag", "study=x"],
                 cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    text = out.stdout
    for needle in ("ranks 3 on 1 node", "fstype", "aggregate (last done)", "first done",
                   "slowest rank", "tags study=x", "record "):
        assert needle in text, needle
    assert only_record(tmp_path / "r").tags() == {"study": "x"}
    assert not os.path.exists(tmp_path / "d")  # created by the run, emptied and removed


@pytest.mark.mpi
def test_time_limited_run_stops_within_a_block_of_its_limit(tmp_path):
    out = mpirun(2, ["run", "d", "-t", "1s", "-b", "64k", "--no-fsync", "--results", "r",
                     "--progress-interval", "0"], cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    rec = only_record(tmp_path / "r")
    write_time = rec.ranks["t_write_end"] - rec.ranks["t_write_start"]
    assert (write_time >= 1.0).all() and (write_time < 1.0 + 0.1).all()
    assert (rec.ranks["stopped_by_time"] == 1).all()
    assert (rec.ranks["bytes"] % 65536 == 0).all()  # only completed writes count


@pytest.mark.mpi
def test_shared_file_layout_writes_disjoint_segments(tmp_path):
    out = mpirun(4, ["run", "d", "--layout", "shared", "-s", "2M", "-b", "128k", "--keep",
                     "--verify", "--results", "r"], cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    files = os.listdir(tmp_path / "d")
    assert len(files) == 1 and files[0].endswith("-shared.dat")
    assert os.path.getsize(tmp_path / "d" / files[0]) == 4 * 2 * 2**20
    rec = only_record(tmp_path / "r")
    assert rec.iterations["verify_mismatches"][0] == 0
    assert (rec.ranks["verify_bytes"] == 2 * 2**20).all()


@pytest.mark.mpi
def test_samples_cover_the_run(tmp_path):
    out = mpirun(2, ["run", "d", "-t", "1.5s", "--no-fsync", "--sample-interval", "0.25",
                     "--results", "r", "--progress-interval", "0"], cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    rec = only_record(tmp_path / "r")
    for r in (0, 1):
        s = rec.samples[rec.samples["rank"] == r]
        assert len(s) >= 5
        assert np.all(np.diff(s["bytes"]) >= 0)
        assert s["bytes"][-1] == rec.ranks["bytes"][r]


@pytest.mark.mpi
def test_progress_lines_are_plain_when_not_a_terminal(tmp_path):
    out = mpirun(2, ["run", "d", "-t", "2s", "--no-fsync", "--progress-interval", "0.5",
                     "--results", "r"], cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    lines = [ln for ln in out.stdout.splitlines() if "MB/s written" in ln]
    assert len(lines) >= 2 and "\r" not in out.stdout and "\x1b" not in out.stdout


@pytest.mark.mpi
def test_iterations_and_delay(tmp_path):
    out = mpirun(2, ["run", "d", "-s", "1M", "-i", "3", "--delay", "0.3", "--results", "r",
                     "--progress-interval", "0"], cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    rec = only_record(tmp_path / "r")
    assert list(rec.iterations["iteration"]) == [0, 1, 2]
    starts = rec.iterations["t_first_start"]
    assert np.all(np.diff(starts) >= 0.3)


@pytest.mark.mpi
def test_failure_on_one_rank_ends_every_rank(tmp_path):
    """Rank 0 alone has a 32 MiB file-size limit (a real EFBIG from the kernel)."""
    mw = os.path.join(os.path.dirname(os.sys.executable), "mpiwrite")
    args = ["run", "d", "-s", "2G", "--results", "r", "--progress-interval", "0"]
    import subprocess

    from common import MPIEXEC, clean_env

    cmd = [MPIEXEC, "-n", "1", "bash", "-c", f"ulimit -f 32768; exec {mw} " + " ".join(args),
           ":", "-n", "3", mw] + args
    out = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=120,
                         env=clean_env())
    assert out.returncode == 1
    err = out.stderr.strip().splitlines()[-1]
    assert "rank 0 on" in err and "File too large" in err and "-r000000.dat" in err
    rec = only_record(tmp_path / "r")
    assert rec.status == "failed"
    st = rec.ranks["status"]
    assert st[0] == Status.FAILED and (st[1:] == Status.ABORTED).all()
    assert rec.ranks["bytes"][0] == 32 * 2**20
    assert (rec.ranks["bytes"][1:] < 2 * 2**30).all()  # stopped early, not finished
    assert not os.path.exists(tmp_path / "d") or not os.listdir(tmp_path / "d")


@pytest.mark.mpi
@pytest.mark.parametrize("extra,per_file", [([], 1), (["--fsync-every", "3"], 3),
                                            (["--no-fsync"], 0)])
def test_fsync_calls_per_data_file_under_mpiexec(tmp_path, extra, per_file):
    """strace -f -y over the whole job: fsync calls on each rank's data file, nothing else."""
    import re
    import shutil

    if not shutil.which("strace"):
        pytest.skip("strace not installed (apt-get install strace)")
    out = mpirun(2, ["run", "d", "-s", "8M", "-b", "1M", "--no-record",
                     "--progress-interval", "0"] + extra, cwd=tmp_path,
                 pre=["strace", "-f", "-y", "-e", "trace=fsync,fdatasync", "-o",
                      str(tmp_path / "trace")])
    assert out.returncode == 0, out.stderr
    calls = re.findall(r"fsync\(\d+<([^>]*\.dat)>", (tmp_path / "trace").read_text())
    per = {}
    for path in calls:
        per[path] = per.get(path, 0) + 1
    assert sorted(per.values()) == ([per_file] * 2 if per_file else [])


def test_python_dash_m_works(tmp_path):
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "mpiwrite", "--version"], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0 and "mpiwrite" in out.stdout
