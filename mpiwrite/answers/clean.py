"""`mpiwrite clean TARGET`: remove the data files that runs which are not running any more
left in TARGET (a run killed for good cannot remove its own).

Only names that this module's run ids own are touched: data files, run subdirectories and
probe files whose names (formats/names.py) carry the id of a record in the results folder
whose run is over (complete, failed, interrupted, timeout, or abandoned: answers/state.py).
Files of running runs, of runs without a record there, and anything else are left alone.
Folders are opened once, without following a symbolic link, and files are removed relative
to them, only when they are regular files; nothing is followed, nothing else is removed.
"""

from __future__ import annotations

import os
import stat
from typing import Dict, List, NamedTuple, Optional, Tuple

from mpiwrite.errors import ConfigError, why
from mpiwrite.formats import names
from mpiwrite.formats.status import RunStatus

OPEN_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class Found(NamedTuple):
    run_id: str
    folder: str  # '' for TARGET itself, else a run subdirectory's name
    name: str
    size: int


class Plan(NamedTuple):
    files: List[Found]  # to remove
    folders: List[Tuple[str, str]]  # (run id, subdirectory name): removed when empty
    left: Dict[str, int]  # why files were left alone -> how many


def plan(target: str, states: Dict[str, str]) -> Plan:
    """What `clean` would remove from TARGET, given each recorded run id's state."""
    over = {rid for rid, s in states.items() if s != RunStatus.RUNNING}
    files: List[Found] = []
    folders: List[Tuple[str, str]] = []
    left: Dict[str, int] = {}

    def owner(run_id: Optional[str]) -> Optional[str]:
        if run_id is None:
            return None
        if run_id in over:
            return run_id
        why_left = "of running runs" if run_id in states else "of runs without a record"
        left[why_left] = left.get(why_left, 0) + 1
        return None

    try:
        top = os.open(target, OPEN_DIR)
    except OSError as exc:
        raise ConfigError(f"TARGET: {target}: {why(exc)} (a folder, not a link)") from None
    try:
        for name, st in _entries(top):
            data = names.parse_data_file(name)
            if data is not None and stat.S_ISREG(st.st_mode):
                rid = owner(data.run_id)
                if rid:
                    files.append(Found(rid, "", name, st.st_size))
            elif names.parse_probe(name) is not None and stat.S_ISREG(st.st_mode):
                rid = owner(names.parse_probe(name))
                if rid:
                    files.append(Found(rid, "", name, st.st_size))
            elif names.parse_subdir(name) is not None and stat.S_ISDIR(st.st_mode):
                rid = owner(names.parse_subdir(name))
                if rid:
                    folders.append((rid, name))
                    files += _in_subdir(top, name, rid, left)
    finally:
        os.close(top)
    return Plan(files, folders, left)


def _entries(fd: int):
    """(name, lstat) of a folder's entries, read through its descriptor."""
    for name in sorted(os.listdir(fd)):
        try:
            yield name, os.stat(name, dir_fd=fd, follow_symlinks=False)
        except OSError:
            continue


def _in_subdir(top: int, sub: str, rid: str, left: Dict[str, int]) -> List[Found]:
    try:
        fd = os.open(sub, OPEN_DIR, dir_fd=top)
    except OSError:
        return []
    out = []
    try:
        for name, st in _entries(fd):
            data = names.parse_data_file(name)
            if data is not None and data.run_id == rid and stat.S_ISREG(st.st_mode):
                out.append(Found(rid, sub, name, st.st_size))
            else:
                left["that are not this run's data files"] = left.get(
                    "that are not this run's data files", 0) + 1
    finally:
        os.close(fd)
    return out


def remove(target: str, p: Plan) -> List[str]:
    """Remove what the plan found, each file relative to its folder's descriptor and only if
    it is still a regular file; then the run subdirectories left empty.  Returns problems
    ('path: reason')."""
    problems = []
    top = os.open(target, OPEN_DIR)
    try:
        for f in p.files:
            fd = top
            try:
                if f.folder:
                    fd = os.open(f.folder, OPEN_DIR, dir_fd=top)
                st = os.stat(f.name, dir_fd=fd, follow_symlinks=False)
                if stat.S_ISREG(st.st_mode):
                    os.unlink(f.name, dir_fd=fd)
            except FileNotFoundError:
                pass
            except OSError as exc:
                problems.append(f"{os.path.join(target, f.folder, f.name)}: {why(exc)}")
            finally:
                if fd != top:
                    os.close(fd)
        for _rid, sub in p.folders:
            try:
                os.rmdir(sub, dir_fd=top)
            except FileNotFoundError:
                pass
            except OSError as exc:
                problems.append(f"{os.path.join(target, sub)}: {why(exc)}")
    finally:
        os.close(top)
    return problems
