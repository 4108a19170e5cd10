"""The limit verdict (answers/limits.py): its table of evidence, each limit from the figures
that decide it; a real run's verdict in `show`, `report --limits` (table, CSV, JSON) and the
page; records whose evidence is malformed; `tune plan --from` refusing what it cannot use.
The testbeds' known limits (a link, a target, a client's CPU, dirty throttling, the
storage, the writer) are tests/cluster/test_gluster.py and test_waits.py."""

import json
import os
import shutil

import jsonschema
import pytest
from common import ROOT, cli, mpirun, only_record, read_record

from mpiwrite.answers import limits
from mpiwrite.formats import contract
from mpiwrite.vocab import limits as L
from mpiwrite.vocab import waits as W

pytestmark = [pytest.mark.timeout(300)]


def _shares(**given):
    out = {c: 0.0 for c in W.CLASSES}
    out.update({getattr(W, k): v for k, v in given.items()})
    return out


def _verdict(rate=100.0, ceiling=None, local=False, buffered=False, shares=None, samples=50,
             busy=None, own=(None, None), on_slow=(), span=10.0, ranks_cores=None, cores=None):
    return limits._node_verdict(rate, span, ceiling, "measured", local, buffered, shares,
                                samples, busy, own, list(on_slow), "target t1: slow",
                                ranks_cores, cores)


@pytest.mark.parametrize("given,limit,confidence", [
    # above the link: the page cache; at it: the link; well below: not the link
    (dict(rate=300.0, ceiling=100.0, buffered=True), L.CACHE, "high"),
    # a measured ceiling is a floor of the link: 1.5x it is still the link
    (dict(rate=150.0, ceiling=100.0, buffered=True), L.LINK, "high"),
    (dict(rate=95.0, ceiling=100.0), L.LINK, "high"),
    (dict(rate=75.0, ceiling=100.0), L.LINK, "medium"),
    (dict(rate=300.0, ceiling=100.0, local=True, shares=_shares(RUNNING=0.9)), L.WRITER,
     "high"),
    # a slow target before the waits
    (dict(rate=30.0, ceiling=100.0, on_slow=["t1"], shares=_shares(DIRTY=0.9)), L.TARGET,
     "high"),
    (dict(shares=_shares(DIRTY=0.6, RUNNING=0.4)), L.DIRTY, "high"),
    (dict(shares=_shares(DIRTY=0.3, WRITEBACK=0.2, RUNNING=0.5)), L.DIRTY, "medium"),
    (dict(shares=_shares(DIRTY=0.3, WRITEBACK=0.5, RUNNING=0.2)), L.STORAGE, "low"),
    (dict(shares=_shares(RUNNING=0.9), ranks_cores=1.0, cores=4), L.WRITER, "high"),
    (dict(shares=_shares(RUNNING=0.9), ranks_cores=3.9, cores=4), L.CPU, "high"),
    # 4 ranks on 2 cores, each runnable part of the time: their own work fills the cores
    (dict(shares=_shares(RUNNING=0.81), ranks_cores=1.53, cores=2), L.CPU, "high"),
    (dict(shares=_shares(RUNNING=0.81), ranks_cores=1.2, cores=2), L.WRITER, "high"),
    (dict(shares=_shares(FUSE=0.5, RUNNING=0.5), busy=0.99), L.CPU, "high"),
    # busy cores while the writers slept on the storage: the storage (a loaded machine)
    (dict(shares=_shares(WRITEBACK=1.0), busy=0.99), L.STORAGE, "medium"),
    (dict(shares=_shares(FUSE=0.9, RUNNING=0.1), busy=0.99, own=(0.5, 8.0)), L.CPU, "high"),
    (dict(shares=_shares(FUSE=0.9, RUNNING=0.1), own=(0.5, 8.0)), L.CPU, "high"),
    (dict(shares=_shares(FUSE=0.9, RUNNING=0.1), own=(0.5, 3.0)), L.CPU, "medium"),
    # waited less than it ran, or briefly: no CPU limit
    (dict(shares=_shares(FUSE=0.9, RUNNING=0.1), own=(5.0, 4.0)), L.STORAGE, "medium"),
    (dict(shares=_shares(FUSE=0.9, RUNNING=0.1), own=(0.1, 1.0)), L.STORAGE, "medium"),
    (dict(shares=_shares(OTHER=0.8, RUNNING=0.2)), L.NONE, "low"),
    (dict(), L.NONE, "low"),
    # few samples: never high
    (dict(shares=_shares(DIRTY=0.9, RUNNING=0.1), samples=5), L.DIRTY, "medium"),
])
def test_each_limit_from_the_evidence_that_decides_it(given, limit, confidence):
    got = _verdict(**given)
    assert (got["limit"], got["confidence"]) == (limit, confidence), got
    assert got["evidence"]


def test_every_limit_has_advice_and_the_catalogue_names_only_limits():
    from mpiwrite.clients import tunables

    assert set(L.ADVICE) == set(L.LIMITS)
    for part in ("LUSTRE", "CEPH_FUSE", "GLUSTER", "WRITEBACK", "NFS", "BLOCK"):
        for t in getattr(tunables, part).values():
            assert set(t.acts_on) <= set(L.LIMITS), t
    # the question that started mpiwrite: Lustre's checksums act on the client's CPU
    assert L.CPU in tunables.LUSTRE["osc.*.checksums"].acts_on


@pytest.mark.mpi
def test_a_run_names_its_limit_in_show_report_and_the_page(tmp_path):
    shm = "/dev/shm"
    if not os.path.isdir(shm):
        pytest.skip("no /dev/shm")
    target = os.path.join(shm, f"mpiwrite-limits-{os.getpid()}")
    try:
        got = mpirun(1, ["run", target, "-s", "64M", "-i", "2", "--results", "r",
                         "--progress-interval", "0"], cwd=tmp_path)
    finally:
        shutil.rmtree(target, ignore_errors=True)
    assert got.returncode == 0, got.stderr
    rec = only_record(tmp_path / "r")
    verdict = limits.of_record(rec)
    assert verdict["limit"] in L.LIMITS and verdict["nodes"][0]["iterations"].endswith("/2")
    show = cli(["show", rec.path], cwd=tmp_path).stdout
    assert f"limit: {verdict['limit']} ({verdict['confidence']} confidence)" in show, show
    assert "to try:" in show

    table = cli(["report", "r", "--by", "fstype", "--limits"], cwd=tmp_path)
    assert table.returncode == 0, table.stderr
    head, row = table.stdout.splitlines()[:2]
    low = "?" if verdict["confidence"] == "low" else ""
    assert head.split()[-1] == "limit" and row.endswith(f"{verdict['limit']}{low} 1/1"), \
        table.stdout
    doc = json.loads(cli(["report", "r", "--by", "fstype", "--limits", "--format", "json"],
                         cwd=tmp_path).stdout)
    jsonschema.validate(doc, contract.schema("report"))
    (one,) = doc["rows"][0]["limits"]
    assert one["run_id"] == rec.run_id and one["limit"] == verdict["limit"], one
    assert one["evidence"] == verdict["evidence"]
    plain = json.loads(cli(["report", "r", "--by", "fstype", "--format", "json"],
                           cwd=tmp_path).stdout)
    assert "limits" not in plain["rows"][0]  # only when asked
    csv = cli(["report", "r", "--by", "fstype", "--limits", "--format", "csv"], cwd=tmp_path)
    assert csv.stdout.splitlines()[0].endswith(",limit"), csv.stdout

    page = cli(["page", "r", "-o", "p.html"], cwd=tmp_path)
    assert page.returncode == 0, page.stderr
    html = (tmp_path / "p.html").read_text()
    assert f"limit: {verdict['limit']}" in html  # the one run in full, and its column


@pytest.mark.mpi
def test_malformed_evidence_in_a_record_is_left_out_not_trusted(tmp_path):
    got = mpirun(2, ["run", "d", "-s", "8M", "--results", "r", "--progress-interval", "0"],
                 cwd=tmp_path)
    assert got.returncode == 0, got.stderr
    path = only_record(tmp_path / "r").path
    import h5py

    for waits, netcheck in (("not json", "[1, 2"),
                            (json.dumps([{"iteration": 0, "ranks": [
                                {"n": 5, "counts": {"R": 3, "balance_dirty_pages": 9}},
                                {"n": -1, "counts": {}}]}]),
                             json.dumps({"nodes": [{"in": {"1": "fast"}}], "seconds": 1e400}))):
        with h5py.File(path, "r+") as f:
            f.attrs["waits"] = waits
            f.attrs["netcheck"] = netcheck
        rec = read_record(path)
        verdict = limits.of_record(rec)
        # counts that do not add up are no samples: no wait class decides
        assert verdict["limit"] in (L.NONE, L.CPU), verdict
        show = cli(["show", path],
                   cwd=tmp_path)
        assert show.returncode == 0 and "Traceback" not in show.stderr, show.stderr
        assert "limit:" in show.stdout


def test_tune_plan_from_refuses_what_it_cannot_use(tmp_path):
    line = ROOT / "tests" / "fixtures" / "import" / "lmdd-tmpfs.txt"
    (tmp_path / "data").mkdir()
    both = cli(["tune", "plan", "data", "-o", "t.toml", "--from", "x.h5", "--param",
                "vm.dirty_ratio=20,5"], cwd=tmp_path)
    assert both.returncode == 2 and "not both" in both.stderr, both.stderr
    missing = cli(["tune", "plan", "data", "-o", "t.toml", "--from", "x.h5"], cwd=tmp_path)
    assert missing.returncode == 2 and missing.stderr.startswith("mpiwrite: error: --from:"), \
        missing.stderr
    assert missing.stderr.count("\n") == 1
    imported = cli(["import", str(line), "--results", "imp"], cwd=tmp_path)
    assert imported.returncode == 0, imported.stderr
    first = sorted((tmp_path / "imp").glob("*.h5"))[0]  # one record an lmdd line
    got = cli(["tune", "plan", "data", "-o", "t.toml", "--from", str(first)], cwd=tmp_path)
    assert got.returncode == 2 and "no limit verdict" in got.stderr, got.stderr
    assert not (tmp_path / "t.toml").exists()
