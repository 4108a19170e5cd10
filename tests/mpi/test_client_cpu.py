"""The client's own CPU: which process serves a FUSE mount, its CPU seconds over the timed
phase, and `cpu-per-GB` as the ranks' share plus the client's own.

The lookup is checked over a crafted /proc (the kernel's formats: cmdline NUL-separated,
`ns/mnt` and `fd/N` links, mountinfo, stat with a command name holding spaces and
parentheses) with every process that could be taken by mistake; then on real processes
(a CPU-burning stand-in for a daemon beside a decoy naming the same mount point), and end to
end on a real FUSE mount (bindfs, as root) under mpiexec, where the record's figures are
recomputed here from its tables.
"""

import json
import os
import shutil
import subprocess
import sys
import time

import h5py
import numpy as np
import pytest
import sysroots
from common import MPIEXEC, cli, kill_group, mpirun, needs_root, records_in
from sysroots import Link

from mpiwrite.answers import clientcpu
from mpiwrite.clients import fuse, ownprocs, registry
from mpiwrite.sysroot import Reader

pytestmark = pytest.mark.timeout(180)

OURS, OTHER = "mnt:[4026531840]", "mnt:[4026532999]"
TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid, comm, utime, stime):
    """/proc/PID/stat as fs/proc/array.c prints it (fields 14, 15: utime, stime in ticks)."""
    return (f"{pid} ({comm}) S 1 {pid} {pid} 0 -1 4194560 5000 0 0 0 {utime} {stime} 0 0 20 0 "
            f"12 0 1234 987654321 2345 18446744073709551615 1 1 0 0 0 0 0 4096 16387 0 0 0 17 "
            "1 0 0 0 0 0\n")


def _proc(files, pid, argv, ns=OURS, mountinfo=None, fds=(), stat=None):
    rel = f"proc/{pid}"
    files[f"{rel}/cmdline"] = "\0".join(argv) + "\0"
    files[f"{rel}/ns/mnt"] = Link(ns)
    for i, target in enumerate(fds):
        files[f"{rel}/fd/{i}"] = Link(target)
    if mountinfo is not None:
        files[f"{rel}/mountinfo"] = mountinfo
    if stat is not None:
        files[f"{rel}/stat"] = stat


def _gluster_root(tmp_path, with_own_namespace_daemon=True):
    """A node with a GlusterFS mount at /mnt/gv0 (device 0:50) and every process that names
    it: the right daemon last."""
    mp = "/mnt/gv0"
    ours = sysroots.mountinfo((mp, "fuse.glusterfs", "srv:/gv0", "rw,user_id=0,group_id=0"))
    theirs = sysroots.mountinfo(("/x", "ext4", "/dev/vdb", "rw"),
                                (mp, "fuse.glusterfs", "srv:/gv0", "rw,user_id=0"))  # 0:51
    daemon_argv = ["/usr/sbin/glusterfs", "--process-name", "fuse", "--volfile-server=srv",
                   "--volfile-id=/gv0", mp]
    files = sysroots.base(mounts=f"srv:/gv0 {mp} fuse.glusterfs rw 0 0\n")
    files["proc/self/ns/mnt"] = Link(OURS)
    files["proc/self/mountinfo"] = ours
    _proc(files, 100, ["tail", "-f", mp], stat=_stat(100, "tail", 1, 1))  # names the mount
    _proc(files, os.getpid(), ["glusterfs", mp])  # this process (mpiwrite env MOUNT): never
    _proc(files, 300, daemon_argv, ns=OTHER, mountinfo=theirs,  # another emulated host's
          stat=_stat(300, "glusterfs", 900, 100))
    _proc(files, 400, daemon_argv, ns=OTHER, mountinfo=ours,  # ours, from a copied namespace
          stat=_stat(400, "glusterfs (x))", 250, 50))
    if with_own_namespace_daemon:
        _proc(files, 4000, daemon_argv, stat=_stat(4000, "glusterfs", 700, 300))
    return sysroots.make(tmp_path / "root", files), mp


@pytest.mark.parametrize("own_namespace", [True, False])
def test_the_daemon_is_the_one_serving_our_mount(tmp_path, own_namespace):
    """In our mount namespace it wins (though found after another); else the one whose
    mountinfo has our device at the mount point; never a `tail -f MOUNT`, this process, or
    another host's daemon with the same command line."""
    root, mp = _gluster_root(tmp_path, own_namespace)
    want = 4000 if own_namespace else 400
    found = fuse.daemon(Reader(root), mp, "glusterfs")
    assert found["pid"] == want and found["name"] == "glusterfs", found
    fs = {"fstype": "fuse.glusterfs", "mount_point": mp, "mount_source": "srv:/gv0"}
    client = registry.for_fs(fs)
    facts = client.collect(Reader(root), fs, "6.1.0", {})
    assert facts["daemon"]["pid"] == want
    pids = client.own_processes(root, fs, facts)
    assert pids == [want]
    ticks = {4000: 700 + 300, 400: 250 + 50}[want]
    name = "glusterfs" if own_namespace else "glusterfs (x))"
    assert ownprocs.seconds(Reader(root), pids) == {f"{want} {name}": ticks / TICK}


def test_no_daemon_found_means_no_own_processes(tmp_path):
    """Only another host's daemon and a decoy: none is ours, nothing is counted."""
    root, mp = _gluster_root(tmp_path, False)
    os.remove(os.path.join(root, "proc/400/cmdline"))  # ours is gone
    fs = {"fstype": "fuse.glusterfs", "mount_point": mp, "mount_source": "srv:/gv0"}
    client = registry.for_fs(fs)
    facts = client.collect(Reader(root), fs, "6.1.0", {})
    assert facts["daemon"] is None
    assert client.own_processes(root, fs, facts) == []
    for hostile in ({"daemon": {"pid": True}}, {"daemon": {"pid": "400"}}, {"daemon": None}):
        assert client.own_processes(root, fs, hostile) == []


def test_a_plain_fuse_mount_is_served_by_the_process_holding_dev_fuse(tmp_path):
    """bindfs mounts as plain `fuse` with a folder as source: no program to match, so of the
    processes whose command line ends with the mount point, the one with /dev/fuse open."""
    mp = "/mnt/b"
    files = sysroots.base(mounts=f"/srv/b {mp} fuse rw 0 0\n")
    files["proc/self/ns/mnt"] = Link(OURS)
    files["proc/self/mountinfo"] = sysroots.mountinfo((mp, "fuse", "/srv/b", "rw,user_id=0"))
    _proc(files, 100, ["tail", "-f", mp], fds=("/dev/pts/0", "/dev/null"))
    _proc(files, 200, ["sleep", "100", mp], fds=("/dev/fuse-not",))
    _proc(files, 300, ["bindfs", "/srv/b", mp], fds=("/dev/null", "socket:[12]", "/dev/fuse"))
    root = sysroots.make(tmp_path / "root", files)
    fs = {"fstype": "fuse", "mount_point": mp, "mount_source": "/srv/b"}
    facts = registry.for_fs(fs).collect(Reader(root), fs, "6.1.0", {})
    assert facts["daemon"]["pid"] == 300 and facts["subtype"] == "bindfs", facts
    assert facts["name"] == "bindfs"


def test_cpu_per_gb_is_the_ranks_share_plus_the_clients_own():
    """Each share per the bytes it served: the ranks' over the measured ranks' bytes, the
    daemon's over all the bytes of the nodes that measured it; hostile values are left out."""
    dt = [("iteration", "i4"), ("node", "i4"), ("bytes", "i8"), ("cpu_user_seconds", "f8"),
          ("cpu_system_seconds", "f8")]
    rows = np.array([(0, 0, 10**9, 1.0, 0.5), (0, 0, 10**9, np.nan, np.nan),
                     (0, 1, 2 * 10**9, 2.0, 0.5)], dtype=dt)
    counters = [
        {"iteration": 0, "node": 0,
         "delta": {"client_cpu": {"seconds": 3.0, "processes": {"9 glusterfs": 3.0,
                                                                "10 x": float("nan"),
                                                                "11 y": -1, "12 z": True,
                                                                "13 w": "5"}}}},
        {"iteration": 0, "node": 1, "delta": {"kind": "x"}},  # this node measured none
        {"iteration": 1, "node": 1, "delta": {"client_cpu": {"processes": {"9 q": 99.0}}}},
    ]
    cpu = clientcpu.per_GB(rows, counters, 0)
    assert cpu.ranks == pytest.approx((1.5 + 2.5) / 3.0)  # rank 1's bytes left out
    assert cpu.own == pytest.approx(3.0 / 2.0)  # node 0's two ranks wrote 2 GB
    assert cpu.total == pytest.approx(4.0 / 3.0 + 1.5) and cpu.processes == ["glusterfs"]
    none = clientcpu.per_GB(rows, [], 0)
    assert none.own == 0.0 and none.total == none.ranks and none.processes == []
    unmeasured = rows.copy()
    unmeasured["cpu_user_seconds"] = np.nan
    assert np.isnan(clientcpu.per_GB(unmeasured, counters, 0).total)  # never the daemon alone


def test_a_cpu_burning_process_is_found_and_its_seconds_counted(tmp_path):
    """Real processes: a stand-in daemon (argv[0] `glusterfs`, argv ending with the mount
    point) that burns CPU, and a decoy of another program naming the same point; the lookup
    takes the burner, and its seconds over a window are what it burnt."""
    mp = str(tmp_path / "mnt")
    os.mkdir(mp)
    burn = "import sys\nsys.stdout.write('go\\n'); sys.stdout.flush()\nwhile True: pass\n"
    idle = "import sys; sys.stdout.write('go\\n'); sys.stdout.flush(); sys.stdin.read()"
    procs = []
    try:
        for argv0, code in (("tail", idle), ("glusterfs", burn)):
            p = subprocess.Popen([argv0, "-c", code, mp], executable=sys.executable,
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                 start_new_session=True)
            procs.append(p)
            assert p.stdout.readline() == "go\n"
        found = fuse.daemon(Reader("/"), mp, "glusterfs")
        assert found is not None and found["pid"] == procs[1].pid, found
        assert found["argv"][-1] == mp
        before = ownprocs.seconds(Reader("/"), [found["pid"]])
        t0 = time.monotonic()
        time.sleep(1.0)
        after = ownprocs.seconds(Reader("/"), [found["pid"]])
        wall = time.monotonic() - t0
        spent = ownprocs.spent(before, after)
        (key, seconds), = spent.items()
        assert key.startswith(f"{procs[1].pid} ")
        # it spins all the time: most of a core over the window, never more than the wall
        assert 0.3 * wall <= seconds <= wall + 2.0 / TICK, (seconds, wall)
        assert fuse.daemon(Reader("/"), mp, "tail")["pid"] == procs[0].pid  # the decoy's
    finally:
        for p in procs:
            kill_group(p)
            p.wait(timeout=10)
            p.stdin.close()
            p.stdout.close()


def _recomputed(path):
    """Per iteration from the record's own tables, not mpiwrite's helpers: (ranks' s/GB,
    daemon's s/GB, {pid name: seconds})."""
    with h5py.File(path, "r") as h5:
        ranks = h5["ranks"][()]
        counters = h5["client_counters"][()]
    out = {}
    for it in sorted(set(int(i) for i in ranks["iteration"])):
        r = ranks[ranks["iteration"] == it]
        cpu = float((r["cpu_user_seconds"] + r["cpu_system_seconds"]).sum())
        nbytes = float(r["bytes"].sum())
        procs = {}
        for c in counters[counters["iteration"] == it]:
            procs.update(json.loads(c["counters_json"])["client_cpu"]["processes"])
        out[it] = (cpu / nbytes * 1e9, sum(procs.values()) / nbytes * 1e9, procs)
    return out


@needs_root
@pytest.mark.mpi
def test_a_run_on_a_fuse_mount_counts_its_daemon(tmp_path):
    """bindfs in the foreground (its pid is ours to know) over a folder; a 2-rank run records
    the daemon's CPU per iteration under its pid, `show` prints both shares and their sum,
    and `report --metric cpu-per-GB` gives the sum, recomputed here from the tables."""
    if shutil.which("bindfs") is None or MPIEXEC is None:
        pytest.skip("needs bindfs (apt-get install bindfs) and mpiexec")
    under, mnt = tmp_path / "under", tmp_path / "mnt"
    under.mkdir()
    mnt.mkdir()
    bindfs = subprocess.Popen(["bindfs", "-f", "--no-allow-other", str(under), str(mnt)],
                              start_new_session=True, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while not os.path.ismount(mnt):
            assert bindfs.poll() is None and time.monotonic() < deadline, "bindfs did not mount"
            time.sleep(0.05)
        out = mpirun(2, ["run", str(mnt / "d"), "-s", "32M", "-b", "64k", "-i", "2",
                         "--results", "r", "--no-live"], cwd=tmp_path)
        assert out.returncode == 0, out.stdout + out.stderr
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)
        kill_group(bindfs)
        bindfs.wait(timeout=10)
    (path,) = records_in(str(tmp_path / "r"))
    want = _recomputed(path)
    assert sorted(want) == [0, 1]
    for ranks, own, procs in want.values():
        assert list(procs) == [f"{bindfs.pid} bindfs"], procs  # the daemon we started
        assert own > 0 and ranks > 0
    shown = cli(["show", path], cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    lines = [ln.strip() for ln in shown.stdout.splitlines() if "s/GB: ranks" in ln]
    assert len(lines) == 2, shown.stdout
    for line, (ranks, own, _) in zip(lines, want.values()):
        assert line == (f"client CPU {ranks + own:.3g} s/GB: ranks {ranks:.3g} + the client's "
                        f"own processes {own:.3g} (bindfs)")
    doc = json.loads(cli(["report", str(tmp_path / "r"), "--metric", "cpu-per-GB", "--unit",
                          "iteration", "--format", "json"], cwd=tmp_path).stdout)
    row, = doc["rows"]
    assert row["mean_cpu_seconds_per_GB"] == pytest.approx(
        np.mean([r + o for r, o, _ in want.values()]), rel=1e-9)
    table = cli(["report", str(tmp_path / "r"), "--metric", "cpu-per-GB", "--by", "fstype"],
                cwd=tmp_path).stdout  # one run: its mean over the iterations
    own = np.mean([o for _, o, _ in want.values()])
    assert f"  fuse: {own:.3f} CPU s/GB (bindfs)" in table.splitlines(), table


def test_kernel_threads_are_found_by_name_and_empty_command_line(tmp_path):
    """Lustre's client threads (ptlrpcd_*, ll_*, ldlm_*) have no command line; a user process
    that calls itself `ptlrpcd_x` has one and is not the client's."""
    files = {}
    for pid, comm, cmdline in ((11, "ptlrpcd_00_00", ""), (12, "ll_ping", ""),
                               (13, "ldlm_bl_01", ""), (14, "kworker/0:1", ""),
                               (15, "ptlrpcd_x", "./ptlrpcd_x\0")):
        files[f"proc/{pid}/comm"] = comm + "\n"
        files[f"proc/{pid}/cmdline"] = cmdline
        files[f"proc/{pid}/stat"] = _stat(pid, comm, 10 * pid, pid)
    root = sysroots.make(tmp_path / "root", files)
    fs = {"fstype": "lustre", "mount_point": "/lustre", "mount_source": "10.0.0.1@tcp:/fs"}
    pids = registry.for_fs(fs).own_processes(root, fs, {})
    assert sorted(pids) == [11, 12, 13]
    assert ownprocs.seconds(Reader(root), pids) == {
        f"{p} {c}": 11 * p / TICK for p, c in ((11, "ptlrpcd_00_00"), (12, "ll_ping"),
                                               (13, "ldlm_bl_01"))}
