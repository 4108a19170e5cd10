"""Real faults: full disks, read-only mounts, killed/stopped ranks, signals, busy results."""

import json
import os
import pathlib
import signal
import subprocess
import time

import pytest
from common import (
    MPIWRITE,
    clean_env,
    cli,
    is_root,
    mounted,
    mpirun,
    needs_root,
    only_record,
    rank_pids,
    read_record,
    records_in,
    start,
    wait,
    wait_for_bytes,
)

from mpiwrite.vocab.status import Status


@pytest.mark.mpi
@needs_root
def test_disk_fills_mid_run(tmpfs, tmp_path):
    """Each rank's share (80 MiB) is more than the whole 64 MiB disk, so no rank can finish
    before the disk is full, however the ranks are scheduled (with 40 MiB, a rank scheduled
    early could, and was rightly recorded as ok)."""
    t0 = time.monotonic()
    out = mpirun(3, ["run", tmpfs, "-s", "80M", "--allow-fill", "--results", str(tmp_path / "r"),
                     "--progress-interval", "0"], cwd=tmp_path)
    assert time.monotonic() - t0 < 30
    assert out.returncode == 1
    last = out.stderr.strip().splitlines()[-1]
    assert "No space left" in last and "rank " in last and " on " in last and tmpfs in last
    rec = only_record(tmp_path / "r")
    assert rec.status == "failed"
    assert (rec.ranks["status"] != Status.OK).all()
    assert 0 < rec.ranks["bytes"].sum() <= 64 * 2**20
    assert any(e["errno"] == 28 for e in rec.errors)
    assert os.listdir(tmpfs) == []  # every data file removed


@needs_root
def test_read_only_mount_is_refused_before_writing(tmp_path):
    with mounted(tmp_path / "ro", "tmpfs", "ro,size=1m") as mnt:
        out = cli(["run", mnt, "--results", str(tmp_path / "r")], cwd=tmp_path)
        assert out.returncode == 2
        assert "Read-only file system" in out.stderr and len(out.stderr.splitlines()) == 1
        out = cli(["run", os.path.join(mnt, "sub")], cwd=tmp_path)
        assert out.returncode == 2 and "Read-only" in out.stderr


@needs_root
def test_permission_denied_for_another_user(tmp_path):
    setpriv = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    if subprocess.run(setpriv + [MPIWRITE, "--version"], capture_output=True).returncode:
        pytest.skip("the installed mpiwrite is not usable by user nobody")
    import tempfile

    base = tempfile.mkdtemp(prefix="mpiwrite-perm-", dir="/tmp")
    os.chmod(base, 0o755)
    target = os.path.join(base, "rootonly")
    os.mkdir(target, 0o755)
    out = subprocess.run(setpriv + [MPIWRITE, "run", str(target), "--no-record"],
                         capture_output=True, text=True, timeout=60, env=clean_env(),
                         cwd="/")
    assert out.returncode == 2, out.stderr
    assert "Permission denied" in out.stderr and str(target) in out.stderr
    assert os.listdir(target) == []
    hidden = os.path.join(str(tmp_path), "inner")  # tmp_path itself is 0700: not traversable
    out = subprocess.run(setpriv + [MPIWRITE, "run", hidden, "--no-record"], cwd="/",
                         capture_output=True, text=True, timeout=60, env=clean_env())
    assert out.returncode == 2 and "Permission denied" in out.stderr, out.stderr
    import shutil

    shutil.rmtree(base)


@needs_root
def test_direct_on_a_filesystem_that_refuses_it(tmp_path):
    with mounted(tmp_path / "ramfs", "ramfs") as mnt:
        out = cli(["run", mnt, "--direct", "-s", "4M", "--no-record"], cwd=tmp_path)
        assert out.returncode == 2
        assert "--direct" in out.stderr and "ramfs" in out.stderr and "O_DIRECT" in out.stderr
        assert os.listdir(mnt) == []


@pytest.mark.mpi
def test_killed_rank_ends_the_job_and_keeps_earlier_records(tmp_path):
    res = tmp_path / "r"
    assert mpirun(2, ["run", "good", "-s", "2M", "--results", str(res)],
                  cwd=tmp_path).returncode == 0
    good = records_in(res)[0]
    before = pathlib.Path(good).read_bytes()
    proc = start(3, ["run", "victim", "-t", "30", "--no-fsync", "--results", str(res),
                     "--progress-interval", "0"], tmp_path)
    pids = rank_pids(tmp_path, 3)
    wait_for_bytes(tmp_path / "victim", 1)
    os.kill(pids[1], signal.SIGKILL)
    code, _out, _err = wait(proc, 60)
    assert code != 0
    assert pathlib.Path(good).read_bytes() == before and read_record(good).status == "complete"
    for path in records_in(res):
        if path != good:
            assert read_record(path).status != "complete"  # never mistaken for a good run
    assert not [f for f in os.listdir(res) if ".tmp" in f]


@pytest.mark.mpi
@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143),
                                      (signal.SIGQUIT, 131)])  # hydra forwards Ctrl-\\ too
def test_signal_to_the_job_records_interrupted(tmp_path, sig, code):
    proc = start(3, ["run", "d", "-t", "30", "--no-fsync", "--results", "r", "--json", "s.json",
                     "--progress-interval", "0"], tmp_path)
    rank_pids(tmp_path, 3)
    wait_for_bytes(tmp_path / "d", 2**20)
    t0 = time.monotonic()
    proc.send_signal(sig)
    rc, _out, err = wait(proc, 60)
    assert time.monotonic() - t0 < 10
    assert rc == code, err
    rec = only_record(tmp_path / "r")
    assert rec.status == "interrupted"
    assert rec.ranks["bytes"].sum() > 0
    assert (rec.ranks["status"] == Status.INTERRUPTED).any()
    assert json.loads((tmp_path / "s.json").read_text())["status"] == "interrupted"
    assert not os.path.exists(tmp_path / "d") or os.listdir(tmp_path / "d") == []


@pytest.mark.mpi
def test_stopped_rank_is_named_by_the_watchdog(tmp_path):
    proc = start(3, ["run", "d", "-t", "2", "--timeout", "4", "--no-fsync", "--results", "r",
                     "--progress-interval", "0"], tmp_path)
    pids = rank_pids(tmp_path, 3)
    wait_for_bytes(tmp_path / "d", 1)
    os.kill(pids[2], signal.SIGSTOP)
    try:
        rc, _out, err = wait(proc, 60)
    finally:
        try:
            os.kill(pids[2], signal.SIGKILL)  # mpiexec normally has ended it already
        except ProcessLookupError:
            pass
    # MPI_Abort(1) ends the job; with a stopped process in it, the launcher may report the
    # signal it sent that process rather than our 1: non-zero is what can be promised.
    assert rc != 0, err
    assert "rank 2 did not finish within 4s (--timeout)" in err
    rec = only_record(tmp_path / "r")
    assert rec.status == "timeout" and rec.errors[0]["rank"] == 2
    assert not os.path.exists(tmp_path / "d") or os.listdir(tmp_path / "d") == []


@needs_root
def test_results_folder_not_writable_is_found_before_data(tmp_path):
    with mounted(tmp_path / "ro", "tmpfs", "ro,size=1m") as ro:
        out = cli(["run", "d", "--results", ro], cwd=tmp_path)
        assert out.returncode == 2 and "--results" in out.stderr
        assert not os.path.exists(tmp_path / "d")


@pytest.mark.mpi
@needs_root
def test_results_disk_full_at_the_end_still_reports(tmp_path):
    with mounted(tmp_path / "res", "tmpfs", "size=512k") as res:
        proc = start(2, ["run", "d", "-t", "3", "--no-fsync", "--results", str(res), "--json",
                         "-", "--progress-interval", "0"], tmp_path)
        wait_for_bytes(tmp_path / "d", 1)
        subprocess.run(["dd", "if=/dev/zero", f"of={res}/filler", "bs=64k"],
                       capture_output=True)  # fills the results filesystem
        rc, out, err = wait(proc, 60)
        assert rc == 1
        doc = json.loads(out)  # the summary still arrives, as valid JSON
        assert doc["record"] is None and "record not saved" in doc["record_error"]
        assert doc["iterations"][0]["aggregate_MB_per_s"] > 0
        assert "record not saved" in err
        running = records_in(res)
        assert len(running) == 1 and read_record(running[0]).status == "running"


@pytest.mark.mpi
def test_eight_runs_finishing_at_once(tmp_path):
    procs = [start(1, ["run", f"d{i}", "-s", "4M", "--results", "r", "--progress-interval",
                       "0"], tmp_path) for i in range(8)]
    for p in procs:
        assert wait(p, 120)[0] == 0
    found = records_in(tmp_path / "r")
    assert len(found) == 8
    assert all(read_record(p).status == "complete" for p in found)


@pytest.mark.mpi
def test_others_files_are_never_touched(tmp_path):
    target = tmp_path / "shared dir ünïcode"
    target.mkdir()
    theirs = {}
    for name in ("data.bin", "mpiwrite-old-i0-r000000.dat", "notes.txt"):
        (target / name).write_bytes(os.urandom(1000))
        theirs[name] = ((target / name).read_bytes(), os.stat(target / name).st_mtime_ns)
    out = mpirun(2, ["run", str(target), "-s", "2M", "--results", "r"], cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert sorted(os.listdir(target)) == sorted(theirs)
    for name, (data, mtime) in theirs.items():
        assert (target / name).read_bytes() == data
        assert os.stat(target / name).st_mtime_ns == mtime


@pytest.mark.mpi
def test_kept_files_of_earlier_runs_stay(tmp_path):
    assert mpirun(2, ["run", "d", "-s", "1M", "--keep", "--no-record"],
                  cwd=tmp_path).returncode == 0
    kept = sorted(os.listdir(tmp_path / "d"))
    assert len(kept) == 2
    assert mpirun(2, ["run", "d", "-s", "1M", "--no-record"], cwd=tmp_path).returncode == 0
    assert sorted(os.listdir(tmp_path / "d")) == kept


@pytest.mark.mpi
def test_verify_command_finds_one_flipped_byte(tmp_path):
    assert mpirun(2, ["run", "d", "-s", "1M", "-b", "64k", "--keep", "--no-record"],
                  cwd=tmp_path).returncode == 0
    files = sorted(os.listdir(tmp_path / "d"))
    out = cli(["verify", "d"], cwd=tmp_path)
    assert out.returncode == 0 and out.stdout.count(": ok (16 blocks of 65536 bytes)") == 2
    victim = tmp_path / "d" / files[1]
    with open(victim, "r+b") as fh:
        fh.seek(5 * 65536 + 4321)
        b = fh.read(1)
        fh.seek(5 * 65536 + 4321)
        fh.write(bytes([b[0] ^ 0x5A]))
    out = cli(["verify", "d"], cwd=tmp_path)
    assert out.returncode == 1
    bad = [ln for ln in out.stdout.splitlines() if "mismatch" in ln]
    assert len(bad) == 1 and files[1] in bad[0]
    assert f"offset {5 * 65536 + 4321} (block 5)" in bad[0]


@pytest.mark.mpi
def test_verify_shift_reads_another_ranks_data(tmp_path):
    out = mpirun(4, ["run", "d", "-s", "2M", "--verify-shift", "1", "--results", "r",
                     "--progress-interval", "0"], cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    rec = only_record(tmp_path / "r")
    assert rec.params()["verify"] is True
    assert (rec.ranks["verify_bytes"] == 2 * 2**20).all()
    assert (rec.ranks["verify_mismatches"] == 0).all()
    assert rec.iterations["verify_MB_per_s"][0] > 0


def test_root_check():
    assert isinstance(is_root(), bool)
