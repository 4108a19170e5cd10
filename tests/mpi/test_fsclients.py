"""The `client` fact of every filesystem client, from sysroot fixtures in the real formats."""

import json
import os

import pytest
import sysroots
from common import cli

from mpiwrite.clients import fuse, gpfs, nfs
from mpiwrite.clients import registry as fsclients
from mpiwrite.facts import nodeinfo
from mpiwrite.formats import nodekeys


def facts(tmp_path, files, target):
    return nodeinfo.collect(target, sysroots.make(tmp_path / "root", files))


@pytest.mark.parametrize("version,client,mode,nconnect,sec", [
    ("3", "nfs 3", "hard", 1, "sys"),
    ("4.1", "nfs 4.1", "soft", 1, "krb5p"),
    ("4.2", "nfs 4.2", "hard", 8, "sys"),
])
def test_nfs_versions_and_mount_settings(tmp_path, version, client, mode, nconnect, sec):
    f = facts(tmp_path, sysroots.nfs(version), "/mnt/nfs/me/run")
    c = f["client"]
    assert c["client"] == client and c["source"] == "mountstats"
    assert c["mode"] == mode and c["nconnect"] == nconnect and c["sec"] == sec
    assert c["proto"] == "tcp" and c["wsize"] == (524288 if version == "4.1" else 1048576)
    assert c["bytes"]["normal_write"] == 268435456 and c["bytes"]["server_write"] == 268435456
    assert c["ops"]["WRITE"]["ops"] == 256 and c["xprt"]["proto"] == "tcp"
    assert nodekeys.common_keys([f])["client"] == client
    assert "/proc/self/mountstats#/mnt/nfs" in f["raw"]  # only this mount's block, raw


def test_nfs_without_mountstats_falls_back_to_mountinfo(tmp_path):
    files = sysroots.nfs("4.2")
    del files["proc/self/mountstats"]
    f = facts(tmp_path, files, "/mnt/nfs")
    assert f["client"]["client"] == "nfs 4.2" and f["client"]["source"] == "mountinfo"
    assert f["client"]["nconnect"] == 8 and "nfs.mountstats" in f["unknown"]


def test_nfs_counters_change_between_snapshots(tmp_path):
    from mpiwrite.sysroot import Reader

    root = sysroots.make(tmp_path / "root", sysroots.nfs("4.2", written=1048576))
    before = nfs.counters(Reader(root), "/mnt/nfs")
    sysroots.make(root, {"proc/self/mountstats": sysroots.mountstats_nfs("4.2", 5 * 1048576)})
    after = nfs.counters(Reader(root), "/mnt/nfs")
    assert after["bytes"]["normal_write"] - before["bytes"]["normal_write"] == 4 * 1048576
    assert nfs.counters(Reader(root), "/elsewhere") == {}


def test_mountstats_blocks_only_nfs_and_escaped_mount_points():
    text = sysroots.mountstats_nfs("3", mp="/mnt/my\\040nfs")
    assert list(nfs.blocks(text)) == ["/mnt/my nfs"]


def test_beegfs_config_and_module_version(tmp_path):
    f = facts(tmp_path, sysroots.beegfs(), "/mnt/beegfs/x")
    c = f["client"]
    assert c["client"] == "beegfs 7.4.2" and c["version_source"] == "/sys/module/beegfs/version"
    assert c["config"]["tuneFileCacheType"] == "buffered" and c["config"]["connUseRDMA"] == "1"
    assert c["sessions"][0]["session"] == "5F3A1B2C-64B8E1D0-node01"
    assert "/proc/fs/beegfs/5F3A1B2C-64B8E1D0-node01/config" in f["raw"]


def test_beegfs_version_from_the_package_when_the_module_has_none(tmp_path):
    files = sysroots.beegfs()
    del files["sys/module/beegfs/version"]
    files.update(sysroots.dpkg(**{"beegfs-client": "7.4.2"}))
    assert facts(tmp_path, files, "/mnt/beegfs")["client"]["client"] == "beegfs 7.4.2"


def test_gpfs_config_file_and_package_version(tmp_path):
    f = facts(tmp_path, sysroots.gpfs(), "/gpfs/fs1/me")
    c = f["client"]
    assert c["client"] == "gpfs 5.1.9" and c["version_source"] == "package gpfs.base"
    assert c["config"] == {"pagepool": "16G", "maxblocksize": "16M", "workerThreads": "1024",
                           "maxMBpS": "20000", "minReleaseLevel": "5.1.9.0",
                           "clusterName": "gpfs.example.org", "verbsRdma": "enable"}
    assert c["node_classes"] == ["nsdNodes"]  # pagepool 64G there applies to NSD servers only
    assert c["config_source"] == "/var/mmfs/gen/mmfs.cfg"


def test_gpfs_command_outputs():
    assert gpfs.parse_build('=== mmdiag: version ===\nCurrent GPFS build: "5.1.9.0 ".\n'
                            "Built on Nov 15 2023 at 10:28:55\n") == "5.1.9.0"
    live = ("=== mmdiag: config ===\n   maxMBpS 2048\n ! pagepool 17179869184\n"
            " ! workerThreads 1024\n   unrelatedThing 3\n")
    assert gpfs.parse_mmdiag_config(live) == {"maxMBpS": "2048", "pagepool": "17179869184",
                                              "workerThreads": "1024"}


def test_gpfs_missing_everything_is_unknown_not_an_error(tmp_path):
    files = sysroots.gpfs()
    del files["var/mmfs/gen/mmfs.cfg"], files["var/lib/dpkg/status"]
    f = facts(tmp_path, files, "/gpfs/fs1")
    assert f["client"]["client"] == "gpfs unknown"
    assert "gpfs.version" in f["unknown"] and "gpfs.config" in f["unknown"]


def test_cephfs_kernel_client(tmp_path):
    f = facts(tmp_path, sysroots.cephfs_kernel(), "/mnt/cephfs/d")
    c = f["client"]
    assert c["client"] == "ceph kernel-6.1.0-18-amd64" and c["userspace_version"] == "18.2.1"
    assert c["options"]["wsize"] == 16777216 and c["options"]["mds_namespace"] == "cephfs"
    assert "secret" not in json.dumps(c["options"])


def test_ceph_fuse_client(tmp_path):
    f = facts(tmp_path, sysroots.ceph_fuse(), "/mnt/cephfs")
    c = f["client"]
    assert c["client"] == "ceph 18.2.1" and c["fuse"] and c["daemon"]["name"] == "ceph-fuse"
    assert c["daemon"]["pid"] == 4711


def test_glusterfs_fuse_client(tmp_path):
    f = facts(tmp_path, sysroots.glusterfs(), "/mnt/gv0/bench")
    c = f["client"]
    assert c["client"] == "glusterfs 10.3" and c["version_source"] == "package glusterfs-client"
    assert c["mount_source"] == "gluster1:/gv0" and c["max_read"] == 131072
    assert c["daemon"]["name"] == "glusterfs" and c["daemon"]["pid"] == 2345
    assert c["volfile"] == {"volfile-server": "gluster1", "volfile-id": "/gv0"}


def test_glusterfs_without_a_package_is_unknown_and_runs_nothing(tmp_path):
    f = facts(tmp_path, sysroots.glusterfs(version=None), "/mnt/gv0")
    assert f["client"]["client"] == "glusterfs unknown"  # no command is run in a sysroot
    assert "glusterfs.version" in f["unknown"]


def test_version_strings_of_fuse_daemons():
    assert fuse.parse_version("glusterfs 10.3\nRepository revision: git://x\n") == "10.3"
    assert fuse.parse_version("ceph version 18.2.1 (7fe91d5d5842e04be3b4f514d6dd990c54b29c76)"
                              " reef (stable)\n") == "18.2.1"


def test_real_glusterfs_binary_version_on_this_machine():
    import shutil

    from mpiwrite.clients.common import command
    from mpiwrite.sysroot import Reader

    if not shutil.which("glusterfs"):
        pytest.skip("glusterfs-client is not installed (apt-get install glusterfs-client)")
    reader = Reader("/")
    version = fuse.parse_version(command(reader, ["glusterfs", "--version"], "g"))
    assert version and version[0].isdigit(), reader.unknown


def test_local_filesystems_have_no_client(tmp_path):
    f = facts(tmp_path, sysroots.no_lustre(), "/home/me")
    assert f["client"] == {"name": "none", "version": None, "client": "none"}


def test_lustre_client_string(tmp_path):
    f = facts(tmp_path, sysroots.lustre_215(), "/mnt/bigfs/me")
    assert f["client"]["client"] == "lustre 2.15.5"
    assert nodekeys.common_keys([f])["client"] == "lustre 2.15.5"


def test_mixed_clients_over_nodes(tmp_path):
    a = nodeinfo.collect("/mnt/nfs", sysroots.make(tmp_path / "a", sysroots.nfs("4.2")))
    b = nodeinfo.collect("/mnt/nfs", sysroots.make(tmp_path / "b", sysroots.nfs("3")))
    assert nodekeys.common_keys([a, b])["client"] == "mixed"


@pytest.mark.parametrize("keys,client", [
    ({"lustre": "1.6.5", "fstype": "lustre"}, "lustre 1.6.5"),
    ({"lustre": "none", "fstype": "ext4"}, "none"),
    ({"lustre": "none", "fstype": "nfs4"}, "nfs unknown"),
    ({"lustre": "mixed", "fstype": "lustre"}, "mixed"),
    ({"lustre": "none", "fstype": "nfs", "client": "nfs 3"}, "nfs 3"),
])
def test_schema_1_records_derive_client_from_lustre(keys, client):
    assert fsclients.legacy_client(keys) == client
    old_facts = {"lustre": {"present": keys["lustre"] != "none", "version": keys["lustre"]},
                 "fs": {"fstype": keys["fstype"]}}
    if "client" not in keys:
        assert nodekeys.client_of(old_facts) == client


@pytest.mark.parametrize("fixture,target,expect", [
    ("nfs", "/mnt/nfs", "nfs 4.2"), ("beegfs", "/mnt/beegfs", "beegfs 7.4.2"),
    ("gpfs", "/gpfs/fs1", "gpfs 5.1.9"), ("glusterfs", "/mnt/gv0", "glusterfs 10.3"),
])
def test_env_shows_the_client(tmp_path, fixture, target, expect):
    root = sysroots.make(tmp_path / "root", getattr(sysroots, fixture)())
    out = cli(["env", "--sysroot", root, target], cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert f"client         {expect}" in out.stdout
    doc = json.loads(cli(["env", "--json", "--sysroot", root, target], cwd=tmp_path).stdout)
    assert doc["client"]["client"] == expect


def test_client_is_a_reserved_tag_name():
    from mpiwrite.errors import ConfigError
    from mpiwrite.run import config

    with pytest.raises(ConfigError, match="built-in run key"):
        config.parse_tag("client=1.6.5")


@pytest.mark.mpi
@pytest.mark.parametrize("fixture,expect", [("nfs", "nfs 4.2"), ("glusterfs", "glusterfs 10.3")])
def test_run_records_the_client(tmp_path, fixture, expect):
    import h5py
    from common import mpirun, only_record

    target = tmp_path / "mnt"
    target.mkdir()
    files = sysroots.nfs("4.2", mp=str(target)) if fixture == "nfs" else sysroots.glusterfs()
    if fixture == "glusterfs":
        files["proc/self/mountinfo"] = files["proc/self/mountinfo"].replace("/mnt/gv0",
                                                                            str(target))
        files["proc/2345/cmdline"] = files["proc/2345/cmdline"].replace("/mnt/gv0", str(target))
    root = sysroots.make(tmp_path / "root", files)
    out = mpirun(2, ["run", str(target / "d"), "-s", "1M", "--results", "r", "--sysroot", root],
                 cwd=tmp_path, timeout=120)
    assert out.returncode == 0, out.stderr
    rec = only_record(tmp_path / "r")
    assert rec.keys()["client"] == expect
    assert rec.nodes[0]["client"]["client"] == expect
    with h5py.File(rec.path) as h5:
        assert h5["nodes"]["client"][0].decode() == expect


def test_snapshot_and_delta_for_nfs_and_lustre(tmp_path):
    nfs_root = sysroots.make(tmp_path / "n", sysroots.nfs("4.2", written=1048576))
    fs = {"fstype": "nfs4", "mount_point": "/mnt/nfs"}
    before = fsclients.snapshot(nfs_root, fs)
    sysroots.make(nfs_root, {"proc/self/mountstats": sysroots.mountstats_nfs("4.2", 9 * 1048576)})
    d = fsclients.delta(before, fsclients.snapshot(nfs_root, fs))
    assert d["kind"] == "nfs" and d["write_bytes"] == 8 * 1048576
    assert d["bytes"]["server_write"] == 8 * 1048576 and d["write_rpcs"] == 8

    lus_root = sysroots.make(tmp_path / "l", {**sysroots.lustre_215(),
                                              **sysroots.lustre_215_counters(writes=(1, 1))})
    fs = {"fstype": "lustre", "mount_point": "/mnt/bigfs"}
    before = fsclients.snapshot(lus_root, fs)
    sysroots.make(lus_root, sysroots.lustre_215_counters(writes=(3, 1)))
    d = fsclients.delta(before, fsclients.snapshot(lus_root, fs))
    assert d["kind"] == "lustre" and d["write_bytes"] == 2 * 1048576
    local = fsclients.snapshot(lus_root, {"fstype": "ext4"})
    assert fsclients.delta(local, local) == {"kind": None, "write_bytes": None}


def test_snapshots_are_cheap(tmp_path):
    import time

    root = sysroots.make(tmp_path / "l", {**sysroots.lustre_215(),
                                          **sysroots.lustre_215_counters()})
    fs = {"fstype": "lustre"}
    t0 = time.perf_counter()
    for _ in range(20):
        fsclients.snapshot(root, fs)
    assert (time.perf_counter() - t0) / 20 < 0.05  # two OSCs: about 1 ms here


def test_mount_secrets_are_not_recorded(tmp_path):
    files = sysroots.cephfs_kernel()
    files["proc/self/mountinfo"] = files["proc/self/mountinfo"].replace(
        "secret=<hidden>", "secret=AQBkey==")
    f = facts(tmp_path, files, "/mnt/cephfs")
    assert "AQBkey" not in json.dumps(f)
    assert "secret=<hidden>" in f["fs"]["mount_options"]


def test_a_slow_command_is_ended_with_its_children_and_leaves_an_unknown(monkeypatch):
    import time

    from mpiwrite.clients import common as fscommon
    from mpiwrite.sysroot import Reader

    monkeypatch.setattr(fscommon, "COMMAND_TIMEOUT", 0.5)
    reader = Reader("/")
    t0 = time.monotonic()
    out = fscommon.command(reader, ["sh", "-c", "sleep 30 & echo $! > /dev/null; sleep 30"],
                           "gpfs.version")
    assert out is None and time.monotonic() - t0 < 5
    assert "no answer within 0.5 s" in reader.unknown["gpfs.version"]
    assert fscommon.command(reader, ["no-such-program-here"], "x") is None
    assert fscommon.command(reader, ["false"], "y") is None and "exit 1" in reader.unknown["y"]
    monkeypatch.setenv("MPIWRITE_NO_COMMANDS", "1")
    assert fscommon.command(reader, ["true"], "z") is None


def test_client_files_that_leave_the_sysroot_are_not_read(tmp_path):
    secret = tmp_path / "secret"
    secret.write_text("device x:/y mounted on /mnt/nfs with fstype nfs4 statvers=1.1\n"
                      "\topts:\trw,vers=4.2,TOP-SECRET\n")
    files = sysroots.glusterfs()
    files.update({"proc/self/mountinfo": sysroots.nfs()["proc/self/mountinfo"]})
    root = sysroots.make(tmp_path / "root", files)
    os.symlink(str(secret), os.path.join(root, "proc/self/mountstats"))
    os.remove(os.path.join(root, "var/lib/dpkg/status"))
    os.symlink(str(secret), os.path.join(root, "var/lib/dpkg/status"))
    f = nodeinfo.collect("/mnt/nfs", root)
    assert "TOP-SECRET" not in json.dumps(f)
    assert f["client"]["source"] == "mountinfo" and f["client"]["client"] == "nfs 4.2"
    assert "leaves the sysroot" in f["unknown"]["nfs.mountstats"]


# The last graph of a GlusterFS 10.3 client's log (the testbed, network.compression on and
# performance.write-behind off), abridged to the lines the parser reads.
GLUSTER_LOG = """[2026-11-30 05:10:01.1] I [MSGID: 101190] 0-epoll: Started thread
Final graph:
+------------------------------------------------------------------------------+
  1: volume mwvol-client-0
  2:     type protocol/client
  3:     option ping-timeout 42
  4:     option remote-host 10.206.77.200
 15: end-volume
 33: volume mwvol-dht
 34:     type cluster/distribute
 37:     subvolumes mwvol-client-0 mwvol-client-1
 38: end-volume
 46: volume mwvol-cdc
 47:     type features/cdc
 48:     option mode client
 49:     subvolumes mwvol-utime
 50: end-volume
 52: volume mwvol-open-behind
 53:     type performance/open-behind
 55: end-volume
 72: volume mwvol
 73:     type debug/io-stats
 74:     option log-level INFO
+------------------------------------------------------------------------------+
[2026-11-30 05:10:02.2] I [fuse-bridge.c:5296:fuse_init] 0-glusterfs-fuse: FUSE inited
"""


def test_gluster_graph_from_the_clients_log():
    from mpiwrite.clients.fuse import parse_graph

    old = GLUSTER_LOG.replace("features/cdc", "performance/write-behind")
    g = parse_graph(old + GLUSTER_LOG)  # the last graph wins (a volume set switches it)
    assert g["compression"] == "on" and g["write_behind"] == "off"
    assert g["translators"][:3] == ["protocol/client", "cluster/distribute", "features/cdc"]
    assert g["options"]["cdc.mode"] == "client" and g["options"]["client-0.ping-timeout"] == "42"
    assert parse_graph("no graph here") is None


# ---- which process serves a FUSE mount (fs_fuse.daemon) ----

FUSE_ARGV = ["ceph-fuse", "--id", "admin", "-m", "10.0.0.7:6789", "/mnt/cephfs"]
LAST_PID = "9999999"  # sorts after every real pid: the other candidates are looked at first


def _cmdline(argv):
    return "\0".join(argv) + "\0"


def test_fuse_daemon_is_not_mpiwrite_itself(tmp_path):
    """`mpiwrite env /mnt/cephfs` ends its own command line with the mount point: before, it
    named itself the daemon (found on the testbed: `daemon python3 pid 10888`)."""
    files = sysroots.ceph_fuse()
    del files["proc/4711/cmdline"]
    files[f"proc/{os.getpid()}/cmdline"] = _cmdline(FUSE_ARGV)  # even one that looks right
    files[f"proc/{LAST_PID}/cmdline"] = _cmdline(FUSE_ARGV)
    assert facts(tmp_path, files, "/mnt/cephfs")["client"]["daemon"]["pid"] == int(LAST_PID)



@pytest.mark.parametrize("argv", [
    ["/usr/bin/python3", "/usr/local/bin/mpiwrite", "env", "/mnt/cephfs"],  # another user's
    ["tail", "-f", "/mnt/cephfs"], ["inotifywait", "-m", "/mnt/cephfs"],
    ["/usr/sbin/glusterfs", "--volfile-server=x", "/mnt/cephfs"],  # another client's binary
])
def test_fuse_daemon_is_the_filesystems_client_binary(tmp_path, argv):
    files = sysroots.ceph_fuse()
    del files["proc/4711/cmdline"]
    files["proc/1000/cmdline"] = _cmdline(argv)
    files[f"proc/{LAST_PID}/cmdline"] = _cmdline(["/usr/bin/ceph-fuse"] + FUSE_ARGV[1:])
    c = facts(tmp_path, files, "/mnt/cephfs")["client"]
    assert c["daemon"]["pid"] == int(LAST_PID) and c["daemon"]["name"] == "ceph-fuse"
    files[f"proc/{LAST_PID}/cmdline"] = _cmdline(["/usr/bin/sshfs", "x:/", "/mnt/cephfs"])
    assert facts(tmp_path / "2", files, "/mnt/cephfs")["client"]["daemon"] is None



def _two_hosts(ours="mnt:[4026531832]", other="mnt:[4026532540]"):
    """Two ceph-fuse daemons with the same command line, as on the testbed's emulated hosts:
    pid 1000 serves the mount in another mount namespace, LAST_PID ours."""
    files = sysroots.ceph_fuse()
    del files["proc/4711/cmdline"]
    files["proc/1000/cmdline"] = files[f"proc/{LAST_PID}/cmdline"] = _cmdline(FUSE_ARGV)
    if ours:
        files["proc/self/ns/mnt"] = sysroots.Link(ours)
        files[f"proc/{LAST_PID}/ns/mnt"] = sysroots.Link(ours)
    if other:
        files["proc/1000/ns/mnt"] = sysroots.Link(other)
    return files


def test_fuse_daemon_is_in_our_mount_namespace(tmp_path):
    """Each emulated host runs its own ceph-fuse with the same arguments; before, h2 named
    h1's daemon (the first in /proc), whose admin socket and counters are another mount's."""
    c = facts(tmp_path, _two_hosts(), "/mnt/cephfs")["client"]
    assert c["daemon"]["pid"] == int(LAST_PID)


def test_fuse_daemon_namespace_unreadable_is_decided_by_its_mount_device(tmp_path):
    """A user may not read root's /proc/PID/ns/mnt (ptrace rules), but every
    /proc/PID/mountinfo: the daemon whose table has our mount point on our device (0:50 in
    the fixture's mountinfo) is ours; one whose table has another device is not."""
    files = _two_hosts(other=None)
    del files[f"proc/{LAST_PID}/ns/mnt"]
    line = "40 22 0:{} / /mnt/cephfs rw,relatime - fuse.ceph-fuse ceph-fuse rw\n"
    files["proc/1000/mountinfo"] = line.format(51)
    files[f"proc/{LAST_PID}/mountinfo"] = line.format(50)
    assert facts(tmp_path, files, "/mnt/cephfs")["client"]["daemon"]["pid"] == int(LAST_PID)
    del files[f"proc/{LAST_PID}/mountinfo"]  # nothing says it is ours: no daemon
    assert facts(tmp_path / "2", files, "/mnt/cephfs")["client"]["daemon"] is None


def test_fuse_daemon_without_namespaces_to_compare_is_taken(tmp_path):
    """No /proc/self/ns/mnt (a sysroot of an old kernel, or one made without it): nothing to
    compare, the first daemon with the right binary and mount point is taken, as before."""
    c = facts(tmp_path, _two_hosts(ours=None, other=None), "/mnt/cephfs")["client"]
    assert c["daemon"]["pid"] == 1000


def test_fuse_daemon_seen_from_a_copy_of_its_mount_namespace(tmp_path):
    """A rank launched into a copy of the host's mount namespace (the testbed's MPI wrapper
    runs `unshare --mount`; containers do the same) sees the daemon in another namespace,
    serving the same FUSE connection: our mount's device (0:50) at the mount point in its
    table.  Another host's daemon (pid 1000, device 0:51) is still not ours; one in our own
    namespace is preferred to one found by device."""
    files = _two_hosts(other="mnt:[4026532540]")
    files[f"proc/{LAST_PID}/ns/mnt"] = sysroots.Link("mnt:[4026532541]")  # the host's
    line = "40 22 0:{} / /mnt/cephfs rw,relatime - fuse.ceph-fuse ceph-fuse rw\n"
    files["proc/1000/mountinfo"] = line.format(51)
    files[f"proc/{LAST_PID}/mountinfo"] = line.format(50)
    assert facts(tmp_path, files, "/mnt/cephfs")["client"]["daemon"]["pid"] == int(LAST_PID)
    files["proc/1000/mountinfo"] = line.format(50)  # both serve it: the namespace decides
    files["proc/1000/ns/mnt"] = sysroots.Link("mnt:[4026531832]")
    assert facts(tmp_path / "2", files, "/mnt/cephfs")["client"]["daemon"]["pid"] == 1000
    files["proc/1000/ns/mnt"] = sysroots.Link("mnt:[4026532540]")
    files["proc/99/cmdline"] = _cmdline(FUSE_ARGV)  # ours, found later than a device match
    files["proc/99/ns/mnt"] = sysroots.Link("mnt:[4026531832]")
    assert facts(tmp_path / "3", files, "/mnt/cephfs")["client"]["daemon"]["pid"] == 99


@pytest.mark.parametrize("fixture,target,expect", [
    ("nfs", "/mnt/nfs", "nfs 4.2"), ("beegfs", "/mnt/beegfs", "beegfs 7.4.2"),
    ("gpfs", "/gpfs/fs1", "gpfs 5.1.9"), ("glusterfs", "/mnt/gv0", "glusterfs 10.3"),
])
def test_show_names_the_client_that_served_the_target_in_its_own_terms(tmp_path, fixture,
                                                                        target, expect):
    """A run's node facts as `env --json` takes them: `show` names the client and its own
    facts, never Lustre's words for a node without Lustre."""
    import synth

    root = sysroots.make(tmp_path / "root", getattr(sysroots, fixture)())
    facts = json.loads(cli(["env", "--json", "--sysroot", root, target], cwd=tmp_path).stdout)
    facts["host"] = "n1"
    path = synth.make(tmp_path / "r.h5", [500.0], "2026s-000001", node_facts=[facts])
    out = cli(["show", path], cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    node = next(ln for ln in out.stdout.splitlines() if ln.strip().startswith("0 n1"))
    assert f"client {expect}" in node, node
    assert "lustre" not in node and "checksums" not in node, node
    keys = next(ln for ln in out.stdout.splitlines() if "keys:" in ln)
    assert f"served by the {facts['client']['name']} client" in keys \
        or f"served by the {fixture}" in keys, keys
    assert "lustre=" not in keys and "checksums=" not in keys and f"client={expect}" in keys


def test_show_keeps_lustres_own_terms_for_a_lustre_client(tmp_path):
    import synth

    path = synth.make(tmp_path / "r.h5", [500.0], "2026s-000002", lustre="2.15.3",
                      checksums="on")
    out = cli(["show", path], cwd=tmp_path).stdout
    assert "served by the lustre client; keys:" in out and "lustre=2.15.3" in out
    assert "client lustre 2.15.3 (patchless), checksums on adler" in out


def test_a_gluster_clients_graph_is_read_from_the_log_its_daemon_names(tmp_path):
    """The client runs with --log-file (as the testbed's do): the graph mark that flags a
    switch inside a timed phase comes from that log, found through the daemon's argv."""
    from mpiwrite.clients import tuning

    root = sysroots.make(tmp_path / "root", {"logs/client-h0.log": GLUSTER_LOG})
    client = {"daemon": {"pid": 4321, "name": "glusterfs",
                         "argv": ["/usr/sbin/glusterfs", "--log-file=/logs/client-h0.log",
                                  "--volfile-server=srv", "--volfile-id=/mwvol", "/mnt/g"]}}
    fs = {"fstype": "fuse.glusterfs", "mount_point": "/mnt/g", "mount_source": "srv:/mwvol"}
    where = tuning.Where("/mnt/g", root, fs, client)
    assert tuning.graph_mark(where) == f"1 graphs, {GLUSTER_LOG.count('switched to graph')}"
    assert fsclients.for_fs(fs).in_force(root, fs, client) == {
        "glusterfs graph": tuning.graph_mark(where)}
