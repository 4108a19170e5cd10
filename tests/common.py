"""Helpers for tests that run mpiwrite as a user would: real mpiexec, real files.

Plain functions, imported by the test modules (`from common import mpirun, ...`); conftest.py
keeps only fixtures and markers.
"""

from __future__ import annotations

import contextlib
import glob
import importlib.util
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import List, Optional

import pytest

BIN = os.path.dirname(sys.executable)
TESTS = pathlib.Path(__file__).resolve().parent  # tests/, wherever a test module sits below it
ROOT = TESTS.parent  # the repository
FIXTURES = TESTS / "fixtures"


def tool(name: str) -> Optional[str]:
    here = os.path.join(BIN, name)
    return here if os.path.exists(here) else shutil.which(name)


MPIEXEC = tool("mpiexec")
MPIWRITE = tool("mpiwrite")


# The plots need matplotlib, which only the `test-full` extra installs (README)
needs_matplotlib = pytest.mark.skipif(importlib.util.find_spec("matplotlib") is None,
                                      reason="matplotlib is not installed (pip install -e "
                                      "'.[test-full]')")


# the index of records read (records/index.py) of every command a test runs: never the
# user's own cache folder
TEST_CACHE = tempfile.mkdtemp(prefix="mpiwrite-test-cache-")
# the settings journals of the tests' studies (study/journal.py), never the user's own
TEST_STATE = tempfile.mkdtemp(prefix="mpiwrite-test-state-")


def clean_env(extra=None):
    env = dict(os.environ)
    for k in list(env):
        if k.startswith(("PMI_", "PMIX_", "OMPI_", "SLURM_", "MPIWRITE_")):
            del env[k]
    env["MPIWRITE_CACHE"] = TEST_CACHE
    env["MPIWRITE_STATE"] = TEST_STATE
    env.update(extra or {})
    return env


def bounded(cmd: List[str], timeout: float, **kw) -> subprocess.CompletedProcess:
    """Run cmd in a session of its own; past `timeout` end exactly that process group
    (never other people's processes by name) and fail the test as a hang."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            stdin=subprocess.DEVNULL, start_new_session=True, **kw)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        out, err = proc.communicate()
        raise AssertionError(f"hung: {cmd} did not finish within {timeout}s\n{out}\n{err}")\
            from None
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def kill_group(proc) -> None:
    """SIGKILL the process group that `proc` leads (started with start_new_session)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def kill_started(pids, proc) -> None:
    """SIGKILL the ranks this test started (a stopped one never leaves by itself), by pid,
    then the launcher's process group."""
    for pid in pids.values():
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    kill_group(proc)


def mpirun(n: int, args: List[str], cwd: str, timeout: float = 120, env=None,
           pre: Optional[List[str]] = None) -> subprocess.CompletedProcess:
    """`mpiexec -n N mpiwrite ARGS` in cwd; output captured; fails the test on a hang."""
    if MPIEXEC is None:
        pytest.skip("no mpiexec (pip install mpich)")
    cmd = (pre or []) + [MPIEXEC, "-n", str(n), MPIWRITE] + list(args)
    return bounded(cmd, timeout, cwd=cwd, env=clean_env(env))


def cli(args: List[str], cwd: str, timeout: float = 60, env=None, input=None):
    """`mpiwrite ARGS` without a launcher."""
    return subprocess.run([MPIWRITE] + list(args), cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=clean_env(env), input=input)


def records_in(folder: str) -> List[str]:
    return sorted(glob.glob(os.path.join(folder, "*.h5")))


def read_record(path):
    """A record as every command reads it: whole and checked, in a worker of the sandbox
    (records/sandbox.py); a RecordError naming the file otherwise.  Tests read records so,
    not through the private reader."""
    from mpiwrite.records.sandbox import read_whole

    return read_whole(str(path))


def only_record(folder: str):
    found = records_in(folder)
    assert len(found) == 1, found
    return read_record(found[0])


def is_root() -> bool:
    return os.geteuid() == 0


def needs_root(test):
    """Marks a test `root` (pytest -m root selects them) and skips it without root."""
    return pytest.mark.root(pytest.mark.skipif(not is_root(), reason="needs root (mounts)")(test))


@contextlib.contextmanager
def mounted(path, fstype: str, options: str = ""):
    """Mount a filesystem of ours at path (created), and unmount it afterwards."""
    os.makedirs(path, exist_ok=True)
    cmd = ["mount", "-t", fstype] + (["-o", options] if options else []) + [fstype, str(path)]
    subprocess.run(cmd, check=True)
    try:
        yield str(path)
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


@contextlib.contextmanager
def ext4_disk(folder, size_mb: int = 96):
    """An ext4 of our own on a loop device (its image on a tmpfs of ours) mounted at
    folder/disk, for what only a real block filesystem does (chattr +a, fsfreeze); unmounted
    and detached afterwards.  Root only."""
    img, mnt = os.path.join(str(folder), "img"), os.path.join(str(folder), "disk")
    with mounted(img, "tmpfs", f"size={size_mb + 16}m"):
        image = os.path.join(img, "disk.img")
        subprocess.run(["truncate", "-s", f"{size_mb}m", image], check=True)
        subprocess.run(["mkfs.ext4", "-q", "-F", image], check=True, capture_output=True)
        os.makedirs(mnt)
        subprocess.run(["mount", "-o", "loop", image, mnt], check=True)
        try:
            yield mnt
        finally:
            subprocess.run(["fsfreeze", "-u", mnt], capture_output=True)  # if a test froze it
            subprocess.run(["umount", mnt], capture_output=True)
            subprocess.run(["umount", "-l", mnt], capture_output=True)


# Runs started by a test and waited for with a bound (the faults, endings and live tests).
def rank_pids(cwd, nranks: int, timeout: float = 20.0) -> dict:
    """{rank: pid} of the mpiwrite ranks running in folder cwd (unique per test)."""
    cwd = os.path.realpath(str(cwd))
    end = time.monotonic() + timeout
    found = {}
    while time.monotonic() < end:
        found = {}
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                if os.path.realpath(f"/proc/{pid}/cwd") != cwd:
                    continue
                with open(f"/proc/{pid}/cmdline", "rb") as fh:
                    cmd = fh.read().replace(b"\0", b" ").decode(errors="replace")
                with open(f"/proc/{pid}/environ", "rb") as fh:
                    env = fh.read().decode(errors="replace")
            except OSError:
                continue
            if "mpiwrite" in cmd and "mpiexec" not in cmd:
                for var in env.split("\0"):
                    if var.startswith("PMI_RANK="):
                        found[int(var[9:])] = int(pid)
        if len(found) == nranks:
            return found
        time.sleep(0.05)
    raise AssertionError(f"found ranks {sorted(found)} of {nranks} in {cwd}")


def start(n, args, cwd, env=None):
    return subprocess.Popen([MPIEXEC, "-n", str(n), MPIWRITE] + args, cwd=cwd,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=clean_env(env), stdin=subprocess.DEVNULL, start_new_session=True)


# A node that crashes takes its keeper (run/keeper.py) with it: what such a run leaves is
# what `clean` must handle.  Tests of that case launch without a keeper.
CRASH = {"MPIWRITE_NO_KEEPER": "1"}


def wait(proc, timeout=60):
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        out, err = proc.communicate()
        raise AssertionError(f"hung:\n{out}\n{err}") from None
    return proc.returncode, out, err


def wait_for_bytes(path_dir, nbytes=1, timeout=20):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            if sum(os.path.getsize(os.path.join(path_dir, f)) for f in os.listdir(path_dir)
                   if f.endswith(".dat")) >= nbytes:
                return
        except OSError:
            pass
        time.sleep(0.05)
    raise AssertionError("no data written")
