"""Several hosts on one machine: network namespaces on a bridge, one hostname each.

MPICH's mpiexec starts its proxies through `-launcher ssh -launcher-exec WRAPPER`; the wrapper,
instead of ssh, enters the host's network namespace and a new UTS namespace with the host's
name.  Files are shared (one mount namespace), as on a parallel filesystem.  Everything is
removed again, also when a test fails.

With `persistent=True` each host is one long-lived process (a holder) with its own network, UTS
and mount namespaces: what is mounted there (a FUSE client of a network filesystem) stays for
every launch, as on a real node, and `run(i, command)` runs a command on host i.  `rates` puts a
`tc tbf` limit on a host's link in both directions.
"""

import os
import random
import shutil
import signal
import subprocess

WRAPPER = """#!/bin/bash
# Called by hydra as: WRAPPER [ssh options] HOST COMMAND...
while [ $# -gt 0 ]; do case "$1" in -*) shift;; *) break;; esac; done
host=$1; shift
case "$host" in
{cases}
  *) echo "unknown emulated host $host" >&2; exit 255;;
esac
exec $enter --mount --propagation private $clock \
  /bin/sh -c "hostname $name; $mount exec $*"
"""

# A persistent host: its own UTS and mount namespaces inside its network namespace.
HOLDER = 'hostname {name} && echo ready && exec sleep infinity'

# Both directions of a host's link: eth0 inside (host -> bridge), the veth outside (to host).
# A 64 KiB burst is enough for the kernel timer at these rates and small against a run.
TBF = "qdisc replace dev {dev} root tbf rate {rate} burst 64kb latency 100ms"


def why_not() -> str:
    if os.geteuid() != 0:
        return "needs root for network namespaces"
    for tool in ("ip", "unshare"):
        if not shutil.which(tool):
            return f"{tool} not installed"
    return ""


def needs(*marks: str):
    """Marks a fixture's function with what its tests need ("root", "slow"): conftest.py
    gives every test that uses the fixture, directly or through another, those markers."""

    def mark(func):
        func.testbed_marks = tuple(marks)
        return func

    return mark


def _ip(*args, check=True):
    return subprocess.run(["ip", *args], check=check, capture_output=True, text=True)


class Hosts:
    def __init__(self, count: int, folder: str, mounts=None, clocks=None, persistent=False,
                 rates=None):
        """mounts: {host index: (path, tmpfs size)} seen by that host only; clocks: {host
        index: seconds} by which that host's CLOCK_MONOTONIC is ahead (a time namespace);
        persistent: one long-lived mount namespace per host (see the module's text); rates:
        {host index: tc rate such as "160mbit"} on that host's link, both directions."""
        self.mounts = mounts or {}
        self.clocks = clocks or {}
        self.persistent = persistent
        self.rates = dict(rates or {})
        self.holders = []
        self.names = [f"h{i}" for i in range(count)]
        self._pick()
        self.wrapper = os.path.join(str(folder), "enter-host.sh")
        self.made = []

    def _pick(self) -> None:
        """Names and a subnet that no bridge, link, namespace or address on this machine uses
        now: another testbed may be up (a module's fixture), or left by a killed session, and
        a random tag alone met one of them once in a CI run (`ip link add` failed: exists)."""
        inuse = _ip("-o", "link", "show").stdout + _ip("netns", "list").stdout
        addrs = _ip("-4", "-o", "addr", "show").stdout
        for _ in range(1000):
            tag = f"{os.getpid() % 1000:03d}{random.randint(0, 99):02d}"
            subnet = random.randint(100, 250)
            if f"mwb{tag}" not in inuse and f"mw{tag}" not in inuse \
                    and f" 10.{subnet}.77." not in addrs:
                break
        self.bridge = f"mwb{tag}"
        self.subnet = subnet
        self.ns = [f"mw{tag}-{n}" for n in self.names]
        self.ips = [f"10.{self.subnet}.77.{i + 1}" for i in range(len(self.names))]
        self.veth = [f"mw{tag}v{i}" for i in range(len(self.names))]

    def __enter__(self) -> "Hosts":
        try:
            for attempt in range(5):  # another process may take the names between pick and use
                made = _ip("link", "add", self.bridge, "type", "bridge", check=attempt == 4)
                if made.returncode == 0:
                    break
                self._pick()
            self.made.append(("link", self.bridge))
            _ip("addr", "add", f"10.{self.subnet}.77.254/24", "dev", self.bridge)
            _ip("link", "set", self.bridge, "up")
            for ns, ip, veth in zip(self.ns, self.ips, self.veth):
                _ip("netns", "add", ns)
                self.made.append(("netns", ns))
                _ip("link", "add", veth, "type", "veth", "peer", "name", veth + "p")
                self.made.append(("link", veth))
                _ip("link", "set", veth, "master", self.bridge, "up")
                _ip("link", "set", veth + "p", "netns", ns)
                _ip("-n", ns, "link", "set", veth + "p", "name", "eth0")
                _ip("-n", ns, "addr", "add", f"{ip}/24", "dev", "eth0")
                _ip("-n", ns, "link", "set", "eth0", "up")
                _ip("-n", ns, "link", "set", "lo", "up")
            for i, rate in self.rates.items():
                self.limit(i, rate)
            if self.persistent:
                for i in range(len(self.ns)):
                    self.holders.append(self._hold(i))
            cases = "\n".join(
                f'  {ip}|{name}) ns={ns}; name={name}; mount="{self._mount(i)}"; '
                f'clock="{self._clock(i)}"; enter="{self._enter(i)}";;'
                for i, (ip, name, ns) in enumerate(zip(self.ips, self.names, self.ns)))
            with open(self.wrapper, "w") as fh:
                fh.write(WRAPPER.format(cases=cases))
            os.chmod(self.wrapper, 0o755)
        except BaseException:
            self.__exit__()
            raise
        return self

    def _hold(self, i: int) -> subprocess.Popen:
        proc = subprocess.Popen(
            ["ip", "netns", "exec", self.ns[i], "unshare", "--uts", "--mount", "--propagation",
             "private", "/bin/sh", "-c", HOLDER.format(name=self.names[i])],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True, start_new_session=True)
        if proc.stdout.readline().strip() != "ready":
            raise RuntimeError(f"host {self.names[i]}: its namespaces could not be made")
        return proc

    def _enter(self, i: int) -> str:
        if self.persistent:
            return f"nsenter -t {self.holders[i].pid} -n -m -u unshare"
        return f"ip netns exec {self.ns[i]} unshare --uts"

    def limit(self, i: int, rate) -> None:
        """Limit host i's link to `rate` (tc syntax, "160mbit") both ways; None lifts it."""
        for cmd, dev in ((["tc", "-n", self.ns[i]], "eth0"), (["tc"], self.veth[i])):
            if rate is None:
                subprocess.run(cmd + ["qdisc", "del", "dev", dev, "root"], capture_output=True)
            else:
                subprocess.run(cmd + TBF.format(dev=dev, rate=rate).split(), check=True,
                               capture_output=True, text=True)
        self.rates[i] = rate

    def run(self, i: int, command: str, timeout: float = 120) -> subprocess.CompletedProcess:
        """`sh -c command` on host i (in its mount namespace when persistent); past `timeout`
        its whole process group is killed and TimeoutExpired raised."""
        enter = (["nsenter", "-t", str(self.holders[i].pid), "-n", "-m", "-u"]
                 if self.persistent else ["ip", "netns", "exec", self.ns[i]])
        proc = subprocess.Popen(enter + ["/bin/sh", "-c", command], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL,
                                start_new_session=True)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise
        return subprocess.CompletedProcess(command, proc.returncode, out, err)

    def _clock(self, i: int) -> str:
        if i not in self.clocks:
            return ""
        return f"--time --monotonic {int(self.clocks[i])} --fork"

    def _mount(self, i: int) -> str:
        if i not in self.mounts:
            return ""
        path, size = self.mounts[i]
        return f"mount -t tmpfs -o size={size} tmpfs {path} &&"

    def __exit__(self, *exc) -> None:
        for proc in self.holders:
            proc.kill()
            proc.wait(timeout=30)
            proc.stdout.close()
        self.holders = []
        for kind, name in reversed(self.made):
            if kind == "netns":
                # Processes left in our own namespaces are ours (a hung job's proxies).
                pids = subprocess.run(["ip", "netns", "pids", name], capture_output=True,
                                      text=True).stdout.split()
                for pid in pids:
                    try:
                        os.kill(int(pid), signal.SIGKILL)
                    except (OSError, ValueError):
                        pass
                _ip("netns", "del", name, check=False)
            else:
                _ip("link", "del", name, check=False)
        self.made = []

    def mpiexec(self, mpiexec: str):
        """The launcher options for these hosts."""
        return [mpiexec, "-launcher", "ssh", "-launcher-exec", self.wrapper, "-iface",
                self.bridge]

    def server_namespace(self, ns: str, veth: str, address: str, made: list) -> None:
        """A server's own network namespace `ns` on the hosts' bridge, at `address` (/24),
        through the veth pair `veth`/`veth`p; what it makes is appended to `made` (for the
        server's teardown, in reverse)."""
        _ip("netns", "add", ns)
        made.append(("netns", ns))
        _ip("link", "add", veth, "type", "veth", "peer", "name", veth + "p")
        made.append(("link", veth))
        _ip("link", "set", veth, "master", self.bridge, "up")
        _ip("link", "set", veth + "p", "netns", ns)
        _ip("-n", ns, "link", "set", veth + "p", "name", "eth0")
        _ip("-n", ns, "addr", "add", f"{address}/24", "dev", "eth0")
        _ip("-n", ns, "link", "set", "eth0", "up")
        _ip("-n", ns, "link", "set", "lo", "up")

    def leftovers(self):
        names = _ip("netns", "list").stdout + _ip("link", "show").stdout
        return [n for n in self.ns + [self.bridge] + self.veth if n in names]


def cmdline(pid) -> str:
    """A process's command line as one string ('' once it is gone); for leftover checks."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def kill(pid: int) -> None:
    """SIGKILL one process of ours, by pid (never by name); gone already is fine."""
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
