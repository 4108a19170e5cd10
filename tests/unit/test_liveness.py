"""facts/liveness.py: a run's proof of life is its lock (a flock on one inode) or, where the
file says its times are a heartbeat, a lock file touched less than FRESH seconds ago: what
every path to the file sees, even one where the flock does not show (another mount, a FUSE
client's backing folder, NFS without locks)."""

import fcntl
import os
import time

from mpiwrite.facts import liveness


def _lock_file(tmp_path, heartbeat: bool, age: float):
    path = tmp_path / ".mpiwrite-x-n00000.lock"
    path.write_bytes(b"")
    os.chmod(path, liveness.HEARTBEAT_MODE if heartbeat else 0o644)
    then = time.time() - age
    os.utime(path, (then, then))
    return path


def test_a_fresh_heartbeat_is_a_live_run_without_any_flock(tmp_path):
    path = _lock_file(tmp_path, True, 1.0)
    state, why = liveness.check(str(path))
    assert state == liveness.HELD and "heartbeat" in why


def test_a_stale_heartbeat_or_none_declared_proves_nothing_beyond_the_flock(tmp_path):
    assert liveness.check(str(_lock_file(tmp_path, True, liveness.FRESH + 5)))[0] \
        == liveness.FREE
    assert liveness.check(str(_lock_file(tmp_path, False, 0.0)))[0] == liveness.FREE


def test_a_held_flock_is_live_whatever_the_times_say(tmp_path):
    path = _lock_file(tmp_path, True, liveness.FRESH + 5)
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert liveness.check(str(path))[0] == liveness.HELD
    finally:
        os.close(fd)


def test_a_clock_ahead_by_less_than_fresh_counts_as_fresh(tmp_path):
    """A file server whose clock is ahead sets times in our future: still a heartbeat."""
    assert liveness.check(str(_lock_file(tmp_path, True, -2.0)))[0] == liveness.HELD
