"""Folders shared with other runs and other people: concurrent runs, and exit 2 that leaves
nothing behind."""

import os
import subprocess

import pytest
from common import MPIWRITE, clean_env, kill_group, mounted, mpirun, needs_root


def test_concurrent_runs_share_a_target_that_does_not_exist_yet(tmp_path):
    """The run that made the folder removes it when empty, maybe just before another run's
    ranks create their files in it: they make it again instead of failing."""
    failures = []
    for _round in range(4):
        procs = [subprocess.Popen([MPIWRITE, "run", "shared", "-s", "256k", "-b", "64k",
                                   "--results", f"r{i}", "--progress-interval", "0"],
                                  cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True, env=clean_env(), start_new_session=True)
                 for i in range(6)]
        for p in procs:
            try:
                _out, err = p.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                kill_group(p)
                raise AssertionError("a concurrent run hung") from None
            if p.returncode:
                failures.append(err.strip().splitlines()[-1])
    assert failures == []
    left = os.listdir(tmp_path / "shared") if (tmp_path / "shared").exists() else []
    assert left == []  # every run removed its own files


@pytest.mark.mpi
@needs_root
def test_exit_2_leaves_no_run_folders_and_no_results_folder(tmp_path):
    with mounted(tmp_path / "few", "tmpfs", "size=8m,nr_inodes=4") as few:
        out = mpirun(4, ["run", few, "-s", "256k", "-b", "64k", "--files-per-dir", "1",
                         "--results", os.path.join(few, "r"), "--progress-interval", "0"],
                     cwd=tmp_path, timeout=60)
        assert out.returncode == 2, out.stderr
        assert len(out.stderr.strip().splitlines()) == 1
        assert os.listdir(few) == []  # no run subdirectories, no results folder


@pytest.mark.mpi
def test_target_renamed_mid_run_keeps_no_data_and_says_so(tmp_path):
    """Each rank removes its files relative to the folder it opened, wherever it went."""
    from common import MPIEXEC, wait_for_bytes

    proc = subprocess.Popen([MPIEXEC, "-n", "3", MPIWRITE, "run", "d", "-s", "256M", "-b",
                             "64k", "--results", "r", "--progress-interval", "0"],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=clean_env(), start_new_session=True)
    try:
        wait_for_bytes(tmp_path / "d")
        os.rename(tmp_path / "d", tmp_path / "moved")
        _out, err = proc.communicate(timeout=120)
    finally:
        kill_group(proc)
    assert proc.returncode == 0, err
    assert [f for f in os.listdir(tmp_path / "moved") if f.endswith(".dat")] == []
    assert "renamed or removed" in err
