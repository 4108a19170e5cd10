"""NFS (v3, v4.0, v4.1, v4.2): mount options and per-mount counters from /proc/self/mountstats.

Format (Linux fs/nfs/super.c nfs_show_stats, statvers 1.1): one block per mount,
    device SRV:/export mounted on /mnt with fstype nfs4 statvers=1.1
    \topts:\trw,vers=4.2,rsize=1048576,wsize=1048576,...,hard,proto=tcp,nconnect=4,...,sec=sys,...
    \tbytes:\t<normal read> <normal write> <direct read> <direct write> <server read>
             <server write> <read pages> <write pages>
    \tRPC iostats version: 1.1  p/v: 100003/4 (nfs)
    \txprt:\ttcp <srcport> <bind count> <connect count> <connect time> <idle time> <sends> ...
    \tper-op statistics
    \t       WRITE: <ops> <trans> <timeouts> <bytes sent> <bytes recv> <queue ms> <rtt ms>
                    <execute ms> [<errors>]
Non-NFS mounts have only the `device ... with fstype X` line.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from mpiwrite.clients.base import Client, grown
from mpiwrite.clients.common import client_string, options
from mpiwrite.clients.common import unescape as _unescape
from mpiwrite.sysroot import Reader, to_int

MOUNTSTATS = "proc/self/mountstats"
MAX_BLOCK = 16 * 1024  # raw text kept per mount
BYTES_FIELDS = ("normal_read", "normal_write", "direct_read", "direct_write", "server_read",
                "server_write", "read_pages", "write_pages")
OP_FIELDS = ("ops", "transmissions", "major_timeouts", "bytes_sent", "bytes_received",
             "queue_ms", "rtt_ms", "execute_ms", "errors")
OPTION_KEYS = ("vers", "rsize", "wsize", "proto", "nconnect", "sec", "timeo", "retrans",
               "port", "local_lock", "max_connect", "lookupcache", "clientaddr", "addr")


def blocks(text: str) -> Dict[str, str]:
    """{mount point: its block of mountstats text} for NFS mounts only."""
    out: Dict[str, str] = {}
    current: Optional[str] = None
    lines: List[str] = []
    for line in text.splitlines():
        if line.startswith("device "):
            if current is not None:
                out.setdefault(current, "\n".join(lines) + "\n")
            current, lines = None, []
            words = line.split()
            if "mounted" in words and "fstype" in words:
                i, j = words.index("mounted"), words.index("fstype")
                if j + 1 < len(words) and words[j + 1].startswith("nfs") and i + 2 < j:
                    current = _unescape(" ".join(words[i + 2:j - 1]))
                    lines = [line]
        elif current is not None:
            lines.append(line)
    if current is not None:
        out.setdefault(current, "\n".join(lines) + "\n")
    return out


def parse_block(block: str) -> Dict[str, Any]:
    """Options, byte counters, transport and WRITE op counters of one mount's block."""
    info: Dict[str, Any] = {}
    head = block.split("\n", 1)[0].split()
    if "fstype" in head:
        info["fstype"] = head[head.index("fstype") + 1]
    for line in block.splitlines()[1:]:
        label, _, rest = line.strip().partition(":")
        rest = rest.strip()
        if label == "opts":
            info["opts"] = rest
        elif label == "bytes":
            info["bytes"] = _numbers(BYTES_FIELDS, rest)
        elif label == "xprt":
            words = rest.split()
            info["xprt"] = {"proto": words[0] if words else None,
                            "values": [to_int(w) for w in words[1:]]}
        elif label == "age":
            info["age_seconds"] = to_int(rest)
        elif label in ("WRITE", "READ", "COMMIT"):
            info.setdefault("ops", {})[label] = _numbers(OP_FIELDS, rest)
    return info


def _numbers(names, text: str) -> Dict[str, Optional[int]]:
    return {n: to_int(w) for n, w in zip(names, text.split())}


def settings(opts: Dict[str, str]) -> Dict[str, Any]:
    """The write-relevant mount settings, with the kernel's defaults made explicit."""
    out: Dict[str, Any] = {k: opts[k] for k in OPTION_KEYS if k in opts}
    for k in ("rsize", "wsize", "nconnect", "timeo", "retrans"):
        if k in out:
            out[k] = to_int(out[k])
    out.setdefault("nconnect", 1)  # shown only when above 1
    out["mode"] = "soft" if "soft" in opts else ("softerr" if "softerr" in opts else "hard")
    out["sync"] = "sync" in opts
    return out


def collect(reader: Reader, fs: Dict[str, Any]) -> Dict[str, Any]:
    """Facts of the NFS mount holding the target: from mountstats, else mountinfo options."""
    mp = fs.get("mount_point")
    text, why = reader.read(MOUNTSTATS, keep=False)
    block = blocks(text).get(mp or "") if text else None
    info: Dict[str, Any] = {"name": "nfs", "source": "mountstats" if block else "mountinfo"}
    if block:
        reader.raw[f"/{MOUNTSTATS}#{mp}"] = block[:MAX_BLOCK]
        parsed = parse_block(block)
        opts = options(parsed.get("opts"))
        info["bytes"] = parsed.get("bytes")
        info["ops"] = parsed.get("ops")
        info["xprt"] = parsed.get("xprt")
    else:
        if text is None:
            reader.unknown["nfs.mountstats"] = f"/{MOUNTSTATS}: {why}"
        else:
            reader.unknown["nfs.mountstats"] = f"/{MOUNTSTATS}: no block for {mp}"
        opts = options(fs.get("mount_options"))
    info.update(settings(opts))
    version = opts.get("vers") or opts.get("nfsvers")
    if version is None and str(fs.get("fstype")) == "nfs4":
        version = "4"
    if version in ("4", "4.0"):
        version = "4.0"
    info["version"] = version
    info["client"] = client_string("nfs", version)
    return info


def counters(reader: Reader, mount_point: str) -> Dict[str, Any]:
    """Byte and WRITE counters of one NFS mount now (for deltas around the timed phase)."""
    text, _ = reader.read(MOUNTSTATS, keep=False)
    block = blocks(text or "").get(mount_point)
    if not block:
        return {}
    parsed = parse_block(block)
    return {"bytes": parsed.get("bytes") or {}, "ops": parsed.get("ops") or {}}


class Nfs(Client):
    """The NFS client (3, 4.0, 4.1, 4.2): mount options and counters from mountstats."""

    name = "nfs"
    catalogue = ("NFS", "WRITEBACK")
    fstypes = ("nfs", "nfs4")
    magics = {0x6969: "nfs"}
    kind = "nfs"
    waits = ("nfs", "rpc_wait")  # its own waits and the SUNRPC layer's
    rpc_counters = True

    def unknown_client(self, fstype: str) -> str:
        return client_string("nfs", None)

    def own_processes(self, sysroot: str, fs: Dict[str, Any],
                      client: Dict[str, Any]) -> List[int]:
        """Its kernel threads (rpciod's and nfsiod's work runs in kworkers: not counted)."""
        from mpiwrite.clients import ownprocs

        return ownprocs.threads(Reader(sysroot or "/"), ("nfsiod", "rpciod", "nfsv4"))

    def collect(self, reader, fs: Dict[str, Any], kernel: str,
                lustre: Dict[str, Any]) -> Dict[str, Any]:
        return collect(reader, fs)

    def snapshot(self, sysroot: str, fs: Dict[str, Any],
                 client: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
        reader = Reader(sysroot or "/")
        return {"kind": "nfs", "data": counters(reader, str(fs.get("mount_point") or ""))}

    def counter_delta(self, before: Dict[str, Any], after: Dict[str, Any]) -> Dict[str, Any]:
        out: Dict[str, Any] = {"bytes": {}, "ops": {}}
        b0, b1 = before.get("bytes") or {}, after.get("bytes") or {}
        for k, v in b1.items():
            out["bytes"][k] = grown(b0.get(k), v)
        for op, row in (after.get("ops") or {}).items():
            old = (before.get("ops") or {}).get(op) or {}
            out["ops"][op] = {k: grown(old.get(k), v) for k, v in row.items()}
        nw, dw = out["bytes"].get("normal_write"), out["bytes"].get("direct_write")
        out["write_bytes"] = None if nw is None or dw is None else nw + dw
        out["write_rpcs"] = (out["ops"].get("WRITE") or {}).get("ops")
        return out

    def detail(self, client: Dict[str, Any]) -> List[str]:
        detail = [f"{k}={client.get(k)}" for k in ("vers", "proto", "rsize", "wsize", "nconnect",
                                                    "sec", "mode") if client.get(k) is not None]
        b = client.get("bytes") or {}
        if b:
            detail.append(f"bytes written {b.get('normal_write')} (direct "
                          f"{b.get('direct_write')}, to server {b.get('server_write')})")
        return detail


CLIENT = Nfs()
