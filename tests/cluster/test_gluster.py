"""mpiwrite on a real network filesystem: GlusterFS under three emulated hosts.

One testbed for the module (the testbed's "gluster": tests/testbed/gluster.py): a 2-brick
distributed volume, each host with its own FUSE client and a 160 Mbit/s link both ways, so
the wire, not the disk, decides the figures and a lone `dd conv=fsync` on the same link is
the ground truth.
"""

import glob
import json
import os
import re
import shlex
import subprocess
import sys
import time

import pytest
import testbed
from common import (
    MPIWRITE,
    ROOT,
    bounded,
    clean_env,
    cli,
    kill_group,
    only_record,
    read_record,
    records_in,
)
from testbed import gluster as glusterlib
from testbed import hosts as hostlib

pytestmark = [pytest.mark.mpi, pytest.mark.slow]

RATE = "160mbit"
HOSTS = 3
PER_HOST = testbed.PER_HOST

# the module's testbed: GlusterFS, hosts at RATE both ways
bed = testbed.fixture("gluster", hosts=HOSTS, rates=RATE)


def test_testbed_removes_itself_when_it_cannot_start(tmp_path):
    """A volume option glusterd refuses: __enter__ raises, and nothing stays (no glusterd,
    no bricks, no namespace); runs first, before the module's testbed exists."""
    reason = glusterlib.why_not()
    if reason:
        pytest.skip(f"GlusterFS testbed: {reason}")
    with hostlib.Hosts(1, tmp_path, persistent=True) as h:
        g = glusterlib.Gluster(h, tmp_path, options={"no.such.option": "1"})
        try:
            with pytest.raises(RuntimeError, match="no.such.option"):
                g.__enter__()
        finally:
            g.__exit__()  # a no-op when __enter__ cleaned up, as it should
        assert g.leftovers() == []
    assert h.leftovers() == []


def test_script_runs_a_command_on_the_testbed_and_removes_it(tmp_path):
    """benchmarks/gluster_testbed.py as a user runs it: what h1 writes h0 reads through the
    volume, the gluster CLI works, and the script exits with the command's code, nothing left."""
    reason = glusterlib.why_not()
    if reason:
        pytest.skip(f"GlusterFS testbed: {reason}")
    script = str(ROOT / "benchmarks" / "gluster_testbed.py")
    command = ("$TESTBED_ENTER h1 cp /proc/sys/kernel/hostname $TESTBED_MOUNT/f && "
               "$TESTBED_ENTER h0 cat $TESTBED_MOUNT/f && "
               "$TESTBED_GLUSTER volume get mwvol network.compression && exit 3")
    out = bounded([sys.executable, script, "--hosts", "2", "--rate", "100mbit", "--dir",
                   str(tmp_path), "--option", "network.compression=on", "--", "sh", "-c",
                   command], 120, cwd=str(tmp_path), env=clean_env())
    assert out.returncode == 3, out.stdout + out.stderr
    assert "\nh1\n" in out.stdout and re.search(r"network.compression\s+on", out.stdout)
    assert "left behind" not in out.stderr
    assert not glob.glob(str(tmp_path / "gluster" / "mnt" / "*"))  # only the hosts saw it


@pytest.mark.parametrize("where,made,said", [
    ("new/deeper", True, None),
    ("a-file/sub", False, "--dir: cannot make"),
    ("a-file", False, "--dir: 'A' is not a folder")])
def test_script_makes_its_folder_or_says_in_one_line_why_not(tmp_path, where, made, said):
    """--dir D where D is missing: made (or one line, exit 2, when it cannot be); a file
    named D: one line.  No traceback either way."""
    (tmp_path / "a-file").write_text("x")
    script = str(ROOT / "benchmarks" / "gluster_testbed.py")
    target = tmp_path / where
    reason = glusterlib.why_not()
    # without GlusterFS the script stops after the folder: the made folder is removed again
    out = bounded([sys.executable, script, "--hosts", "1", "--dir", str(target), "--",
                   "true"], 120, cwd=str(tmp_path), env=clean_env())
    assert "Traceback" not in out.stderr, out.stderr
    if said:
        assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
        assert said.replace("'A'", repr(str(target))) in out.stderr, out.stderr
        return
    if reason:
        assert out.returncode == 2 and "cannot run here" in out.stderr
        assert not target.exists() and (tmp_path / "new").is_dir()
        return
    assert out.returncode == 0, out.stdout + out.stderr
    assert target.is_dir() and "left behind" not in out.stderr


def test_leftovers_are_only_what_the_testbed_made(tmp_path, monkeypatch):
    """A file of the machine's GlusterFS folders that another volume changed is not ours;
    one that names our mount or folder is."""
    other = tmp_path / "machine"
    other.mkdir()
    monkeypatch.setattr(glusterlib, "MACHINE", (str(other),))
    g = glusterlib.Gluster.__new__(glusterlib.Gluster)
    g.top, g.ip, g.ns, g.veth = str(tmp_path / "bed" / "gluster"), "10.250.77.200", "x", "y"
    g.mount = os.path.join(g.top, "mnt")
    g.machine = glusterlib._state()
    (other / "glusterd.log").write_text("[volume theirs] started on 10.0.0.5\n")
    mangled = g.mount.strip("/").replace("/", "-")
    (other / f"{mangled}.log").write_text("client log\n")
    (other / "vol-info").write_text(f"brick=10.250.77.200:{g.top}/brick0\n")
    left = g.leftovers()
    assert sorted(left) == sorted([f"changed: {other}/{mangled}.log",
                                   f"changed: {other}/vol-info"]), left


def write_args(bed, name, size="16M", *extra):
    return ["run", bed.target(name), "-s", size, "--results", os.path.join(bed.folder, name),
            "--progress-interval", "0", *extra]


def node_rates(doc):
    return {n["host"]: n["MB_per_s"] for n in doc["summary"]["nodes"]}


def dd_rate(bed, host, path, mib):
    """A lone `dd conv=fsync` of mib MiB on host's link, in MB/s (10^6 B/s)."""
    out = bed.h.run(host, f"dd if=/dev/zero of={path} bs=1M count={mib} conv=fsync 2>&1; "
                          f"rm -f {path}", timeout=120)
    m = re.search(r"copied, ([0-9.]+) s", out.stdout)
    assert m, out.stdout + out.stderr
    return mib * 2**20 / float(m.group(1)) / 1e6


def test_per_host_rate_matches_a_lone_dd_on_the_same_link(bed):
    """3 hosts x 2 ranks x 24 MiB: each host writes as fast as dd alone on its own link.

    On a shared 2-core machine the hosts' FUSE clients and bricks compete for CPU with each
    other (dd runs alone), and one host in a run can come out 10-15% low once in a while.  So
    a second try, with dd measured afresh, is allowed: a rate that is wrong fails both."""
    tries = []
    for attempt in range(2):
        dd = max(dd_rate(bed, 0, bed.target("dd0"), 48), dd_rate(bed, 2, bed.target("dd2"), 48))
        out, doc = bed.run(HOSTS, write_args(bed, f"match{attempt}", "24M"))
        assert out.returncode == 0, out.stdout + out.stderr
        assert not os.path.exists(bed.target(f"match{attempt}"))  # made by the run, and removed
        rates = node_rates(doc)
        assert sorted(rates) == ["h0", "h1", "h2"]
        tries.append((round(dd, 1), {k: round(v, 1) for k, v in rates.items()}))
        print(f"try {attempt}: dd {dd:.1f} MB/s; per host", tries[-1][1])
        if all(abs(rate - dd) / dd <= 0.10 for rate in rates.values()):
            return
    raise AssertionError(f"a host off by more than 10% from a lone dd in both tries: {tries}")


def test_aggregate_grows_with_hosts(bed):
    """Each host has its own link: two and three hosts write about twice and three times as
    much per second as one."""
    agg = {}
    for n in (1, 2, 3):
        out, doc = bed.run(n, write_args(bed, f"scale{n}"))
        assert out.returncode == 0, out.stdout + out.stderr
        agg[n] = doc["summary"]["aggregate"]["mean_MB_per_s"]
    print("aggregate MB/s by hosts", {k: round(v, 1) for k, v in agg.items()})
    assert agg[2] > 1.6 * agg[1] and agg[3] > 2.3 * agg[1], agg


def test_host_with_a_slower_link_is_the_slowest_node(bed):
    """h1's link at 60 Mbit/s, the others' at 160: h1 is the slowest node, and with MPI over
    the links (testbed.TCP) the network check measures each node's link, so the limit
    verdict names the link on every node, with h1's rate a share of its own ceiling (one
    rank a host: its link carries one stream at the link's rate, as a lone dd's)."""
    bed.h.limit(1, "60mbit")
    try:
        # one rank a host: with MPI told to use no shared memory (TCP), ranks of one host
        # would each be a node of their own
        out, doc = bed.run(HOSTS, write_args(bed, "slow"), env=testbed.TCP, per_host=1)
    finally:
        bed.h.limit(1, RATE)
    assert out.returncode == 0, out.stdout + out.stderr
    rates = node_rates(doc)
    print("h1 at 60mbit, per host", {k: round(v, 1) for k, v in rates.items()})
    assert min(rates, key=rates.get) == "h1", rates
    assert rates["h1"] < 0.6 * min(rates["h0"], rates["h2"]), rates
    assert doc["summary"]["slowest"]["host"] == "h1"
    assert "node h1" in out.stderr  # the human summary names it too (on stderr with --json -)
    from mpiwrite.answers import limits

    rec = only_record(os.path.join(bed.folder, "slow"))
    got = limits.of_record(rec)
    print(f"limit: {got['limit']} ({got['confidence']}): {got['evidence']}")
    by_host = {n["host"]: n for n in got["nodes"]}
    assert got["limit"] == "link" and got["differ"] == [], got
    # h1's measured ceiling is its 60 Mbit/s link's (7.5 MB/s); another node's is only a
    # floor of its link (a loaded node measured 9.8 MB/s for 20), so it is not compared
    assert by_host["h1"]["ceiling_MB_per_s"] < 1.3 * 60 / 8, got
    show = cli(["show", rec.path], cwd=bed.folder).stdout
    assert "limit: link" in show and "of its link's ceiling" in show, show


def test_verify_from_another_host(bed):
    """h0 writes and keeps; h2, whose client never saw the files, checks every block over the
    network; a byte changed on the brick behind gluster's back is found from h1."""
    target, res = bed.target("keep"), os.path.join(bed.folder, "keep")
    out, doc = bed.run(1, write_args(bed, "keep", "8M", "--keep"))
    assert out.returncode == 0, out.stdout + out.stderr
    env = f"PYTHONPATH={shlex.quote(os.environ.get('PYTHONPATH', ''))}"
    verify = f"{env} {MPIWRITE} verify {target} --record {res}"
    before = bed.rx_bytes(2)
    ok = bed.h.run(2, verify, timeout=60)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert bed.rx_bytes(2) - before >= 2 * 8 * 2**20  # read over the wire, not from a cache
    on_brick = [os.path.join(b, "keep", f) for b in bed.fs.bricks
                for f in sorted(os.listdir(os.path.join(b, "keep")))]
    assert len(on_brick) == 2, on_brick
    with open(on_brick[0], "r+b") as fh:
        fh.seek(5 * 2**20 + 100)
        byte = fh.read(1)
        fh.seek(-1, os.SEEK_CUR)
        fh.write(bytes([byte[0] ^ 0xFF]))
    bad = bed.h.run(1, verify, timeout=60)
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert os.path.basename(on_brick[0]) in bad.stdout + bad.stderr
    bed.h.run(0, f"rm -rf {target}", timeout=30)


@pytest.mark.skipif(MPIWRITE is None or "--read" not in subprocess.run(
    [MPIWRITE or "false", "run", "--help"], capture_output=True, text=True).stdout,
    reason="mpiwrite run has no --read option yet")
def test_read_phase_reads_across_the_network(bed):
    """`--read` (default shift: ranks per node) reads another host's file: each host receives
    at least 90% of its ranks' read bytes on its own link."""
    before = [bed.rx_bytes(i) for i in range(HOSTS)]
    out, doc = bed.run(HOSTS, write_args(bed, "read", "16M", "--read"))
    after = [bed.rx_bytes(i) for i in range(HOSTS)]
    assert out.returncode == 0, out.stdout + out.stderr
    assert all(it["read_aggregate_MB_per_s"] > 0 for it in doc["iterations"])
    rec = only_record(os.path.join(bed.folder, "read"))
    names = rec.ranks.dtype.names
    field = "read_bytes" if "read_bytes" in names else next(
        n for n in names if "read" in n and n.endswith("bytes"))
    hosts = [n["host"] for n in rec.nodes]
    for i, name in enumerate(bed.h.names):
        mine = rec.ranks[[hosts[int(r["node"])] == name for r in rec.ranks]]
        read = int(mine[field].sum())
        print(f"{name}: received {after[i] - before[i]} B, its ranks read {read} B "
              f"({field}); read aggregate {doc['iterations'][0]['read_aggregate_MB_per_s']:.1f}"
              " MB/s")
        assert read >= PER_HOST * 16 * 2**20
        assert after[i] - before[i] >= 0.9 * read, (name, after[i] - before[i], read)


def _client_logs(bed) -> list:
    """Each host's FUSE client log, as text ('' while there is none)."""
    texts = []
    for n in bed.h.names:
        try:
            with open(os.path.join(bed.fs.top, "log", f"client-{n}.log"), errors="replace") as fh:
                texts.append(fh.read())
        except OSError:
            texts.append("")
    return texts


def _set_and_wait(bed, compression: str, timeout: float = 90.0) -> None:
    """Set network.compression and wait until every host's FUSE client runs a graph newer
    than the one it ran before (`volume set` returns before the clients fetch the new
    volfile; setting the value in force changes no graph, so that is not waited for).
    A client logs "Final graph" when a graph arrives but switches to it lazily, on its next
    FUSE request, and only then tears down the old graph's connections: a write racing that
    teardown fails with ENOTCONN (seen in CI).  So each host gets a probe request (create
    and remove a file, which no attribute cache answers) until its log says "switched to
    graph" after the new graph; then the old connections get a moment to close.

    Under load a client once kept its new graph unswitched for good: the graph's first
    lookup found a brick missing ("Found anomalies ... holes=1") and the client never
    switched, whatever the probes.  A client not switched halfway through the wait is
    mounted afresh, as an administrator would (its new mount runs the volume's graph), once."""
    from mpiwrite.clients.fuse import parse_graph

    before = [t.count("Final graph:") for t in _client_logs(bed)]
    if bed.fs.get("network.compression") == compression:
        before = [n - 1 for n in before]  # the graph each client has is the one wanted
    else:
        bed.fs.set("network.compression", compression)
    end = time.monotonic() + timeout
    halfway, remounted = end - timeout / 2, []
    state = []
    while time.monotonic() < end:
        if state and time.monotonic() > halfway and not remounted:
            remounted = [i for i, s in enumerate(state) if s != (compression, True)]
            for i in remounted:
                print(f"{bed.h.names[i]}'s client did not switch to compression={compression} "
                      f"in {timeout / 2:.0f} s: mounted afresh")
                bed.fs.remount(i)
        state = []
        for i, text in enumerate(_client_logs(bed)):
            new = text.count("Final graph:") > before[i]
            graph = (parse_graph(text) or {}).get("compression") if new else None
            switched = "switched to graph" in text[text.rfind("Final graph:"):]
            state.append((graph, switched))
            if graph == compression and not switched:
                probe = os.path.join(bed.fs.mount, f".graph-probe-{bed.h.names[i]}")
                bed.h.run(i, f"touch {probe} && rm -f {probe}", timeout=30)
        if all(s == (compression, True) for s in state):
            time.sleep(2)  # the old graph's connections close just after the switch
            return
        time.sleep(0.2)
    stuck = [(bed.h.names[i], "\n".join(text.splitlines()[-40:]))
             for i, text in enumerate(_client_logs(bed)) if state[i] != (compression, True)]
    raise AssertionError(f"clients did not switch to compression={compression} "
                         f"(mounted afresh: {[bed.h.names[i] for i in remounted]}): {state}\n"
                         + "\n".join(f"--- the last lines of {name}'s client log\n{tail}"
                                      for name, tail in stuck))


def _graph_of(facts) -> dict:
    """The GlusterFS client graph somewhere in a node's facts (fs_fuse.gluster_graph)."""
    stack = [facts]
    while stack:
        x = stack.pop()
        if isinstance(x, dict):
            if "translators" in x and "compression" in x:
                return x
            stack.extend(x.values())
        elif isinstance(x, list):
            stack.extend(x)
    return {}


@pytest.mark.timeout(600)  # up to 5 pairs of runs
def test_compression_ab_with_compare(bed):
    """network.compression off/on in ABBA order, 3 runs x 2 iterations each, links unlimited
    (as a new user's trial): `compare` calls the difference real, and the records carry the
    tag.  The data is random, so compression only costs the client CPU.  When `compare` says
    "within noise" (on a loaded 2-core machine one pair of runs can be far apart: -72% at
    p = 0.08 was seen), the test does what the verdict advises, one more repetition per side,
    at most twice.

    A run that GlusterFS fails with ENOTCONN soon after a graph switch (the old graph's
    connections torn down under a write; seen under load even after the wait), or whose
    writes the FUSE client holds until --timeout (once in a full suite: iteration 1 hung 180 s
    with no switch in between), is run once more: mpiwrite recorded it as failed or timed
    out, rightly, and `compare` leaves it out."""
    res = os.path.join(bed.folder, "ab")
    reps = []

    def pair():
        # off,on then on,off (ABBA): half the graph switches of off,on every time, and a
        # drift of the machine's load over the test falls on both sides alike
        for value in ("off", "on") if len(reps) % 2 == 0 else ("on", "off"):
            _set_and_wait(bed, value)  # every client runs the new graph
            args = ["run", bed.target("ab"), "-s", "16M", "-i", "2", "--delay", "0",
                    "--results", res, "--progress-interval", "0", "--timeout", "60",
                    "--tag", f"compression={value}"]
            for attempt in (1, 2):
                out, doc = bed.run(HOSTS, args, timeout=180)
                said = out.stdout + out.stderr
                if out.returncode == 0 or attempt == 2 or not (
                        "(errno 107)" in said or "run timed out" in said):
                    break
                print(f"compression={value}: {doc.get('error') if doc else said[-300:]}; "
                      "once more")
                time.sleep(3)
            assert out.returncode == 0, said
        reps.append(value)

    def compared():
        cmp = cli(["compare", "compression=off", "compression=on", "--in", res, "--json"],
                  cwd=bed.folder)
        assert cmp.returncode == 0, cmp.stdout + cmp.stderr
        verdict = json.loads(cmp.stdout)
        print(json.dumps({k: verdict[k] for k in ("change_pct", "p_value", "verdict")}))
        return verdict

    for i in range(HOSTS):
        bed.h.limit(i, None)
    try:
        for _rep in range(3):
            pair()
        verdict = compared()
        for _more in range(2):
            if verdict["real"]:
                break
            pair()
            verdict = compared()
    finally:
        _set_and_wait(bed, "off")  # the later tests write through the usual graph
        for i in range(HOSTS):
            bed.h.limit(i, RATE)

    complete = [p for p in records_in(res) if read_record(p).status == "complete"]
    assert len(complete) == 2 * len(reps) and 3 <= len(reps) <= 5
    pairs = len(reps)
    assert verdict["a"]["n"] >= pairs and verdict["b"]["n"] >= pairs  # a sample a run, or more
    assert verdict["real"] and verdict["change_pct"] < -20, verdict
    # every node's facts say what its client ran: the option, not only the tag
    for path in records_in(res):
        rec = read_record(path)
        graphs = [((n.get("client_info") or n.get("fs", {}).get("client") or {}), n)
                  for n in rec.nodes]
        seen = {_graph_of(n).get("compression") for n in rec.nodes}
        assert seen == {rec.tags()["compression"]}, (path, seen, graphs[:1])


@pytest.mark.timeout(900)
def test_write_behind_as_a_once_setting_is_found_and_restored(bed):
    """`tune` over performance.write-behind at 4 KiB writes, as a `once` setting: glusterd
    takes `volume get/set` only from its own host, so MPIWRITE_GLUSTER_CLI runs gluster there
    (here: in the server's namespaces; on a site: `ssh SERVER gluster`).  `tune list` reads
    the option; the study sets it once per change (never once per host), every run waits for
    the clients' graph switch and none records a switch in its timed window; `tune report`
    finds write-behind off slower (real, or withheld for carry-over: never recommended), and
    the volume ends with it on."""

    cli_env = {"MPIWRITE_GLUSTER_CLI": f"nsenter -t {bed.fs.server.pid} -n -m gluster"}
    target = bed.target("tune")
    deadline = time.monotonic() + 60  # after a brick restart, until the client reconnects
    while bed.h.run(0, f"mkdir -p {target}", timeout=30).returncode != 0:
        assert time.monotonic() < deadline, f"cannot make {target}"
        time.sleep(1)
    pre = f"MPIWRITE_GLUSTER_CLI={shlex.quote(cli_env['MPIWRITE_GLUSTER_CLI'])} {MPIWRITE}"
    out = bed.h.run(0, f"{pre} tune list {target} --format json", timeout=120)
    assert out.returncode == 0, out.stderr
    rows = {r["name"]: r for r in json.loads(out.stdout)}
    wb = rows["performance.write-behind"]
    assert wb["value"] == "on" and wb["scope"] == "once", wb
    assert rows["performance.write-behind-window-size"]["value"] == "1MB"  # not "(DEFAULT)"
    study, res = os.path.join(bed.folder, "wb.toml"), os.path.join(bed.folder, "wb-res")
    out = bed.h.run(0, f"{pre} tune plan {target} -o {study} "
                       "--param performance.write-behind=on,off --budget 60s --run size=8MiB "
                       f"--run block_size=4KiB --run progress_interval=0 --results {res}",
                    timeout=120)
    assert out.returncode == 0, out.stderr
    history = os.path.join(bed.folder, "gluster", "log", "cmd_history.log")

    def sets():
        with open(history) as fh:
            return [ln.split("performance.write-behind ")[1].split()[0] for ln in fh
                    if "volume set mwvol performance.write-behind " in ln]

    before = sets()
    try:
        run = bounded(bed.command(HOSTS, ["study", "run", study]), 600, cwd=bed.folder,
                      env=clean_env(cli_env))
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr
        assert "not in force" not in run.stdout + run.stderr, run.stdout[-3000:]
        after, made = bed.fs.get("performance.write-behind"), sets()[len(before):]
    finally:  # the later tests' graph, whatever happened
        if bed.fs.get("performance.write-behind") != "on":
            bed.fs.set("performance.write-behind", "on")
    assert after == "on"
    recs = sorted((read_record(p) for p in records_in(res)), key=lambda r: r.run_id)
    assert len(recs) >= 4 and all(r.status == "complete" for r in recs)
    values = [r.tags()["setting.performance.write-behind"] for r in recs]
    changes = sum(1 for a, b in zip(["on"] + values, values + ["on"]) if a != b)
    assert made == [b for a, b in zip(["on"] + values, values + ["on"]) if a != b] \
        and changes >= 2  # one `volume set` a change, the last one putting it back
    for rec in recs:
        assert sorted(c["node"] for c in rec.client_counters) == list(range(HOSTS))
        for c in rec.client_counters:
            graph = c["delta"]["in_force"]
            assert graph["before"] == graph["after"] and graph["before"]["glusterfs graph"]
    rep = cli(["tune", "report", study, "--format", "json"], cwd=bed.folder)
    assert rep.returncode == 0, rep.stderr
    doc = json.loads(rep.stdout)
    (factor,) = doc["factors"]
    print(json.dumps(factor))
    assert factor["effect_percent"] < -15 and factor["ci_percent"][1] < 0, factor
    # real; or withheld when the carry-over test (at 5%, on these 7-8 runs) says the run
    # before moved the rate by a quarter of the effect or more: seen once in three suites,
    # carry-over +27% p 0.048.  Withheld is the safe answer; off is never recommended.
    assert factor["verdict"] in ("real", "carry-over"), factor
    if factor["verdict"] == "carry-over":
        assert factor["carryover_flagged"] and not factor["carryover_aliased"], factor
    assert doc["recommended"] == {"performance.write-behind": "on"}, doc["recommended"]


def test_show_by_target_names_the_slow_brick(bed):
    """12 ranks (3 hosts x 4) whose files the volume spreads over its 2 bricks by name; brick
    1's server is kept stopped 98% of the time (SIGSTOP/SIGCONT to its pid from a
    thread) while they write, two iterations.  The record names the brick that holds each
    rank's file in each iteration (the FUSE client's trusted.glusterfs.pathinfo), and `show
    --by target` and `explain RECORD` name brick 1 slow and brick 0 not."""
    import signal
    import threading

    pid = bed.fs.brick_pid(1)
    stop = threading.Event()

    def throttle():
        while not stop.is_set():
            os.kill(pid, signal.SIGSTOP)
            time.sleep(0.49)
            os.kill(pid, signal.SIGCONT)
            time.sleep(0.01)

    t = threading.Thread(target=throttle, daemon=True)
    t.start()
    try:
        out, doc = bed.run(HOSTS, write_args(bed, "targets", "4M", "-i", "2", "--delay", "0"),
                           per_host=4, timeout=240)
    finally:
        stop.set()
        t.join()
        os.kill(pid, signal.SIGCONT)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr
    rec = only_record(os.path.join(bed.folder, "targets"))
    bricks = {}
    for lay in rec.layouts:
        assert lay["layout"]["layout"] == "glusterfs"
        (brick,) = lay["layout"]["targets"]  # a distributed volume: one brick a file
        bricks.setdefault(brick, []).append(lay["rank"])
    assert sorted((lay["iteration"], lay["rank"]) for lay in rec.layouts) == [
        (it, r) for it in range(2) for r in range(HOSTS * 4)]  # every iteration's files
    assert sorted(bricks, key=lambda b: b[-1]) and set(b.rsplit("/", 1)[1]
                                                      for b in bricks) <= {"brick0", "brick1"}
    if len(bricks) < 2 or min(len(r) for r in bricks.values()) < 2:
        pytest.skip(f"the volume put the files on one brick this time: {bricks}")
    shown = cli(["show", rec.path, "--by", "target"], cwd=bed.folder)
    assert shown.returncode == 0, shown.stderr
    section = shown.stdout.split("per storage target")[1]
    slow = next(ln for ln in section.splitlines() if ln.strip().startswith("slow:"))
    assert slow.strip().endswith("brick1"), section
    line0 = next(ln for ln in section.splitlines() if "brick0 " in ln)
    assert ": slow" not in line0, section
    from mpiwrite.answers.targets import by_target

    rows, _notes = by_target(rec)
    rate = {r["target"].rsplit("/", 1)[1]: r["mean_MB_per_s"] for r in rows}
    assert rate["brick1"] < rate["brick0"], rows
    assert sum(r["files"] for r in rows) == 2 * HOSTS * 4
    told = cli(["explain", rec.path, "--format", "json"], cwd=bed.folder)
    assert told.returncode == 0, told.stderr
    found = json.loads(told.stdout)
    verdict = {r["target"].rsplit("/", 1)[1]: r["verdict"] for r in found["targets"]["rows"]}
    assert verdict["brick1"] == "slow" and verdict["brick0"] != "slow", found["targets"]
    target = next(f for f in found["factors"] if "target" in f["keys"])
    assert target["p_value"] < 0.05, target
    # the limit verdict: one storage target, the ranks whose files it holds named
    from mpiwrite.answers import limits

    got = limits.of_record(rec)

    print(f"limit: {got['limit']} ({got['confidence']}): {got['evidence']}")
    assert got["limit"] == "target" and "brick1" in got["evidence"], got
    on1 = sorted({r for b, ranks in bricks.items() if b.endswith("brick1") for r in ranks})
    assert got["ranks"] == on1, (got, bricks)
    assert "limit: target" in cli(["show", rec.path], cwd=bed.folder).stdout


def test_a_fuse_client_held_to_a_small_cpu_share_is_named_the_limit(bed):
    """Host 0's FUSE client (its glusterfs daemon) in a cgroup held to 1% of a CPU (cgroup
    v1 cpu quota; at 5% a loaded suite once starved the bricks as much) while 2 ranks
    write: the writers wait in FUSE requests, the daemon waits
    for a CPU far longer than it runs, and the verdict is the client's CPU, with the gluster
    catalogue's CPU tunables to try (`tune plan --from`)."""
    cpu = "/sys/fs/cgroup/cpu"
    if not os.path.exists(os.path.join(cpu, "cpu.cfs_quota_us")):
        pytest.skip("no cgroup-v1 cpu controller")
    pid = bed.fs.client_pid(0)
    group = os.path.join(cpu, f"mpiwrite-test-{os.getpid()}")
    os.mkdir(group)
    try:
        with open(os.path.join(group, "cpu.cfs_quota_us"), "w") as fh:
            fh.write("1000")  # 1% of the default 100000 us period: the least it takes
        with open(os.path.join(group, "cgroup.procs"), "w") as fh:
            fh.write(str(pid))
        out, _doc = bed.run(1, write_args(bed, "cpu", "2M"), timeout=180)
    finally:
        with open(os.path.join(group, "cgroup.procs")) as fh:
            inside = fh.read().split()
        for p in inside:  # back where they were: the hierarchy's root
            with open(os.path.join(cpu, "cgroup.procs"), "w") as fh:
                fh.write(p)
        os.rmdir(group)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr
    from mpiwrite.answers import limits

    rec = only_record(os.path.join(bed.folder, "cpu"))
    got = limits.of_record(rec)
    print(f"limit: {got['limit']} ({got['confidence']}): {got['evidence']}")
    (own,) = [c["delta"]["client_cpu"] for c in rec.client_counters]
    assert got["limit"] == "client cpu" and "waited" in got["evidence"], (got, own)
    assert "performance.client-io-threads" in got["try"], got
    waited, ran = sum(own["waited"].values()), own["seconds"]
    assert waited > 3 * ran, own  # held by its quota: it waited far longer than it ran
    gluster = shlex.quote(f"nsenter -t {bed.fs.server.pid} -n -m gluster")
    plan = bed.h.run(0, f"MPIWRITE_GLUSTER_CLI={gluster} {MPIWRITE} tune plan "
                        f"{bed.mount} -o {os.path.join(bed.folder, 'cpu.toml')} --from "
                        f"{rec.path} --budget 2h --run size=1MiB", timeout=120)
    assert plan.returncode == 0, plan.stderr
    assert "performance.client-io-threads" in plan.stdout.split("factors:")[-1], plan.stdout


def test_brick_server_killed_mid_run_fails_collectively(bed):
    """A brick's server dies 2 s into a 30 s run: the ranks whose files live there get an
    error, every rank stops, one line names the host and the error, all within seconds."""
    target = bed.target("kill")
    args = ["run", target, "-t", "30", "--results", os.path.join(bed.folder, "kill"),
            "--progress-interval", "0"]
    proc = subprocess.Popen(bed.command(HOSTS, args), cwd=bed.folder, env=clean_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        # Every rank's file exists (the hash of its name chose its brick), then 2 s of writing.
        deadline = time.monotonic() + 60
        on = [os.path.join(b, "kill") for b in bed.fs.bricks]
        while sum(len(_data_files(d)) for d in on) < HOSTS * PER_HOST:
            assert time.monotonic() < deadline and proc.poll() is None, "files not created"
            time.sleep(0.2)
        time.sleep(2)
        victim = 0 if _data_files(on[0]) else 1  # all six on brick 1 happens (1 in 64)
        doomed = _data_files(on[victim])
        bed.fs.kill_brick(victim)
        killed = time.monotonic()
        out, err = proc.communicate(timeout=60)
        ended = time.monotonic() - killed
    except BaseException:
        kill_group(proc)
        proc.communicate()
        raise
    finally:
        bed.fs.restart_bricks()
    print(f"ended {ended:.1f} s after the kill: {err.strip().splitlines()[-1]}")
    assert proc.returncode == 1, out + err
    assert ended < 20, ended  # not the 30 s of -t, nor a 42 s ping timeout
    last = err.strip().splitlines()[-1]
    assert re.search(r"on h[012]\b", last) and "Transport endpoint is not connected" in last, \
        last
    ranks = {int(re.search(r"-r(\d+)\.dat", f).group(1)) for f in doomed}
    failing = int(re.search(r"rank (\d+)", last).group(1))
    assert failing in ranks, (last, doomed)
    assert f"on h{failing // PER_HOST}" in last
    rec = only_record(os.path.join(bed.folder, "kill"))
    assert rec.status == "failed"
    failed = {int(r["rank"]) for r in rec.ranks if r["status"] == 1}
    assert failed and failed <= ranks, (failed, ranks)  # only ranks with files there
    assert all(r["status"] == 2 for r in rec.ranks if int(r["rank"]) not in failed)
    assert {e["host"] for e in rec.errors} == {f"h{r // PER_HOST}" for r in failed}
    assert all("not connected" in e["message"] for e in rec.errors), rec.errors
    # What the brick held could not be removed while it was down; the rest was.
    left = bed.h.run(0, f"find {target} -name '*.dat'", timeout=30).stdout.split()
    assert {os.path.basename(f) for f in left} <= set(doomed), (left, doomed)
    bed.h.run(0, f"rm -rf {target}", timeout=30)


def _data_files(folder):
    return [f for _, _, files in os.walk(folder) for f in files if f.endswith(".dat")]
