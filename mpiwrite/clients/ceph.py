"""CephFS: the kernel client's mount options, and a ceph-fuse client's own view of itself.

Kernel client: part of the kernel (no version of its own; /sys/module/ceph/version exists only
for an out-of-tree build), so its version is `kernel-<release>`; the ceph-common package
version is recorded beside it.  Mount options (rsize, wsize, name, fs/mds_namespace, ...) come
from mountinfo with `secret=` hidden.

ceph-fuse (found as a FUSE daemon by fs_fuse.py): its admin socket answers what it runs.  The
socket is found, in this order, as
  1. the UNIX socket the daemon itself listens on (its /proc/PID/fd socket inodes looked up in
     /proc/PID/net/unix; needs root or the daemon's user, as connecting does);
  2. `--admin-socket PATH` (or `--admin_socket`) on its command line;
  3. `admin socket` in its ceph.conf (`-c`/`--conf`, else /etc/ceph/$cluster.conf), section
     [client.ID], else [client], else [global]; else Ceph's default
     `$run_dir/$cluster-$name.$pid.$cctid.asok` ($run_dir from `run dir`, else /var/run/ceph;
     $cctid, unknowable, as a pattern that must match exactly one file).
The protocol (src/common/admin_socket.cc; `ceph --admin-daemon` does the same): the command as
JSON, `{"prefix": "perf dump"}`, then a NUL; the answer is a 4-byte big-endian length and that
many bytes, JSON or `ERROR: ...` text.  A socket is used only on the real root (never in a
sysroot, never with MPIWRITE_NO_COMMANDS), only when lstat shows a socket (not a symlink)
owned by root or us, and only when the peer that accepted (SO_PEERCRED) is the daemon's pid
running as root or us; each command has ASK_TIMEOUT seconds and MAX_ANSWER bytes, and every
value taken from an answer is type-checked, bounded and escaped.

Facts (`version` from `version`; `entity`, `global_id`, `fs_name` from `status`; `config`
from `config show` and `config diff`): WRITE_OPTIONS always, and every option `config diff`
shows as changed from its default whose name is a client-side one (CLIENT_PREFIXES), never
secrets.  Counters for deltas around the timed phase come from `perf dump` (COUNTERS).
"""

from __future__ import annotations

import json
import os
import re
import socket
import stat
import struct
import time
from typing import Any, Dict, List, Optional, Tuple

from mpiwrite.clients.common import client_string, options, package_version, scrub
from mpiwrite.errors import why
from mpiwrite.sysroot import Reader, first_line, to_int
from mpiwrite.text import clean

KEYS = ("rsize", "wsize", "rasize", "name", "fs", "mds_namespace", "recover_session", "ms_mode",
        "caps_max", "readdir_max_bytes")

ASK_TIMEOUT = 2.0  # seconds per admin socket command; a hung ceph-fuse must not stall a run
MAX_ANSWER = 1 << 20  # bytes; `config show` is 75 KB, `perf dump` 9 KB (Ceph 16.2)
MAX_FDS = 1024  # the daemon's /proc/PID/fd links looked at, at most
MAX_CHANGED = 64  # options taken from `config diff`, at most
MAX_VALUE = 200  # characters kept of an option's value
MAX_NUMBER = 2**62
# the options that shape how ceph-fuse writes: its object cacher (client_oc*: the write-back
# cache and its dirty limits; max_dirty 0 makes it write-through), FUSE write sizes, and how
# much the objecter keeps in flight to the OSDs
WRITE_OPTIONS = ("client_oc", "client_oc_size", "client_oc_max_dirty", "client_oc_target_dirty",
                 "client_oc_max_dirty_age", "client_oc_max_objects", "fuse_big_writes",
                 "fuse_max_write", "objecter_inflight_op_bytes", "objecter_inflight_ops")
# changed options kept: those a client uses (not the mon's, OSD's or MDS's own)
CLIENT_PREFIXES = ("client_", "fuse_", "objecter_", "objectcacher_", "ms_", "rados_", "debug_")
NOT_KEPT = ("key", "secret", "password", "admin_socket")  # substrings of names never kept
# perf dump: section -> counters taken (numbers, or {avgcount, sum} for latencies)
COUNTERS = {
    "objecter": ("op_w", "op_send_bytes"),
    "objectcacher-libcephfs": ("data_written", "data_flushed", "write_ops_blocked",
                               "write_bytes_blocked", "write_time_blocked"),
    "client": ("wrlat", "fsync"),
}
SECTION_NAMES = {"objecter": "objecter", "objectcacher-libcephfs": "objectcacher",
                 "client": "client"}
_NAME = re.compile(r"^[a-z][a-z0-9_]{0,79}\Z")
_WORD = re.compile(r"^[A-Za-z0-9_.-]{1,64}\Z")
_VERSION = re.compile(r"^\d+(?:\.\d+){1,3}\Z")


def collect(reader: Reader, fs: Dict[str, Any], kernel: str) -> Dict[str, Any]:
    """The kernel client's facts."""
    opts = options(scrub(fs.get("mount_options")))
    info: Dict[str, Any] = {"name": "ceph", "kind": "kernel",
                            "mount_source": fs.get("mount_source"),
                            "options": {k: opts[k] for k in KEYS if k in opts}}
    for k in ("rsize", "wsize", "rasize"):
        if k in info["options"]:
            info["options"][k] = to_int(info["options"][k])
    module = first_line(reader.read("sys/module/ceph/version")[0]) or None
    version = module or (f"kernel-{kernel}" if kernel else None)
    info["userspace_version"] = package_version(reader, ("ceph-common",))[0]
    info["version"] = version
    info["client"] = client_string("ceph", version)
    return info


# ---- ceph-fuse: where its admin socket is ------------------------------------------------

def flags(argv: List[str]) -> Dict[str, str]:
    """The Ceph options of a command line: `--conf`, `--id`, `--name`, `--cluster`,
    `--admin-socket` (dashes and underscores alike, `--x=v` or `--x v`, `-c -i -n` too)."""
    short = {"-c": "conf", "-i": "id", "-n": "name"}
    out: Dict[str, str] = {}
    i = 1
    while i < len(argv):
        a = argv[i]
        key, value = None, None
        if a in short:
            key = short[a]
        elif a.startswith("--"):
            key, eq, value = a[2:].partition("=")
            key = key.replace("-", "_")
            value = value if eq else None
        if key in ("conf", "id", "name", "cluster", "admin_socket"):
            if value is None and i + 1 < len(argv):
                value = argv[i + 1]
                i += 1
            if value is not None:
                out.setdefault(key, value)
        i += 1
    return out


def parse_conf(text: str) -> Dict[str, Dict[str, str]]:
    """ceph.conf: {section: {option: value}}, names with spaces and dashes as underscores."""
    out: Dict[str, Dict[str, str]] = {}
    section = out.setdefault("global", {})
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and "]" in line:
            section = out.setdefault(line[1:line.index("]")].strip(), {})
            continue
        key, eq, value = line.partition("=")
        if eq:
            value = re.split(r"\s[#;]", value, maxsplit=1)[0].strip()
            section.setdefault(re.sub(r"[\s-]+", "_", key.strip()), value)
    return out


def expand(template: str, values: Dict[str, str]) -> str:
    """Ceph's metavariables ($cluster, $name, $type, $id, $pid, $run_dir, ${x}); $cctid and
    any other unknown one become `*` (a pattern)."""
    return re.sub(r"\$(\{?)([a-z_]+)\}?",
                  lambda m: values.get(m.group(2), "*"), template)


def listening_socket(reader: Reader, pid: int) -> Optional[str]:
    """The path of the UNIX socket the process listens on (an `.asok` one if several)."""
    inodes = set()
    for rel in reader.glob(f"proc/{pid}/fd/*")[:MAX_FDS]:
        target, _ = reader.readlink(rel)
        if target and target.startswith("socket:[") and target.endswith("]"):
            inodes.add(target[8:-1])
    if not inodes:
        return None
    text, _ = reader.read(f"proc/{pid}/net/unix", keep=False)
    paths = []
    for line in (text or "").splitlines()[1:]:
        f = line.split(None, 7)
        # Num RefCount Protocol Flags Type St Inode Path; listening: flag __SO_ACCEPTCON
        if len(f) == 8 and f[6] in inodes and f[3] == "00010000" and f[7].startswith("/"):
            paths.append(f[7])
    asoks = [p for p in paths if p.endswith(".asok")]
    return (asoks or paths or [None])[0]


def find_socket(reader: Reader, proc: Dict[str, Any]) -> Tuple[Optional[str], str]:
    """(path, how it was found) of the daemon's admin socket, or (None, why not)."""
    pid = int(proc["pid"])
    path = listening_socket(reader, pid)
    if path:
        return path, "the socket the daemon listens on"
    f = flags(list(proc.get("argv") or []))
    name = f.get("name") or f"client.{f.get('id') or 'admin'}"
    cluster = f.get("cluster") or "ceph"
    values = {"cluster": cluster, "name": name, "type": name.split(".", 1)[0],
              "id": name.split(".", 1)[-1], "pid": str(pid)}
    conf_path = f.get("conf") or f"/etc/ceph/{cluster}.conf"
    text, why = reader.read(conf_path, keep=False)  # a conf may hold a `key`: never kept raw
    conf = parse_conf(text or "")
    sections = [conf.get(s, {}) for s in (name, "client", "global")]

    def option(key: str, default: str) -> str:
        return next((s[key] for s in sections if key in s), default)

    values["run_dir"] = expand(option("run_dir", "/var/run/ceph"), values)
    if f.get("admin_socket"):
        template, how = f["admin_socket"], "--admin-socket on its command line"
    elif any("admin_socket" in s for s in sections):
        template, how = option("admin_socket", ""), f"`admin socket` in {conf_path}"
    else:
        template = "$run_dir/$cluster-$name.$pid.$cctid.asok"
        how = "Ceph's default" + ("" if text is not None else f" ({conf_path}: {why})")
    if not template:
        return None, f"no admin socket (`admin socket` is empty in {conf_path})"
    path = expand(template, values)
    if "*" in path:
        found = reader.glob(path.lstrip("/"))
        if len(found) != 1:
            return None, f"{len(found)} files match {path} ({how})"
        path = found[0]
    return path, how


# ---- ceph-fuse: asking its admin socket ----------------------------------------------------

def ask(path: str, command: Dict[str, Any], pid: Optional[int], limit: int = MAX_ANSWER,
        timeout: Optional[float] = None) -> Tuple[Any, str]:
    """(parsed answer, "") of one admin socket command, or (None, why).  The socket must be a
    socket owned by root or us (a planted symlink or file is refused), and the process that
    accepted must be `pid` running as root or us."""
    me = os.geteuid()
    timeout = ASK_TIMEOUT if timeout is None else timeout
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None, f"{path}: absent"
    except OSError as exc:
        return None, f"{path}: {why(exc)}"
    if not stat.S_ISSOCK(st.st_mode):
        return None, f"{path}: not a socket (a symlink or file in its place is not followed)"
    if st.st_uid not in (0, me):
        return None, f"{path}: owned by uid {st.st_uid}, not root or us: not used"
    deadline = time.monotonic() + timeout
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        sock.connect(path)
        cred = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        peer_pid, peer_uid, _ = struct.unpack("3i", cred)
        if peer_uid not in (0, me) or (pid is not None and peer_pid != pid):
            return None, (f"{path}: served by pid {peer_pid} uid {peer_uid}, not the daemon "
                          f"(pid {pid}) as root or us: not used")
        sock.sendall(json.dumps(command).encode() + b"\0")
        head = _recv(sock, 4, deadline)
        if len(head) < 4:
            return None, f"{path}: no answer to {command['prefix']!r}"
        (length,) = struct.unpack(">I", head)
        if length > limit:
            return None, f"{path}: an answer of {length} bytes, more than {limit}: not read"
        data = _recv(sock, length, deadline)
    except socket.timeout:
        return None, f"{path}: no answer within {timeout:g} s"
    except OSError as exc:
        return None, f"{path}: {why(exc)}"
    finally:
        sock.close()
    if len(data) < length:
        return None, f"{path}: the answer ended after {len(data)} of {length} bytes"
    text = data.decode("utf-8", "replace")
    if text.startswith("ERROR"):
        return None, f"{path}: {clean(first_line(text) or '')[:MAX_VALUE]}"
    try:
        return json.loads(text), ""
    except (ValueError, RecursionError):
        return None, f"{path}: the answer to {command['prefix']!r} is not JSON"


def _recv(sock: socket.socket, n: int, deadline: float) -> bytes:
    parts, got = [], 0
    while got < n:
        left = deadline - time.monotonic()
        if left <= 0:
            raise socket.timeout
        sock.settimeout(left)
        chunk = sock.recv(min(n - got, 65536))
        if not chunk:
            break
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


def _word(value: Any) -> Optional[str]:
    return value if isinstance(value, str) and _WORD.match(value) else None


def _value(value: Any) -> Optional[str]:
    """An option's value as text to store: str, int, float or bool only, bounded, escaped."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        return clean(str(value))[:MAX_VALUE]
    return None


def kept(name: Any) -> bool:
    """Whether a changed option is kept: a client-side option name, never a secret."""
    return (isinstance(name, str) and bool(_NAME.match(name)) and name.startswith(CLIENT_PREFIXES)
            and not any(word in name for word in NOT_KEPT))


def fuse_client(reader: Reader, proc: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    """What a ceph-fuse daemon says of itself: {admin_socket, admin_socket_source, version,
    release, entity, global_id, fs_name, config}; reasons for what is missing under
    reader.unknown['ceph.*']."""
    if not proc:
        return {}
    path, how = find_socket(reader, proc)
    if path is None:
        reader.unknown["ceph.admin_socket"] = how
        return {}
    info: Dict[str, Any] = {"admin_socket": path, "admin_socket_source": how}
    if reader.root != "/" or os.environ.get("MPIWRITE_NO_COMMANDS"):
        reader.unknown["ceph.admin_socket"] = (
            "not asked in a sysroot" if reader.root != "/" else "MPIWRITE_NO_COMMANDS is set")
        return info
    pid = int(proc["pid"])
    answers: Dict[str, Any] = {}
    for what in ("version", "status", "config show", "config diff"):
        answers[what], why = ask(path, {"prefix": what}, pid)
        if why:
            reader.unknown[f"ceph.{what.replace(' ', '_')}"] = why
            if "no answer within" in why or "not used" in why or "absent" in why:
                break  # a hung, foreign or vanished socket: no more tries
    ver = answers.get("version")
    if isinstance(ver, dict) and isinstance(ver.get("version"), str) \
            and _VERSION.match(ver["version"]):
        info["version"] = ver["version"]
        info["release"] = _word(ver.get("release"))
    status = answers.get("status")
    if isinstance(status, dict):
        meta = status.get("metadata") if isinstance(status.get("metadata"), dict) else {}
        if str(meta.get("pid")) not in (str(pid), "None"):
            reader.unknown["ceph.status"] = f"status names pid {clean(meta.get('pid'))[:20]}"
        else:
            entity = _word(meta.get("entity_id"))
            info["entity"] = f"client.{entity}" if entity else None
            gid = status.get("id")
            info["global_id"] = gid if isinstance(gid, int) and 0 <= gid <= MAX_NUMBER \
                else None
            info["fs_name"] = _word(status.get("fs_name"))
    config: Dict[str, str] = {}
    show = answers.get("config show")
    if isinstance(show, dict):
        for name in WRITE_OPTIONS:
            v = _value(show.get(name))
            if v is not None:
                config[name] = v
    diff = answers.get("config diff")
    diff = diff.get("diff") if isinstance(diff, dict) else None
    if isinstance(diff, dict):
        for name, row in list(diff.items())[:4096]:
            if len(config) >= len(WRITE_OPTIONS) + MAX_CHANGED:
                break
            if not kept(name) or not isinstance(row, dict):
                continue
            final, default = _value(row.get("final")), _value(row.get("default"))
            if final is not None and final != default:
                config[name] = final
    if show is not None or diff is not None:
        info["config"] = dict(sorted(config.items()))
    return info


# ---- ceph-fuse: counters for deltas around the timed phase -----------------------------------

def counters(sysroot: str, client: Dict[str, Any]) -> Dict[str, Any]:
    """The client's write counters now (`perf dump`, COUNTERS) with the time `t`, or {} (with
    `why`) when its admin socket cannot be asked."""
    path = client.get("admin_socket")
    pid = (client.get("daemon") or {}).get("pid")
    if (sysroot or "/") != "/" or os.environ.get("MPIWRITE_NO_COMMANDS") or not path \
            or not isinstance(pid, int):
        return {}
    t = time.time()
    dump, why = ask(str(path), {"prefix": "perf dump"}, pid)
    if not isinstance(dump, dict):
        return {"why": why or "perf dump is not an object"}
    out: Dict[str, Any] = {"t": t}
    for section, names in COUNTERS.items():
        row = dump.get(section)
        row = row if isinstance(row, dict) else {}
        out[SECTION_NAMES[section]] = {n: _counter(row.get(n)) for n in names}
    return out


def _number(v: Any) -> Optional[float]:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return v if v == v and 0 <= v <= MAX_NUMBER else None


def _counter(v: Any):
    if isinstance(v, dict):
        return {"avgcount": _number(v.get("avgcount")), "sum": _number(v.get("sum"))}
    return _number(v)


def _diff(a: Any, b: Any):
    """b - a for numbers and {avgcount, sum}; None when unknown or gone backwards (a remount)."""
    if isinstance(b, dict):
        a = a if isinstance(a, dict) else {}
        return {k: _diff(a.get(k), b.get(k)) for k in ("avgcount", "sum")}
    if a is None or b is None or b < a:
        return None
    return b - a


def counter_delta(before: Dict[str, Any], after: Dict[str, Any]) -> Dict[str, Any]:
    """What the client did between two `counters`: each counter's growth, and the totals
    every kind has: `write_bytes` (objecter op_send_bytes: what it sent to the OSDs),
    `write_rpcs` (op_w: OSD write ops), `seconds`."""
    if not before.get("t") or not after.get("t"):
        return {"write_bytes": None, "write_rpcs": None,
                "why": after.get("why") or before.get("why") or "no counters"}
    out: Dict[str, Any] = {}
    for section in SECTION_NAMES.values():
        b0, b1 = before.get(section) or {}, after.get(section) or {}
        out[section] = {k: _diff(b0.get(k), v) for k, v in b1.items()}
    out["write_bytes"] = out["objecter"].get("op_send_bytes")
    out["write_rpcs"] = out["objecter"].get("op_w")
    out["seconds"] = after["t"] - before["t"]
    return out
