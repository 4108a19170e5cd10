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


def test_show_says_what_verify_checked(tmp_path):
    from common import cli, records_in

    out = mpirun(2, ["run", "d", "-s", "8M", "--verify", "--results", "r",
                     "--progress-interval", "0"], cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    shown = cli(["show", records_in(str(tmp_path / "r"))[0]], cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    said = [ln for ln in shown.stdout.splitlines() if "verified" in ln]
    assert said and "verified 16 blocks (16MiB) at" in said[0] \
        and "none mismatched" in said[0], shown.stdout


@pytest.mark.parametrize("fstype, status, noted", [
    ("ext4", "OK", True), ("ext4", "FAILED", False), ("tmpfs", "OK", False)])
def test_busy_cpu_note_only_for_a_good_iteration_on_a_real_filesystem(fstype, status, noted):
    """The note that client CPUs were saturated, given the ranks' figures: never for a failed
    iteration (its figures mean nothing) nor on a memory filesystem (copying is the work)."""
    import numpy as np

    from mpiwrite.formats import summary
    from mpiwrite.run.config import build
    from mpiwrite.run.console import Console
    from mpiwrite.run.ledger import Ledger
    from mpiwrite.vocab.status import Status

    cfg = build(target="d", size=2**20)
    ledger = Ledger(cfg, ["mpiwrite"], "run", 2, [{"host": "n1"}], np.zeros(2, dtype=int),
                    {"fstype": fstype}, "MPICH", Console(cfg))
    ranks = np.zeros(2, dtype=summary.RANK_DTYPE)
    ranks["rank"] = [0, 1]
    ranks["node_cpu_busy"] = 0.97
    row = np.zeros((), dtype=summary.ITER_DTYPE)
    row["aggregate_MB_per_s"] = row["aggregate_with_open_MB_per_s"] = 100.0
    ledger.figure_notes(0, row, ranks, getattr(Status, status))
    assert any("client CPU 97% busy" in n for n in ledger.notes) is noted, ledger.notes
