"""The names of the files and folders a run creates, built and parsed here only.

Every name carries the run id, so a run (or `verify`, or a later clean-up) can tell its own
files from anyone else's: `mpiwrite-<run id>-i<iteration>-r<rank:06d>.dat` (a file per rank),
`mpiwrite-<run id>-i<iteration>-shared.dat` (one shared file), `mpiwrite-<run id>-d<index:05d>`
(a run subdirectory), `.mpiwrite-<run id>-probe` (the preflight's probe block),
`.mpiwrite-<run id>-n<node:05d>.lock` (each node's proof of life, facts/liveness.py) and
the record `mpiwrite-<run id>.h5`.
"""

from __future__ import annotations

import re
from typing import NamedTuple, Optional, Tuple

DATA_NAME = re.compile(
    r"^mpiwrite-(?P<run>.+)-i(?P<it>\d{1,9})-(?:r(?P<rank>\d{6,9})|shared)\.dat\Z")


class DataName(NamedTuple):
    run_id: str
    iteration: int
    rank: Optional[int]  # None: the shared file


def data_file(run_id: str, iteration: int, rank: Optional[int]) -> str:
    """The data file of one rank (or, with rank None, the shared file) of one iteration."""
    if rank is None:
        return f"mpiwrite-{run_id}-i{iteration}-shared.dat"
    return f"mpiwrite-{run_id}-i{iteration}-r{rank:06d}.dat"


def looks_like_data_file(name: str) -> bool:
    """mpiwrite-*.dat: a data file's name, or one made to look like it (verify names both)."""
    return name.startswith("mpiwrite-") and name.endswith(".dat")


def parse_data_file(name: str) -> Optional[DataName]:
    """What a data file's name says, or None when it is not the name of a data file."""
    m = DATA_NAME.match(name)
    if not m:
        return None
    return DataName(m["run"], int(m["it"]), int(m["rank"]) if m["rank"] else None)


SUBDIR_NAME = re.compile(r"^mpiwrite-(?P<run>.+)-d(?P<index>\d{5,9})\Z")
PROBE_NAME = re.compile(r"^\.mpiwrite-(?P<run>.+)-probe\Z")


def subdir(run_id: str, index: int) -> str:
    return f"mpiwrite-{run_id}-d{index:05d}"


def parse_subdir(name: str) -> Optional[str]:
    """The run id of a run subdirectory's name, or None."""
    m = SUBDIR_NAME.match(name)
    return m["run"] if m else None


def probe(run_id: str) -> str:
    return f".mpiwrite-{run_id}-probe"


def parse_probe(name: str) -> Optional[str]:
    """The run id of a probe file's name, or None."""
    m = PROBE_NAME.match(name)
    return m["run"] if m else None


LOCK_NAME = re.compile(r"^\.mpiwrite-(?P<run>.+)-n(?P<node>\d{5,9})\.lock$")


def lock(run_id: str, node: int) -> str:
    """The lock file that node `node`'s leader holds locked while the run lives."""
    return f".mpiwrite-{run_id}-n{node:05d}.lock"


def parse_lock(name: str) -> Optional[Tuple[str, int]]:
    """(run id, node) of a lock file's name, or None."""
    m = LOCK_NAME.match(name)
    return (m["run"], int(m["node"])) if m else None


RECORD_SUFFIX = ".h5"


def record(run_id: str) -> str:
    """The record of a run (in the results folder)."""
    return f"mpiwrite-{run_id}{RECORD_SUFFIX}"


def looks_like_record(name: str) -> bool:
    return name.startswith("mpiwrite-") and name.endswith(RECORD_SUFFIX)
