"""An ordinary user on this machine, as the people mpiwrite is for run it: an account made
now (`useradd -m`: a fresh home without ~/.local or ~/.cache), mpiwrite installed as a site
would install it (a virtual environment from the system's Python, readable by all, the
project and the MPICH wheel from PyPI in it: the README's light install), a work folder of
the user's in /tmp, and commands run as that user with a clean environment, optionally with
the home read-only (a private mount namespace: the machine's own mounts are untouched).

Root only (useradd, setpriv, unshare); everything is removed again, also when a test fails.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from typing import Dict, Iterator, List, NamedTuple, Optional

SYSTEM_PYTHON = "/usr/bin/python3"


def why_not() -> str:
    if os.geteuid() != 0:
        return "needs root to make a user (useradd) and to run as it (setpriv)"
    for tool in ("useradd", "userdel", "setpriv", "unshare"):
        if not shutil.which(tool):
            return f"{tool} not installed"
    if not os.path.exists(SYSTEM_PYTHON):
        return f"{SYSTEM_PYTHON} not installed (the user's install needs a Python it may run)"
    return ""


class User(NamedTuple):
    name: str
    uid: int
    gid: int
    home: str
    work: str  # a folder of the user's own in /tmp (0700)
    bin: str  # the install's bin folder (mpiwrite, mpiexec)


def _run(cmd: List[str], timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=timeout)


@contextlib.contextmanager
def install(root: str) -> Iterator[str]:
    """The project at `root` installed into a virtual environment of the system's Python
    that every user may run (the README's light install, with the MPICH wheel); its bin."""
    venv = tempfile.mkdtemp(prefix="mpiwrite-user-venv-", dir="/tmp")
    try:
        os.chmod(venv, 0o755)
        _run([SYSTEM_PYTHON, "-m", "venv", venv])
        src = os.path.join(venv, "src")  # a copy: the checkout gets no build files
        shutil.copytree(root, src, ignore=shutil.ignore_patterns(
            ".git", ".venv", "results", "__pycache__", "*.egg-info", "build"))
        _run([os.path.join(venv, "bin", "pip"), "install", "-q", f"{src}[mpich]"], timeout=900)
        subprocess.run(["chmod", "-R", "a+rX", venv], check=True)
        yield os.path.join(venv, "bin")
    finally:
        shutil.rmtree(venv, ignore_errors=True)


@contextlib.contextmanager
def fresh_user(bin_dir: str) -> Iterator[User]:
    """A user made now, with a fresh home and a work folder; removed afterwards (its
    processes were the tests' own, each run bounded: none is left to end)."""
    name = f"mwt{os.getpid() % 100000}"
    subprocess.run(["userdel", "-r", name], capture_output=True)  # an earlier run's, killed
    _run(["useradd", "-m", "-s", "/bin/sh", name])
    work = ""
    try:
        pw = pwd.getpwnam(name)
        work = tempfile.mkdtemp(prefix=f"{name}-work-", dir="/tmp")
        os.chown(work, pw.pw_uid, pw.pw_gid)
        os.chmod(work, 0o700)
        yield User(name, pw.pw_uid, pw.pw_gid, pw.pw_dir, work, bin_dir)
    finally:
        if work:
            shutil.rmtree(work, ignore_errors=True)
        subprocess.run(["userdel", "-r", name], capture_output=True)
        for leftover in (f"/tmp/mpiwrite-state-{_uid(name)}",):
            shutil.rmtree(leftover, ignore_errors=True)


def _uid(name: str) -> str:
    try:
        return str(pwd.getpwnam(name).pw_uid)
    except KeyError:
        return "none"


def command(user: User, cmd: List[str], read_only_home: bool = False,
            env: Optional[Dict[str, str]] = None) -> List[str]:
    """cmd as the user, with a clean environment (HOME, USER, PATH with the install first),
    optionally inside a mount namespace where the home is read-only."""
    base = {"HOME": user.home, "USER": user.name, "LOGNAME": user.name, "LANG": "C.UTF-8",
            "PATH": f"{user.bin}:/usr/local/bin:/usr/bin:/bin"}
    base.update(env or {})
    as_user = ["setpriv", f"--reuid={user.uid}", f"--regid={user.gid}", "--init-groups",
               "env", "-i"] + [f"{k}={v}" for k, v in base.items()] + cmd
    if not read_only_home:
        return as_user
    script = ('mount --bind "$0" "$0" && mount -o remount,ro,bind "$0" "$0" && '
              'exec "$@"')
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", script,
            user.home] + as_user


def python() -> str:
    return sys.executable
