"""`mpiwrite clean TARGET`: remove the data files that runs which are over left in TARGET (a
run killed for good cannot remove its own).

Only names that this module's run ids own are touched: data files, run subdirectories, probe
and lock files whose names (vocab/names.py) carry the id of a record in the results folder.
A run is cleaned only when it is proven over (answers/state.py: a final record, or every
node's lock free on this kernel); a run whose lock is held lives and is never touched; a run
whose end cannot be proven, or whose run id two differing records claim (a conflict), is
cleaned only with `force`.  Files of runs without a record there, and anything else, are
left alone.  Folders are opened once, without following a symbolic link, and files are
removed relative to them, only when they are regular files; nothing is followed, nothing
else is removed.
"""

from __future__ import annotations

import os
import stat
from typing import Dict, List, NamedTuple, Optional, Tuple

from mpiwrite.answers.state import Verdict, verdict
from mpiwrite.errors import ConfigError, why
from mpiwrite.facts import liveness
from mpiwrite.vocab import names
from mpiwrite.vocab.status import RunStatus

OPEN_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class Found(NamedTuple):
    run_id: str
    folder: str  # '' for TARGET itself, else a run subdirectory's name
    name: str
    size: int


class Plan(NamedTuple):
    files: List[Found]  # to remove (lock files last)
    folders: List[Tuple[str, str]]  # (run id, subdirectory name): removed when empty
    left: Dict[str, int]  # why files were left alone -> how many
    runs: Dict[str, Verdict]  # what is known of each run that has files here
    refused: Dict[str, str]  # run id -> why nothing of it is removed (one line)


def decide(rid: str, recs, top: int, lock_names: List[str], force: bool,
           conflict: str = "") -> Tuple[Verdict, str]:
    """(the verdict, why nothing is removed or '') for one run id and its records."""
    also = f"; {conflict}" if conflict else ""
    for name in lock_names:  # a lock of this run id in TARGET, whatever the records say
        if liveness.check(name, top)[0] == liveness.HELD:
            return Verdict(RunStatus.RUNNING, True, f"its lock {name} is held"), \
                f"run {rid} is live ({name} is held): left alone{also}"
    said = [verdict(r, top) for r in recs]
    live = next((v for v in said if v.proven and v.state == RunStatus.RUNNING), None)
    if live is not None:
        return live, f"run {rid} is live ({live.why}): left alone{also}"
    if conflict:
        return Verdict("conflict", False, conflict), "" if force else \
            f"run {rid}: {conflict}; nothing of it removed (--force removes it)"
    v = said[0]
    if not v.proven and not force:
        return v, (f"run {rid} ({v.state}): cannot prove that it is over: {v.why}; nothing of "
                   "it removed (--force removes it)")
    return v, ""


def plan(target: str, runs: Dict[str, list], force: bool = False,
         conflicts: Optional[Dict[str, str]] = None) -> Plan:
    """What `clean` would remove from TARGET, given each recorded run id's records (and the
    one-line conflict of the run ids that differing records claim)."""
    conflicts = conflicts or {}
    files: List[Found] = []
    locks: List[Found] = []
    folders: List[Tuple[str, str]] = []
    left: Dict[str, int] = {}
    found: Dict[str, list] = {}

    try:
        top = os.open(target, OPEN_DIR)
    except OSError as exc:
        raise ConfigError(f"TARGET: {target}: {why(exc)} (a folder, not a link)") from None
    try:
        for name, st in _entries(top):
            regular, folder = stat.S_ISREG(st.st_mode), stat.S_ISDIR(st.st_mode)
            data, lock = names.parse_data_file(name), names.parse_lock(name)
            rid = None
            if regular:
                rid = data.run_id if data is not None else \
                    lock[0] if lock is not None else names.parse_probe(name)
            elif folder:
                rid = names.parse_subdir(name)
            if rid is not None:
                found.setdefault(rid, []).append((name, st, lock is not None, folder))
        verdicts, refused = {}, {}
        for rid, entries in found.items():
            if rid not in runs:
                left["of runs without a record"] = left.get("of runs without a record", 0) \
                    + len(entries)
                continue
            lock_names = [n for n, _st, is_lock, _f in entries if is_lock]
            verdicts[rid], refused_why = decide(rid, runs[rid], top, lock_names, force,
                                                conflicts.get(rid, ""))
            if refused_why:
                refused[rid] = refused_why
                continue
            for name, st, is_lock, folder in entries:
                if folder:
                    folders.append((rid, name))
                    files += _in_subdir(top, name, rid, left)
                else:
                    (locks if is_lock else files).append(Found(rid, "", name, st.st_size))
    finally:
        os.close(top)
    return Plan(files + locks, folders, left, verdicts, refused)


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
