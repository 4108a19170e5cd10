"""What every filesystem client module shares: package versions from files, read-only commands
with a timeout, option strings, and the one-line `client` value.

Commands run only on the real root (never from a sysroot, which is someone else's tree), only
programs named here (never one found in a mount table), with a timeout and bounded output; a
command that is missing, slow or failing leaves the fact unknown with the reason.
"""

from __future__ import annotations

import os
import re
import shutil
from typing import Any, Dict, Optional, Sequence, Tuple

from mpiwrite.clients.base import client_string  # noqa: F401  (the clients' one-line value)
from mpiwrite.sysroot import Reader
from mpiwrite.units import MiB

COMMAND_TIMEOUT = 5.0  # seconds; a hung daemon (mmdiag waits for mmfsd) must not stall a run
COMMAND_OUTPUT = 64 * 1024
DPKG_STATUS = "var/lib/dpkg/status"
SECRET_OPTIONS = ("secret", "password", "pass", "key")


def options(text: Optional[str]) -> Dict[str, str]:
    """'rw,vers=4.2,hard' -> {'rw': '', 'vers': '4.2', 'hard': ''} (first occurrence wins)."""
    out: Dict[str, str] = {}
    for item in (text or "").split(","):
        if item:
            key, _, value = item.partition("=")
            out.setdefault(key, value)
    return out


def unescape(field: str) -> str:
    """A mount table field (mountinfo, mounts, mountstats) with its octal escapes of space,
    tab, newline and backslash undone."""
    return (field.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n")
            .replace("\\134", "\\"))


def scrub(text: Optional[str]) -> Optional[str]:
    """Mount options with secrets (ceph `secret=`, cifs `password=`) replaced by <hidden>."""
    if text is None:
        return None
    return ",".join(
        (item.split("=", 1)[0] + "=<hidden>")
        if "=" in item and item.split("=", 1)[0] in SECRET_OPTIONS else item
        for item in text.split(","))


def settle_version(reader: Reader, info: Dict[str, Any], name: str, version: Optional[str],
                   source: str, packages: Sequence[str], missing: str) -> Dict[str, Any]:
    """The client's version: `version` (found at `source`) if there is one, else the first
    installed package of `packages`; where neither, `missing` is said under `name.version`.
    Sets info's `version`, `version_source` and `client` ('beegfs 7.4.2')."""
    info["version_source"] = source if version else None
    if version is None:
        version, pkg = package_version(reader, packages)
        info["version_source"] = f"package {pkg}" if version else None
    if version is None:
        reader.unknown.setdefault(f"{name}.version", missing)
    info["version"] = version
    info["client"] = client_string(name, version)
    return info


def package_version(reader: Reader, names: Sequence[str]) -> Tuple[Optional[str], str]:
    """(upstream version, package) of the first installed package of `names` in the dpkg
    database ('10.3-5' -> '10.3', epoch and Debian revision dropped); (None, '') if none."""
    text, _ = reader.read(DPKG_STATUS, keep=False, limit=8 * MiB)
    if not text:
        return None, ""
    wanted = set(names)
    found: Dict[str, str] = {}
    for stanza in text.split("\n\n"):
        if not stanza.startswith("Package: "):
            continue
        name = stanza[9:stanza.find("\n")] if "\n" in stanza else stanza[9:]
        if name.strip() not in wanted or "Status: install ok installed" not in stanza:
            continue
        m = re.search(r"^Version: (\S+)", stanza, re.M)
        if m:
            found[name.strip()] = m.group(1)
    for name in names:
        if name in found:
            version = found[name].split(":", 1)[-1]
            version = version.rsplit("-", 1)[0] if "-" in version else version
            reader.raw[f"/{DPKG_STATUS}#{name}"] = f"Package: {name}\nVersion: {found[name]}\n"
            return version, name
    return None, ""


def command(reader: Reader, argv: Sequence[str], key: str) -> Optional[str]:
    """Output of a read-only command on the real root, or None (reason under unknown[key]).

    Never in a sysroot; the program is looked up on PATH and in the given absolute path only.
    MPIWRITE_NO_COMMANDS=1 turns every command off."""
    if reader.root != "/" or os.environ.get("MPIWRITE_NO_COMMANDS"):
        return None
    prog = argv[0] if os.path.isabs(argv[0]) and os.access(argv[0], os.X_OK) \
        else shutil.which(os.path.basename(argv[0]))
    if not prog:
        return None
    from mpiwrite.procs import run_bounded

    got = run_bounded([prog, *argv[1:]], COMMAND_TIMEOUT, output_cap=COMMAND_OUTPUT,
                      merge_stderr=True)
    if got.missing or got.timed_out:
        reader.unknown[key] = f"{' '.join(argv)}: {got.why(COMMAND_TIMEOUT)}"
        return None
    data = got.out  # at most COMMAND_OUTPUT: a longer answer is cut there, as it always was
    text = data[:COMMAND_OUTPUT].decode("utf-8", "replace")
    if got.code != 0 and not got.overflowed:
        reader.unknown[key] = f"{' '.join(argv)}: {got.why(COMMAND_TIMEOUT)}"
        return None
    reader.raw["$ " + " ".join(argv)] = text
    return text
