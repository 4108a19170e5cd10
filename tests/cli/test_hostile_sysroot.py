"""A sysroot made by someone else: symlinks out of it, FIFOs, devices, huge files, odd numbers."""

import json
import os
import stat

import pytest
import sysroots
from common import cli, is_root, only_record

from mpiwrite import sysroot
from mpiwrite.errors import ConfigError
from mpiwrite.facts import nodeinfo

pytestmark = pytest.mark.timeout(60)
SECRET = "root:$6$SECRET-HASH:19000:0:99999:7:::"


@pytest.fixture
def root(tmp_path):
    return sysroots.make(tmp_path / "root", sysroots.lustre_165())


def _swap(root, rel, make):
    path = os.path.join(root, rel)
    if os.path.lexists(path):
        os.remove(path)
    make(path)
    return path


@pytest.fixture
def secret(tmp_path):
    p = tmp_path / "shadow"
    p.write_text(SECRET + "\n")
    os.chmod(p, 0o600)
    return str(p)


@pytest.mark.parametrize("rel", ["proc/cpuinfo", "proc/fs/lustre/version", "proc/meminfo"])
@pytest.mark.parametrize("how", ["absolute", "relative", "via-dir"])
def test_symlink_out_of_the_sysroot_is_not_read(root, secret, tmp_path, rel, how):
    if how == "absolute":
        _swap(root, rel, lambda p: os.symlink(secret, p))
    elif how == "relative":
        _swap(root, rel, lambda p: os.symlink(os.path.relpath(secret, os.path.dirname(p)), p))
    else:  # a directory on the way is the symlink
        outside = tmp_path / "outside"
        outside.mkdir()
        (outside / os.path.basename(rel)).write_text(SECRET)
        parent = os.path.join(root, os.path.dirname(rel))
        os.rename(parent, parent + ".old")
        os.symlink(outside, parent)
    out = cli(["env", "--json", "--raw", "--sysroot", root, "/mnt/lustre"], cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "SECRET" not in out.stdout
    doc = json.loads(out.stdout)
    assert any("leaves the sysroot" in why for why in doc["unknown"].values()) or \
        doc["lustre"]["version"] is None


def test_symlink_inside_the_sysroot_is_followed(root):
    real = os.path.join(root, "proc/meminfo")
    os.rename(real, real + ".real")
    os.symlink("meminfo.real", real)
    assert nodeinfo.collect("/mnt/lustre", root)["mem_total_bytes"] == 16432136 * 1024


def test_fifo_and_device_are_refused_without_blocking(root):
    _swap(root, "proc/meminfo", os.mkfifo)
    if is_root():
        _swap(root, "proc/cpuinfo", lambda p: os.mknod(p, stat.S_IFCHR | 0o644,
                                                       os.makedev(1, 5)))  # /dev/zero
    f = nodeinfo.collect("/mnt/lustre", root)
    assert f["mem_total_bytes"] is None and "not a regular file" in f["unknown"]["mem"]
    if is_root():
        assert "not a regular file" in f["unknown"]["cpu"]
    assert f["lustre"]["version"] == "1.6.5"


def test_huge_file_is_read_only_up_to_the_cap(root):
    path = os.path.join(root, "proc/cpuinfo")
    with open(path, "w") as fh:
        fh.write(sysroots.CPUINFO)
        fh.write("x" * (8 * 2**20))
    r = sysroot.Reader(root)
    text, why = r.read("proc/cpuinfo")
    assert why == "" and len(text) == sysroot.MAX_READ


BAD_NUMBERS = ["inf", "-inf", "nan", "9" * 20, "9" * 400, "1e400", "١٢", "0x10", ""]


@pytest.mark.parametrize("value", BAD_NUMBERS)
def test_numbers_that_do_not_fit_are_unknown(root, value):
    with open(os.path.join(root, "proc/meminfo"), "w") as fh:
        fh.write(f"MemTotal:       {value} kB\n")
    for key in nodeinfo.VM_KEYS:
        with open(os.path.join(root, "proc/sys/vm", key), "w") as fh:
            fh.write(f"{value}\n")
    f = nodeinfo.collect("/mnt/lustre", root)
    assert f["mem_total_bytes"] is None
    assert all(f[f"vm_{k}"] is None for k in nodeinfo.VM_KEYS)
    json.dumps(f, allow_nan=False)


def test_env_with_inf_memory_exits_0(root, tmp_path):
    with open(os.path.join(root, "proc/meminfo"), "w") as fh:
        fh.write("MemTotal:       inf kB\n")
    with open(os.path.join(root, "proc/sys/vm/dirty_ratio"), "w") as fh:
        fh.write("inf\n")
    out = cli(["env", "--sysroot", root, "/mnt/lustre"], cwd=tmp_path)
    assert out.returncode == 0 and "memory         unknown" in out.stdout, out.stderr


def test_run_with_20_digit_memory_records_it_unknown(root, tmp_path):
    with open(os.path.join(root, "proc/meminfo"), "w") as fh:
        fh.write(f"MemTotal:       {'9' * 20} kB\n")
    out = cli(["run", "d", "-s", "64k", "-b", "64k", "--results", "r", "--sysroot", root],
              cwd=tmp_path, timeout=60)
    assert out.returncode == 0, out.stderr
    assert only_record(str(tmp_path / "r")).nodes[0]["mem_total_bytes"] is None


@pytest.mark.parametrize("bad", ["/nonexistent-sysroot", "/etc/passwd"])
def test_sysroot_that_is_not_a_directory_is_exit_2(tmp_path, bad):
    with pytest.raises(ConfigError):
        sysroot.check(bad)
    for env, args in (({"MPIWRITE_SYSROOT": bad}, []), ({}, ["--sysroot", bad])):
        out = cli(["env", *args], cwd=tmp_path, env=env)
        assert out.returncode == 2, out
        assert out.stderr.startswith("mpiwrite: error: --sysroot") and bad in out.stderr
        assert len(out.stderr.splitlines()) == 1


def test_real_root_is_exempt(tmp_path):
    assert sysroot.check("/") == "/"
    f = nodeinfo.collect(str(tmp_path), "/")
    assert f["kernel"] and f["mem_total_bytes"] and f["fs"]["mount_point"]


def test_escapes_in_facts_do_not_reach_the_terminal(root, tmp_path):
    with open(os.path.join(root, "proc/sys/kernel/osrelease"), "w") as fh:
        fh.write("6.1\x1b]0;owned\x07\x1b[2J\n")
    out = cli(["env", "--sysroot", root, "/mnt/lustre"], cwd=tmp_path)
    assert out.returncode == 0 and "\x1b" not in out.stdout and "\x07" not in out.stdout
    assert "\\x1b]0;owned" in out.stdout


def test_inside_a_run_a_bad_sysroot_is_recorded_not_raised(tmp_path):
    """One rank must not raise alone inside a run (the others would wait): the run checks the
    sysroot with sysroot.check before MPI; collect only records the reason."""
    f = nodeinfo.collect(str(tmp_path), "/nonexistent-sysroot", mpi_library="MPICH x")
    assert "does not exist" in f["unknown"]["sysroot"]
    with pytest.raises(ConfigError):
        nodeinfo.collect(str(tmp_path), "/nonexistent-sysroot")
