"""CephFS through the kernel client: mount options, and the kernel as its version.

The kernel client is part of the kernel (no version of its own; /sys/module/ceph/version exists
only for an out-of-tree build), so its version is `kernel-<release>`; the ceph-common package
version is recorded beside it.  Mount options (rsize, wsize, name, fs/mds_namespace, ...) come
from mountinfo with `secret=` hidden.  ceph-fuse mounts are handled as FUSE (fuse.py).
"""

from __future__ import annotations

from typing import Any, Dict

from mpiwrite.facts.fscommon import client_string, options, package_version, scrub
from mpiwrite.facts.sysroot import Reader, first_line, to_int

KEYS = ("rsize", "wsize", "rasize", "name", "fs", "mds_namespace", "recover_session", "ms_mode",
        "caps_max", "readdir_max_bytes")


def collect(reader: Reader, fs: Dict[str, Any], kernel: str) -> Dict[str, Any]:
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
