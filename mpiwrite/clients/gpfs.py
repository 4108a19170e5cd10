"""GPFS (IBM Storage Scale): version and the settings that decide streaming writes.

Files: /var/mmfs/gen/mmfs.cfg (`key value` lines written by mmchconfig; `[class]` lines open
node-class sections, `[common]` returns to all nodes) and the gpfs.base package.  Commands
(real root only, 5 s timeout, never fatal): `mmdiag --version` (`Current GPFS build:
"5.1.9.0 ".`) and `mmdiag --config` (`   name value` lines, `!` before changed values), which
show what the running daemon uses.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional

from mpiwrite.clients.base import Client
from mpiwrite.clients.common import command, settle_version
from mpiwrite.sysroot import Reader

MMFS_CFG = "var/mmfs/gen/mmfs.cfg"
MMDIAG = "/usr/lpp/mmfs/bin/mmdiag"
KEYS = ("pagepool", "maxblocksize", "workerThreads", "worker1Threads", "maxMBpS",
        "prefetchThreads", "nsdMaxWorkerThreads", "maxFilesToCache", "maxStatCache",
        "seqDiscardThreshold", "writebehindThreshold", "prefetchAggressivenessWrite",
        "verbsRdma", "verbsPorts", "minReleaseLevel", "clusterName")
_BUILD = re.compile(r'Current GPFS build:\s*"?\s*([0-9][0-9.]*)')


def parse_cfg(text: str) -> Dict[str, Any]:
    """mmfs.cfg: values for all nodes, and whether node-class sections override some."""
    common: Dict[str, str] = {}
    classes = []
    section = None
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = None if line == "[common]" else line[1:-1]
            if section:
                classes.append(section)
            continue
        if section is None:
            key, _, value = line.partition(" ")
            common.setdefault(key, value.strip())
    return {"common": {k: common[k] for k in KEYS if k in common}, "node_classes": classes}


def parse_mmdiag_config(text: str) -> Dict[str, str]:
    out = {}
    for line in text.splitlines():
        words = line.replace("!", " ").split()
        if len(words) >= 2 and words[0] in KEYS:
            out[words[0]] = " ".join(words[1:])
    return out


def parse_build(text: Optional[str]) -> Optional[str]:
    m = _BUILD.search(text or "")
    return m.group(1).rstrip(".") if m else None


def collect(reader: Reader, fs: Dict[str, Any]) -> Dict[str, Any]:
    info: Dict[str, Any] = {"name": "gpfs", "device": fs.get("mount_source")}
    text, why = reader.read(MMFS_CFG)
    if text is not None:
        cfg = parse_cfg(text)
        info["config_file"] = cfg["common"]
        info["node_classes"] = cfg["node_classes"]
    else:
        reader.unknown["gpfs.config"] = f"/{MMFS_CFG}: {why}"
    live = command(reader, [MMDIAG, "--config"], "gpfs.mmdiag_config")
    info["config"] = parse_mmdiag_config(live) if live else dict(info.get("config_file") or {})
    info["config_source"] = "mmdiag --config" if live else ("/" + MMFS_CFG if text else None)
    version = parse_build(command(reader, [MMDIAG, "--version"], "gpfs.version"))
    return settle_version(reader, info, "gpfs", version, "mmdiag --version", ("gpfs.base",),
                          "no mmdiag answer, no gpfs.base package")


class Gpfs(Client):
    """IBM Storage Scale (GPFS): the running daemon's configuration (mmdiag), else mmfs.cfg."""

    name = "gpfs"
    fstypes = ("gpfs",)
    magics = {0x47504653: "gpfs"}
    volatile = ("device",)  # the filesystem's device name

    def collect(self, reader, fs: Dict[str, Any], kernel: str,
                lustre: Dict[str, Any]) -> Dict[str, Any]:
        return collect(reader, fs)

    def detail(self, client: Dict[str, Any]) -> List[str]:
        return [f"{k}={v}" for k, v in (client.get("config") or {}).items()] + [
            f"from {client.get('config_source')}"]


CLIENT = Gpfs()
