"""The index of records already read: their run-level part, kept in SQLite (docs/history.md).

A row is keyed by the record's absolute path and says which file it was read from: device,
inode, size, mtime and ctime in nanoseconds.  A row is used only when the file at that path
still has all five.  A row holds what a record read from disk gave once it had passed every
check (formats/runlevel.build) and its run keys, sealed with an HMAC (SHA-256) over the path,
the five, the reader version and the row, under a random key kept in a 0600 file beside the
index: a row that was damaged, edited or moved to another path does not verify and is not
used (the record is read again), so the index is never trusted; a row that verifies is used
with cheap type checks only, since it is what this reader wrote.  A record that is
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
import hmac
import json
import os
import sqlite3
import stat
import sys
import time
from typing import Any, Dict, Iterator, List, Optional, Set, Tuple

from mpiwrite import SCHEMA_VERSION, __version__
from mpiwrite.formats import isolated, runlevel, runrows
from mpiwrite.text import printable

ENV = "MPIWRITE_CACHE"
NAME = "index-2.sqlite"
KEY_NAME = "index-2.key"  # the HMAC key of the rows: 32 random bytes, mode 0600
KEY_BYTES = 32
READER = f"runlevel-2/schema-{SCHEMA_VERSION}/{__version__}"  # rows of another reader: misses
SETTLE = 2.0
BUSY_MS = 10000
OFF = ("off", "no", "none", "0", "false")
_SCHEMA = ("CREATE TABLE IF NOT EXISTS runs (path TEXT PRIMARY KEY, dev INTEGER, ino INTEGER,"
           " size INTEGER, mtime_ns INTEGER, ctime_ns INTEGER, reader TEXT, run_id TEXT,"
           " status TEXT, head TEXT, doc TEXT, keys TEXT, iterations BLOB, rank_stats BLOB,"
           " mac BLOB)")
_COLUMNS = ("dev, ino, size, mtime_ns, ctime_ns, reader, head, doc, keys, iterations, "
            "rank_stats, mac")


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


def _own_file(st: os.stat_result, name: str) -> None:
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_nlink != 1:
        raise OSError(errno.EPERM, f"{name} is not a regular file of yours (a link?)")


def _key(folder: str) -> bytes:
    """The index's HMAC key, made once (written under a temporary name, then linked into
    place, so no reader sees half a key); OSError when it is not the user's own 0600 file."""
    path = os.path.join(folder, KEY_NAME)
    for _attempt in range(2):
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except FileNotFoundError:
            tmp = f"{path}.tmp-{os.getpid()}"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                         | os.O_CLOEXEC, 0o600)
            try:
                os.write(fd, os.urandom(KEY_BYTES))
                os.fsync(fd)
                os.close(fd)
                try:
                    os.link(tmp, path)
                except FileExistsError:  # another reader made it first: theirs is read
                    pass
            finally:
                os.unlink(tmp)
            continue
        try:
            st = os.fstat(fd)
            _own_file(st, KEY_NAME)
            if st.st_mode & 0o077 or st.st_size != KEY_BYTES:
                raise OSError(errno.EPERM, f"{KEY_NAME} is readable by others or not a key "
                              "(remove it and the index to start over)")
            key = os.read(fd, KEY_BYTES + 1)
        finally:
            os.close(fd)
        if len(key) == KEY_BYTES:
            return key
    raise OSError(errno.EIO, f"{KEY_NAME} could not be read")


def seal(key: bytes, path: str, ident: Tuple[int, ...], *parts: bytes) -> bytes:
    """The HMAC of a row: what it is of (path, file identity, reader) and what it holds."""
    head = "\0".join([path, *map(str, ident), READER, *(str(len(p)) for p in parts),
                      ""]).encode("utf-8", "surrogateescape")
    return hmac.digest(key, b"".join((head, *parts)), "sha256")


class Index:
    """Lookups and new rows for one command; `close()` writes the new rows."""

    def __init__(self, folder: str, warn=_say):
        self.folder, self.warn = folder, warn
        self.path = os.path.join(folder, NAME)
        self.db: Optional[sqlite3.Connection] = None
        self.pending: List[tuple] = []
        self.key = b""
        self._rows: Dict[str, tuple] = {}  # rows of the folders looked at, by path
        self._dirs: Set[str] = set()
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
        _own_file(os.lstat(self.path), NAME)
        self.key = _key(self.folder)
        db = sqlite3.connect(self.path, timeout=BUSY_MS / 1000, isolation_level=None,
                             check_same_thread=False)
        try:
            db.execute(f"PRAGMA busy_timeout = {BUSY_MS}")
            if db.execute("PRAGMA journal_mode").fetchone()[0].lower() == "wal":
                db.execute("PRAGMA journal_mode = DELETE")
            if not db.execute("SELECT 1 FROM sqlite_master WHERE name='runs'").fetchone():
                db.execute(_SCHEMA)
            try:
                db.execute(f"SELECT path, {_COLUMNS} FROM runs LIMIT 1").fetchall()
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
        self._rows, self._dirs = {}, set()
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
    def _row(self, db: sqlite3.Connection, key: str) -> Optional[tuple]:
        """The row of `key`: the rows of its whole folder are read at once, in one query
        (a report asks for thousands of records of a few folders)."""
        folder = os.path.dirname(key)
        if folder not in self._dirs:
            self._dirs.add(folder)
            low = folder.rstrip("/") + "/"
            for row in db.execute(f"SELECT path, {_COLUMNS} FROM runs WHERE path > ? AND "
                                  "path < ? AND instr(substr(path, ?), '/') = 0",
                                  (low, low[:-1] + "0", len(low) + 1)):
                self._rows[row[0]] = row[1:]
        return self._rows.pop(key, None)

    def get(self, key: str, shown: str, ident: Tuple[int, ...]):
        """(record, run keys) of `key` (an absolute path) from its row, if the row is of
        this very file and its seal verifies; else None (the caller reads the file)."""
        db = self._open()
        if db is None:
            return None
        try:
            row = self._row(db, key)
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
            head, doc, keys = (t.encode("utf-8", "surrogateescape") for t in row[6:9])
            its, stats, mac = row[9:12]
            if not (isinstance(its, bytes) and isinstance(stats, bytes)
                    and isinstance(mac, bytes)) or not hmac.compare_digest(
                        mac, seal(self.key, key, ident, head, doc, keys, its, stats)):
                raise ValueError("the row's seal does not verify")
            first, keys = json.loads(head), json.loads(keys)
            if not (isinstance(keys, dict) and isinstance(first, list) and len(first) == 3
                    and all(isinstance(x, str) for x in first)):
                raise ValueError("not an index row")
            iterations, rstats = runrows.tables(its, stats)
            got = runrows.Lazy(row[7], first, iterations, shown, ident, rstats), keys
        except Exception:  # noqa: BLE001 - any row that does not verify is not used
            self.invalid += 1
            return None
        self.hits += 1
        return got

    def put(self, key: str, ident: Tuple[int, ...], rec: runlevel.RunLevel,
            keys: Dict[str, Any]) -> None:
        """Keep a record just read and checked, with its run keys, unless it may still
        change (running, just modified) or does not come back from JSON as it is."""
        if rec.status not in runlevel.FINAL or self._off or self._open() is None:
            return
        if time.time() - ident[3] / 1e9 < SETTLE:
            return
        text = getattr(rec, "row_text", None) or _text(runrows.doc_of(rec))
        keys_text = getattr(rec, "keys_text", None) or _text(keys)
        if text is None or keys_text is None:  # a tuple, say: not kept, read each time
            return
        its, stats = rec.iterations.tobytes(), rec.rank_stats.tobytes()
        head_text = json.dumps(runrows.head_of(rec))
        head, doc, kdoc = (t.encode("utf-8", "surrogateescape")
                           for t in (head_text, text, keys_text))
        mac = seal(self.key, key, ident, head, doc, kdoc, its, stats)
        self.pending.append((key, *ident, READER, rec.run_id, rec.status, head_text, text,
                             keys_text, its, stats, mac))

    def close(self) -> None:
        """Write the new rows (one transaction) and close; a busy index keeps its rows."""
        db = self._open() if self.pending else self.db
        if db is not None and self.pending:
            try:
                db.execute("BEGIN IMMEDIATE")
                db.executemany("INSERT OR REPLACE INTO runs VALUES "
                               "(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
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


def _text(value: Any) -> Optional[str]:
    """JSON text of value if it reads back exactly (runlevel.json_text), else None."""
    return isolated.json_text(value)


def lookup(paths: List[str], level: str, index: Optional[Index]) -> Iterator[Tuple[str, Any]]:
    """Per path, in order: ("hit", (record, keys)) from the index, or ("answer", a worker's
    answer): libhdf5 reads a record that is not served from the index only in a child
    process first (formats/isolated.py), several records at once, while the caller works on
    the answers already in."""
    from mpiwrite.formats import isolated

    hits: List[Any] = []
    for path in paths:
        got = None
        if index is not None:
            try:
                st = os.stat(path)
            except OSError:
                st = None  # the worker names what is wrong
            if st is not None and stat.S_ISREG(st.st_mode):
                got = index.get(os.path.abspath(path), path, runlevel.identity(st))
        hits.append(got)
    op = "runlevel" if level == "run" else "whole"
    ask = [(op, p) for p, got in zip(paths, hits) if got is None]
    answers = isolated.pool().imap(ask) if ask else iter(())
    for got in hits:
        yield ("hit", got) if got is not None else ("answer", next(answers))


def open_index(option: Any = None, warn=_say) -> Optional[Index]:
    """The index for --cache/--no-cache/MPIWRITE_CACHE, or None when it is off."""
    folder = folder_for(option)
    return Index(folder, warn) if folder else None
