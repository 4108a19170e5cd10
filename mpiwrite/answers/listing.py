"""Which files under some paths are records: files, folders (recursively) and shell globs."""

from __future__ import annotations

import glob
import os
import stat
from typing import Iterable, List, Optional

from mpiwrite.errors import ConfigError, why
from mpiwrite.formats import records
from mpiwrite.text import printable


def find(paths: Iterable[str], option: str = "PATHS",
         leftovers: Optional[List[str]] = None) -> List[str]:
    """Record files from any mix of files, folders (recursively) and shell globs.

    A path that exists is taken as it is (a folder named `res[1]` is not a glob); a pattern is
    expanded only when no such path exists.  A file or folder reached twice (named twice,
    other spellings, symlinks) is listed once.  Temporary records left by killed runs are
    added to `leftovers` when given.  ConfigError (naming `option`) for a path that does not
    exist or cannot be listed."""
    out: List[str] = []
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
                out += _walk(m, option, leftovers)
            else:
                out.append(m)
    seen, once = set(), []
    for p in out:
        real = os.path.realpath(p)  # once a path: it looks at every component
        if real not in seen:
            seen.add(real)
            once.append(p)
    return once


def _walk(top: str, option: str, leftovers: Optional[List[str]]) -> List[str]:
    def fail(exc: OSError):
        raise ConfigError(f"{option}: cannot list {printable(exc.filename or top)!r}: "
                          f"{why(exc)}")

    out = []
    for root, dirs, names in os.walk(top, onerror=fail):
        dirs.sort()
        out += [os.path.join(root, f) for f in sorted(names)
                if f.endswith(records.SUFFIX) and not f.startswith(".")]
        if leftovers is not None:
            leftovers += records.leftovers(root, names)
    return out
