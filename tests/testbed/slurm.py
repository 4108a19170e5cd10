"""A real Slurm over emulated nodes: one slurmd inside each persistent host of `hosts.Hosts`.

Job steps must run *inside* a node, as on a real cluster: with its hostname, its network and
its mount namespace (a FUSE client mounted there has to be what the ranks write to).  So each
`slurmd -N hN` is started in its host's holder (`nsenter -t HOLDER -n -u -m`), and slurmstepd
and the ranks it forks inherit all three namespaces.  slurmctld lives in a namespace of its
own on the hosts' bridge (hostname `ctl`, `.250`), as a head node would; the client commands
(sbatch, srun, squeue, scancel) run from the machine's own namespace, which reaches the
bridge through the bridge's address.  A one-node Slurm is the case `Hosts(1, ...)`.

Everything is the testbed's own, so that another Slurm (or another testbed) on the machine
is not touched: a munged with its own key and socket (`AuthInfo=socket=`), started and
stopped by its pid; its own ports, state, spool, pid and log files under `folder/slurm`, and
per node (`%n`) where slurmd needs them apart: spool, pid file, log and `TmpFS` (the PMIx
plugin makes `$TmpFS/spmix_appdir_<uid>_<job>.<step>`; one shared folder gives `File
exists` on every node but the first).  Each node gets a private `/etc/hosts` listing all
nodes (MPI resolves the peers' names), bind-mounted in its mount namespace; the machine's
own file is left alone.

`hosts.Hosts` starts its holders under `ip netns exec`, which mounts a fresh /sys in their
mount namespace: /sys/fs/cgroup is then empty, and slurmd, which autodetects the cgroup
version at start even with proctrack/linuxproc and task/none, refuses to start ("No
filesystem mounted on /sys/fs/cgroup ... slurmd initialization failed").  A cgroup.conf that
names the version (`CgroupPlugin=cgroup/v1`) skips the detection, and nothing else of Slurm
needs a cgroup here.  Where the nodes do see the machine's hierarchies (holders made without
`ip netns exec`), Slurm is known to leave `slurm_<node>` cgroups behind: those that appear
while it runs are removed when it stops.

Every wait is polled and bounded; everything is stopped (by pid), unmounted and removed on
exit, also when starting failed; `leftovers()` names what is not.  The fixtures `slurm` (one
node of 16 CPUs) and `slurm3` (three of 2) in common.py are this class; docs/testbed.md.
"""

from __future__ import annotations

import glob
import os
import random
import shutil
import signal
import subprocess
import tempfile
import time
from typing import Dict, List, Optional

from testbed import hosts as hostlib

# MessageTimeout: Slurm's RPCs give up after 10 s by default.  On 2 cores running 6 ranks, srun's
# pmi2 plugin sending the fence's KVS to a node's slurmd timed out now and then ("failed to send
# temp kvs to compute nodes"), and the step's ranks then waited in MPI_Init for minutes (a CI run
# failed on it); busy sites raise it for the same reason.
CONF = """ClusterName=mwnodes
SlurmctldHost={ctl}({ctl_ip})
SlurmctldPort={ctl_port}
SlurmdPort={d_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={munge_socket}
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool/%n
SlurmctldPidFile={d}/run/slurmctld.pid
SlurmdPidFile={d}/run/slurmd-%n.pid
SlurmctldLogFile={d}/log/slurmctld.log
SlurmdLogFile={d}/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
TmpFS={d}/tmp/%n
PlugStackConfig={d}/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
SlurmdParameters=config_overrides
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
KillWait={kill_wait}
MessageTimeout=60
FirstJobId={first_job}
{nodes}
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
"""

# One line per node: `CPUs=` alone would mean one core per socket, a mismatch with what
# slurmd finds; config_overrides lets a node declare more CPUs than the machine has.
NODE = ("NodeName={name} NodeAddr={ip} CPUs={cpus} Sockets=1 CoresPerSocket={cpus} "
        "ThreadsPerCore=1 RealMemory=1000 State=UNKNOWN")

# Without it slurmd autodetects the cgroup version and, with nothing at /sys/fs/cgroup, fails.
CGROUP_CONF = "CgroupPlugin=cgroup/v1\nConstrainCores=no\nConstrainRAMSpace=no\n"

# The head node: its own network (on the bridge), hostname (slurmctld checks it against
# SlurmctldHost) and mount namespace (for its /etc/hosts).  Not under `ip netns exec`: that
# would remount /sys, which slurmctld does not need, but there is no reason to.
HEAD = "hostname {name} && mount --bind {hosts} /etc/hosts && echo ready && exec sleep infinity"

CTL_NAME = "ctl"
CTL_OCTET = 250
ACTIVE = ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED", "REQUEUED",
        "RESIZING", "SIGNALING", "STAGE_OUT")


def _bin(name: str) -> Optional[str]:
    """A program's path: on PATH, or in /usr/sbin (where Debian puts the daemons; a PATH
    without it is common outside a root login shell)."""
    found = shutil.which(name)
    if found is None and os.access(f"/usr/sbin/{name}", os.X_OK):
        found = f"/usr/sbin/{name}"
    return found


def why_not() -> str:
    """Why this Slurm cannot be started here, or '' when it can."""
    reason = hostlib.why_not()
    if reason:
        return reason
    missing = [b for b in ("munged", "mungekey", "slurmctld", "slurmd", "sbatch", "srun",
                           "nsenter") if not _bin(b)]
    if missing:
        return f"not installed: {', '.join(missing)} (apt-get install slurm-wlm munge)"
    return ""


class SlurmNodes:
    def __init__(self, h: hostlib.Hosts, folder: str, cpus: int = 2, kill_wait: int = 5,
                 timeout: float = 30.0):
        """A Slurm whose nodes are the hosts of `h` (entered, persistent), each declaring
        `cpus` cores; `kill_wait`: Slurm's KillWait (seconds between SIGTERM and SIGKILL
        when a job is cancelled or runs out of time); `timeout`: for each start-up wait."""
        if not h.persistent:
            raise ValueError("the hosts must be persistent: slurmd lives in each holder")
        if not h.holders:
            raise ValueError("enter the hosts first")
        self.h = h
        self.names = list(h.names)
        self.dir = os.path.join(str(folder), "slurm")
        self.conf = os.path.join(self.dir, "slurm.conf")
        # munged wants every folder above its socket traversable by all (o+x), which a
        # test's tmp_path (0700) is not: the socket gets a folder of its own in /tmp.
        self.munge_dir = None
        self.munge_socket = None
        # An outer job's or launcher's variables would steer sbatch/srun (and the ranks).
        self.env = {k: v for k, v in os.environ.items()
                    if not k.startswith(("SLURM_", "PMI_", "PMIX_", "OMPI_"))}
        self.env["SLURM_CONF"] = self.conf
        self.cpus = cpus
        self.kill_wait = kill_wait
        self.timeout = timeout
        self.ctl_ns = h.ns[0].rsplit("-", 1)[0] + "-ctl"
        self.ctl_veth = h.veth[0][:-1] + "sl"  # gluster.py has "s", the Ceph one "c"
        self.ctl_ip = f"10.{h.subnet}.77.{CTL_OCTET}"
        self.munged: Optional[subprocess.Popen] = None
        self.head: Optional[subprocess.Popen] = None
        self.slurmctld: Optional[subprocess.Popen] = None
        self.slurmd: Dict[str, subprocess.Popen] = {}
        self.mounted: Dict[int, List[str]] = {}  # host index -> mount points, innermost last
        self.local = os.path.join(self.dir, "local")  # each node's own tmpfs (node-local disk)
        self.made: List[tuple] = []
        self.outputs: Dict[str, str] = {}
        self.cgroups_before = set(self._cgroups())
        self.started_in = self.stopped_in = None

    # -- life cycle ------------------------------------------------------------------------

    def __enter__(self) -> SlurmNodes:
        t0 = time.monotonic()
        try:
            self._folders()
            self._munged()
            self._head()
            for i in range(len(self.names)):
                self._node_mounts(i)
            self._slurmctld()
            for i in range(len(self.names)):
                self._slurmd(i)
            self._wait_idle()
        except BaseException:
            self.__exit__()
            raise
        self.started_in = time.monotonic() - t0
        return self

    def _folders(self) -> None:
        for sub in ("state", "run", "log", "munge", "jobs", "local"):
            os.makedirs(os.path.join(self.dir, sub), exist_ok=True)
        for name in self.names:
            os.makedirs(os.path.join(self.dir, "spool", name), exist_ok=True)
            os.makedirs(os.path.join(self.dir, "tmp", name), exist_ok=True)
        self.munge_dir = tempfile.mkdtemp(prefix="mwmunge-")
        os.chmod(self.munge_dir, 0o755)
        self.munge_socket = os.path.join(self.munge_dir, "munge.socket")
        with open(os.path.join(self.dir, "plugstack.conf"), "w"):
            pass  # no SPANK plugins of the machine's
        with open(os.path.join(self.dir, "cgroup.conf"), "w") as fh:
            fh.write(CGROUP_CONF)
        lines = ["127.0.0.1\tlocalhost", f"{self.ctl_ip}\t{CTL_NAME}"]
        lines += [f"{ip}\t{name}" for ip, name in zip(self.h.ips, self.names)]
        with open(os.path.join(self.dir, "hosts"), "w") as fh:
            fh.write("\n".join(lines) + "\n")
        nodes = "\n".join(NODE.format(name=n, ip=ip, cpus=self.cpus)
                          for n, ip in zip(self.names, self.h.ips))
        with open(self.conf, "w") as fh:
            # Job ids start somewhere new each time: MPICH names its shared-memory segments
            # after the PMI job, and a killed job's stale segment would break a later job.
            # The ports are those of namespaces of our own: no other Slurm can hold them.
            fh.write(CONF.format(d=self.dir, ctl=CTL_NAME, ctl_ip=self.ctl_ip,
                                 ctl_port=26817, d_port=26818, munge_socket=self.munge_socket,
                                 kill_wait=self.kill_wait, nodes=nodes,
                                 first_job=random.randint(1000, 10**6)))

    def _munged(self) -> None:
        """A munged of our own: its key, socket, pid, seed and log files in our folder, in
        the foreground so that its pid is the Popen's.  Root runs it (it accepts that; the
        key must be the running user's and not readable by others)."""
        m = os.path.join(self.dir, "munge")
        key = os.path.join(m, "munge.key")
        subprocess.run([_bin("mungekey"), "--create", "--force", f"--keyfile={key}"], check=True,
                       capture_output=True)
        os.chmod(key, 0o600)
        console = open(os.path.join(m, "console"), "w")
        self.munged = subprocess.Popen(
            [_bin("munged"), "--foreground", f"--socket={self.munge_socket}", f"--key-file={key}",
             f"--pid-file={m}/munged.pid", f"--seed-file={m}/munged.seed",
             f"--log-file={m}/munged.log"],
            stdin=subprocess.DEVNULL, stdout=console, stderr=subprocess.STDOUT,
            start_new_session=True)
        console.close()
        self._until(lambda: os.path.exists(self.munge_socket), "munged made no socket",
                    self.munged)

    def _head(self) -> None:
        ip = hostlib._ip
        ip("netns", "add", self.ctl_ns)
        self.made.append(("netns", self.ctl_ns))
        ip("link", "add", self.ctl_veth, "type", "veth", "peer", "name", self.ctl_veth + "p")
        self.made.append(("link", self.ctl_veth))
        ip("link", "set", self.ctl_veth, "master", self.h.bridge, "up")
        ip("link", "set", self.ctl_veth + "p", "netns", self.ctl_ns)
        ip("-n", self.ctl_ns, "link", "set", self.ctl_veth + "p", "name", "eth0")
        ip("-n", self.ctl_ns, "addr", "add", f"{self.ctl_ip}/24", "dev", "eth0")
        ip("-n", self.ctl_ns, "link", "set", "eth0", "up")
        ip("-n", self.ctl_ns, "link", "set", "lo", "up")
        self.head = subprocess.Popen(
            ["nsenter", f"--net=/run/netns/{self.ctl_ns}", "unshare", "--uts", "--mount",
             "--propagation", "private", "/bin/sh", "-c",
             HEAD.format(name=CTL_NAME, hosts=os.path.join(self.dir, "hosts"))],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True, start_new_session=True)
        if self.head.stdout.readline().strip() != "ready":
            raise RuntimeError("the head node's namespaces could not be made")

    def _node_mounts(self, i: int) -> None:
        """The node's own /etc/hosts (bind-mounted in its mount namespace only), and its own
        local disk: a tmpfs at `self.local`, the same path on every node with each node's own
        contents, as /tmp or /local is on a cluster (jobscript --stage unpacks into it)."""
        self._on(i, f"mount --bind {self.dir}/hosts /etc/hosts")
        self._on(i, f"mount -t tmpfs -o size=1g,mode=1777 mwlocal {self.local}")
        self.mounted[i] = ["/etc/hosts", self.local]

    def _on(self, i: int, cmd: str, check: bool = True) -> subprocess.CompletedProcess:
        out = self.h.run(i, cmd, timeout=30)
        if check and out.returncode != 0:
            raise RuntimeError(f"{self.names[i]}: {cmd}: {out.stderr.strip()}")
        return out

    def _enter(self, pid: int) -> List[str]:
        # --wd: without it the daemon's working directory would be the namespace's /.
        return ["nsenter", "-t", str(pid), "-n", "-u", "-m", f"--wd={self.dir}"]

    def _daemon(self, pid: int, argv: List[str], console: str) -> subprocess.Popen:
        """A daemon in the foreground (-D), entered into `pid`'s namespaces: nsenter execs
        it, so the Popen's pid is the daemon's and it is stopped by that pid."""
        with open(os.path.join(self.dir, "log", console), "w") as fh:
            return subprocess.Popen(self._enter(pid) + argv, stdin=subprocess.DEVNULL,
                                    stdout=fh, stderr=subprocess.STDOUT, env=self.env,
                                    start_new_session=True)

    def _slurmctld(self) -> None:
        # -c: a clean start (-i would keep an earlier run's jobs as running).
        self.slurmctld = self._daemon(self.head.pid, [_bin("slurmctld"), "-D", "-c", "-f",
                                                      self.conf], "slurmctld.console")

    def _slurmd(self, i: int) -> None:
        name = self.names[i]
        self.slurmd[name] = self._daemon(self.h.holders[i].pid,
                                         [_bin("slurmd"), "-D", "-N", name, "-f", self.conf],
                                         f"slurmd-{name}.console")

    def _wait_idle(self) -> None:
        """Until every node is exactly `idle` (`sinfo -t idle` would also match drained
        ones, and a drained node never runs a job)."""
        def idle():
            out = self._cmd(["sinfo", "-h", "-N", "-o", "%N %T"], check=False).stdout
            states = dict(line.split()[:2] for line in out.splitlines() if line.strip())
            return all(states.get(n) == "idle" for n in self.names)

        self._until(idle, "the nodes are not all idle", self.slurmctld,
                    *self.slurmd.values())

    def _until(self, ok, what: str, *procs: subprocess.Popen) -> None:
        end = time.monotonic() + self.timeout
        while not ok():
            dead = [p.args for p in procs if p.poll() is not None]
            if dead or time.monotonic() > end:
                why = f"exited: {dead}" if dead else f"after {self.timeout}s"
                raise RuntimeError(f"{what} ({why})\n{self.log()}")
            time.sleep(0.1)

    def __exit__(self, *exc) -> None:
        t0 = time.monotonic()
        if self.slurmctld is not None and self.slurmctld.poll() is None:
            try:  # the steps get KillWait to go; then the jobs leave the queue
                self._cmd(["scancel", "--full", "--user=root"], check=False, timeout=30)
                end = time.monotonic() + self.kill_wait + 10
                while self._cmd(["squeue", "-h", "-o", "%i"], check=False,
                                timeout=30).stdout.strip():
                    if time.monotonic() > end:
                        break
                    time.sleep(0.2)
            except subprocess.TimeoutExpired:
                pass
        for proc in list(self.slurmd.values()) + [self.slurmctld]:
            _stop(proc)
        self.slurmd = {}
        self.slurmctld = None
        for pid in self._strays():  # slurmstepd or ranks a failed stop left: ours
            hostlib.kill(pid)
        end = time.monotonic() + 10
        while self._strays() and time.monotonic() < end:
            time.sleep(0.1)
        for i, points in self.mounted.items():
            for mnt in reversed(points):
                if i < len(self.h.holders):  # else the node's namespace is gone
                    try:
                        self.h.run(i, f"umount {mnt} || umount -l {mnt}", timeout=30)
                    except subprocess.TimeoutExpired:
                        pass
        self.mounted = {}
        _stop(self.head, signal.SIGKILL)
        if self.head is not None:
            self.head.stdout.close()
        self.head = None
        for kind, name in reversed(self.made):
            if kind == "netns":
                for pid in _netns_pids(name):
                    hostlib.kill(pid)
                hostlib._ip("netns", "del", name, check=False)
            else:
                hostlib._ip("link", "del", name, check=False)
        self.made = []
        self._remove_cgroups()
        _stop(self.munged)
        self.munged = None
        if self.munge_dir:
            shutil.rmtree(self.munge_dir, ignore_errors=True)
            self.munge_dir = None
        self.stopped_in = time.monotonic() - t0

    def _cgroups(self) -> List[str]:
        return [p for n in self.names for p in glob.glob(f"/sys/fs/cgroup/*/slurm_{n}")]

    def _remove_cgroups(self) -> None:
        """The `slurm_<node>` cgroups that appeared while we ran, deepest first (a cgroup
        folder goes with rmdir, its files with it)."""
        for top in set(self._cgroups()) - self.cgroups_before:
            for folder, _dirs, _files in sorted(os.walk(top), key=lambda w: -len(w[0])):
                try:
                    os.rmdir(folder)
                except OSError:
                    pass

    def _strays(self) -> List[int]:
        """Living processes of this Slurm (once stopped, there should be none): in the head's
        namespace, or in a node's with our SLURM_CONF in their environment or a slurm*
        name (slurmstepd, ranks), or naming our folder on their command line.  Zombies do
        not count: the machine's init reaps exited slurmstepds only after a second or two."""
        ours = {_ns_inode(f"/run/netns/{n}") for n in self.h.ns} - {None}
        keep = {p.pid for p in self.h.holders} | {os.getpid()}
        if self.munged is not None:  # stopped last, by its pid
            keep.add(self.munged.pid)
        found = set(_netns_pids(self.ctl_ns)) - ({self.head.pid} if self.head else set())
        mark = f"SLURM_CONF={self.conf}".encode()
        for pid in _pids():
            if pid in keep:
                continue
            if self.dir in hostlib.cmdline(pid):
                found.add(pid)
            elif ours and _ns_inode(f"/proc/{pid}/ns/net") in ours:
                if _comm(pid).startswith("slurm") or mark in _environ(pid).split(b"\0"):
                    found.add(pid)
        return sorted(p for p in found if _alive(p))

    def leftovers(self) -> List[str]:
        """What of this Slurm is still there: its namespace and link, its processes (see
        _strays), the slurm cgroups it made, mounts it made in the nodes."""
        names = hostlib._ip("netns", "list").stdout + hostlib._ip("link", "show").stdout
        left = [n for n in (self.ctl_ns, self.ctl_veth) if n in names]
        left += [f"pid {p}: {hostlib.cmdline(p) or _comm(p)}" for p in self._strays()]
        if self.munged is not None and _alive(self.munged.pid):
            left.append(f"munged {self.munged.pid}")
        if self.munge_dir and os.path.exists(self.munge_dir):
            left.append(f"folder {self.munge_dir}")
        left += [f"cgroup {c}" for c in set(self._cgroups()) - self.cgroups_before]
        left += [f"mount {self.names[i]}:{m}" for i, pts in self.mounted.items() for m in pts]
        return left

    # -- operations ------------------------------------------------------------------------

    def _cmd(self, argv, check=True, timeout=60, cwd=None, env=None):
        """A Slurm client command from the machine's own namespace; past `timeout` its
        process group is killed and TimeoutExpired raised."""
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                stdin=subprocess.DEVNULL, cwd=cwd,
                                env=dict(self.env, **(env or {})), start_new_session=True)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise
        res = subprocess.CompletedProcess(argv, proc.returncode, out, err)
        if check and res.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)}: rc {res.returncode}: {err}{out}")
        return res

    def srun(self, *args, timeout: float = 120, cwd=None, env=None, check=False):
        """`srun ARGS` (from outside the nodes, as a login node would)."""
        return self._cmd(["srun", *args], check=check, timeout=timeout, cwd=cwd, env=env)

    def sbatch(self, script: str, *args, cwd=None, env=None) -> str:
        """Submit `script` (the text of a batch script) with sbatch options `args`; returns
        the job id.  Its output goes to `output(job)` (slurm-JOB.out in `cwd`, default
        our folder's jobs/, unless args say otherwise)."""
        cwd = str(cwd or os.path.join(self.dir, "jobs"))
        path = os.path.join(self.dir, "jobs", f"script-{time.monotonic_ns()}.sh")
        with open(path, "w") as fh:
            fh.write(script)
        os.chmod(path, 0o755)
        out = self._cmd(["sbatch", "--parsable", *args, path], cwd=cwd, env=env)
        job = out.stdout.strip().split(";")[0]
        named = any(a in ("-o", "--output") or a.startswith("--output=") for a in args)
        self.outputs[job] = "" if named else os.path.join(cwd, f"slurm-{job}.out")
        return job

    def output(self, job: str) -> str:
        try:
            with open(self.outputs.get(job, ""), errors="replace") as fh:
                return fh.read()
        except OSError:
            return ""

    def state(self, job: str) -> str:
        out = self._cmd(["scontrol", "show", "job", job], check=False).stdout
        for word in out.split():
            if word.startswith("JobState="):
                return word.split("=", 1)[1]
        return ""

    def wait(self, job: str, timeout: float = 180.0) -> str:
        """Wait until the job has ended; returns its final state.  Past `timeout` it is
        cancelled and AssertionError raised."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            state = self.state(job)
            if state and state not in ACTIVE:
                return state
            time.sleep(0.3)
        where = self.processes()
        self.scancel(job)
        raise AssertionError(f"job {job} did not end within {timeout}s\n--- its processes\n"
                             f"{where}\n--- job output\n{self.output(job)[-3000:]}\n"
                             f"{self.log()}")

    def processes(self) -> str:
        """What runs in the nodes now (state, kernel wait channel, run time, command), for
        the message of a job that did not end: which rank waits where."""
        lines = []
        for i, ns in enumerate(self.h.ns):
            pids = hostlib._ip("netns", "pids", ns, check=False).stdout.split()
            for pid in pids:
                try:
                    with open(f"/proc/{pid}/stat") as fh:
                        state = fh.read().rsplit(")", 1)[1].split()[0]
                    with open(f"/proc/{pid}/wchan") as fh:
                        wchan = fh.read().strip()
                except OSError:
                    continue
                cmd = hostlib.cmdline(pid)
                if cmd and not cmd.startswith("sleep"):
                    lines.append(f"{self.h.names[i]} {pid} {state} {wchan or '-'} {cmd[:160]}")
        return "\n".join(lines)

    def scancel(self, job: str, *args) -> subprocess.CompletedProcess:
        return self._cmd(["scancel", *args, job], check=False)

    def log(self, tail: int = 3000) -> str:
        """The ends of the daemons' logs and consoles, for an assertion message."""
        text = ""
        files = [os.path.join(self.dir, "munge", "munged.log")]
        files += sorted(glob.glob(os.path.join(self.dir, "log", "*")))
        for path in files:
            try:
                with open(path, errors="replace") as fh:
                    body = fh.read()[-tail:]
            except OSError:
                continue
            if body.strip():
                text += f"--- {os.path.basename(path)}\n{body}"
        return text


# -- processes ------------------------------------------------------------------------------

def _stop(proc: Optional[subprocess.Popen], sig=signal.SIGTERM, timeout: float = 15) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(sig)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=timeout)


def _alive(pid: int) -> bool:
    """Whether a process exists and has not exited (a zombie has)."""
    try:
        state = _read(f"/proc/{pid}/stat").decode().rsplit(")", 1)[1].split()[0]
    except IndexError:
        return False
    return state not in ("Z", "X")


def _pids() -> List[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def _netns_pids(name: str) -> List[int]:
    out = subprocess.run(["ip", "netns", "pids", name], capture_output=True, text=True)
    return [int(p) for p in out.stdout.split()]


def _ns_inode(path: str):
    try:
        return os.stat(path).st_ino
    except OSError:
        return None


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError:
        return b""


def _comm(pid) -> str:
    return _read(f"/proc/{pid}/comm").decode(errors="replace").strip()


def _environ(pid) -> bytes:
    return _read(f"/proc/{pid}/environ")
