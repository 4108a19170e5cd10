"""Endings that need a real block filesystem of our own (an ext4 on a
loop device; root only): the results folder made append-only mid-run (`chattr +a`), and ranks
stuck inside write() at --timeout because the filesystem is frozen (`fsfreeze`)."""

import errno
import os
import subprocess
import time

import pytest
from common import cli, ext4_disk, is_root, kill_group, records_in
from test_faults import start, wait, wait_for_bytes

from mpiwrite.records import h5 as records

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
        assert records._read(path).status == "running"  # the set-up's, all it could keep
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


@pytest.mark.timeout(150)
def test_ranks_stuck_in_write_at_the_timeout_leave_a_timeout_record(tmp_path):
    """The filesystem is frozen (fsfreeze) under both ranks' writes: rank 0 cannot end the
    write phase itself, so the watchdogs must.  Once the job ended naming each rank, the record
    stayed `running` and 163-178 MB were left.  Now the record says `timeout`, and the data
    files are removed once the filesystem thaws, or named in one line."""
    with ext4_disk(tmp_path, 256) as disk:
        target = os.path.join(disk, "d")
        proc = start(2, ["run", target, "-s", "64M", "-b", "4k", "--fsync-every", "1",
                         "--timeout", "3", "--results", "r"] + QUIET, tmp_path)
        try:
            wait_for_bytes(target, 2**20)
            subprocess.run(["fsfreeze", "-f", disk], check=True)
            try:
                # the watchdogs fire at --timeout plus the grace (5 s); the ranks stay inside
                # write() until the filesystem thaws, and the launcher waits for them
                end = time.monotonic() + 40
                while proc.poll() is None and time.monotonic() < end and records._read(
                        records_in(tmp_path / "r")[0]).status == "running":
                    time.sleep(0.1)
            finally:
                subprocess.run(["fsfreeze", "-u", disk], check=True)
            rc, _out, err = wait(proc, 60)
        finally:
            kill_group(proc)
        left = [f for f in os.listdir(target) if f.endswith(".dat")] \
            if os.path.isdir(target) else []
    assert rc != 0 and "Traceback" not in err, err
    assert records._read(records_in(tmp_path / "r")[0]).status == "timeout", err
    said = [ln for ln in err.splitlines() if "timed out" in ln]
    assert said and "rank" in said[0], err
    if left:  # not removed: then named, in one line
        named = [ln for ln in err.splitlines() if "could not remove" in ln]
        assert len(named) == 1 and all(f in named[0] for f in left), (left, err)
