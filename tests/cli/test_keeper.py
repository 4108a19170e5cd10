"""A node's keeper (run/keeper.py) as its leader starts it: a real process reading a real
pipe, real files, a rank that is a real process killed before or after the keeper starts."""

import json
import os
import subprocess
import sys
import time

import pytest

from mpiwrite.host import start_ticks
from mpiwrite.vocab import names

RUN = "20991231T235959Z-a1b2c3"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _files(target):
    lock = names.lock(RUN, 0)
    data = [names.data_file(RUN, 0, r) for r in (0, 1)]
    other = names.data_file("20991231T235958Z-ffffff", 0, 0)  # another run's: never touched
    for name in [lock] + data + [other]:
        (target / name).write_bytes(b"x")
    return lock, data, other


def _keeper(target, info_of):
    """The keeper started as layout._start_keeper starts it; `info_of(fd)` its first line."""
    fd = os.open(target, os.O_RDONLY | os.O_DIRECTORY)
    r, w = os.pipe()
    env = dict(os.environ, PYTHONPATH=ROOT)
    proc = subprocess.Popen([sys.executable, "-m", "mpiwrite.run.keeper"], stdin=r,
                            pass_fds=(fd,), cwd="/", env=env, start_new_session=True)
    os.close(r)
    os.write(w, (json.dumps(info_of(fd)) + "\n").encode())
    return proc, w, fd


def _info(fd, pids, ticks, lock):
    return {"run_id": RUN, "node": 0, "lock": lock, "target_fd": fd, "ranks": [0, 1],
            "pids": pids, "ticks": ticks, "first": True, "host": "h", "results_fd": None,
            "record": None, "keep": False}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("seen", [True, False], ids=["seen-by-the-leader", "another-namespace"])
def test_ranks_killed_before_the_keeper_read_them_are_gone_not_unseen(tmp_path, seen):
    """The leader reads its ranks' start times while they live; ranks then killed before
    the keeper has even started are gone, and their files and the lock go (once the keeper
    read the times itself, found -1 and took them for ranks of another PID namespace, and the
    lock file was left).  A rank the leader itself could not see (-1) leaves all to clean."""
    lock, data, other = _files(tmp_path)
    ranks = [subprocess.Popen(["sleep", "60"]) for _ in range(2)]
    pids = [p.pid for p in ranks]
    ticks = [start_ticks(p) for p in pids] if seen else [start_ticks(pids[0]), -1]
    assert ticks[0] > 0
    for p in ranks:
        p.kill()
        p.wait()
    proc, w, fd = _keeper(tmp_path, lambda fd: _info(fd, pids, ticks, lock))
    try:
        os.close(w)  # the leader dies without a word
        assert proc.wait(timeout=30) == (0 if seen else 1)
    finally:
        proc.kill()
        os.close(fd)
    left = sorted(os.listdir(tmp_path))
    assert left == ([other] if seen else sorted([lock, other] + data)), left


@pytest.mark.timeout(60)
def test_an_orderly_end_touches_nothing_and_a_missing_field_is_exit_2(tmp_path):
    lock, data, other = _files(tmp_path)
    me = os.getpid()
    proc, w, fd = _keeper(tmp_path, lambda fd: _info(fd, [me], [start_ticks(me)], lock))
    try:
        time.sleep(1.5)
        assert proc.poll() is None  # it waits on its pipe, beating the lock file
        os.write(w, b"done\n")
        os.close(w)
        assert proc.wait(timeout=10) == 0
    finally:
        proc.kill()
        os.close(fd)
    assert sorted(os.listdir(tmp_path)) == sorted([lock, other] + data)

    def without_ticks(fd):
        info = _info(fd, [me], [1], lock)
        del info["ticks"]
        return info

    proc, w, fd = _keeper(tmp_path, without_ticks)
    try:
        os.close(w)
        assert proc.wait(timeout=10) == 2
    finally:
        proc.kill()
        os.close(fd)
    assert sorted(os.listdir(tmp_path)) == sorted([lock, other] + data)
