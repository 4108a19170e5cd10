"""FUSE filesystems (GlusterFS, ceph-fuse, others): mount source, daemon name and version.

The mount table gives `fuse.<subtype>` (glusterfs mounts show `fuse.glusterfs` with source
`server:/volume`).  The daemon is the process whose command line ends with the mount point
(`/usr/sbin/glusterfs --process-name fuse --volfile-server=srv --volfile-id=/gv0 /mnt/gv0`),
found by reading /proc/<pid>/cmdline, and whose program is the filesystem's client binary
(`glusterfs`, `ceph-fuse`; the subtype for others: `sshfs`), never mpiwrite itself, and that
serves our mount: in our mount namespace (`/proc/PID/ns/mnt` as `/proc/self/ns/mnt`), else
with our mount's device (MAJ:MIN, one per FUSE connection) at the mount point in its
`/proc/PID/mountinfo` (a copy of its namespace: a container, `unshare -m`; or a namespace a
user may not read).  A plain `fuse` mount (bindfs: no subtype, its source a folder) names no
program: its daemon is the process, so found, that holds /dev/fuse open.  Emulated hosts run
identical daemons, each with its own device.  Its
version comes from the package database, else (real root only, named programs only) from
`glusterfs --version` (`glusterfs 10.3`) or `ceph-fuse --version` (`ceph version 18.2.1
(<sha>) reef (stable)`).
"""

from __future__ import annotations

import os
import re
from typing import Any, Dict, List, Optional, Tuple

from mpiwrite.clients import ceph
from mpiwrite.clients.base import Client
from mpiwrite.clients.common import client_string, command, options, package_version, unescape
from mpiwrite.sysroot import Reader
from mpiwrite.units import MiB

MAX_PROCESSES = 4096  # /proc/<pid>/cmdline files looked at, at most
MAX_FDS = 256  # /proc/<pid>/fd links looked at per candidate, at most
# subtype -> (client name, packages, version command); the command's program is the daemon's
# binary (argv[0]'s base name), for other subtypes the subtype itself
KNOWN = {
    "glusterfs": ("glusterfs", ("glusterfs-client", "glusterfs-fuse"), ["glusterfs", "--version"]),
    "ceph-fuse": ("ceph", ("ceph-fuse",), ["ceph-fuse", "--version"]),
    "ceph": ("ceph", ("ceph-fuse",), ["ceph-fuse", "--version"]),
}


def binary(sub: str) -> str:
    """The program a FUSE daemon of this subtype runs: 'ceph' -> 'ceph-fuse', 'sshfs'."""
    known = KNOWN.get(sub)
    return known[2][0] if known else sub
_VERSION = re.compile(r"(?:version\s+|^\S+\s+)v?(\d+(?:\.\d+)+)", re.M)


def subtype(fstype: str, source: Optional[str]) -> str:
    """'fuse.glusterfs' -> 'glusterfs'; a plain 'fuse' mount names its daemon as source."""
    if fstype.startswith(("fuse.", "fuseblk.")):
        return fstype.split(".", 1)[1]
    if fstype == "glusterfs":
        return "glusterfs"
    return os.path.basename(source or "") or fstype


def daemon(reader: Reader, mount_point: Optional[str],
           program: Optional[str] = None) -> Optional[Dict[str, Any]]:
    """pid, name and argv of the process serving mount_point: its argv ends with it and
    argv[0]'s base name is `program` or, without one, it holds /dev/fuse open (either way not
    `tail -f MOUNT`); of those,
    the first in our mount namespace, else the first whose mount table has our mount's
    device at mount_point (ours seen from a copy of its namespace, or a namespace we may not
    read).  Without our own namespace link (a sysroot without it) the first is taken."""
    if not mount_point:
        return None
    pids = [p for p in reader.glob("proc/[0-9]*") if p.rsplit("/", 1)[-1].isdigit()]
    me = str(os.getpid())  # `mpiwrite env /mnt/x` ends its own command line with the mount
    ours, _ = reader.readlink("proc/self/ns/mnt")
    device = mount_device(reader, "proc/self", mount_point) if ours is not None else None
    by_device = None
    for rel in pids[:MAX_PROCESSES]:
        if rel.rsplit("/", 1)[-1] == me:
            continue
        text, _ = reader.read(f"{rel}/cmdline", keep=False)
        if not text:
            continue
        argv = [a for a in text.split("\0") if a]
        if len(argv) < 2 or argv[-1].rstrip("/") != mount_point.rstrip("/"):
            continue
        if os.path.basename(argv[0]) != program if program is not None \
                else not holds_fuse(reader, rel):
            continue
        found = {"pid": int(rel.rsplit("/", 1)[-1]), "name": os.path.basename(argv[0]),
                 "argv": argv[:32]}
        if ours is None or reader.readlink(f"{rel}/ns/mnt")[0] == ours:
            reader.raw[f"{rel}/cmdline"] = text
            return found
        if by_device is None and device is not None \
                and mount_device(reader, rel, mount_point) == device:
            by_device = (found, text)  # unless one in our own namespace comes later
    if by_device is None:
        return None  # e.g. only other emulated hosts' daemons with the same command line
    reader.raw[f"/proc/{by_device[0]['pid']}/cmdline"] = by_device[1]
    return by_device[0]


def holds_fuse(reader: Reader, rel: str) -> bool:
    """Whether the process at rel (proc/PID) has /dev/fuse open, as a FUSE daemon has."""
    return any(reader.readlink(fd)[0] == "/dev/fuse"
               for fd in reader.glob(f"{rel}/fd/*")[:MAX_FDS])


def mount_device(reader: Reader, rel: str, mount_point: str) -> Optional[str]:
    """MAJ:MIN of mount_point in /proc/PID/mountinfo (rel: proc/PID), the topmost mount."""
    text, _ = reader.read(f"{rel}/mountinfo", keep=False)
    found = None
    for line in (text or "").splitlines():
        f = line.split()
        if len(f) > 4 and unescape(f[4]).rstrip("/") == mount_point.rstrip("/"):
            found = f[2]
    return found


def parse_version(text: Optional[str]) -> Optional[str]:
    """'glusterfs 10.3\\n...' -> '10.3'; 'ceph version 18.2.1 (...)' -> '18.2.1'."""
    m = _VERSION.search(text or "")
    return m.group(1) if m else None


def collect(reader: Reader, fs: Dict[str, Any]) -> Dict[str, Any]:
    fstype = str(fs.get("fstype") or "")
    sub = subtype(fstype, fs.get("mount_source"))
    if fstype in ("fuse", "fuseblk"):  # no subtype: the daemon (its program) names it
        proc = daemon(reader, fs.get("mount_point"))
        sub = proc["name"] if proc else sub
    else:
        proc = daemon(reader, fs.get("mount_point"), binary(sub))
    name, packages, cmd = KNOWN.get(sub, (sub, (sub,), None))
    info: Dict[str, Any] = {"name": name, "fuse": True, "subtype": sub,
                            "mount_source": fs.get("mount_source")}
    info["daemon"] = proc
    version, package = package_version(reader, packages)
    info["version_source"] = f"package {package}" if version else None
    if name == "ceph":  # the running client's own answers, through its admin socket
        info.update(ceph.fuse_client(reader, proc))
        if info.get("version"):
            info["package_version"] = version
            version = info["version"]
            info["version_source"] = "admin socket (the running ceph-fuse)"
    if version is None and cmd is not None:
        version = parse_version(command(reader, cmd, f"{name}.version"))
        info["version_source"] = " ".join(cmd) if version else None
    opts = options(fs.get("mount_options"))
    info["max_read"] = int(opts["max_read"]) if opts.get("max_read", "").isdigit() else None
    if sub == "glusterfs" and proc:
        info["volfile"] = _flags(proc["argv"], ("--volfile-server", "--volfile-id"))
        info["graph"] = gluster_graph(reader, proc["argv"], fs.get("mount_point"))
    if version is None:
        reader.unknown[f"{name}.version"] = reader.unknown.get(
            f"{name}.version", f"no installed package of {', '.join(packages)}")
    info["version"] = version
    info["client"] = client_string(name, version)
    return info


GRAPH_LOG_BYTES = 4 * MiB  # the end of the client's log, where its last graph is
_GRAPH_LINE = re.compile(r"^\s*\d+:\s?(.*)$")


def gluster_graph(reader: Reader, argv: List[str],
                  mount_point: Optional[str]) -> Optional[Dict[str, Any]]:
    """The translator graph the GlusterFS client runs, from the last "Final graph:" block of
    its log (--log-file, else /var/log/glusterfs/<mount point>.log): what the volume's
    options made of the client (features/cdc is network.compression, performance/write-behind
    is performance.write-behind, ...), the closest thing to Lustre's osc settings."""
    log = _flags(argv, ("--log-file",)).get("log-file")
    if not log and mount_point:
        log = "/var/log/glusterfs/" + mount_point.strip("/").replace("/", "-") + ".log"
    if not log:
        return None
    text, why = reader.read(log.lstrip("/"), keep=False, limit=GRAPH_LOG_BYTES, tail=True)
    if text is None:
        reader.unknown["glusterfs.graph"] = f"{log}: {why}"
        return None
    graph = parse_graph(text)
    if graph is None:
        reader.unknown["glusterfs.graph"] = f"{log}: no 'Final graph' in its last 4 MiB"
        return None
    graph["log"] = log
    return graph


def parse_graph(text: str) -> Optional[Dict[str, Any]]:
    """{'translators': [type, ...], 'options': {'cdc.mode': 'client', ...}, 'compression':
    'on'|'off', 'write_behind': 'on'|'off'} from a client log's last graph, or None."""
    start = text.rfind("Final graph:")
    if start < 0:
        return None
    translators: List[str] = []
    volumes: List[list] = []  # [name, {option: value}]
    for line in text[start:].splitlines()[1:]:
        if line.startswith("+---") and translators:
            break
        m = _GRAPH_LINE.match(line)
        if not m:
            continue
        words = m.group(1).split()
        if len(words) >= 2 and words[0] == "volume":
            volumes.append([words[1], {}])
        elif len(words) >= 2 and words[0] == "type":
            translators.append(words[1])
        elif len(words) >= 3 and words[0] == "option" and volumes and len(volumes) < 64:
            volumes[-1][1][words[1]] = " ".join(words[2:])[:200]
    if not translators:
        return None
    # translators are named VOLUME-XLATOR and the last one (io-stats) VOLUME itself
    prefix = volumes[-1][0] + "-" if volumes else ""
    options = {f"{name[len(prefix):] if name.startswith(prefix) else name}.{k}": v
               for name, opts in volumes for k, v in opts.items()}
    return {"translators": translators[:64], "options": options,
            "compression": "on" if "features/cdc" in translators else "off",
            "write_behind": "on" if "performance/write-behind" in translators else "off"}


def _flags(argv: List[str], names) -> Dict[str, str]:
    out = {}
    for a in argv:
        key, _, value = a.partition("=")
        if key in names:
            out[key.lstrip("-")] = value
    return out


def is_fuse(fstype: str) -> bool:
    """A FUSE mount (or GlusterFS's own type name), served by a daemon of its subtype."""
    return fstype.startswith(("fuse.", "fuseblk.")) or fstype in ("fuse", "fuseblk", "glusterfs")


class Fuse(Client):
    """Any FUSE filesystem: its subtype, source, daemon (found in /proc) and version.  The
    FUSE clients with more to say (GlusterFS, ceph-fuse, DAOS dfuse) are its subclasses,
    each matching its own subtypes; this one serves the rest (sshfs, ...)."""

    name = "fuse"
    magics = {0x65735546: "fuse"}
    subtypes: Tuple[str, ...] = ()  # the daemons it serves; empty: any
    volatile = ("pid", "argv", "log")  # the daemon's process, its command line, its log file
    waits = ("request_wait_answer", "fuse_")
    waits_are = "fuse"  # the daemon's answer to a request (its own network behind it)

    def matches(self, fstype: str, source: Optional[str] = None) -> bool:
        return is_fuse(fstype) and (not self.subtypes or subtype(fstype, source) in self.subtypes)

    def collect(self, reader, fs: Dict[str, Any], kernel: str,
                lustre: Dict[str, Any]) -> Dict[str, Any]:
        return collect(reader, fs)

    def own_processes(self, sysroot: str, fs: Dict[str, Any],
                      client: Dict[str, Any]) -> List[int]:
        """Its daemon, as the node's facts found it (all its threads: /proc/PID/stat)."""
        pid = (client.get("daemon") or {}).get("pid")
        return [pid] if isinstance(pid, int) and not isinstance(pid, bool) else []

    def detail(self, client: Dict[str, Any]) -> List[str]:
        d = client.get("daemon") or {}
        return [f"fuse {client.get('subtype')} from {client.get('mount_source')}",
                f"daemon {d.get('name')} pid {d.get('pid')}" if d else "daemon not found",
                f"version from {client.get('version_source')}"]


CLIENT = Fuse()
