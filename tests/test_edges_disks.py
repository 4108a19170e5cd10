"""Endings of issue 23, round 3, that need a real block filesystem of our own (an ext4 on a
loop device; root only): the results folder made append-only mid-run (`chattr +a`), and ranks
stuck inside write() at --timeout because the filesystem is frozen (`fsfreeze`)."""

import errno
import os
import subprocess
import time

import pytest
from common import cli, ext4_disk, is_root, kill_group, records_in
from test_faults import start, wait

from mpiwrite.formats import records

QUIET = ["--progress-interval", "0"]
pytestmark = [pytest.mark.mpi, pytest.mark.root,
              pytest.mark.skipif(not is_root(), reason="needs root (loop mounts)")]


def _until(what, proc, timeout=30.0):
    end = time.monotonic() + timeout
    while not what():
        assert time.monotonic() < end and proc.poll() is None, proc.communicate()
        time.sleep(0.02)


@pytest.mark.timeout(120)
def test_an_append_only_results_folder_gets_no_tmp_files(tmp_path):
    """`chattr +a` after the set-up's save: a record can no longer be renamed (nor a temporary
    file removed) there.  Once three .tmp files were left; now none, and the end says why the
    record was not saved."""
    with ext4_disk(tmp_path) as disk:
        results = os.path.join(disk, "r")
        proc = start(2, ["run", "d", "-s", "64k", "-b", "64k", "-i", "4", "--delay", "1.2",
                         "--results", results] + QUIET, tmp_path)
        try:
            _until(lambda: records_in(results), proc)
            subprocess.run(["chattr", "+a", results], check=True)
            rc, _out, err = wait(proc, 60)
            left = os.listdir(results)
        finally:
            kill_group(proc)
            subprocess.run(["chattr", "-a", results], capture_output=True)
        assert not [f for f in left if ".tmp-" in f], (left, err)
        assert rc == 1 and "record not saved" in err and "append-only" in err, err
        (path,) = records_in(results)
        assert records.read(path).status == "running"  # the set-up's, all it could keep
        shown = cli(["show", path], cwd=tmp_path)
        assert "status abandoned" in shown.stdout, shown.stdout


@pytest.mark.timeout(60)
def test_a_temporary_file_that_cannot_be_removed_is_named(tmp_path):
    """The folder turns append-only between the temporary file and its rename (the check
    just before the rename makes it so): neither rename nor removal works, and the error
    names the temporary file left, rather than leaving it without a word."""
    from mpiwrite import files

    with ext4_disk(tmp_path) as disk:
        folder = os.path.join(disk, "out")
        os.mkdir(folder)

        def lock(_name):
            subprocess.run(["chattr", "+a", folder], check=True)
            raise OSError(errno.EPERM, "locked by the test")

        try:
            with pytest.raises(OSError) as raised:
                files.write_replacing(os.path.join(folder, "x.json"), b"{}", check=lock)
            left = os.listdir(folder)
        finally:
            subprocess.run(["chattr", "-a", folder], capture_output=True)
        assert len(left) == 1 and ".tmp-" in left[0], left
        assert f"the temporary file {os.path.join(folder, left[0])} is left" \
            in raised.value.strerror, raised.value.strerror
        # and the next write is refused before it makes a temporary file
        subprocess.run(["chattr", "+a", folder], check=True)
        try:
            with pytest.raises(OSError, match="append-only"):
                files.write_replacing(os.path.join(folder, "y.json"), b"{}")
            assert os.listdir(folder) == left
        finally:
            subprocess.run(["chattr", "-a", folder], capture_output=True)
