"""The index of records already read: their run-level part, kept in SQLite (docs/history.md).

A row is keyed by the record's absolute path and says which file it was read from: device,
inode, size, mtime and ctime in nanoseconds.  A row is used only when the file at that path
still has all five, and only after its material passed the checks a record read from disk
passes (formats/runlevel.build): the index is as untrusted as the records.  A record that is
still `running`, or was modified in the last SETTLE seconds (a timestamp tick may repeat),
is never kept.  The index lives in the user's cache folder (never next to the records, which
may be read-only or someone else's), in a folder that must be the user's own and not
writable by others; the file is created O_EXCL|O_NOFOLLOW with mode 0600.  Readers and a
writer at the same time: SQLite's rollback journal with a busy timeout (it works on NFS home
folders, which WAL does not), every write one short transaction; an index that is busy for
longer is passed over for that command.  A damaged index is removed and made anew, with a
warning.  Whatever goes wrong with the index, the records are read as if it did not exist.
"""

from __future__ import annotations

import errno
import os
import sqlite3
import stat
import sys
import time
from typing import Any, Dict, List, Optional, Tuple

from mpiwrite import SCHEMA_VERSION, __version__
from mpiwrite.formats import runlevel
from mpiwrite.text import printable

ENV = "MPIWRITE_CACHE"
NAME = "index-1.sqlite"
READER = f"runlevel-1/schema-{SCHEMA_VERSION}/{__version__}"  # rows of another reader: misses
SETTLE = 2.0
BUSY_MS = 10000
OFF = ("off", "no", "none", "0", "false")
_SCHEMA = ("CREATE TABLE IF NOT EXISTS runs (path TEXT PRIMARY KEY, dev INTEGER, ino INTEGER,"
           " size INTEGER, mtime_ns INTEGER, ctime_ns INTEGER, reader TEXT, run_id TEXT,"
           " status TEXT, doc TEXT, iterations BLOB, rank_stats BLOB)")


def folder_for(option: Any = None) -> Optional[str]:
    """The index's folder: --cache DIR, None for --no-cache (option False), else MPIWRITE_CACHE
    (a folder, or `off`), else $XDG_CACHE_HOME/mpiwrite or ~/.cache/mpiwrite."""
    if option is False:
        return None
    if option:
        return str(option)
    env = os.environ.get(ENV, "").strip()
    if env:
        return None if env.lower() in OFF else env
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    base = xdg if os.path.isabs(xdg) else os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "mpiwrite")


def _busy(exc: Exception) -> bool:
    return any(w in str(exc) for w in ("locked", "busy"))


def _say(text: str) -> None:
    sys.stderr.write(printable(f"mpiwrite: warning: {text}") + "\n")


class Index:
    """Lookups and new rows for one command; `close()` writes the new rows."""

    def __init__(self, folder: str, warn=_say):
        self.folder, self.warn = folder, warn
        self.path = os.path.join(folder, NAME)
        self.db: Optional[sqlite3.Connection] = None
        self.pending: List[tuple] = []
        self.hits = self.misses = self.invalid = 0
        self._off = False
        self._told = 0

    # -- opening --------------------------------------------------------------------------
    def _open(self) -> Optional[sqlite3.Connection]:
        if self.db is not None or self._off:
            return self.db
        try:
            self.db = self._connect()
        except sqlite3.OperationalError as exc:
            self._disable(f"cannot use the index {self.path} ({exc}); reading the records")
        except sqlite3.DatabaseError as exc:
            self._rebuild(exc)
        except OSError as exc:
            self._disable(f"cannot use the index folder {self.folder} "
                          f"({exc.strerror or exc}); reading the records")
        return self.db

    def _connect(self) -> sqlite3.Connection:
        os.makedirs(self.folder, mode=0o700, exist_ok=True)
        st = os.stat(self.folder)
        if not stat.S_ISDIR(st.st_mode):
            raise OSError(errno.ENOTDIR, "not a folder")
        if st.st_uid != os.geteuid() or st.st_mode & 0o022:
            raise OSError(errno.EPERM, "not your own folder, or writable by others")
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                         | os.O_CLOEXEC, 0o600)
            os.close(fd)
        except FileExistsError:
            pass
        except PermissionError:  # a read-only folder: an index already there is still read
            pass
        lst = os.lstat(self.path)
        if not stat.S_ISREG(lst.st_mode) or lst.st_uid != os.geteuid() or lst.st_nlink != 1:
            raise OSError(errno.EPERM, f"{NAME} is not a regular file of yours (a link?)")
        db = sqlite3.connect(self.path, timeout=BUSY_MS / 1000, isolation_level=None,
                             check_same_thread=False)
        try:
            db.execute(f"PRAGMA busy_timeout = {BUSY_MS}")
            if db.execute("PRAGMA journal_mode").fetchone()[0].lower() == "wal":
                db.execute("PRAGMA journal_mode = DELETE")
            if not db.execute("SELECT 1 FROM sqlite_master WHERE name='runs'").fetchone():
                db.execute(_SCHEMA)
            try:
                db.execute("SELECT path, dev, ino, size, mtime_ns, ctime_ns, reader, doc, "
                           "iterations, rank_stats FROM runs LIMIT 1").fetchall()
            except sqlite3.OperationalError as exc:
                if _busy(exc):
                    raise
                raise sqlite3.DatabaseError(f"not an index of this shape: {exc}") from None
        except BaseException:
            db.close()
            raise
        return db

    def _disable(self, why: str) -> None:
        if not self._off:
            self.warn(why)
        self._off, self.db = True, None

    def _rebuild(self, exc: Exception) -> None:
        self.warn(f"the index {self.path} is damaged ({exc}); it is made anew")
        if self.db is not None:
            try:
                self.db.close()
            except sqlite3.Error:
                pass
            self.db = None
        for suffix in ("", "-journal", "-wal", "-shm"):
            try:
                if stat.S_ISREG(os.lstat(self.path + suffix).st_mode):
                    os.unlink(self.path + suffix)
            except OSError:
                pass
        try:
            self.db = self._connect()
        except (sqlite3.Error, OSError) as again:
            self._disable(f"cannot make the index {self.path} anew ({again}); reading the "
                          "records")

    # -- rows -----------------------------------------------------------------------------
    def get(self, key: str, shown: str, ident: Tuple[int, ...]) -> Optional[runlevel.RunLevel]:
        """The record at `key` (an absolute path) from its row, if the row is of this very
        file and passes every check; else None (the caller reads the file)."""
        db = self._open()
        if db is None:
            return None
        try:
            row = db.execute("SELECT dev, ino, size, mtime_ns, ctime_ns, reader, doc, "
                             "iterations, rank_stats FROM runs WHERE path = ?",
                             (key,)).fetchone()
        except sqlite3.OperationalError as exc:
            self._disable(f"the index {self.path} is busy or unreadable ({exc}); reading "
                          "the records")
            return None
        except sqlite3.DatabaseError as exc:
            self._rebuild(exc)
            return None
        if row is None or tuple(row[:5]) != tuple(ident) or row[5] != READER:
            self.misses += 1
            return None
        try:
            rec = runlevel.build(shown, runlevel.decode(row[6], row[7], row[8]), ident)
        except Exception:  # noqa: BLE001 - any row that does not check is not used
            self.invalid += 1
            return None
        self.hits += 1
        return rec

    def lookup(self, path: str) -> Optional[runlevel.RunLevel]:
        """The record's run-level part, if the index holds this very file (get())."""
        try:
            st = os.stat(path)
        except OSError:
            return None  # runlevel.read names what is wrong
        if not stat.S_ISREG(st.st_mode):
            return None
        return self.get(os.path.abspath(path), path, runlevel.identity(st))

    def put(self, key: str, ident: Tuple[int, ...], material: Optional[Dict[str, Any]],
            status: str) -> None:
        """Keep a record just read, unless it may still change (running, just modified)."""
        if material is None or status not in runlevel.FINAL or self._off:
            return
        if time.time() - ident[3] / 1e9 < SETTLE:
            return
        try:
            doc, its, stats = runlevel.encode(material)
        except (TypeError, ValueError):  # e.g. an attribute that is not JSON: not kept
            return
        self.pending.append((key, *ident, READER, material["attrs"].get("run_id"), status,
                             doc, its, stats))

    def close(self) -> None:
        """Write the new rows (one transaction) and close; a busy index keeps its rows."""
        db = self._open() if self.pending else self.db
        if db is not None and self.pending:
            try:
                db.execute("BEGIN IMMEDIATE")
                db.executemany("INSERT OR REPLACE INTO runs VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                               self.pending)
                db.execute("COMMIT")
            except sqlite3.OperationalError as exc:
                if "readonly" not in str(exc):
                    self.warn(f"the index {self.path} is busy ({exc}); {len(self.pending)} "
                              "new record(s) not kept")
                try:
                    db.execute("ROLLBACK")
                except sqlite3.Error:
                    pass
            except sqlite3.DatabaseError as exc:
                self._rebuild(exc)
        self.pending = []
        if self.invalid > self._told:
            self.warn(f"{self.invalid - self._told} row(s) of the index {self.path} did not "
                      "pass the checks of a record and were read from the records instead")
            self._told = self.invalid
        if self.db is not None:
            self.db.close()
            self.db = None


def open_index(option: Any = None, warn=_say) -> Optional[Index]:
    """The index for --cache/--no-cache/MPIWRITE_CACHE, or None when it is off."""
    folder = folder_for(option)
    return Index(folder, warn) if folder else None
