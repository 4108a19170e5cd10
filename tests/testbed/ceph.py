"""A CephFS under emulated hosts: a real network filesystem with a userspace client per host.

One mon, one OSD (bluestore on a sparse file of `osd_gib` GiB), one MDS and a mgr run in a
server network namespace of their own on the hosts' bridge (`.201`), in a private mount
namespace whose /etc/ceph, /var/lib/ceph, /var/log/ceph and /run/ceph (those the machine has)
are small throw-away tmpfs mounts: the testbed's ceph.conf names every path explicitly (data,
keyrings, logs, admin sockets, pid files, crash dir, all under `folder/ceph/`), and the tmpfs
only catch what a daemon would still write there by mistake (`strays`, listed before
teardown).  Each persistent emulated host mounts the fs with its own `ceph-fuse --id hN`
(cephx key from `ceph fs authorize`) at the same path, with an admin socket at `asok(i)`.
Everything is stopped and removed on exit, also when start-up fails; `leftovers()` says what
is not.

Start order: keyrings + monmaptool + `ceph-mon --mkfs`, mon (the OSD's `--mkfs --no-mon-config`
runs meanwhile); quorum; `ceph osd new`, `ceph auth add osd.0`, OSD (not waited for); pools,
`ceph fs new`, MDS key, MDS; `ceph fs authorize` per host; OSD up, MDS up:active; mgr (not
waited for); the ceph-fuse mounts at once.  Stop: unmount on every host (`umount -l` as
fallback), ceph-fuse by its pid file; SIGTERM mgr+MDS+OSD, then mon, SIGKILL after
`stop_grace`; whatever is left in the server namespace; namespace and link; the OSD's block
file.  How long each takes: docs/testbed.md.

    with hosts.Hosts(3, d, persistent=True) as h, Ceph(h, d) as c:
        h.run(0, f"dd if=/dev/zero of={c.mount}/f bs=1M count=64 conv=fsync")
        c.ceph("fs", "status"); c.client_admin(0, "perf", "dump")
        c.set_client(1, "client_oc_max_dirty", 0)
    assert c.leftovers() == [] and h.leftovers() == []
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Dict, List, Optional

from testbed import hosts as hostlib

# What a machine-wide Ceph keeps; the testbed's daemons see empty tmpfs copies instead.
MACHINE = ("/etc/ceph", "/var/lib/ceph", "/var/log/ceph", "/run/ceph")

# tmpfs over each of them that exists (/run/ceph is made by ceph-common's postinst, and may be
# missing in a container that never ran it); a missing one must stay missing (leftovers)
SERVER = ("for d in {dirs}; do [ ! -d $d ] || mount -t tmpfs -o size=16m,mode=0755 tmpfs $d "
          "|| exit 1; done && echo ready && exec sleep infinity")

PACKAGES = ("ceph-mon", "ceph-osd", "ceph-mds", "ceph-mgr", "ceph-fuse", "ceph-common")
TOOLS = ("ceph", "ceph-mon", "ceph-osd", "ceph-mds", "ceph-mgr", "ceph-fuse", "monmaptool",
         "ceph-authtool", "nsenter", "mountpoint", "umount")

CONF = """\
[global]
fsid = {fsid}
mon initial members = a
mon host = [v2:{ip}:3300,v1:{ip}:6789]
public network = {net}
auth cluster required = cephx
auth service required = cephx
auth client required = cephx
keyring = {top}/$cluster.$name.keyring
run dir = {top}/run
admin socket = {top}/run/$cluster-$name.asok
pid file = {top}/run/$cluster-$name.pid
log file = {top}/log/$cluster-$name.log
mon cluster log file = {top}/log/$cluster.log
crash dir = {top}/crash
osd pool default size = 1
osd pool default min size = 1
osd pool default pg autoscale mode = off
mon allow pool size one = true
mon warn on pool no redundancy = false
osd crush chooseleaf type = 0
mgr initial modules = iostat
auth allow insecure global id reclaim = false
# the machine's root fs is shared: do not warn (or stop the mon, 5 %) for what others fill
mon data avail warn = 2
mon data avail crit = 1
{extra}
[mon]
mon data = {top}/mon/$cluster-$id
keyring = $mon_data/keyring

[osd]
osd data = {top}/osd/$cluster-$id
keyring = $osd_data/keyring
osd objectstore = bluestore
bluestore block create = true
bluestore block size = {block_bytes}

[mds]
# its last beacon, on SIGTERM, waits up to one interval (default 4 s) for the mon's ack
mds beacon interval = 1
mds data = {top}/mds/$cluster-$id
keyring = $mds_data/keyring

[mgr]
mgr data = {top}/mgr/$cluster-$id
keyring = $mgr_data/keyring

[client]
# the ceph CLI (client.admin) gets no socket; each host's client gets its own below
admin socket =
client mount timeout = 30
{clients}"""

CLIENT = "[client.{name}]\nadmin socket = {top}/run/$cluster-$name.asok\n"


def why_not() -> str:
    """Why the testbed cannot run here, or ''."""
    reason = hostlib.why_not()
    if reason:
        return reason
    if not os.path.exists("/dev/fuse"):
        return "no /dev/fuse"
    for tool in TOOLS:
        if not shutil.which(tool):
            return f"{tool} not installed (apt-get install {' '.join(PACKAGES)})"
    return ""


class Ceph:
    def __init__(self, h: hostlib.Hosts, folder: str, fs: str = "cephfs", osd_gib: int = 4,
                 mgr: bool = True, conf: Optional[Dict[str, str]] = None, timeout: float = 60,
                 stop_grace: float = 8):
        """A CephFS `fs` mounted by every host of `h` (persistent) at `self.mount`; conf: extra
        [global] options {key: value}; mgr: start a mgr (for `ceph df`, `ceph fs status`);
        timeout: each start-up wait; stop_grace: seconds after SIGTERM before SIGKILL."""
        if not h.persistent:
            raise ValueError("the hosts must be persistent to keep a FUSE mount")
        self.h = h
        self.fs = fs
        self.osd_gib = osd_gib
        self.with_mgr = mgr
        self.extra = dict(conf or {})
        self.timeout = timeout
        self.stop_grace = stop_grace
        self.top = os.path.join(os.path.abspath(str(folder)), "ceph")
        self.conf = os.path.join(self.top, "ceph.conf")
        self.mount = os.path.join(self.top, "mnt")
        self.ns = h.ns[0].rsplit("-", 1)[0] + "-ceph"
        self.veth = h.veth[0][:-1] + "c"
        self.ip = f"10.{h.subnet}.77.201"
        self.clients = [f"{n}" for n in h.names]  # client.h0, client.h1, ...
        self.server: Optional[subprocess.Popen] = None
        self._mkfs: Optional[subprocess.Popen] = None
        self._own = False  # self.top is ours (made by this testbed)
        self.daemons: Dict[str, subprocess.Popen] = {}  # "mon.a" -> process (in start order)
        self.fuse_pids: Dict[int, int] = {}  # host index -> ceph-fuse pid
        self.mounted: List[int] = []
        self.made: List[tuple] = []
        self.strays: List[str] = []
        self.times: Dict[str, float] = {}
        self.stopped: Dict[str, str] = {}  # daemon -> how it stopped
        self.machine = _state()

    # -- life cycle ------------------------------------------------------------------------

    def __enter__(self) -> Ceph:
        if not self.h.holders:
            raise ValueError("the hosts must be entered (up) before the Ceph testbed")
        t0 = time.monotonic()
        try:
            self._files()
            self._network()
            self._server()
            self._mon()
            self.times["mon"] = time.monotonic() - t0
            self._osd()  # started, not waited for: the pools and the fs can be made meanwhile
            self._fs()
            keys = [self._authorize(i) for i in range(len(self.h.ns))]
            self._wait("osd.0 up", lambda: self._json("osd", "stat").get("num_up_osds") == 1)
            self.times["osd"] = time.monotonic() - t0
            self._wait("mds up:active", self._mds_active)
            self.times["mds"] = time.monotonic() - t0
            if self.with_mgr:
                self._mgr()
            with ThreadPoolExecutor(len(keys)) as pool:  # the mounts at once
                for f in [pool.submit(self._mount, i) for i in range(len(keys))]:
                    f.result()
            self.times["mounted"] = time.monotonic() - t0
        except BaseException:
            self.__exit__()
            raise
        return self

    def _files(self) -> None:
        if os.path.exists(self.top):
            raise FileExistsError(f"{self.top} exists (an earlier testbed?)")
        self._own = True
        for d in ("run", "log", "crash", "mon/ceph-a", "osd/ceph-0", "mds/ceph-a",
                  "mgr/ceph-x", "mnt"):
            os.makedirs(os.path.join(self.top, d))
        self.fsid = str(uuid.uuid4())
        extra = "".join(f"{k} = {v}\n" for k, v in self.extra.items())
        clients = "\n".join(CLIENT.format(name=n, top=self.top) for n in self.clients)
        with open(self.conf, "w") as fh:
            fh.write(CONF.format(fsid=self.fsid, ip=self.ip, net=f"10.{self.h.subnet}.77.0/24",
                                 top=self.top, block_bytes=self.osd_gib << 30, extra=extra,
                                 clients=clients))

    def _network(self) -> None:
        self.h.server_namespace(self.ns, self.veth, self.ip, self.made)

    def _server(self) -> None:
        """The holder of the server's namespaces: private tmpfs over the machine's Ceph dirs."""
        self.server = subprocess.Popen(
            ["ip", "netns", "exec", self.ns, "unshare", "--mount", "--propagation", "private",
             "/bin/sh", "-c", SERVER.format(dirs=" ".join(MACHINE))],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True,
            start_new_session=True)
        if self.server.stdout.readline().strip() != "ready":
            raise RuntimeError("the Ceph server's namespaces could not be made")

    def _enter(self) -> List[str]:
        return ["nsenter", "-t", str(self.server.pid), "-n", "-m", f"--wd={self.top}"]

    def _tool(self, *cmd, check=True, timeout=60) -> subprocess.CompletedProcess:
        """A Ceph tool (monmaptool, ceph-authtool, --mkfs) inside the server's namespaces."""
        out = subprocess.run(self._enter() + list(cmd), capture_output=True, text=True,
                             timeout=timeout, stdin=subprocess.DEVNULL)
        if check and out.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)}: rc {out.returncode}: {out.stdout}{out.stderr}")
        return out

    def _start(self, kind: str, ident: str) -> None:
        """ceph-KIND -f -i IDENT in the server's namespaces (nsenter execs: same pid)."""
        name = f"{kind}.{ident}"
        console = os.path.join(self.top, "log", f"{name}.console")
        with open(console, "w") as fh:
            self.daemons[name] = subprocess.Popen(
                self._enter() + [f"ceph-{kind}", "-f", "-c", self.conf, "-i", ident],
                stdin=subprocess.DEVNULL, stdout=fh, stderr=subprocess.STDOUT,
                start_new_session=True)

    def _mon(self) -> None:
        top, conf = self.top, self.conf
        mk = os.path.join(top, "mon.keyring")
        self._tool("ceph-authtool", "--create-keyring", mk, "--gen-key", "-n", "mon.",
                   "--cap", "mon", "allow *")
        ak = os.path.join(top, "ceph.client.admin.keyring")
        self._tool("ceph-authtool", "--create-keyring", ak, "--gen-key", "-n", "client.admin",
                   "--cap", "mon", "allow *", "--cap", "osd", "allow *", "--cap", "mds",
                   "allow *", "--cap", "mgr", "allow *")
        self._tool("ceph-authtool", mk, "--import-keyring", ak)
        monmap = os.path.join(top, "monmap")
        self._tool("monmaptool", "--create", "--fsid", self.fsid, "--addv", "a",
                   f"[v2:{self.ip}:3300,v1:{self.ip}:6789]", monmap)
        self._tool("ceph-mon", "-c", conf, "--mkfs", "-i", "a", "--monmap", monmap,
                   "--keyring", mk)
        self._start("mon", "a")
        # the OSD's mkfs needs no mon (--no-mon-config): it runs while the mon comes up
        self.osd_uuid = str(uuid.uuid4())
        with open(os.path.join(top, "log", "osd.0.mkfs"), "w") as fh:
            self._mkfs = subprocess.Popen(
                self._enter() + ["ceph-osd", "-c", conf, "-i", "0", "--mkfs", "--mkkey",
                                 "--no-mon-config", "--osd-uuid", self.osd_uuid],
                stdin=subprocess.DEVNULL, stdout=fh, stderr=subprocess.STDOUT,
                start_new_session=True)
        self._wait("mon quorum", self._quorum)

    def _quorum(self) -> bool:
        out = self.ceph("quorum_status", "-f", "json", check=False, timeout=15)
        if out.returncode != 0:
            return False
        return "a" in json.loads(out.stdout).get("quorum_names", [])

    def _osd(self) -> None:
        osd_id = self.ceph("osd", "new", self.osd_uuid).stdout.strip()
        if osd_id != "0":
            raise RuntimeError(f"ceph osd new gave id {osd_id!r}, not 0")
        try:
            rc = self._mkfs.wait(timeout=120)
        except subprocess.TimeoutExpired:
            self._mkfs.kill()
            rc = self._mkfs.wait()
        self._mkfs = None
        if rc != 0:
            log = os.path.join(self.top, "log", "osd.0.mkfs")
            raise RuntimeError(f"ceph-osd --mkfs: rc {rc}: {_tail(log)}")
        data = os.path.join(self.top, "osd", "ceph-0")
        self.ceph("auth", "add", "osd.0", "osd", "allow *", "mon", "allow profile osd", "mgr",
                  "allow profile osd", "-i", os.path.join(data, "keyring"))
        self._start("osd", "0")

    def _fs(self) -> None:
        for pool in ("cephfs_metadata", "cephfs_data"):
            self.ceph("osd", "pool", "create", pool, "8")
        self.ceph("fs", "new", self.fs, "cephfs_metadata", "cephfs_data")
        self.ceph("auth", "get-or-create", "mds.a", "mon", "allow profile mds", "osd",
                  "allow rwx", "mds", "allow *", "mgr", "allow profile mds", "-o",
                  os.path.join(self.top, "mds", "ceph-a", "keyring"))
        self._start("mds", "a")

    def _mds_active(self) -> bool:
        info = self._json("mds", "stat").get("fsmap", {})
        return any(m.get("state") == "up:active" for f in info.get("filesystems", [])
                   for m in f.get("mdsmap", {}).get("info", {}).values())

    def _mgr(self) -> None:
        self.ceph("auth", "get-or-create", "mgr.x", "mon", "allow profile mgr", "osd",
                  "allow *", "mds", "allow *", "-o",
                  os.path.join(self.top, "mgr", "ceph-x", "keyring"))
        self._start("mgr", "x")  # not waited for: the clients do not need it

    def _authorize(self, i: int) -> str:
        """Host i's cephx key (`ceph fs authorize FS client.hN / rw`), in its keyring file."""
        name = self.clients[i]
        keyring = os.path.join(self.top, f"ceph.client.{name}.keyring")
        key = self.ceph("fs", "authorize", self.fs, f"client.{name}", "/", "rw").stdout
        with open(keyring, "w") as fh:
            fh.write(key)
        return keyring

    def _mount(self, i: int) -> None:
        name = self.clients[i]
        console = os.path.join(self.top, "log", f"client.{name}.console")
        # ceph-fuse daemonizes once mounted; the mount point is its last argument (mpiwrite
        # finds the daemon of a FUSE mount that way)
        out = self.h.run(i, f"ceph-fuse -c {shlex.quote(self.conf)} --id {name} "
                            f"{shlex.quote(self.mount)} >{shlex.quote(console)} 2>&1",
                         timeout=self.timeout)
        if out.returncode != 0:
            raise RuntimeError(f"ceph-fuse on {self.h.names[i]}: rc {out.returncode}: "
                               f"{_read(console)} (see {self.top}/log)")
        self.mounted.append(i)
        self._wait(f"{self.h.names[i]} mounted", lambda: self.h.run(
            i, f"mountpoint -q {shlex.quote(self.mount)}", timeout=10).returncode == 0)
        pid = _read(self.pidfile(i)).strip()
        if pid.isdigit():
            self.fuse_pids[i] = int(pid)

    def _wait(self, what: str, ready, timeout: Optional[float] = None) -> None:
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            for name, proc in self.daemons.items():
                if proc.poll() is not None:
                    raise RuntimeError(f"{name} exited (rc {proc.returncode}) while waiting for "
                                       f"{what}: {_tail(self._log(name))}")
            try:
                if ready():
                    return
            except (RuntimeError, ValueError, KeyError, IndexError, subprocess.TimeoutExpired):
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"timed out waiting for {what} (see {self.top}/log)")
            time.sleep(0.3)

    def __exit__(self, *exc) -> None:
        t0 = time.monotonic()
        m = shlex.quote(self.mount)
        for i in range(len(self.h.holders) if self._own else 0):  # also a half-made mount
            pid = _read(self.pidfile(i)).strip()
            if pid.isdigit():
                self.fuse_pids.setdefault(i, int(pid))
            try:  # ceph-fuse ends with its mount
                self.h.run(i, f"! mountpoint -q {m} || umount {m} || umount -l {m}", timeout=30)
            except subprocess.TimeoutExpired:
                pass
        self.mounted = []
        # only processes that are ours: their command line names our ceph.conf
        _stop([p for p in self.fuse_pids.values() if self.conf in hostlib.cmdline(p)],
              self.stop_grace)
        self.fuse_pids = {}
        self.times["unmounted"] = time.monotonic() - t0
        if self.server is not None and self.server.poll() is None:
            self.strays = self._strays()
        # mgr, mds, osd together, then mon: the others report to the mon while they stop (the
        # MDS waits ~4 s for its last beacon's ack, the OSD ~1 s for the mon's stop ack)
        procs = [(n, p) for n, p in self.daemons.items() if not n.startswith("mon.")]
        _stop_procs(procs, self.stop_grace, self.stopped)
        _stop_procs([(n, p) for n, p in self.daemons.items() if n.startswith("mon.")],
                    self.stop_grace, self.stopped)
        self.daemons = {}
        if self._mkfs is not None:  # a start-up that failed during the OSD's mkfs
            _stop_procs([("osd.0 mkfs", self._mkfs)], self.stop_grace, self.stopped)
            self._mkfs = None
        self.times["daemons stopped"] = time.monotonic() - t0
        if self.server is not None:
            for pid in self._pids():  # anything left in the server namespace is ours
                hostlib.kill(pid)
            if self.server.poll() is None:
                self.server.kill()
            self.server.wait(timeout=15)
            self.server.stdout.close()
            self.server = None
        self.times["server gone"] = time.monotonic() - t0
        for kind, name in reversed(self.made):
            if kind == "netns":
                for pid in self._pids():
                    hostlib.kill(pid)
                hostlib._ip("netns", "del", name, check=False)
            else:
                hostlib._ip("link", "del", name, check=False)
        self.made = []
        self.times["netns gone"] = time.monotonic() - t0
        block = os.path.join(self.top, "osd", "ceph-0", "block")
        if self._own and os.path.exists(block):  # up to osd_gib GiB of written data
            os.unlink(block)
            self.times["block removed"] = time.monotonic() - t0
        self.times["down"] = time.monotonic() - t0

    def leftovers(self) -> List[str]:
        """Our namespace, link, any process whose command line names the testbed, anything
        the daemons wrote to the shadowed machine folders, and any file or folder of the
        machine's own Ceph folders made or changed since we were made."""
        names = hostlib._ip("netns", "list").stdout + hostlib._ip("link", "show").stdout
        left = [n for n in (self.ns, self.veth) if n in names]
        now = _state()
        left += [f"changed: {p}" for p in sorted(set(now) | set(self.machine))
                 if now.get(p) != self.machine.get(p)]  # also made or removed
        left += [f"stray (in the server's tmpfs): {p}" for p in self.strays]
        for pid in os.listdir("/proc"):
            if pid.isdigit() and self.top in hostlib.cmdline(pid):
                left.append(f"pid {pid}: {hostlib.cmdline(pid)}")
        return left

    # -- operations ------------------------------------------------------------------------

    def ceph(self, *args, check=True, timeout=60) -> subprocess.CompletedProcess:
        """The ceph CLI (client.admin) against this testbed's mon, in the server namespace."""
        out = subprocess.run(self._enter() + ["ceph", "-c", self.conf, "--connect-timeout",
                                              "10", *args], capture_output=True, text=True,
                             timeout=timeout, stdin=subprocess.DEVNULL)
        if check and out.returncode != 0:
            raise RuntimeError(f"ceph {' '.join(args)}: rc {out.returncode}: "
                               f"{out.stdout}{out.stderr}")
        return out

    def _json(self, *args):
        return json.loads(self.ceph(*args, "-f", "json", timeout=20).stdout)

    def asok(self, i: int) -> str:
        """Host i's client admin socket."""
        return os.path.join(self.top, "run", f"ceph-client.{self.clients[i]}.asok")

    def pidfile(self, i: int) -> str:
        return os.path.join(self.top, "run", f"ceph-client.{self.clients[i]}.pid")

    def client_admin(self, i: int, *args, timeout=30):
        """An admin socket command on host i's ceph-fuse (`perf dump`, `config diff`,
        `status`, `config get KEY`, ...): its parsed JSON."""
        out = subprocess.run(self._enter() + ["ceph", "-c", self.conf, "--admin-daemon",
                                              self.asok(i), *args], capture_output=True,
                             text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        if out.returncode != 0:
            raise RuntimeError(f"client {self.clients[i]}: {' '.join(args)}: "
                               f"{out.stdout}{out.stderr}")
        return json.loads(out.stdout) if out.stdout.strip() else None

    def set_client(self, i: int, key: str, value) -> None:
        """Set a client option at run time through host i's admin socket (an `override`,
        which wins over the conf and `ceph config set client ...`; `config diff` shows it);
        checked by reading it back."""
        self.client_admin(i, "config", "set", key, str(value))
        got = self.client_admin(i, "config", "get", key).get(key)
        if str(got) != str(value):
            raise RuntimeError(f"client {self.clients[i]}: {key} is {got!r}, not {value!r}")

    def daemon_pids(self) -> Dict[str, int]:
        return {name: p.pid for name, p in self.daemons.items()}

    def _log(self, name: str) -> str:
        return os.path.join(self.top, "log", f"ceph-{name}.log")

    def _strays(self) -> List[str]:
        out = subprocess.run(self._enter() + ["find", *MACHINE, "-mindepth", "1"],
                             capture_output=True, text=True, timeout=30)
        return out.stdout.split()

    def _pids(self) -> List[int]:
        out = subprocess.run(["ip", "netns", "pids", self.ns], capture_output=True, text=True)
        return [int(p) for p in out.stdout.split()]


def _signal(proc: subprocess.Popen, sig) -> None:
    if proc.poll() is None:
        try:
            proc.send_signal(sig)
        except ProcessLookupError:
            pass


def _stop_procs(procs, grace: float, how: Dict) -> None:
    """SIGTERM them all, wait up to grace seconds, SIGKILL the rest; how[name] says which."""
    t0 = time.monotonic()
    for _name, proc in procs:
        _signal(proc, signal.SIGTERM)
    waiting = dict(procs)
    while waiting and time.monotonic() < t0 + grace:
        for name, proc in list(waiting.items()):
            if proc.poll() is not None:
                how[name] = f"exited after SIGTERM in {time.monotonic() - t0:.1f} s"
                del waiting[name]
        time.sleep(0.05)
    for name, proc in waiting.items():
        proc.kill()
        proc.wait(timeout=15)
        how[name] = f"SIGKILLed after {grace} s"


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _stop(pids: List[int], grace: float) -> None:
    """Processes not ours as children (ceph-fuse daemonized): wait, SIGTERM, SIGKILL."""
    for sig in (None, signal.SIGTERM, signal.SIGKILL):
        if sig is not None:
            for pid in pids:
                if _alive(pid):
                    try:
                        os.kill(pid, sig)
                    except ProcessLookupError:
                        pass
        deadline = time.monotonic() + grace
        while any(_alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.05)
        if not any(_alive(p) for p in pids):
            return


def _read(path: str) -> str:
    try:
        with open(path, errors="replace") as fh:
            return fh.read()
    except OSError:
        return ""


def _tail(path: str, lines: int = 5) -> str:
    return " | ".join(_read(path).strip().splitlines()[-lines:])


def _state() -> dict:
    """The machine's own Ceph folders: {path: mtime} of every file and folder."""
    out = {}
    for top in MACHINE:
        for folder, _dirs, files in os.walk(top):
            for name in [""] + files:
                path = os.path.join(folder, name) if name else folder
                try:
                    out[path] = os.stat(path).st_mtime_ns
                except OSError:
                    pass
    return out
