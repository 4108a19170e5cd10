"""Helpers for tests that run mpiwrite as a user would: real mpiexec, real files."""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import signal
import subprocess
import sys
from typing import List, Optional

import pytest

BIN = os.path.dirname(sys.executable)


def tool(name: str) -> Optional[str]:
    here = os.path.join(BIN, name)
    return here if os.path.exists(here) else shutil.which(name)


MPIEXEC = tool("mpiexec")
MPIWRITE = tool("mpiwrite")


def _clean_env(extra=None):
    env = dict(os.environ)
    for k in list(env):
        if k.startswith(("PMI_", "PMIX_", "OMPI_", "SLURM_", "MPIWRITE_")):
            del env[k]
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


def mpirun(n: int, args: List[str], cwd: str, timeout: float = 120, env=None,
           pre: Optional[List[str]] = None) -> subprocess.CompletedProcess:
    """`mpiexec -n N mpiwrite ARGS` in cwd; output captured; fails the test on a hang."""
    if MPIEXEC is None:
        pytest.skip("no mpiexec (pip install mpich)")
    cmd = (pre or []) + [MPIEXEC, "-n", str(n), MPIWRITE] + list(args)
    return bounded(cmd, timeout, cwd=cwd, env=_clean_env(env))


def cli(args: List[str], cwd: str, timeout: float = 60, env=None, input=None):
    """`mpiwrite ARGS` without a launcher."""
    return subprocess.run([MPIWRITE] + list(args), cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=_clean_env(env), input=input)


def records_in(folder: str) -> List[str]:
    return sorted(glob.glob(os.path.join(folder, "*.h5")))


def only_record(folder: str):
    from mpiwrite.formats import records

    found = records_in(folder)
    assert len(found) == 1, found
    return records.read(found[0])


def is_root() -> bool:
    return os.geteuid() == 0


needs_root = pytest.mark.skipif(not is_root(), reason="needs root (mounts)")


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


@pytest.fixture
def tmpfs(tmp_path):
    """A small tmpfs of our own (64 MiB), unmounted afterwards."""
    if not is_root():
        pytest.skip("needs root to mount a tmpfs")
    with mounted(tmp_path / "tmpfs", "tmpfs", "size=64m") as mnt:
        yield mnt


def _shm_segments():
    try:
        return {f for f in os.listdir("/dev/shm") if f.startswith("mpich_shm_")}
    except OSError:
        return set()


def _mapped_shm():
    inuse = set()
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/maps") as fh:
                    inuse.update(ln.rsplit("/", 1)[-1].strip() for ln in fh if "/dev/shm/" in ln)
            except OSError:
                pass
    return inuse


def _slurm(tmp_path_factory, nodes: int, cpus: int):
    """A real Slurm on `nodes` emulated nodes of `cpus` CPUs each (slurm_nodes.SlurmNodes over
    persistent hosts.Hosts), stopped afterwards, asserting that nothing of it is left;
    skipped with the reason where it cannot run."""
    import hosts as hostlib
    import slurm_nodes

    reason = slurm_nodes.why_not()
    if reason:
        pytest.skip(f"Slurm: {reason}")
    folder = tmp_path_factory.mktemp(f"slurm{nodes}")
    h = hostlib.Hosts(nodes, folder, persistent=True)
    with h:
        s = slurm_nodes.SlurmNodes(h, folder, cpus=cpus)
        with s:
            yield s
        assert s.leftovers() == []
    assert h.leftovers() == []


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    """One node (h0) declaring 16 CPUs, so that 16 tasks fit on a small machine."""
    yield from _slurm(tmp_path_factory, nodes=1, cpus=16)


@pytest.fixture(scope="module")
def slurm3(tmp_path_factory):
    """Three nodes (h0, h1, h2) of 2 CPUs each."""
    yield from _slurm(tmp_path_factory, nodes=3, cpus=2)


@pytest.fixture(scope="session", autouse=True)
def _remove_stale_mpich_segments():
    """Tests kill MPI jobs on purpose; MPICH then leaves its /dev/shm segments behind.
    Remove those that appeared during this session and no living process maps."""
    before = _shm_segments()
    yield
    stale = _shm_segments() - before - _mapped_shm()
    for name in stale:
        try:
            os.unlink(os.path.join("/dev/shm", name))
        except OSError:
            pass
