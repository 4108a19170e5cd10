"""What a run says must be true: advice that fits the options given, notes that mean something,
and a verify that says it passed."""

import os
import shutil
import uuid

import pytest
from common import mpirun

QUIET = ["--progress-interval", "0", "--no-record"]
pytestmark = [pytest.mark.mpi, pytest.mark.timeout(120)]


def test_direct_reads_are_not_said_to_come_from_the_page_cache(tmp_path):
    args = ["run", "d", "-s", "4M", "--read", "--read-shift", "0"] + QUIET
    cached = mpirun(2, args, cwd=tmp_path)
    assert cached.returncode == 0, cached.stderr
    assert "page cache may serve" in cached.stderr
    direct = mpirun(2, args + ["--direct"], cwd=tmp_path)
    assert direct.returncode == 0, direct.stderr
    assert "page cache may serve" not in direct.stderr


def test_drop_cache_is_not_advised_to_who_gave_it(tmp_path):
    out = mpirun(2, ["run", "d", "-s", "4M", "--read", "--read-shift", "1", "--drop-cache"]
                 + QUIET, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    said = [ln for ln in out.stderr.splitlines() if "page cache may serve" in ln]
    assert said and "--drop-cache" not in said[0].split("reads (", 1)[1]


def test_a_memory_filesystem_gets_no_busy_cpu_note(tmp_path):
    if not os.path.isdir("/dev/shm"):
        pytest.skip("no /dev/shm")
    target = f"/dev/shm/mpiwrite-test-{uuid.uuid4().hex[:8]}"
    try:
        out = mpirun(4, ["run", target, "-s", "64M", "-i", "2"] + QUIET, cwd=tmp_path)
    finally:
        shutil.rmtree(target, ignore_errors=True)
    assert out.returncode == 0, out.stderr
    assert "client CPU" not in out.stdout + out.stderr


def test_a_verify_that_passes_says_so(tmp_path):
    out = mpirun(2, ["run", "d", "-s", "8M", "--verify"] + QUIET, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    said = [ln for ln in (out.stdout + out.stderr).splitlines() if "verify:" in ln]
    assert len(said) == 1 and "16 blocks" in said[0] and "none mismatched" in said[0]
