"""Folders shared with other runs and other people: concurrent runs, and exit 2 that leaves
nothing behind."""

import os
import subprocess

import pytest
from conftest import MPIWRITE, _clean_env, kill_group, mounted, mpirun, needs_root

pytestmark = pytest.mark.mpi


def test_concurrent_runs_share_a_target_that_does_not_exist_yet(tmp_path):
    """The run that made the folder removes it when empty, maybe just before another run's
    ranks create their files in it: they make it again instead of failing."""
    failures = []
    for _round in range(4):
        procs = [subprocess.Popen([MPIWRITE, "run", "shared", "-s", "256k", "-b", "64k",
                                   "--results", f"r{i}", "--progress-interval", "0"],
                                  cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True, env=_clean_env(), start_new_session=True)
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


@needs_root
def test_exit_2_leaves_no_run_folders_and_no_results_folder(tmp_path):
    with mounted(tmp_path / "few", "tmpfs", "size=8m,nr_inodes=4") as few:
        out = mpirun(4, ["run", few, "-s", "256k", "-b", "64k", "--files-per-dir", "1",
                         "--results", os.path.join(few, "r"), "--progress-interval", "0"],
                     cwd=tmp_path, timeout=60)
        assert out.returncode == 2, out.stderr
        assert len(out.stderr.strip().splitlines()) == 1
        assert os.listdir(few) == []  # no run subdirectories, no results folder
