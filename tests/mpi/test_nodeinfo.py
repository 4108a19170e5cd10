"""Node facts from sysroot fixtures of every Lustre client generation, and from this machine."""

import json
import os
import subprocess
import sys

import pytest
import sysroots
from common import MPIWRITE, cli, mpirun, only_record

from mpiwrite.clients import lustre
from mpiwrite.facts import nodeinfo
from mpiwrite.formats import nodekeys


def facts(tmp_path, files, target="/mnt/lustre/me"):
    return nodeinfo.collect(target, sysroots.make(tmp_path / "root", files))


def test_lustre_1643_patched_client(tmp_path):
    f = facts(tmp_path, sysroots.lustre_1643_patched())
    lus = f["lustre"]
    assert lus["version"] == "1.6.4.3" and lus["kernel_line"] == "47"
    assert lus["kernel"] == "patched"
    assert lus["checksums"] == "on" and lus["checksum_type"] == "unknown"  # 1.6.4: no type
    assert lus["osc"][0]["checksum_type"] is None
    assert lus["llite"][0]["max_cached_mb"] == 12288
    assert f["kernel"] == "2.6.9-67.0.4.EL_lustre.1.6.4.3smp"
    assert f["fs"]["fstype"] == "lustre" and f["fs"]["mount_source"] == "10.0.0.1@o2ib:/lustre"


@pytest.mark.parametrize("on,expect", [(1, "on"), (0, "off")])
def test_lustre_165_patchless_checksums(tmp_path, on, expect):
    lus = facts(tmp_path, sysroots.lustre_165(on))["lustre"]
    assert lus["version"] == "1.6.5" and lus["kernel"] == "patchless"
    assert lus["checksums"] == expect
    assert lus["checksum_type"] == ("adler" if on else "n/a")
    assert lus["osc"][0]["checksum_types_available"] == "crc32 adler"
    assert lus["checksum_pages"] == "off"  # the 1.6 trap: recorded beside the OSC value
    assert len(lus["osc"]) == 2 and lus["osc"][0]["max_dirty_mb"] == 32


def test_lustre_18_patchless_client(tmp_path):
    lus = facts(tmp_path, sysroots.lustre_18())["lustre"]
    assert lus["version"] == "1.8.9" and lus["kernel_line"] == "patchless_client"
    assert lus["kernel"] == "patchless" and lus["osc"][0]["max_dirty_mb"] == 32.0


def test_lustre_2952_sys_version_with_prefix(tmp_path):
    lus = facts(tmp_path, sysroots.lustre_2952())["lustre"]
    assert lus["version"] == "2.9.52" and lus["version_file"] == "/sys/fs/lustre/version"
    assert lus["checksum_type"] == "crc32c"  # /proc beside /sys
    assert lus["kernel"] == "unknown"


def test_lustre_215_split_locations(tmp_path):
    f = facts(tmp_path, sysroots.lustre_215(), target="/mnt/bigfs/me/run")
    lus = f["lustre"]
    assert lus["version"] == "2.15.5"
    assert lus["checksums"] == "on" and lus["checksum_type"] == "crc32c"
    assert lus["osc"][0]["max_pages_per_rpc"] == 1024
    assert lus["osc"][0]["max_dirty_mb"] == 2000
    assert lus["llite"][0]["max_cached_mb"] == 128877  # multi-line debugfs form
    assert lus["llite"][0]["checksums"] == 1
    assert lus["checksum_speed_MB_per_s"]["crc32c"] == 14035
    assert f["fs"]["fstype"] == "lustre" and f["fs"]["mount_point"] == "/mnt/bigfs"
    assert "lazystatfs" in f["fs"]["mount_options"]
    assert f["cpu_flags"] == "sse4_2 pclmulqdq avx2"
    assert f["mem_total_bytes"] == 263921780 * 1024


def test_mixed_osc_settings(tmp_path):
    f = facts(tmp_path, sysroots.lustre_215(checksums=(1, 0)))
    assert f["lustre"]["checksums"] == "mixed"
    assert nodekeys.common_keys([f])["checksums"] == "mixed"


def test_no_lustre(tmp_path):
    f = facts(tmp_path, sysroots.no_lustre(), target="/home/me")
    assert f["lustre"]["present"] is False
    keys = nodekeys.common_keys([f])
    assert keys["lustre"] == "none" and keys["fstype"] == "ext4"


@pytest.mark.parametrize("rate,speed", [("40 Gb/sec (4X QDR)", "QDR"),
                                        ("100 Gb/sec (4X EDR)", "EDR")])
def test_infiniband_ports(tmp_path, rate, speed):
    files = sysroots.infiniband(sysroots.no_lustre(), rates=(rate, rate))
    ports = facts(tmp_path, files)["infiniband"]
    assert len(ports) == 2 and ports[0]["hca"] == "mlx4_0" and ports[1]["port"] == "2"
    assert speed in ports[0]["rate"] and ports[0]["state"] == "4: ACTIVE"
    assert ports[0]["link_layer"] == "InfiniBand"


def test_tolerant_parsing():
    assert lustre.parse_version("lustre: 1.6.5   \nkernel: patchless")["version"] == "1.6.5"
    assert lustre.parse_version("2.15.5")["version"] == "2.15.5"
    assert lustre.parse_version("\n 2.16.1 \nextra line\n")["version"] == "2.16.1"
    assert lustre.parse_checksum_type("crc32 adler [crc32c]")["active"] == "crc32c"
    assert lustre.parse_max_cached_mb("users: 2\nmax_cached_mb: 99\nnew_key: 1") == 99
    assert lustre.parse_max_cached_mb("12288") == 12288
    assert lustre.patch_state(None, "2.6.18-53.1.21.el5_lustre.1.6.5.1") == "patched"


def test_odd_files_are_unknown_with_a_reason_not_errors(tmp_path):
    files = sysroots.lustre_165()
    root = sysroots.make(tmp_path / "root", files)
    os.remove(os.path.join(root, "proc/meminfo"))
    os.mkdir(os.path.join(root, "proc/meminfo"))  # a directory where a file should be
    os.mkfifo(os.path.join(root, "proc/cpuinfo.tmp"))
    os.replace(os.path.join(root, "proc/cpuinfo.tmp"), os.path.join(root, "proc/cpuinfo"))
    os.remove(os.path.join(root, "proc/sys/vm/dirty_ratio"))
    os.symlink("dirty_ratio", os.path.join(root, "proc/sys/vm/dirty_ratio"))  # ELOOP
    f = nodeinfo.collect("/mnt/lustre", root)
    assert f["mem_total_bytes"] is None and "is a directory" in f["unknown"]["mem"]
    assert f["vm_dirty_ratio"] is None and "vm_dirty_ratio" in f["unknown"]
    assert f["lustre"]["version"] == "1.6.5"  # the rest still read


def test_unreadable_files_for_an_ordinary_user():
    if os.geteuid() != 0:
        pytest.skip("needs root to become another user")
    import shutil
    import tempfile

    top = tempfile.mkdtemp(prefix="mpiwrite-sysroot-", dir="/tmp")  # traversable by nobody
    try:
        os.chmod(top, 0o755)
        root = sysroots.make(os.path.join(top, "root"), sysroots.lustre_165())
        for dirpath, dirs, _files in os.walk(top):
            for d in dirs:
                os.chmod(os.path.join(dirpath, d), 0o755)
        os.chmod(os.path.join(root, "proc/fs/lustre/version"), 0)
        setpriv = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
        out = subprocess.run(setpriv + [MPIWRITE, "env", "--json", "--sysroot", root,
                                        "/mnt/lustre"],
                             capture_output=True, text=True, timeout=60, cwd="/")
    finally:
        shutil.rmtree(top)
    if out.returncode and "Permission denied" in out.stderr and "python" in out.stderr:
        pytest.skip("mpiwrite not usable by user nobody")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["lustre"]["version"] is None
    assert doc["unknown"]["lustre.version"] == "/proc/fs/lustre/version: permission denied"
    assert doc["lustre"]["checksums"] == "on"


def test_env_command_on_this_machine_is_fast(tmp_path):
    import time

    t0 = time.monotonic()
    out = cli(["env", "--json", str(tmp_path)], cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["kernel"] == os.uname().release
    assert doc["fs"]["fs_magic"] is not None and doc["cores"] >= 1
    t1 = time.monotonic()
    nodeinfo.collect(str(tmp_path))
    assert time.monotonic() - t1 < 1.0, "reading node facts must cost well under a second"
    assert t1 - t0 < 30
    text = cli(["env", str(tmp_path)], cwd=tmp_path).stdout
    assert "kernel" in text and "filesystem" in text


def test_env_honours_the_environment_variable(tmp_path):
    root = sysroots.make(tmp_path / "root", sysroots.lustre_215())
    out = cli(["env", "/mnt/bigfs"], cwd=tmp_path, env={"MPIWRITE_SYSROOT": root})
    assert out.returncode == 0
    assert "2.15.5" in out.stdout and "crc32c" in out.stdout


@pytest.mark.mpi
def test_multi_rank_run_records_the_sysroot_facts(tmp_path):
    root = sysroots.make(tmp_path / "root", sysroots.infiniband(sysroots.lustre_165(0)))
    out = mpirun(3, ["run", "d", "-s", "1M", "--results", "r", "--sysroot", root,
                     "--tag", "build=1.6.5"], cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "lustre 1.6.5" in out.stdout and "checksums off" in out.stdout
    rec = only_record(tmp_path / "r")
    keys = rec.keys()
    assert keys["lustre"] == "1.6.5" and keys["checksums"] == "off"
    assert keys["client"] == "none"  # the target is on the fixture's ext3 /, not /mnt/lustre
    assert keys["kernel"] == "2.6.18-53.1.14.el5"
    node = rec.nodes[0]
    assert node["lustre"]["osc"][0]["checksum_type"] == "adler"
    assert node["infiniband"][0]["rate"] == "40 Gb/sec (4X QDR)"
    assert node["software"]["mpi_library"].startswith("MPICH")
    assert "/proc/fs/lustre/version" in node["raw"]  # the raw text, for re-parsing later
    assert (rec.ranks["node"] == 0).all()


def test_stripe_layout_from_a_lov_xattr():
    import struct

    v1 = struct.pack("<II16sIHH", 0x0BD10BD0, 1, b"\0" * 16, 4 * 2**20, 8, 3)
    v1 += b"\0" * 24 * 8
    assert lustre.parse_lov(v1) == {"layout": "v1", "pattern": 1, "stripe_size": 4 * 2**20,
                                    "stripe_count": 8, "stripe_offset": 3}
    pfl = struct.pack("<II", 0x0BD60BD0, 0) + b"\0" * 40
    assert lustre.parse_lov(pfl) == {"layout": "composite"}
    assert lustre.parse_lov(b"short") is None
    assert nodeinfo.stripe_of("/proc/self/status") is None  # no such xattr off Lustre


def test_slurm_context_from_the_environment():
    env = {"SLURM_JOB_ID": "4242", "SLURM_STEP_ID": "3", "SLURM_JOB_NODELIST": "n[01-04]",
           "SLURM_NNODES": "4", "SLURM_NTASKS": "64", "SLURM_CLUSTER_NAME": "lab", "HOME": "/"}
    ctx = nodeinfo.slurm(env)
    assert ctx == {"job_id": "4242", "step_id": "3", "job_nodelist": "n[01-04]",
                   "nnodes": "4", "ntasks": "64", "cluster_name": "lab"}


@pytest.mark.mpi
def test_tag_file_and_tags_are_stored(tmp_path):
    (tmp_path / "tags").write_text("# study\nbuild=1.6.5\nsite=lab\n\n")
    out = mpirun(2, ["run", "d", "-s", "1M", "--results", "r", "--tag-file", "tags", "--tag",
                     "rep=1"], cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert only_record(tmp_path / "r").tags() == {"build": "1.6.5", "site": "lab", "rep": "1"}


def test_mount_options_are_not_repeated(tmp_path):
    """mountinfo lists the mount's and the superblock's options: env showed rw,relatime,rw,..."""
    from mpiwrite.facts.nodeinfo import mounts
    from mpiwrite.sysroot import Reader

    (tmp_path / "proc" / "self").mkdir(parents=True)
    (tmp_path / "proc" / "self" / "mountinfo").write_text(
        "29 1 253:0 / / rw,relatime shared:1 - xfs /dev/vda1 rw,seclabel,attr2,inode64\n")
    (m,) = mounts(Reader(str(tmp_path)))
    assert m["options"] == "rw,relatime,seclabel,attr2,inode64"


def _importlib_versions(names, path=None):
    from importlib import metadata

    out, where = {}, {} if path is None else {"path": path}
    for n in names:
        dist = next(iter(metadata.distributions(name=n, **where)), None)
        out[n] = dist.version if dist is not None else None
    return out


def test_versions_are_importlib_metadatas_without_importing_it():
    """software() reads dist-info folders itself (a node leader's start-up skips importing
    importlib.metadata): its answers are importlib.metadata's, here and in a fresh process."""
    names = nodeinfo.DISTS + ("pytest", "no-such-dist")
    assert nodeinfo.dist_versions(names) == _importlib_versions(names)
    probe = ("import sys; from mpiwrite.facts import nodeinfo; v = nodeinfo.software(); "
             "print(v['numpy'] is not None, 'importlib.metadata' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         timeout=60, check=True)
    assert out.stdout.split() == ["True", "False"]


def test_versions_of_odd_installs_are_left_to_importlib_metadata(tmp_path):
    def dist(folder, child, text):
        (folder / child).mkdir(parents=True)
        if text is not None:
            (folder / child / ("METADATA" if child.endswith("dist-info") else "PKG-INFO"))\
                .write_text(text)

    a, b = tmp_path / "a", tmp_path / "b"
    dist(a, "Foo.Bar-1.2.post3.dist-info", "Metadata-Version: 2.1\nName: Foo.Bar\n"
         "version: 1.2.post3\n\nVersion: 9\n")
    dist(a, "eggy-0.5.egg-info", "Metadata-Version: 1.1\nName: eggy\nVersion: 0.5\n")
    dist(a, "twice-1.0.dist-info", "Name: twice\nVersion: 1.0\n")
    dist(a, "twice-2.0.dist-info", "Name: twice\nVersion: 2.0\n")
    dist(a, "bare-3.0.dist-info", None)  # no METADATA at all
    dist(b, "foo_bar-7.0.dist-info", "Name: foo_bar\nVersion: 7.0\n")  # later on the path
    dist(b, "later-4.0.dist-info", "Name: later\nVersion: 4.0\n")
    path = [str(tmp_path / "missing"), str(a), "a path hook's name", str(b)]
    names = ("foo-bar", "eggy", "twice", "bare", "later", "none")
    got = nodeinfo.dist_versions(names, path=path)
    assert got == _importlib_versions(names, path)
    assert got["foo-bar"] == "1.2.post3" and got["later"] == "4.0" and got["none"] is None
