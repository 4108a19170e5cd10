"""The Lustre client's version, patched/patchless state, checksums and write tunables.

Parameters moved between /proc/fs/lustre, /sys/fs/lustre and /sys/kernel/debug/lustre over the
releases, so, like lctl, every location is searched and the first that has a device's parameter
wins.  Formats: docs/node-facts.md.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from mpiwrite.sysroot import Reader, first_line, key_values, to_int, to_number

ROOTS = ("sys/fs/lustre", "sys/kernel/debug/lustre", "proc/fs/lustre")
VERSION_FILES = ("sys/fs/lustre/version", "proc/fs/lustre/version", "sys/module/lustre/version")
OSC_PARAMS = ("checksums", "checksum_type", "max_rpcs_in_flight", "max_dirty_mb",
              "max_pages_per_rpc")
LLITE_PARAMS = ("checksum_pages", "checksums", "max_cached_mb")


def parse_version(text: str) -> Dict[str, Optional[str]]:
    """Version and the raw `kernel:` line from any release's version file."""
    kv = key_values(text)
    version = kv.get("lustre")
    if version is None:
        version = first_line(text) or None
        if version and ":" in version:  # some other "key: value" file: not a version
            version = None
    elif version:
        version = version.split()[0]
    return {"version": version or None, "kernel_line": kv.get("kernel")}


def patch_state(kernel_line: Optional[str], kernel_release: str) -> str:
    """patched / patchless / unknown: a heuristic; the raw strings are kept beside it."""
    if kernel_line:
        word = kernel_line.split()[0]
        if word.isdigit():
            return "patched"
        if word.startswith("patchless"):
            return "patchless"
    if "_lustre" in (kernel_release or ""):
        return "patched"
    return "unknown"


def parse_checksum_type(text: Optional[str]) -> Dict[str, Any]:
    """'crc32 adler [crc32c] ' -> active crc32c, available [crc32, adler, crc32c]."""
    if text is None:
        return {"active": None, "available": []}
    names = text.split()
    active = None
    available = []
    for n in names:
        if n.startswith("[") and n.endswith("]"):
            n = n[1:-1]
            active = n
        available.append(n)
    return {"active": active, "available": available}


def parse_max_cached_mb(text: Optional[str]) -> Optional[float]:
    """One number (<= 2.3) or the 'max_cached_mb: N' line of the multi-line form (2.4+)."""
    if text is None:
        return None
    kv = key_values(text)
    if "max_cached_mb" in kv:
        return to_number(kv["max_cached_mb"])
    return to_number(text)


def _devices(reader: Reader, kind: str) -> Dict[str, Dict[str, str]]:
    """{device: {param: relative path}} over every location, the first location winning."""
    found: Dict[str, Dict[str, str]] = {}
    for root in ROOTS:
        for rel in reader.glob(f"{root}/{kind}/*/*"):
            parts = rel.strip("/").split("/")
            dev, param = parts[-2], parts[-1]
            found.setdefault(dev, {}).setdefault(param, rel)
    return found


def _onoff(values: List[Optional[int]]) -> str:
    known = [v for v in values if v is not None]
    if not known:
        return "unknown"
    if all(known):
        return "on" if len(known) == len(values) else "mixed"
    if not any(known):
        return "off" if len(known) == len(values) else "mixed"
    return "mixed"


def collect(reader: Reader, kernel_release: str) -> Dict[str, Any]:
    """Every Lustre fact of this node; {'present': False} when no client is loaded."""
    text = None
    source = None
    reasons = []
    for rel in VERSION_FILES:
        text, why = reader.read(rel)
        if text is not None:
            source = "/" + rel
            break
        if why != "absent":
            reasons.append(f"/{rel}: {why}")
    oscs = _devices(reader, "osc")
    llites = _devices(reader, "llite")
    if text is None and not oscs and not llites:
        return {"present": False, "version": None, "checksums": "n/a", "checksum_type": "n/a",
                "kernel": "n/a"}
    info: Dict[str, Any] = {"present": True, "version_file": source}
    parsed = parse_version(text or "")
    info["version"] = parsed["version"]
    info["kernel_line"] = parsed["kernel_line"]
    info["kernel"] = patch_state(parsed["kernel_line"], kernel_release)
    if text is None:
        reader.unknown["lustre.version"] = "; ".join(reasons) or "no version file"
    osc_rows = []
    for dev in sorted(oscs):
        params = oscs[dev]
        row: Dict[str, Any] = {"device": dev}
        for p in OSC_PARAMS:
            rel = params.get(p)
            val = reader.read(rel)[0] if rel else None
            if p == "checksum_type":
                ct = parse_checksum_type(val)
                row["checksum_type"] = ct["active"]
                row["checksum_types_available"] = " ".join(ct["available"])
            elif p == "max_dirty_mb":
                row[p] = to_number(val)
            else:
                row[p] = to_int(val)
        osc_rows.append(row)
    llite_rows = []
    for dev in sorted(llites):
        params = llites[dev]
        row = {"device": dev}
        for p in LLITE_PARAMS:
            rel = params.get(p)
            val = reader.read(rel)[0] if rel else None
            row[p] = parse_max_cached_mb(val) if p == "max_cached_mb" else to_int(val)
        llite_rows.append(row)
    info["osc"] = osc_rows
    info["llite"] = llite_rows
    info["checksums"] = _onoff([r.get("checksums") for r in osc_rows])
    types = {r.get("checksum_type") for r in osc_rows if r.get("checksums")}
    types.discard(None)
    if info["checksums"] == "off":
        info["checksum_type"] = "n/a"
    elif not types:
        info["checksum_type"] = "unknown"
    else:
        info["checksum_type"] = types.pop() if len(types) == 1 else "mixed"
    info["checksum_pages"] = _onoff([r.get("checksum_pages") for r in llite_rows])
    speed, _ = reader.read("sys/kernel/debug/lustre/checksum_speed")
    if speed is not None:
        info["checksum_speed_MB_per_s"] = {k: to_number(v) for k, v in key_values(speed).items()}
    return info


_STRIPE_MAGICS = {0x0BD10BD0: "v1", 0x0BD30BD0: "v3", 0x0BD60BD0: "composite"}


def parse_lov(data: bytes) -> Optional[Dict[str, Any]]:
    """Stripe count, size and first OST from a lustre.lov xattr (lov_user_md v1/v3)."""
    import struct

    if len(data) < 32:
        return None
    magic, pattern = struct.unpack_from("<II", data, 0)
    kind = _STRIPE_MAGICS.get(magic)
    if kind is None or kind == "composite":
        return {"layout": kind or f"magic 0x{magic:08x}"}
    stripe_size, stripe_count, stripe_offset = struct.unpack_from("<IHH", data, 24)
    return {"layout": kind, "pattern": pattern, "stripe_size": stripe_size,
            "stripe_count": stripe_count, "stripe_offset": stripe_offset}
