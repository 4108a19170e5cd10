"""--netcheck on emulated hosts whose links are limited by tc (tests/testbed/hosts.py): the
node whose link is slow is measured at its link's rate, the others well above it, in about a
second; one node and --no-netcheck take none.  The emulated hosts share one kernel, so MPI
(UCX) would carry their messages through shared memory; the test makes it take TCP, as it does
between real nodes (MPIR_CVAR_NOLOCAL, UCX_TLS=tcp)."""

import time

import pytest
from common import MPIEXEC, cli, only_record, read_record
from test_hosts import launch
from testbed import hosts as hostlib

pytestmark = [pytest.mark.mpi, pytest.mark.slow]
LIMIT = 80e6 / 8 / 1e6  # "80mbit" in MB/s: 10 MB/s
TCP = {"MPIR_CVAR_NOLOCAL": "1", "UCX_TLS": "tcp"}


@pytest.fixture
def three_hosts(tmp_path):
    reason = hostlib.why_not()
    if reason or MPIEXEC is None:
        pytest.skip(f"emulated hosts: {reason or 'no mpiexec'}")
    h = hostlib.Hosts(3, tmp_path)
    with h:
        h.limit(2, "80mbit")
        yield h
    assert h.leftovers() == []


@pytest.mark.timeout(300)
def test_the_node_with_the_slow_link_is_measured_at_its_rate(three_hosts, tmp_path):
    args = ["run", str(tmp_path / "data"), "-s", "1M", "--results", str(tmp_path / "res"),
            "--progress-interval", "0"]
    t0 = time.monotonic()
    out = launch(three_hosts, [(i, 1, TCP, args) for i in range(3)], tmp_path, per_host=1)
    took = time.monotonic() - t0
    assert out.returncode == 0, out.stdout + out.stderr
    rec = only_record(tmp_path / "res")
    got = rec._json("netcheck", None)
    assert got is not None and len(got["nodes"]) == 3 and got["seconds"] < 3.0, got
    from mpiwrite.answers.netcheck import ceilings

    tops = ceilings(rec)
    assert 0.6 * LIMIT < tops[2] < 1.3 * LIMIT, (tops, got)
    assert min(tops[0], tops[1]) > 3 * tops[2], (tops, got)
    assert "network check" in out.stdout
    show = cli(["show", rec.path], cwd=tmp_path).stdout
    assert "network ceiling per node" in show and "h2 " in show
    assert took < 60

    # --no-netcheck: none
    out = launch(three_hosts, [(i, 1, TCP, args + ["--no-netcheck"]) for i in range(3)],
                 tmp_path, per_host=1)
    assert out.returncode == 0, out.stdout + out.stderr
    recs = sorted((tmp_path / "res").glob("*.h5"), key=lambda p: p.stat().st_mtime)
    assert read_record(recs[-1])._json("netcheck", None) is None
    assert "network check" not in out.stdout


def test_one_node_takes_no_network_check(tmp_path):
    got = cli(["run", "d", "-s", "1M", "--results", "r", "--progress-interval", "0"],
              cwd=tmp_path)
    assert got.returncode == 0, got.stderr
    rec = only_record(tmp_path / "r")
    assert rec._json("netcheck", None) is None and "network check" not in got.stdout
