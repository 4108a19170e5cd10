"""A GlusterFS volume under emulated hosts: a real network filesystem for the tests.

glusterd and its brick daemons run in a server network namespace of their own on the hosts'
bridge, in a private mount namespace whose /run, /var/lib/glusterd and /var/log/glusterfs are
the testbed's own (so nothing of it lands in the machine's GlusterFS state, and another
testbed can run beside it).  The volume is distributed over `bricks` directories; each
persistent emulated host mounts it with its own FUSE client at the same path.  Everything is
stopped and removed on exit, also when a test fails; `leftovers()` says what is not.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from typing import List

from testbed import hosts as hostlib

SERVER = ("mount -t tmpfs -o size=16m tmpfs /run && mount --bind {lib} /var/lib/glusterd && "
          "mount --bind {log} /var/log/glusterfs && echo ready && exec glusterd -N")


# What a machine-wide GlusterFS keeps; the testbed's glusterd sees its own copies instead.
MACHINE = ("/var/lib/glusterd", "/var/log/glusterfs", "/run/gluster")


def why_not() -> str:
    """Why the testbed cannot run here, or ''."""
    reason = hostlib.why_not()
    if reason:
        return reason
    if not os.path.exists("/dev/fuse"):
        return "no /dev/fuse"
    for tool in ("glusterd", "gluster", "glusterfs", "mount.glusterfs", "nsenter", "tc"):
        if not shutil.which(tool):
            return f"{tool} not installed (apt-get install glusterfs-server glusterfs-client)"
    if not os.path.isdir("/var/lib/glusterd") or not os.path.isdir("/var/log/glusterfs"):
        return "glusterfs-server is not installed (no /var/lib/glusterd)"
    return ""


class Gluster:
    def __init__(self, h: hostlib.Hosts, folder: str, bricks: int = 2, options=None,
                 name: str = "mwvol"):
        """A volume `name` over `bricks` bricks, mounted by every host of `h` (which must be
        persistent) at `self.mount`; options: {volume option: value} set before start."""
        if not h.persistent:
            raise ValueError("the hosts must be persistent to keep a FUSE mount")
        self.h = h
        self.name = name
        self.options = dict(options or {})
        self.top = os.path.join(str(folder), "gluster")
        self.mount = os.path.join(self.top, "mnt")
        self.bricks = [os.path.join(self.top, f"brick{i}") for i in range(bricks)]
        self.ns = h.ns[0].rsplit("-", 1)[0] + "-srv"
        self.veth = h.veth[0][:-1] + "s"
        self.ip = f"10.{h.subnet}.77.200"
        self.server = None
        self.mounted = []
        self.made = []
        self.machine = _state()

    # -- life cycle ------------------------------------------------------------------------

    def __enter__(self) -> Gluster:
        try:
            self._network()
            self._glusterd()
            self.gluster("volume", "create", self.name,
                         *[f"{self.ip}:{b}" for b in self.bricks], "force")
            for key, value in self.options.items():
                self.set(key, value)
            self.gluster("volume", "start", self.name)
            for i in range(len(self.h.ns)):
                self._mount(i)
        except BaseException:
            self.__exit__()
            raise
        return self

    def _network(self) -> None:
        self.h.server_namespace(self.ns, self.veth, self.ip, self.made)

    def _glusterd(self) -> None:
        lib, log = os.path.join(self.top, "lib"), os.path.join(self.top, "log")
        os.makedirs(log, exist_ok=True)
        os.makedirs(self.mount, exist_ok=True)
        shutil.copytree("/var/lib/glusterd", lib, symlinks=True)  # its hooks and groups
        for b in self.bricks:
            os.makedirs(b, exist_ok=True)
        console = os.path.join(log, "glusterd.console")
        with open(console, "w") as fh:  # a file, not a pipe nobody reads
            self.server = subprocess.Popen(
                ["ip", "netns", "exec", self.ns, "unshare", "--mount", "--propagation",
                 "private", "/bin/sh", "-c", SERVER.format(lib=lib, log=log)],
                stdin=subprocess.DEVNULL, stdout=fh, stderr=subprocess.STDOUT,
                start_new_session=True)
        deadline = time.monotonic() + 30
        # Until the bind mounts are made, the CLI would log into the machine's own folder.
        while not _read(console).startswith("ready"):
            if self.server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"glusterd's namespace could not be made: {_read(console)}")
            time.sleep(0.05)
        while self.gluster("pool", "list", check=False).returncode != 0:
            if self.server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"glusterd did not start: {_read(console)} (see {log})")
            time.sleep(0.2)

    def _mount(self, i: int) -> None:
        log = os.path.join(self.top, "log", f"client-{self.h.names[i]}.log")
        out = self.h.run(i, f"mount -t glusterfs -o log-file={log} "
                            f"{self.ip}:/{self.name} {self.mount}", timeout=60)
        if out.returncode != 0:
            raise RuntimeError(f"mount on {self.h.names[i]} failed: {out.stderr} (see {log})")
        self.mounted.append(i)

    def remount(self, i: int) -> None:
        """Unmount host i's client and mount it afresh (it fetches the volume's graph now)."""
        self.h.run(i, f"umount {self.mount} || umount -l {self.mount}", timeout=30)
        self.mounted.remove(i)
        self._mount(i)

    def __exit__(self, *exc) -> None:
        for i in self.mounted:
            try:  # the FUSE client ends with its mount
                self.h.run(i, f"umount {self.mount} || umount -l {self.mount}", timeout=30)
            except subprocess.TimeoutExpired:
                pass
        self.mounted = []
        if self.server is not None:
            if self.server.poll() is None:
                try:
                    self.gluster("volume", "stop", self.name, check=False, timeout=30)
                except subprocess.TimeoutExpired:
                    pass
                self.server.send_signal(signal.SIGTERM)
                try:
                    self.server.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    self.server.kill()
                    self.server.wait(timeout=15)
            self.server = None
        for kind, name in reversed(self.made):
            if kind == "netns":
                for pid in self._pids():  # bricks left by a failed stop: ours
                    hostlib.kill(pid)
                hostlib._ip("netns", "del", name, check=False)
            else:
                hostlib._ip("link", "del", name, check=False)
        self.made = []

    def leftovers(self) -> List[str]:
        """What this testbed made and did not remove: its namespace, its link, any process
        whose command line names its folder, and any file of the machine's own GlusterFS
        folders made or changed since it was made that names it (its folder, mount or
        server address, in the file's name or text).  A file that another volume on the
        machine changed meanwhile (its glusterd's log) is not ours to report."""
        names = hostlib._ip("netns", "list").stdout + hostlib._ip("link", "show").stdout
        left = [n for n in (self.ns, self.veth) if n in names]
        now = _state()
        left += [f"changed: {p}" for p in sorted(now)
                 if now[p] != self.machine.get(p) and self._names_us(p)]
        for pid in os.listdir("/proc"):
            if pid.isdigit() and self.top in hostlib.cmdline(pid):
                left.append(f"pid {pid}: {hostlib.cmdline(pid)}")
        return left

    def _names_us(self, path: str) -> bool:
        """Whether a file of the machine's GlusterFS folders is this testbed's: a client log
        is named after its mount (/a/b/mnt -> a-b-mnt.log); other state names the folder
        or the server's address in its first MiB."""
        marks = (self.top, self.ip, self.mount.strip("/").replace("/", "-"))
        if any(m in path for m in marks):
            return True
        try:
            with open(path, "rb") as fh:
                head = fh.read(1 << 20)
        except OSError:
            return False
        return any(m.encode() in head for m in marks)

    # -- operations ------------------------------------------------------------------------

    def gluster(self, *args, check=True, timeout=60) -> subprocess.CompletedProcess:
        """The gluster CLI against this testbed's glusterd."""
        out = subprocess.run(["nsenter", "-t", str(self.server.pid), "-n", "-m", "gluster",
                              "--mode=script", *args], capture_output=True, text=True,
                             timeout=timeout)
        if check and out.returncode != 0:
            raise RuntimeError(f"gluster {' '.join(args)}: {out.stdout}{out.stderr}")
        return out

    def set(self, key: str, value: str) -> None:
        """Set a volume option; running clients switch to the new graph."""
        self.gluster("volume", "set", self.name, key, str(value))
        self.options[key] = value

    def get(self, key: str) -> str:
        out = self.gluster("volume", "get", self.name, key).stdout
        return out.strip().splitlines()[-1].split()[-1]

    def brick_pid(self, i: int) -> int:
        """The glusterfsd serving brick i."""
        for pid in self._pids():
            if re.search(rf"--brick-name {re.escape(self.bricks[i])}( |$)", hostlib.cmdline(pid)):
                return pid
        raise LookupError(f"no process serves {self.bricks[i]}")

    def client_pid(self, i: int) -> int:
        """The pid of host i's FUSE client (the glusterfs daemon logging to client-hI.log)."""
        mine = f"client-h{i}.log"
        for pid in os.listdir("/proc"):
            line = hostlib.cmdline(pid) if pid.isdigit() else ""
            if self.top in line and f"/{mine} " in line + " " and "--process-name fuse" in line:
                return int(pid)
        raise LookupError(f"no FUSE client of host {i} under {self.top}")

    def kill_brick(self, i: int) -> None:
        """A brick server dies (SIGKILL): clients with files there get errors at once."""
        os.kill(self.brick_pid(i), signal.SIGKILL)

    def restart_bricks(self) -> None:
        self.gluster("volume", "start", self.name, "force")

    def _pids(self) -> List[int]:
        out = subprocess.run(["ip", "netns", "pids", self.ns], capture_output=True, text=True)
        return [int(p) for p in out.stdout.split()]


def _read(path: str) -> str:
    with open(path, errors="replace") as fh:
        return fh.read()


def _state() -> dict:
    """The machine's own GlusterFS folders: {path: mtime}, to show the testbed left them be."""
    out = {}
    for top in MACHINE:
        for folder, _dirs, files in os.walk(top):
            for name in files:
                path = os.path.join(folder, name)
                try:
                    out[path] = os.stat(path).st_mtime_ns
                except OSError:
                    pass
    return out
