"""Which files under some paths are records: files, folders (recursively) and shell globs."""

from __future__ import annotations

import glob
import os
import re
import stat
from typing import Iterable, List, Optional, Tuple

from mpiwrite.errors import ConfigError, why
from mpiwrite.text import printable
from mpiwrite.vocab.names import RECORD_SUFFIX

TMP_NAME = re.compile(r"^\.mpiwrite-.+\.h5\.tmp-\d+(-\d+)?\Z")  # records/h5.py's temp_names


def find(paths: Iterable[str], option: str = "PATHS",
         leftovers: Optional[List[str]] = None) -> List[str]:
    """Record files from any mix of files, folders (recursively) and shell globs.

    A path that exists is taken as it is (a folder named `res[1]` is not a glob); a pattern is
    expanded only when no such path exists.  A file or folder reached twice (named twice,
    other spellings, symlinks) is listed once.  Temporary records left by killed runs are
    added to `leftovers` when given.  ConfigError (naming `option`) for a path that does not
    exist or cannot be listed."""
    out: List[Tuple[str, Optional[str]]] = []  # (path, its real path when known)
    for p in paths:
        if os.path.lexists(p):
            matches = [p]
        elif glob.has_magic(p):
            matches = sorted(glob.glob(p))
            if not matches:
                raise ConfigError(f"{option}: nothing matches {printable(p)!r}")
        else:
            raise ConfigError(f"{option}: {printable(p)!r} does not exist")
        for m in matches:
            try:
                st = os.stat(m)
            except OSError as exc:
                raise ConfigError(f"{option}: {printable(m)!r}: {why(exc)}") from None
            if stat.S_ISDIR(st.st_mode):
                _walk(m, os.path.realpath(m), option, leftovers, out)
            else:
                out.append((m, None))
    seen, once = set(), []
    for p, real in out:
        real = real or os.path.realpath(p)  # once a path: it looks at every component
        if real not in seen:
            seen.add(real)
            once.append(p)
    return once


def _walk(top: str, real: str, option: str, leftovers: Optional[List[str]],
          out: List[Tuple[str, Optional[str]]]) -> None:
    """As os.walk, top-down in sorted order, not into linked folders; a file that is not a
    link has the real path of its folder's real path and its name (one realpath a folder,
    not one a file: a history has thousands of records)."""
    try:
        with os.scandir(top) as it:
            entries = sorted(it, key=lambda e: e.name)
    except OSError as exc:
        raise ConfigError(f"{option}: cannot list {printable(exc.filename or top)!r}: "
                          f"{why(exc)}") from None
    dirs, names = [], []
    for e in entries:
        try:
            is_dir = e.is_dir()
        except OSError:
            is_dir = False
        if is_dir:
            if not e.is_symlink():
                dirs.append(e)
        else:
            names.append(e.name)
            if e.name.endswith(RECORD_SUFFIX) and not e.name.startswith("."):
                out.append((os.path.join(top, e.name),
                            None if e.is_symlink() else os.path.join(real, e.name)))
    if leftovers is not None:
        leftovers += temporary(top, names)
    for d in dirs:
        _walk(os.path.join(top, d.name), os.path.join(real, d.name), option, leftovers, out)


def temporary(folder: str, names: List[str]) -> List[str]:
    """Temporary records (of this folder's listing) that a killed run left behind."""
    return [os.path.join(folder, n) for n in sorted(names) if TMP_NAME.match(n)]
