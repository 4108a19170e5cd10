"""mpiwrite on a real CephFS: three emulated hosts, each with its own ceph-fuse client.

One testbed for the module (the testbed's "ceph": tests/testbed/ceph.py): one mon, one OSD
(bluestore on a sparse file), one MDS, a mgr; each host mounts with `ceph-fuse --id hN` and
has its own admin socket.  The links are not limited: the machine's two cores decide the
figures, so no test asserts a rate, only what the client did (its facts, its counters) and
which way an A/B goes.
"""

import json
import os
import shutil

import pytest
import testbed
from common import MPIWRITE, bounded, clean_env, cli, only_record, read_record, records_in
from testbed import ceph as cephlib
from testbed import hosts as hostlib

from mpiwrite.clients import fuse as fs_fuse
from mpiwrite.clients.common import command
from mpiwrite.sysroot import Reader

pytestmark = [pytest.mark.slow, pytest.mark.root, pytest.mark.timeout(300)]

HOSTS = 3
PER_HOST = testbed.PER_HOST
DEFAULT_MAX_DIRTY = "104857600"  # client_oc_max_dirty, Ceph's default (100 MiB)

bed = testbed.fixture("ceph", hosts=HOSTS)


def test_testbed_removes_itself_when_it_cannot_start(tmp_path):
    """A filesystem name the mon refuses: `ceph fs new` fails with the mon and the OSD
    already running; __enter__ raises naming it, and nothing stays (no daemon, namespace,
    link, file in the machine's Ceph folders, block file); runs first, before the module's
    testbed exists."""
    reason = cephlib.why_not()
    if reason:
        pytest.skip(f"ceph testbed: {reason}")
    with hostlib.Hosts(1, tmp_path, persistent=True) as h:
        c = cephlib.Ceph(h, tmp_path, fs="bad/name", timeout=30)
        try:
            with pytest.raises(RuntimeError, match="ceph fs new bad/name .*invalid chars"):
                c.__enter__()
        finally:
            c.__exit__()  # a no-op when __enter__ cleaned up, as it should
        assert set(c.stopped) == {"mon.a", "osd.0"}  # it got that far
        assert c.leftovers() == []
        assert not os.path.exists(os.path.join(c.top, "osd", "ceph-0", "block"))
    assert h.leftovers() == []


def _env(bed, i):
    out = bed.h.run(i, f"{MPIWRITE} env --json {bed.mount}", timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_each_host_records_its_own_client_from_its_admin_socket(bed):
    """`mpiwrite env` on every host: the daemon is that host's own ceph-fuse (not another
    host's with the same command line, not mpiwrite), and what its admin socket says agrees
    with the `ceph --admin-daemon` CLI; a setting changed through one host's socket shows in
    that host's facts only."""
    c = bed.fs
    reader = Reader("/")
    installed = fs_fuse.parse_version(command(reader, ["ceph-fuse", "--version"], "v"))
    for i in range(HOSTS):
        f = _env(bed, i)
        cl = f["client"]
        assert cl["daemon"]["pid"] == c.fuse_pids[i], (i, cl["daemon"])
        assert cl["daemon"]["name"] == "ceph-fuse"
        assert cl["admin_socket"] == c.asok(i)
        assert cl["admin_socket_source"] == "the socket the daemon listens on"
        assert cl["version"] == installed and cl["client"] == f"ceph {installed}"
        assert cl["version_source"] == "admin socket (the running ceph-fuse)"
        assert cl["entity"] == f"client.h{i}" and cl["fs_name"] == c.fs
        assert cl["global_id"] == c.client_admin(i, "status")["id"]
        assert cl["config"]["client_oc_max_dirty"] == DEFAULT_MAX_DIRTY
        assert cl["config"]["client_oc_size"] == \
            c.client_admin(i, "config", "get", "client_oc_size")["client_oc_size"]
        assert cl["config"]["client_mount_timeout"] == "30"  # changed in the testbed's conf
        assert not any(k.startswith("ceph.") for k in f["unknown"]), f["unknown"]
        assert "keyring" not in json.dumps(cl["config"])
    c.set_client(1, "client_oc_max_dirty", 0)
    try:
        assert _env(bed, 1)["client"]["config"]["client_oc_max_dirty"] == "0"
        assert _env(bed, 0)["client"]["config"]["client_oc_max_dirty"] == DEFAULT_MAX_DIRTY
    finally:
        c.set_client(1, "client_oc_max_dirty", DEFAULT_MAX_DIRTY)
    text = bed.h.run(2, f"{MPIWRITE} env {bed.mount}", timeout=60).stdout
    assert f"client         ceph {installed}" in text
    assert f"daemon ceph-fuse pid {c.fuse_pids[2]}" in text and "client.h2 (global id" in text
    assert f"client_oc_max_dirty={DEFAULT_MAX_DIRTY}" in text


def _run(bed, name, res, size="32M", *extra, timeout=180):
    args = ["run", bed.target(name), "-s", size, "--results", res, "--progress-interval", "0",
            *extra]
    out, doc = bed.run(HOSTS, args, timeout=timeout)
    assert out.returncode == 0, out.stdout + out.stderr
    return doc


@pytest.mark.mpi
def test_three_host_run_records_client_facts_and_counters(bed):
    """3 hosts x 2 ranks x 32 MiB through the hosts' mpiexec wrapper: every node's facts name
    its own client, and its counters say it sent the bytes its ranks wrote to the OSD
    (op_send_bytes: the fsync at the end flushes the object cacher; nothing else writes),
    through the cache, in OSD write ops of up to an object (4 MiB)."""
    res = os.path.join(bed.folder, "three")
    _run(bed, "three", res)
    rec = only_record(res)
    per_node = PER_HOST * 32 * 2**20
    hosts = [n["host"] for n in rec.nodes]
    assert sorted(hosts) == ["h0", "h1", "h2"]
    for n in rec.nodes:
        cl = n["client"]
        i = int(n["host"][1:])
        assert cl["daemon"]["pid"] == bed.fs.fuse_pids[i]  # from the ranks' copied namespace
        assert cl["entity"] == f"client.{n['host']}" and cl["version"]
        assert cl["config"]["client_oc_max_dirty"] == DEFAULT_MAX_DIRTY
    assert rec.keys()["client"].startswith("ceph ")
    rows = rec.client_counters
    assert sorted(r["node"] for r in rows) == [0, 1, 2] and all(r["iteration"] == 0
                                                                for r in rows)
    for r in rows:
        d = r["delta"]
        assert d["kind"] == "ceph", d
        assert per_node <= d["write_bytes"] <= per_node + 4 * 2**20, d
        assert r["write_bytes"] == d["objecter"]["op_send_bytes"]
        assert d["objectcacher"]["data_written"] >= per_node
        assert d["objectcacher"]["data_flushed"] >= per_node
        assert per_node / (4 * 2**20) <= d["write_rpcs"] <= per_node / 2**17, d
        assert d["client"]["fsync"]["avgcount"] >= PER_HOST
        assert d["client"]["wrlat"]["avgcount"] >= per_node / 2**20  # FUSE splits 1 MiB writes
        assert 0 < r["seconds"] < 120
        # the node's own ceph-fuse (all its threads) did work the ranks' CPU never shows
        pid = bed.fs.fuse_pids[int(hosts[r["node"]][1:])]
        own = d["client_cpu"]["processes"]
        assert list(own) == [f"{pid} ceph-fuse"] and own[f"{pid} ceph-fuse"] > 0, d
    show = cli(["show", rec.path], cwd=bed.folder)
    assert show.returncode == 0, show.stderr
    assert show.stdout.count("ceph: sent 64MiB in ") == HOSTS, show.stdout
    line, = [ln for ln in show.stdout.splitlines() if "s/GB: ranks" in ln]
    assert line.endswith("(ceph-fuse)"), line


@pytest.mark.mpi
def test_a_buffered_run_above_the_link_is_named_the_page_cache(bed):
    """Every host's link at 80 Mbit/s (10 MB/s), one rank a host, MPI over the links
    (testbed.TCP, so the network check measures them), 24 MiB a rank without fsync: ceph-fuse's
    object cacher holds up to 100 MiB dirty, so the writes end far faster than the link
    carries them, and the verdict is the page cache (the client's), on every node."""
    from mpiwrite.answers import limits

    res = os.path.join(bed.folder, "cache")
    for i in range(HOSTS):
        bed.h.limit(i, "80mbit")
    try:
        out, _doc = bed.run(HOSTS, ["run", bed.target("cache"), "-s", "24M", "--no-fsync",
                                    "--results", res, "--progress-interval", "0"],
                            timeout=180, per_host=1, env=testbed.TCP)
    finally:
        for i in range(HOSTS):
            bed.h.limit(i, None)
    assert out.returncode == 0, out.stdout + out.stderr
    rec = only_record(res)
    got = limits.of_record(rec)
    print(f"limit: {got['limit']} ({got['confidence']}): {got['evidence']}")
    assert got["limit"] == "page cache" and got["differ"] == [], got
    for node in got["nodes"]:
        assert node["MB_per_s"] > 1.15 * node["ceiling_MB_per_s"], got
        assert node["ceiling_MB_per_s"] < 15, got  # the link's, measured over TCP
    show = cli(["show", rec.path], cwd=bed.folder).stdout
    assert "limit: page cache" in show and "did not all leave the node" in show
    bed.h.run(0, f"rm -rf {bed.target('cache')}", timeout=60)


def _set_everywhere(bed, value):
    for i in range(HOSTS):
        bed.fs.set_client(i, "client_oc_max_dirty", value)


@pytest.mark.mpi
def test_client_oc_max_dirty_ab_with_compare(bed):
    """Ceph's write-back cache against write-through (client_oc_max_dirty 0, set through
    every host's admin socket), alternating, 2 runs x 2 iterations each side, 32 MiB a rank:
    `compare` names the option as what differs, and what the client did differently (OSD
    write ops of whole objects against one per FUSE write; the time a write() spends in
    ceph-fuse).  Write-through is slower; by how much is the machine's business."""
    from mpiwrite.clients import ceph_fuse

    res = os.path.join(bed.folder, "ab")
    try:
        for _rep in range(2):
            for value in (DEFAULT_MAX_DIRTY, "0"):
                _set_everywhere(bed, value)
                _run(bed, "ab", res, "32M", "-i", "2", "--delay", "0",
                     "--tag", f"oc={'default' if value != '0' else 'writethrough'}")
    finally:
        _set_everywhere(bed, DEFAULT_MAX_DIRTY)
    assert len(records_in(res)) == 4
    out = cli(["compare", "oc=default", "oc=writethrough", "--in", res, "--json"],
              cwd=bed.folder)
    assert out.returncode == 0, out.stdout + out.stderr
    verdict = json.loads(out.stdout)
    diff = verdict["differing_facts"]
    print(json.dumps({k: verdict[k] for k in ("change_pct", "p_value", "verdict")}),
          json.dumps(diff))
    assert diff["client.config.client_oc_max_dirty"] == {"a": [DEFAULT_MAX_DIRTY], "b": ["0"]}
    size = diff[ceph_fuse.OP_SIZE]
    assert float(size["a"][0]) > 4 * float(size["b"][0]), size  # MiBs against 128 KiB
    assert float(size["b"][0]) <= 2**17 + 1
    assert ceph_fuse.WRLAT in diff
    assert verdict["b"]["mean_MB_per_s"] < verdict["a"]["mean_MB_per_s"]
    text = cli(["compare", "oc=default", "oc=writethrough", "--in", res], cwd=bed.folder)
    assert f"client.config.client_oc_max_dirty: {DEFAULT_MAX_DIRTY} -> 0" in text.stdout
    bed.h.run(0, f"rm -rf {bed.target('ab')}", timeout=60)


def test_why_not_names_what_is_missing(monkeypatch):
    """Where a Ceph program is missing, the tests skip with the packages to install."""
    real = shutil.which
    monkeypatch.setattr(shutil, "which", lambda t: None if t == "ceph-mds" else real(t))
    if hostlib.why_not():
        pytest.skip(hostlib.why_not())
    reason = cephlib.why_not()
    if not os.path.exists("/dev/fuse"):
        assert reason == "no /dev/fuse"
        return
    # the first missing program is named (ceph-mds, or one before it where Ceph is absent),
    # always with every package to install
    first = next(t for t in cephlib.TOOLS if t == "ceph-mds" or not real(t))
    assert reason.startswith(f"{first} not installed (apt-get install ceph-mon "), reason


OC_SETTING = """#!/bin/bash
# occ get | occ set VALUE: this host's ceph-fuse client_oc_max_dirty, through its own admin
# socket (the host's name is its client id), as a study's [[setting]] runs it on each node
sock={top}/run/ceph-client.$(hostname).asok
if [ "$1" = get ]; then
  ceph -c {conf} --admin-daemon "$sock" config get client_oc_max_dirty |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["client_oc_max_dirty"])'
else
  ceph -c {conf} --admin-daemon "$sock" config set client_oc_max_dirty "$2"
fi
"""


@pytest.mark.mpi
def test_client_oc_max_dirty_as_a_study_setting_axis(bed):
    """The A/B above as a study: a [[setting]] axis applied by one rank per host through its
    admin socket before each point, 2 repetitions interleaved, one launch over 3 hosts.  Each
    record's client facts show the value its point set, `compare` and `explain` name
    client_oc_max_dirty, and the default is back on every host at the end."""
    occ = os.path.join(bed.folder, "occ")
    with open(occ, "w") as fh:
        fh.write(OC_SETTING.format(top=bed.fs.top, conf=bed.fs.conf))
    os.chmod(occ, 0o755)
    res = os.path.join(bed.folder, "study-oc")
    study = os.path.join(bed.folder, "oc.toml")
    with open(study, "w") as fh:
        fh.write(f"""
[study]
name = "oc"
target = "{bed.target('study-oc')}"
results = "{res}"
repeat = 2

[run]
size = "32MiB"
progress_interval = 0

[[setting]]
name = "client_oc_max_dirty"
values = ["{DEFAULT_MAX_DIRTY}", "0"]
set = "{occ} set {{value}}"
get = "{occ} get"
""")
    try:
        out = bounded(bed.command(HOSTS, ["study", "run", study]), 240, cwd=bed.folder,
                      env=clean_env())
        assert out.returncode == 0, out.stdout[-3000:] + out.stderr
    finally:
        _set_everywhere(bed, DEFAULT_MAX_DIRTY)
    recs = [read_record(p) for p in records_in(res)]
    assert len(recs) == 4 and all(r.status == "complete" for r in recs)
    for rec in recs:
        value = rec.tags()["setting.client_oc_max_dirty"]
        assert sorted(n["host"] for n in rec.nodes) == ["h0", "h1", "h2"]
        assert {n["client"]["config"]["client_oc_max_dirty"] for n in rec.nodes} == {value}
    for i in range(HOSTS):  # `get` read the default before the study; restored after it
        got = bed.fs.client_admin(i, "config", "get", "client_oc_max_dirty")
        assert got["client_oc_max_dirty"] == DEFAULT_MAX_DIRTY
    cmp = cli(["compare", f"setting.client_oc_max_dirty={DEFAULT_MAX_DIRTY}",
               "setting.client_oc_max_dirty=0", "--in", res, "--json"], cwd=bed.folder)
    assert cmp.returncode == 0, cmp.stdout + cmp.stderr
    diff = json.loads(cmp.stdout)["differing_facts"]
    assert diff["client.config.client_oc_max_dirty"] == {"a": [DEFAULT_MAX_DIRTY], "b": ["0"]}
    exp = cli(["explain", res, "--format", "json"], cwd=bed.folder)
    assert exp.returncode == 0, exp.stderr
    factors = json.loads(exp.stdout)["factors"]
    named = [k for f in factors for k in f["keys"]]
    assert "setting.client_oc_max_dirty" in named or \
        "client.config.client_oc_max_dirty" in named, factors
    report = cli(["study", "report", study], cwd=bed.folder)
    assert report.returncode == 0 and "client_oc_max_dirty 0 vs" in report.stdout, \
        report.stdout + report.stderr
    bed.h.run(0, f"rm -rf {bed.target('study-oc')}", timeout=60)


TUNED = {"client_oc_max_dirty": (DEFAULT_MAX_DIRTY, "0"),  # write-through: half the rate
         "client_oc_max_dirty_age": ("5", "1"),  # these two do not matter for 32 MiB a rank
         "client_oc_target_dirty": ("8388608", "67108864")}


@pytest.mark.mpi
@pytest.mark.timeout(900)
def test_tune_from_the_mount_ranks_client_oc_max_dirty_first_and_restores(bed):
    """`tune list` shows the ceph-fuse tunables with the values each host's admin socket
    gives; `tune plan` over client_oc_max_dirty (0 against the default) and two tunables that
    do not matter here writes a study that runs in one launch on 3 hosts, each record holding
    the asked values as seen before and after on every node; `tune report` ranks
    client_oc_max_dirty first, a real loss, the others far smaller; all is back after."""
    target = bed.target("tune")
    bed.h.run(0, f"mkdir -p {target}", timeout=30)
    for i in (0, HOSTS - 1):
        out = bed.h.run(i, f"{MPIWRITE} tune list {target} --format json", timeout=60)
        assert out.returncode == 0, out.stderr
        rows = {r["name"]: r for r in json.loads(out.stdout)}
        for name in ("client_oc_max_dirty", "client_oc_size", "client_oc_target_dirty",
                     "client_oc_max_dirty_age"):
            asked = bed.fs.client_admin(i, "config", "get", name)[name]  # 5.000000: 5
            assert float(rows[name]["value"]) == float(asked) and rows[name]["scope"] == "node"
            assert rows[name]["candidates"] and "admin socket" in rows[name]["how"]
    study, res = os.path.join(bed.folder, "tune.toml"), os.path.join(bed.folder, "tune-res")
    params = [f"--param={n}={a},{b}" for n, (a, b) in TUNED.items()]
    out = bed.h.run(0, f"{MPIWRITE} tune plan {target} -o {study} {' '.join(params)} "
                       f"--budget 110s --rate 30 --run size=32MiB --run progress_interval=0 "
                       f"--results {res}", timeout=60)
    assert out.returncode == 0, out.stderr
    try:
        run = bounded(bed.command(HOSTS, ["study", "run", study]), 600, cwd=bed.folder,
                      env=clean_env())
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr
        assert "warning" not in run.stdout + run.stderr, run.stdout[-3000:] + run.stderr
        after = {i: {n: float(bed.fs.client_admin(i, "config", "get", n)[n]) for n in TUNED}
                 for i in range(HOSTS)}
    finally:  # whatever happened, the next test finds the defaults
        for i in range(HOSTS):
            for name, (default, _) in TUNED.items():
                bed.fs.client_admin(i, "config", "set", name, default)
    recs = [read_record(p) for p in records_in(res)]
    assert len(recs) >= 12 and all(r.status == "complete" for r in recs)
    for rec in recs:
        assert sorted(c["node"] for c in rec.client_counters) == list(range(HOSTS))
        for c in rec.client_counters:
            s = c["delta"]["settings"]
            assert s["asked"] == s["before"] == s["after"], s
            assert s["asked"]["client_oc_max_dirty"] == rec.tags()[
                "setting.client_oc_max_dirty"]
    # at the default 95%: with 8 runs, 3 factors and the blocks the fit keeps 3 degrees of
    # freedom, and Holm's correction over the 3 factors at 99% asks t > 10; 8 runs left the
    # factor that matters within noise once on an idle machine here (-60%, CI to +32%), and
    # another factor at +40% beside it in a loaded suite: the budget buys 12 runs
    rep = cli(["tune", "report", study, "--format", "json"], cwd=bed.folder)
    assert rep.returncode == 0, rep.stderr
    got = json.loads(rep.stdout)
    said = json.dumps(got["factors"])
    first, *others = got["factors"]
    # ranked first, the loss it is; "real" on a quiet machine (twice here, -61% and -84%),
    # within noise under a loaded suite (three factors and their carry-over leave 12 runs
    # few degrees of freedom): never a confident wrong answer either way
    assert first["name"] == "client_oc_max_dirty" and first["effect_percent"] < -25, said
    assert first["verdict"] in ("real", "within noise"), said
    assert not [f for f in others if f["verdict"] == "real"], said
    # the others ranked below it and (above) never called real; their point estimates are
    # not held to a size: under a loaded suite an idle one came out at +31%, CI -16% to
    # +106%, within noise, as the tool said.  The budget buys 3 rounds of the 4 points (12
    # runs; --rate fixes the estimate, which a 16 MiB probe of the FUSE mount made vary from
    # run to run): write-through halves the rate
    for f in others:
        assert abs(f["effect_percent"]) < abs(first["effect_percent"]), said
    assert got["recommended"]["client_oc_max_dirty"] == DEFAULT_MAX_DIRTY
    # what the study found before it began was back on every host when it ended
    assert after == {i: {n: float(default) for n, (default, _) in TUNED.items()}
                     for i in range(HOSTS)}
