"""The record writer in a folder other people can write to, and on a disk that fills up."""

import errno
import json
import os
import pathlib
import shutil
import subprocess
import tempfile

import numpy as np
import pytest
import synth
from common import cli, is_root, mounted, read_record

from mpiwrite.formats import summary
from mpiwrite.records import h5 as records

pytestmark = pytest.mark.timeout(60)


def _victim(tmp_path):
    other = tmp_path / "elsewhere"
    other.mkdir()
    victim = other / "victim"
    victim.write_bytes(b"precious\n")
    os.chmod(victim, 0o600)
    return victim


def _record(path, rows=0, run_id="20260101T000000Z-aaaaaa"):
    """A synthetic record; rows > 0 adds that many incompressible sample rows."""
    synth.make(path, [500.0], run_id)
    rec = read_record(str(path))
    if rows:
        s = np.zeros(rows, dtype=summary.SAMPLE_DTYPE)
        s["t"] = np.random.default_rng(1).random(rows)
        s["bytes"] = np.random.default_rng(2).integers(0, 2**62, rows)
        rec.samples = s
    return rec


def test_symlink_at_every_temp_name_is_never_followed(tmp_path):
    victim = _victim(tmp_path)
    res = tmp_path / "r"
    res.mkdir()
    path = res / "mpiwrite-x.h5"
    rec = _record(tmp_path / "src.h5")
    for name in records.temp_names(str(path)):
        os.symlink(victim, name)
    with pytest.raises(OSError) as info:
        records.write(rec, str(path))
    assert info.value.errno == errno.EEXIST and info.value.strerror
    assert victim.read_bytes() == b"precious\n"
    assert not path.exists()


def test_symlink_at_the_first_temp_name_is_skipped(tmp_path):
    victim = _victim(tmp_path)
    res = tmp_path / "r"
    res.mkdir()
    path = res / "mpiwrite-x.h5"
    rec = _record(tmp_path / "src.h5")
    first = records.temp_names(str(path))[0]
    os.symlink(victim, first)
    records.write(rec, str(path))
    assert victim.read_bytes() == b"precious\n"
    assert read_record(str(path)).run_id == rec.run_id
    assert os.path.islink(first)  # someone else's: left alone
    assert sorted(os.listdir(res)) == sorted([os.path.basename(first), path.name])


@pytest.mark.root
@pytest.mark.skipif(not is_root(), reason="needs root for setpriv")
def test_symlink_planted_by_another_user_in_a_shared_folder(tmp_path):
    victim = _victim(tmp_path)
    shared = tempfile.mkdtemp(prefix="mpiwrite-shared-", dir="/tmp")
    try:
        os.chmod(shared, 0o777)  # group/world-writable results folder, no sticky bit
        path = os.path.join(shared, "mpiwrite-x.h5")
        rec = _record(tmp_path / "src.h5")
        for name in records.temp_names(path)[:2]:
            subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                            "ln", "-s", str(victim), name], check=True, timeout=10)
        records.write(rec, path)
        assert victim.read_bytes() == b"precious\n"
        assert read_record(path).status == "complete"
    finally:
        shutil.rmtree(shared)


@pytest.mark.root
@pytest.mark.skipif(not is_root(), reason="needs root to mount a tmpfs")
def test_full_disk_is_an_oserror_and_leaves_the_previous_version(tmp_path):
    with mounted(tmp_path / "full", "tmpfs", "size=64k") as mnt:
        path = os.path.join(mnt, "mpiwrite-x.h5")
        records.write(_record(tmp_path / "a.h5"), path)
        before = pathlib.Path(path).read_bytes()
        big = _record(tmp_path / "b.h5", rows=20000)  # ~480 KB, does not fit
        with pytest.raises(OSError) as info:
            records.write(big, path)
        assert info.value.errno == errno.ENOSPC and info.value.strerror
        assert os.listdir(mnt) == ["mpiwrite-x.h5"]  # no temporary file left
        assert pathlib.Path(path).read_bytes() == before
        assert read_record(path).status == "complete"


def test_an_unbuildable_record_is_an_oserror(tmp_path):
    rec = _record(tmp_path / "a.h5")
    rec.attrs["bad"] = object()  # h5py cannot store this
    with pytest.raises(OSError) as info:
        records.write(rec, str(tmp_path / "out.h5"))
    assert info.value.errno == errno.EIO and info.value.strerror
    assert sorted(os.listdir(tmp_path)) == ["a.h5"]


def test_leftover_temp_record_is_named_by_report(tmp_path):
    res = tmp_path / "r"
    res.mkdir()
    synth.make(res / "mpiwrite-a.h5", [500.0, 510.0], "a")
    left = res / ".mpiwrite-20260101T000000Z-dead00.h5.tmp-4242"
    left.write_bytes(b"half a record")
    out = cli(["report", str(res), "--by", "ranks"], cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "leftover temporary record" in out.stderr and left.name in out.stderr
    assert left.exists()  # named, not removed: it may belong to a run still going
    shown = cli(["show", "a", "--in", str(res)], cwd=tmp_path)
    assert shown.returncode == 0 and left.name in shown.stderr


def test_record_is_written_0644_without_temp_files(tmp_path):
    path = tmp_path / "mpiwrite-x.h5"
    old = os.umask(0o022)
    try:
        records.write(_record(tmp_path / "src.h5"), str(path))
    finally:
        os.umask(old)
    assert oct(os.stat(path).st_mode & 0o777) == "0o644"
    assert not [n for n in os.listdir(tmp_path) if ".tmp-" in n]
    assert json.loads(json.dumps(read_record(str(path)).params()))["block_size"] == 2**20
