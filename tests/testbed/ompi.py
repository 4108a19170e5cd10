"""Debian's Open MPI for the tests: its mpirun, the environment mpi4py needs to load it, and
its rsh launcher through the emulated hosts.

mpi4py >= 4.1 loads the MPI library named by MPI4PY_LIBMPI at run time, so the same venv runs
under the MPICH wheel's mpiexec and under Open MPI's mpirun.  Each job runs in its own process
group and is killed as a group when it overruns, so a hang fails the test and leaves nothing.
"""

from __future__ import annotations

import functools
import os
import shutil
import signal
import subprocess
import time
import uuid
from typing import List, Optional

from common import MPIWRITE, clean_env

from testbed import hosts as hostlib

LIBMPI = "libmpi.so.40"  # Open MPI 4.x and 5.x


@functools.cache
def mpirun_path() -> Optional[str]:
    """Open MPI's mpirun (Debian names it mpirun.openmpi; the venv's mpirun is MPICH's)."""
    for candidate in (shutil.which("mpirun.openmpi"), "/usr/bin/mpirun.openmpi",
                      "/usr/bin/mpirun"):
        if candidate and os.path.exists(candidate):
            out = subprocess.run([candidate, "--version"], capture_output=True, text=True,
                                 timeout=30, env=env())
            if "Open MPI" in out.stdout + out.stderr:
                return candidate
    return None


def why_not() -> str:
    """Why Open MPI cannot be used here, or '' when it can."""
    if mpirun_path() is None:
        return "Open MPI's mpirun not installed (apt-get install openmpi-bin)"
    return ""


def env(extra=None) -> dict:
    """The test environment for Open MPI: its library for mpi4py, and root allowed."""
    e = clean_env({"MPI4PY_LIBMPI": LIBMPI, "OMPI_ALLOW_RUN_AS_ROOT": "1",
                    "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
                    # No CMA single copy in containers (ptrace is often not allowed).
                    "OMPI_MCA_btl_vader_single_copy_mechanism": "none"})
    e.update(extra or {})
    return e


TAG = "MPIWRITE_TEST_JOB"  # in the environment of every process a launch() starts


def environ_of(pid: int) -> List[str]:
    """A process's environment as VAR=value strings ([] if it is gone)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            return fh.read().decode(errors="replace").split("\0")
    except OSError:
        return []


def tagged(tag: str) -> List[int]:
    """Pids of living processes whose environment carries TAG=tag, wherever they moved: Open
    MPI gives each rank its own process group, and ranks outliving mpirun are reparented."""
    needle = f"{TAG}={tag}"
    return [int(pid) for pid in os.listdir("/proc")
            if pid.isdigit() and int(pid) != os.getpid() and needle in environ_of(int(pid))]


def kill_tagged(tag: str) -> List[int]:
    """SIGKILL every process of the job `tag`; returns those that were still there."""
    stray = tagged(tag)
    for pid in stray:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return stray


def start(cmd: List[str], cwd, environ=None) -> subprocess.Popen:
    """Start a job whose every process carries a tag of its own (proc.tag)."""
    tag = uuid.uuid4().hex
    environ = dict(environ if environ is not None else env(), **{TAG: tag})
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, text=True, start_new_session=True,
                            env=environ)
    proc.tag = tag
    return proc


def finish(proc: subprocess.Popen, timeout: float) -> subprocess.CompletedProcess:
    """Wait for a started job; on a timeout kill all its processes and fail.  The result's
    `stray` lists processes of the job still alive after the launcher returned (killed)."""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_tagged(proc.tag)
        out, err = proc.communicate()
        raise AssertionError(f"hung: {proc.args} did not finish within {timeout}s\n{out}\n"
                             f"{err}") from None
    finally:
        kill_group(proc)
    result = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    # a node's keeper (run/keeper.py) outlives a launcher that killed the ranks, by design,
    # for the seconds it takes to remove what they left: it must be gone by itself in time
    end = time.monotonic() + KEEPER_SECONDS
    while keepers(proc.tag) and time.monotonic() < end:
        time.sleep(0.1)
    result.stray = kill_tagged(proc.tag)
    return result


KEEPER_SECONDS = 15.0


def keepers(tag: str) -> List[int]:
    """The job's keepers still alive."""
    out = []
    for pid in tagged(tag):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                if b"mpiwrite.run.keeper" in fh.read():
                    out.append(pid)
        except OSError:
            continue
    return out


def launch(cmd: List[str], cwd, timeout: float, environ=None) -> subprocess.CompletedProcess:
    """Run a job to its end (see finish)."""
    return finish(start(cmd, cwd, environ), timeout)


def kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def mpirun(n: int, args: List[str], cwd, timeout: float = 120, options=(),
           environ=None) -> subprocess.CompletedProcess:
    """`mpirun --oversubscribe -np N mpiwrite ARGS` with Open MPI, on this host."""
    cmd = [mpirun_path(), "--oversubscribe", "-np", str(n), *options, MPIWRITE, *args]
    return launch(cmd, cwd, timeout, environ)


OMPI_WRAPPER = """#!/bin/bash
# Open MPI's rsh launcher calls: WRAPPER [options] HOST "PATH=...; export PATH; ... orted ...";
# the host wrapper execs its command, so the string is handed to it as `sh -c 'STRING'`.
while [ $# -gt 0 ]; do case "$1" in -*) shift;; *) break;; esac; done
host=$1; shift
cmd="$*"
q="'"
exec {hosts_wrapper} "$host" /bin/sh -c "$q${{cmd//$q/$q\\\\$q$q}}$q"
"""


class OmpiHosts(hostlib.Hosts):
    """Emulated hosts that Open MPI's mpirun reaches through its rsh launcher."""

    def __enter__(self) -> OmpiHosts:
        super().__enter__()
        try:
            self.ompi_wrapper = os.path.join(os.path.dirname(self.wrapper), "ompi-rsh.sh")
            with open(self.ompi_wrapper, "w") as fh:
                fh.write(OMPI_WRAPPER.format(hosts_wrapper=self.wrapper))
            os.chmod(self.ompi_wrapper, 0o755)
        except BaseException:
            self.__exit__()
            raise
        return self

    @property
    def cidr(self) -> str:
        return f"10.{self.subnet}.77.0/24"

    def mpirun(self, used: List[int], per_host: int) -> List[str]:
        """mpirun and its options for `per_host` ranks on each of the hosts `used`, placed
        the way `mpiwrite jobscript` renders it for Open MPI (--map-by ppr:K:node --host)."""
        return [mpirun_path(), "--mca", "plm_rsh_agent", self.ompi_wrapper,
                "--mca", "btl", "tcp,self", "--mca", "btl_tcp_if_include", self.cidr,
                "--mca", "oob_tcp_if_include", self.cidr,
                "--map-by", f"ppr:{per_host}:node",
                "--host", ",".join(f"{self.ips[i]}:{per_host}" for i in used),
                "-x", "MPI4PY_LIBMPI", "-x", "PYTHONPATH"]
