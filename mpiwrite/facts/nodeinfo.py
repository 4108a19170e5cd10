"""What each node was running: host, kernel, Lustre client, target filesystem, InfiniBand,
software and batch context.  Read once per node; never fails a run (unknowns have reasons).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import platform
import re
import sys
from typing import Any, Dict, List, Optional

from mpiwrite import __version__
from mpiwrite.clients import lustre, registry
from mpiwrite.clients.common import scrub
from mpiwrite.clients.common import unescape as _unescape
from mpiwrite.errors import ConfigError
from mpiwrite.sysroot import MAX_INT, Reader, first_line, key_values, to_int
from mpiwrite.sysroot import check as check_sysroot
from mpiwrite.text import printable

VM_KEYS = ("dirty_ratio", "dirty_background_ratio", "dirty_bytes", "dirty_background_bytes",
           "dirty_expire_centisecs", "dirty_writeback_centisecs")
SLURM_VARS = ("SLURM_JOB_ID", "SLURM_STEP_ID", "SLURM_JOB_NODELIST", "SLURM_NNODES",
              "SLURM_NTASKS", "SLURM_NTASKS_PER_NODE", "SLURM_CLUSTER_NAME", "SLURM_JOB_NAME",
              "SLURM_JOB_PARTITION")
# the distributions whose versions each node reports (software())
DISTS = ("mpi4py", "numpy", "h5py", "click", "mpich")


class _StatFs(ctypes.Structure):
    _fields_ = [("f_type", ctypes.c_long), ("f_bsize", ctypes.c_long),
                ("f_blocks", ctypes.c_ulong), ("f_bfree", ctypes.c_ulong),
                ("f_bavail", ctypes.c_ulong), ("f_files", ctypes.c_ulong),
                ("f_ffree", ctypes.c_ulong), ("f_fsid", ctypes.c_int * 2),
                ("f_namelen", ctypes.c_long), ("f_frsize", ctypes.c_long),
                ("f_flags", ctypes.c_long), ("f_spare", ctypes.c_long * 4)]


def statfs_magic(path: str) -> Optional[int]:
    """f_type of the filesystem holding path (Linux x86_64/aarch64 layout), or None."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        buf = _StatFs()
        if libc.statfs(os.fsencode(path), ctypes.byref(buf)) != 0:
            return None
        return buf.f_type & 0xFFFFFFFF
    except (OSError, AttributeError):
        return None


def _merge_options(mount: str, superblock: str) -> str:
    """The mount's options, then the superblock's that add something (mountinfo lists both:
    'rw,relatime' and 'rw,seclabel' read 'rw,relatime,seclabel', not 'rw,relatime,rw,...')."""
    seen, out = set(), []
    for opt in (mount + "," + superblock).split(","):
        if opt and opt not in seen:
            seen.add(opt)
            out.append(opt)
    return ",".join(out)


def mounts(reader: Reader) -> List[Dict[str, str]]:
    """Mount points from mountinfo (preferred) or /proc/mounts."""
    out = []
    text = reader.read("proc/self/mountinfo", keep=False)[0]
    if text:
        for line in text.splitlines():
            left, sep, right = line.partition(" - ")
            lf, rf = left.split(), right.split()
            if not sep or len(lf) < 6 or len(rf) < 2:
                continue
            out.append({"mount_point": _unescape(lf[4]), "fstype": rf[0],
                        "source": _unescape(rf[1]),
                        "options": _merge_options(lf[5], rf[2] if len(rf) > 2 else "")})
    if not out:
        text = reader.read("proc/mounts", keep=False)[0] or ""
        for line in text.splitlines():
            f = line.split()
            if len(f) >= 4:
                out.append({"mount_point": _unescape(f[1]), "fstype": f[2],
                            "source": _unescape(f[0]), "options": f[3]})
    return out


def filesystem(reader: Reader, path: str) -> Dict[str, Any]:
    """Type, source and options of the filesystem holding path (and Lustre striping)."""
    absolute = os.path.abspath(path)
    probe = absolute
    while not os.path.exists(probe) and probe != "/":
        probe = os.path.dirname(probe)
    real = os.path.realpath(probe)
    magic = statfs_magic(probe) if reader.root == "/" else None
    best: Optional[Dict[str, str]] = None
    for m in mounts(reader):
        mp = m["mount_point"].rstrip("/") or "/"
        for candidate in (absolute, real):
            if candidate == mp or candidate.startswith(mp.rstrip("/") + "/") or mp == "/":
                if best is None or len(mp) > len(best["mount_point"].rstrip("/") or "/"):
                    best = m
    info: Dict[str, Any] = {"path": absolute, "fs_magic": f"0x{magic:08x}" if magic else None}
    if best:
        info.update(fstype=best["fstype"], mount_point=best["mount_point"],
                    mount_source=best["source"], mount_options=scrub(best["options"]))
        # the client of the mount knows its magic (ext2/3/4 share one; FUSE's is the
        # wrapper's): the name from the table is the more specific, keep both
        named = registry.magic_name(magic, registry.for_mount(best["fstype"], best["source"]))
        if named and best["fstype"] != named:
            info["fs_magic_name"] = named
    else:
        info.update(fstype=registry.magic_name(magic) or "unknown", mount_point=None,
                    mount_source=None, mount_options=None)
        reader.unknown["fs.mount"] = "no mount table entry matched"
    return info


def stripe_of(path: str) -> Optional[Dict[str, Any]]:
    """Lustre layout of a file from its lustre.lov xattr; None elsewhere."""
    try:
        return lustre.parse_lov(os.getxattr(path, "lustre.lov"))
    except (OSError, AttributeError):
        return None


def infiniband(reader: Reader) -> List[Dict[str, Any]]:
    ports = []
    for rel in reader.glob("sys/class/infiniband/*/ports/*"):
        parts = rel.strip("/").split("/")
        hca, port = parts[-3], parts[-1]
        row: Dict[str, Any] = {"hca": hca, "port": port}
        for name in ("rate", "state", "phys_state", "link_layer"):
            row[name] = first_line(reader.read(f"{rel}/{name}")[0])
        ports.append(row)
    return ports


def host_facts(reader: Reader) -> Dict[str, Any]:
    facts: Dict[str, Any] = {}
    rel = first_line(reader.read("proc/sys/kernel/osrelease")[0])
    facts["kernel"] = rel or (platform.release() if reader.root == "/" else None)
    if facts["kernel"] is None:
        reader.unknown["kernel"] = "/proc/sys/kernel/osrelease: absent"
    osr = key_values(reader.read("etc/os-release")[0], "=")
    facts["os"] = osr.get("PRETTY_NAME", "").strip('"') or None
    cpu = reader.fact("cpu", "proc/cpuinfo")
    if cpu is not None:
        # keep only the first processor's block raw: the rest repeats it
        reader.raw["/proc/cpuinfo"] = cpu.split("\n\n", 1)[0]
        kv = key_values(cpu)
        facts["cpu_model"] = kv.get("model name") or kv.get("cpu model") or kv.get("Processor")
        facts["cores"] = sum(1 for ln in cpu.splitlines() if ln.startswith("processor")) or None
        flags = set(kv.get("flags", "").split())
        facts["cpu_flags"] = " ".join(f for f in ("sse4_2", "pclmulqdq", "avx2", "avx512f")
                                      if f in flags)
    if facts.get("cores") is None and reader.root == "/":
        facts["cores"] = os.cpu_count()
    mem = key_values(reader.fact("mem", "proc/meminfo"))
    total = to_int(mem.get("MemTotal"))
    if total is not None and not 0 <= total * 1024 <= MAX_INT:
        total = None
    if total is None and "mem" not in reader.unknown:
        reader.unknown["mem"] = "/proc/meminfo: MemTotal missing or not a usable number"
    facts["mem_total_bytes"] = total * 1024 if total is not None else None
    for key in VM_KEYS:
        facts[f"vm_{key}"] = to_int(reader.fact(f"vm_{key}", f"proc/sys/vm/{key}"))
    return facts


def software(mpi_library: Optional[str] = None) -> Dict[str, Optional[str]]:
    out: Dict[str, Optional[str]] = {"python": platform.python_version(), "mpiwrite": __version__,
                                     "mpi_library": mpi_library}
    out.update(dist_versions(DISTS))
    return out


def _normal(name: str) -> str:
    """A distribution name as importlib.metadata compares them (PEP 503, '_' for '-')."""
    return re.sub(r"[-_.]+", "_", name).lower()


def _metadata_version(folder: str) -> Optional[str]:
    """The Version header of a .dist-info folder's METADATA, or None."""
    try:
        with open(os.path.join(folder, "METADATA"), encoding="utf-8", errors="replace") as f:
            for line in f:
                if not line.strip():
                    return None  # the end of the headers
                key, sep, value = line.partition(":")
                if sep and key.strip().lower() == "version":
                    return value.strip() or None
    except OSError:
        return None
    return None


def dist_versions(names, path: Optional[List[str]] = None) -> Dict[str, Optional[str]]:
    """{name: version or None} of installed distributions, as importlib.metadata.version
    answers: the first NAME-VERSION.dist-info along sys.path (or `path`), its METADATA's
    Version.  Read here from one listing per path entry and one METADATA per name: importing
    importlib.metadata (email, zipfile, csv, importlib.resources: some 30 modules) and its
    look-ups cost each node leader about 400 file-system calls at start-up
    (benchmarks/bench_startup_metadata.py).  Whatever this does not read plainly (an
    .egg-info, two candidates in one folder, a METADATA without a Version, a zip on the
    path) is left to importlib.metadata itself."""
    entries = list(sys.path if path is None else path)
    want = {_normal(n): n for n in names}
    out: Dict[str, Optional[str]] = {n: None for n in names}
    hard = []
    for entry in entries:
        if not want:
            break
        try:
            children = os.listdir(entry or ".")
        except NotADirectoryError:  # a zip archive: importlib.metadata looks inside
            hard += want.values()
            break
        except (OSError, TypeError, ValueError):
            continue  # missing, unreadable, a path hook's name: importlib finds nothing there
        found: Dict[str, List[str]] = {}
        for child in children:
            low = child.lower()
            if low.endswith((".dist-info", ".egg-info")):
                key = _normal(low.rpartition(".")[0].partition("-")[0])
                if key in want:
                    found.setdefault(key, []).append(child)
        for key, hits in found.items():
            name = want.pop(key)
            version = None
            if len(hits) == 1 and hits[0].lower().endswith(".dist-info"):
                version = _metadata_version(os.path.join(entry or ".", hits[0]))
            if version is None:
                hard.append(name)
            else:
                out[name] = version
    if hard:
        from importlib import metadata

        for name in hard:
            dist = next(iter(metadata.distributions(name=name, path=entries)), None)
            out[name] = dist.version if dist is not None else None
    return out


def slurm(environ=None) -> Dict[str, str]:
    env = os.environ if environ is None else environ
    return {k[6:].lower(): env[k] for k in SLURM_VARS if k in env}


def collect(target: str, sysroot: str = "/", mpi_library: Optional[str] = None,
            host: Optional[str] = None) -> Dict[str, Any]:
    """All facts of this node as a JSON-able dict (with raw texts and unknowns).

    A sysroot that is not an existing directory is a ConfigError (sysroot.check) for `env`;
    inside a run (mpi_library given) one rank must not raise alone, so the reason is recorded
    under `unknown` instead: the run checks the sysroot on every rank before MPI starts."""
    import socket

    bad_root = ""
    try:
        check_sysroot(sysroot or "/")
    except ConfigError as exc:
        if mpi_library is None:
            raise
        bad_root = str(exc)
    reader = Reader(sysroot)
    if bad_root:
        reader.unknown["sysroot"] = bad_root
    facts: Dict[str, Any] = {"host": host or socket.gethostname(), "sysroot": reader.root}
    facts.update(host_facts(reader))
    facts["lustre"] = lustre.collect(reader, facts.get("kernel") or "")
    facts["fs"] = filesystem(reader, target)
    facts["client"] = registry.collect(reader, facts["fs"], facts.get("kernel") or "",
                                       facts["lustre"])
    facts["infiniband"] = infiniband(reader)
    facts["software"] = software(mpi_library)
    facts["slurm"] = slurm()
    facts["unknown"] = dict(reader.unknown)
    facts["raw"] = dict(reader.raw)
    return facts


def describe(facts: Dict[str, Any]) -> List[str]:
    """Readable lines for `mpiwrite env`."""
    lus = facts["lustre"]
    fs = facts["fs"]
    mem = facts.get("mem_total_bytes")
    lines = [
        f"host           {facts['host']}",
        f"kernel         {facts.get('kernel')}",
        f"os             {facts.get('os')}",
        f"cpu            {facts.get('cpu_model')} ({facts.get('cores')} cores; "
        f"{facts.get('cpu_flags') or 'no checksum flags'})",
        f"memory         {mem / 2**30:.1f} GiB" if mem else "memory         unknown",
        "vm dirty       " + ", ".join(f"{k}={facts.get('vm_' + k)}" for k in VM_KEYS[:4]),
        f"filesystem     {fs.get('fstype')} at {fs.get('mount_point')} "
        f"(source {fs.get('mount_source')}, {fs.get('mount_options')})",
    ]
    lines += registry.for_fs(fs).describe(facts.get("client") or {})
    if lus.get("present"):
        lines.append(f"lustre         {lus.get('version')} ({lus.get('kernel')}; "
                     f"kernel line {lus.get('kernel_line')!r})")
        lines.append(f"checksums      {lus.get('checksums')} ({lus.get('checksum_type')}); "
                     f"llite checksum_pages {lus.get('checksum_pages')}")
        for row in lus.get("osc", []):
            lines.append(f"  osc {row['device']}: checksums={row.get('checksums')} "
                         f"type={row.get('checksum_type')} "
                         f"rpcs_in_flight={row.get('max_rpcs_in_flight')} "
                         f"dirty_mb={row.get('max_dirty_mb')} "
                         f"pages_per_rpc={row.get('max_pages_per_rpc')}")
        for row in lus.get("llite", []):
            lines.append(f"  llite {row['device']}: checksum_pages={row.get('checksum_pages')} "
                         f"checksums={row.get('checksums')} "
                         f"max_cached_mb={row.get('max_cached_mb')}")
    else:
        lines.append("lustre         no client")
    for p in facts["infiniband"]:
        lines.append(f"infiniband     {p['hca']} port {p['port']}: {p.get('rate')}, "
                     f"{p.get('state')}, {p.get('link_layer')}")
    sw = facts["software"]
    lines.append("software       " + ", ".join(f"{k} {v}" for k, v in sw.items() if v))
    if facts["slurm"]:
        lines.append("slurm          " + ", ".join(f"{k}={v}" for k, v in facts["slurm"].items()))
    for key, why in facts["unknown"].items():
        lines.append(f"unknown        {key}: {why}")
    return [printable(ln) for ln in lines]


def cpu_line(path: str = "/proc/stat"):
    """The aggregate 'cpu' line of /proc/stat as integers, or None."""
    try:
        with open(path) as fh:
            first = fh.readline().split()
        if first and first[0] == "cpu":
            return [int(x) for x in first[1:9]]
    except (OSError, ValueError):
        pass
    return None
