"""Runs over several emulated hosts: per-node facts, totals and a scaling study, end to end."""

import importlib.util
import os

import pytest
import sysroots
from common import MPIEXEC, MPIWRITE, bounded, clean_env, cli, only_record, records_in
from testbed import hosts as hostlib

pytestmark = [pytest.mark.mpi, pytest.mark.slow]


@pytest.fixture
def can_emulate():
    reason = hostlib.why_not()
    if reason or MPIEXEC is None:
        pytest.skip(f"emulated hosts: {reason or 'no mpiexec'}")


@pytest.fixture
def three_hosts(tmp_path, can_emulate):
    h = hostlib.Hosts(3, tmp_path)
    with h:
        yield h
    assert h.leftovers() == []


def launch(h, segments, cwd, per_host=2, timeout=180):
    """segments: [(host index, ranks, extra env, args)], hosts filled in order, per_host each."""
    used = sorted({host for host, *_ in segments})
    cmd = h.mpiexec(MPIEXEC) + ["-hosts", ",".join(h.ips[i] for i in used), "-ppn",
                                str(per_host)]
    for i, (_host, n, env, args) in enumerate(segments):
        if i:
            cmd.append(":")
        cmd += ["-n", str(n)]
        for k, v in env.items():
            cmd += ["-env", k, v]
        cmd += [MPIWRITE] + args
    return bounded(cmd, timeout, cwd=cwd, env=clean_env())


def test_three_hosts_two_ranks_each_with_their_own_facts(three_hosts, tmp_path):
    roots = [
        sysroots.make(tmp_path / "r0", sysroots.lustre_165(1)),
        sysroots.make(tmp_path / "r1", sysroots.lustre_165(0)),
        sysroots.make(tmp_path / "r2", sysroots.lustre_1643_patched()),
    ]
    args = ["run", str(tmp_path / "data"), "-s", "4M", "--results", str(tmp_path / "res"),
            "--progress-interval", "0"]
    out = launch(three_hosts, [(i, 2, {"MPIWRITE_SYSROOT": roots[i]}, args) for i in range(3)],
                 tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "ranks 6 on 3 nodes (h0, h1, h2)" in out.stdout
    assert "checksums mixed" in out.stdout
    rec = only_record(tmp_path / "res")
    assert [n["host"] for n in rec.nodes] == ["h0", "h1", "h2"]
    assert list(rec.ranks["node"]) == [0, 0, 1, 1, 2, 2]
    assert [n["lustre"]["checksums"] for n in rec.nodes] == ["on", "off", "on"]
    assert rec.nodes[2]["lustre"]["version"] == "1.6.4.3"
    assert rec.nodes[2]["kernel"].endswith("_lustre.1.6.4.3smp")
    keys = rec.keys()
    assert keys["checksums"] == "mixed" and keys["lustre"] == "mixed" and keys["kernel"] == \
        "mixed"
    for line in ("node h0", "node h1", "node h2"):
        assert line in out.stdout  # per-node totals in the summary
    assert rec.node_clock.shape == (3, 2) and (rec.node_clock[:, 1] >= 0).all()
    show = cli(["show", rec.path], cwd=tmp_path)
    assert "h2" in show.stdout and "1.6.4.3 (patched)" in show.stdout


def test_scaling_study_over_one_two_three_hosts(three_hosts, tmp_path):
    res = tmp_path / "res"
    for nhosts in (1, 2, 3):
        for _rep in range(2):
            args = ["run", str(tmp_path / "data"), "-s", "2M", "--results", str(res),
                    "--progress-interval", "0", "--tag", "study=scale"]
            out = launch(three_hosts, [(i, 2, {}, args) for i in range(nhosts)], tmp_path)
            assert out.returncode == 0, out.stdout + out.stderr
    assert len(records_in(res)) == 6
    rep = cli(["report", str(res), "--by", "nodes", "--format", "csv"], cwd=tmp_path)
    assert rep.returncode == 0, rep.stderr
    rows = rep.stdout.strip().splitlines()[1:]
    assert [r.split(",")[0] for r in rows] == ["1", "2", "3"]
    assert all(r.split(",")[1:3] == ["2", "2"] for r in rows)  # 2 runs, 2 iterations
    png = tmp_path / "scaling.png"
    plot = cli(["plot", "scaling", str(res), "--by", "study", "-o", str(png)], cwd=tmp_path)
    if importlib.util.find_spec("matplotlib") is None:  # the quick start's `test` extra
        assert plot.returncode == 2 and "plot needs matplotlib" in plot.stderr, plot.stderr
        assert not png.exists()
        return
    assert plot.returncode == 0, plot.stderr
    assert os.path.getsize(png) > 10000


def test_disk_full_on_one_host_stops_every_rank(tmp_path, can_emulate):
    """Host h1 sees an 8 MiB tmpfs over the target (its own mount namespace); h0 and h2 the
    shared disk.  Its ranks get a real ENOSPC; all six stop; the message names h1."""
    data = tmp_path / "data"
    data.mkdir()
    with hostlib.Hosts(3, tmp_path, mounts={1: (str(data), "8m")}) as h:
        # 20 s without fsync on the healthy hosts: only the abort can stop them early.
        args = ["run", str(data), "-t", "20", "--no-fsync", "--results",
                str(tmp_path / "res"), "--progress-interval", "0"]
        out = launch(h, [(i, 2, {}, args) for i in range(3)], tmp_path, timeout=120)
    assert h.leftovers() == []
    assert out.returncode == 1, out.stdout + out.stderr
    last = out.stderr.strip().splitlines()[-1]
    assert "on h1" in last and "No space left" in last and str(data) in last
    rec = only_record(tmp_path / "res")
    assert rec.status == "failed"
    failed = {int(r["rank"]) for r in rec.ranks if r["status"] == 1}
    assert failed and failed <= {2, 3}  # only h1's ranks hit the full disk
    assert all(r["status"] == 2 for r in rec.ranks if int(r["rank"]) not in failed)
    assert (rec.ranks["stopped_by_time"] == 0).all()
    assert (rec.ranks["t_write_end"] - rec.ranks["t_write_start"] < 10).all()  # stopped early
    assert os.listdir(data) == []  # the shared disk is clean


def test_verify_shift_fails_when_a_host_cannot_see_the_data(tmp_path, can_emulate):
    """h1 has its own filesystem over the target: its neighbours' data is not there, and
    theirs is not on h1.  --verify-shift 2 reads across hosts; the run must fail."""
    data = tmp_path / "data"
    data.mkdir()
    with hostlib.Hosts(2, tmp_path, mounts={1: (str(data), "64m")}) as h:
        args = ["run", str(data), "-s", "4M", "--verify-shift", "2", "--results",
                str(tmp_path / "res"), "--progress-interval", "0"]
        out = launch(h, [(i, 2, {}, args) for i in range(2)], tmp_path)
    assert out.returncode == 1, out.stdout + out.stderr
    last = out.stderr.strip().splitlines()[-1]
    assert "verify" in last and "No such file" in last
    rec = only_record(tmp_path / "res")
    assert rec.status == "failed"
    assert (rec.ranks["verify_mismatches"] > 0).all()
    assert {e["phase"] for e in rec.errors} == {"verify"}
    assert os.listdir(data) == []



@pytest.mark.timeout(120)
def test_a_second_testbed_never_takes_a_live_ones_names(tmp_path, can_emulate):
    """Two testbeds up at once (a module's fixture and a test's own): the second picks names
    and a subnet nobody uses, and if its bridge's name is taken between picking and making it
    (another process), it picks again instead of failing on `ip link add` (it did once in CI)."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with hostlib.Hosts(2, tmp_path / "a") as first:
        second = hostlib.Hosts(2, tmp_path / "b")
        assert second.bridge != first.bridge and second.subnet != first.subnet
        assert not set(second.ns) & set(first.ns) and not set(second.veth) & set(first.veth)
        second.bridge = first.bridge  # as if another process took it meanwhile
        with second:
            assert second.bridge != first.bridge
            ports = hostlib._ip("link", "show", "master", second.bridge).stdout
            assert all(v in ports for v in second.veth), ports
        assert second.leftovers() == []
        assert sorted(first.leftovers()) == sorted(first.ns + [first.bridge] + first.veth)
    assert first.leftovers() == []
