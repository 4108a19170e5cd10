"""The index of records already read: their run-level part, kept in SQLite (docs/history.md).

A row is keyed by the record's absolute path and says which file it was read from: device,
inode, size, mtime and ctime in nanoseconds.  A row is used only when the file at that path
still has all five.  A row holds what a record read from disk gave once it had passed every
check (records/runlevel.build) and its run keys, sealed with an HMAC (SHA-256) over the path,
the five, the reader version and the row, under a random key kept in a 0600 file beside the
index: a row that was damaged, edited or moved to another path does not verify and is not
used (the record is read again), so the index is never trusted; a row that verifies is used
with cheap type checks only, since it is what this reader wrote.  A record that is
still `running`, or was modified in the last SETTLE seconds (a timestamp tick may repeat),
is never kept.  The index lives in the user's cache folder (never next to the records, which
may be read-only or someone else's), in a folder that must be the user's own and not
writable by others, opened by descriptor like every output folder (files.Folder: a symlink
of another user's is not followed) and made only below a folder that exists (never HOME);
the file is created O_EXCL|O_NOFOLLOW with mode 0600.  --cache DIR that cannot be used is
exit 2; MPIWRITE_CACHE or the default folder, a warning.  A record whose path is not UTF-8
is read, not indexed.  Readers and a
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

from mpiwrite import SCHEMA_VERSION, __version__, files
from mpiwrite.errors import ConfigError
from mpiwrite.records import runlevel, runrows, sandbox
from mpiwrite.text import printable

ENV = "MPIWRITE_CACHE"
NAME = "index-2.sqlite"
KEY_NAME = "index-2.key"  # the HMAC key of the rows: 32 random bytes, mode 0600
KEY_BYTES = 32
READER = f"runlevel-3/schema-{SCHEMA_VERSION}/{__version__}"  # another reader's rows: misses
SETTLE = 2.0
BUSY_MS = 10000
OFF = ("off", "no", "none", "0", "false")
_SCHEMA = ("CREATE TABLE IF NOT EXISTS runs (path TEXT PRIMARY KEY, dev INTEGER, ino INTEGER,"
           " size INTEGER, mtime_ns INTEGER, ctime_ns INTEGER, reader TEXT, run_id TEXT,"
           " status TEXT, head TEXT, doc TEXT, keys TEXT, iterations BLOB, rank_stats BLOB,"
           " mac BLOB)")
_COLUMNS = ("dev, ino, size, mtime_ns, ctime_ns, reader, head, doc, keys, iterations, "
            "rank_stats, mac")


def location(option: Any = None) -> Optional[Tuple[str, str]]:
    """(the index's folder, the folder above it that must exist already: only the folders
    between the two are made): --cache DIR, None for --no-cache (option False), else
    MPIWRITE_CACHE (a folder, or `off`), else $XDG_CACHE_HOME/mpiwrite or ~/.cache/mpiwrite
    (HOME must exist)."""
    if option is False:
        return None
    if option is not None and not str(option).strip():
        from mpiwrite.errors import ConfigError

        raise ConfigError("--cache: empty: give a folder, or --no-cache")
    folder = str(option) if option else os.environ.get(ENV, "").strip()
    if folder:
        if not option and folder.lower() in OFF:
            return None
        return folder, os.path.dirname(os.path.abspath(folder))
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    if os.path.isabs(xdg):
        return os.path.join(xdg, "mpiwrite"), os.path.dirname(os.path.abspath(xdg))
    home = os.path.expanduser("~")
    return os.path.join(home, ".cache", "mpiwrite"), home


def folder_for(option: Any = None) -> Optional[str]:
    """The index's folder (location()), or None when there is none."""
    where = location(option)
    return where[0] if where else None


def open_folder(folder: str, anchor: str) -> files.Folder:
    """The index's folder, opened by descriptor: `anchor` must exist (a symlink there only of
    the user's own or root's, files.Folder), the folders below it are made (0700) and opened
    one by one from the one above, never through another user's symlink; the last must be
    the user's own and not writable by others.  OSError naming the path otherwise."""
    folder = os.path.abspath(folder)
    rel = os.path.relpath(folder, anchor)
    parts = [] if rel == "." else rel.split(os.sep)
    try:
        cur = files.Folder.open(anchor)
    except FileNotFoundError:
        raise OSError(errno.ENOENT, "does not exist (it is not made)", anchor) from None
    except NotADirectoryError:
        raise OSError(errno.ENOTDIR, "not a folder", anchor) from None
    try:
        for part in parts:
            path = os.path.join(cur.path, part)
            try:
                try:
                    os.mkdir(part, 0o700, dir_fd=cur.fd)
                except FileExistsError:
                    pass
                nxt = files.Folder.open(path, dir_fd=cur.fd, name=part)
            except OSError as exc:  # named by its whole path, not by `part`
                raise OSError(exc.errno, "not a folder" if exc.errno == errno.ENOTDIR
                              else exc.strerror, path) from None
            cur.close()
            cur = nxt
        st = os.fstat(cur.fd)
        if st.st_uid != os.geteuid():
            raise OSError(errno.EPERM, f"belongs to another user (uid {st.st_uid})", folder)
        if st.st_mode & 0o022:
            raise OSError(errno.EPERM, "is writable by others or by its group", folder)
    except BaseException:
        cur.close()
        raise
    return cur


def _utf8(*texts: str) -> bool:
    """Whether SQLite can take these as text (a name that is not UTF-8 holds surrogates)."""
    try:
        for text in texts:
            text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _busy(exc: Exception) -> bool:
    return any(w in str(exc) for w in ("locked", "busy"))


def _say(text: str) -> None:
    sys.stderr.write(printable(f"mpiwrite: warning: {text}") + "\n")


def _own_file(st: os.stat_result, name: str) -> None:
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_nlink != 1:
        raise OSError(errno.EPERM, f"{name} is not a regular file of yours (a link?)")


def _key(dir_fd: int) -> bytes:
    """The index's HMAC key in the folder open at dir_fd, made once (written under a
    temporary name, then linked into place, so no reader sees half a key); OSError when it
    is not the user's own 0600 file."""
    path = KEY_NAME
    for _attempt in range(2):
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                         dir_fd=dir_fd)
        except FileNotFoundError:
            tmp = f"{path}.tmp-{os.getpid()}"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                         | os.O_CLOEXEC, 0o600, dir_fd=dir_fd)
            try:
                os.write(fd, os.urandom(KEY_BYTES))
                os.fsync(fd)
                os.close(fd)
                try:
                    os.link(tmp, path, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
                except FileExistsError:  # another reader made it first: theirs is read
                    pass
            finally:
                os.unlink(tmp, dir_fd=dir_fd)
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

    def __init__(self, folder: str, warn=_say, anchor: Optional[str] = None):
        self.folder, self.warn = folder, warn
        self.anchor = anchor or os.path.dirname(os.path.abspath(folder))
        self.path = os.path.join(folder, NAME)
        self.dir: Optional[files.Folder] = None  # the folder, open while the index is
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
            self._disable(f"cannot use the index folder: "
                          f"{files.about(exc.filename or self.folder, exc)}; reading the "
                          "records")
        return self.db

    def opened(self) -> files.Folder:
        """The index's folder, opened once (open_folder)."""
        if self.dir is None:
            self.dir = open_folder(self.folder, self.anchor)
        return self.dir

    def _connect(self) -> sqlite3.Connection:
        fd = self.opened().fd
        try:
            os.close(os.open(NAME, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                             | os.O_CLOEXEC, 0o600, dir_fd=fd))
        except FileExistsError:
            pass
        except PermissionError:  # a read-only folder: an index already there is still read
            pass
        _own_file(os.stat(NAME, dir_fd=fd, follow_symlinks=False), NAME)
        self.key = _key(fd)
        # SQLite opens the file and its journal by name: through the descriptor's folder
        # (Linux's /proc/self/fd), so that a path swapped since it was checked is not used
        here = f"/proc/self/fd/{fd}"
        db = sqlite3.connect(os.path.join(here if os.path.isdir(here) else self.folder, NAME),
                             timeout=BUSY_MS / 1000, isolation_level=None,
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
                fd = self.opened().fd
                if stat.S_ISREG(os.stat(NAME + suffix, dir_fd=fd,
                                        follow_symlinks=False).st_mode):
                    os.unlink(NAME + suffix, dir_fd=fd)
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
        if not _utf8(key):  # not a name SQLite can hold: read, not indexed
            self.misses += 1
            return None
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
        if (rec.status not in runlevel.FINAL or not _utf8(key, rec.run_id, rec.status)
                or self._off or self._open() is None):
            return
        if time.time() - ident[3] / 1e9 < SETTLE:
            return
        text = getattr(rec, "row_text", None) or _text(runrows.doc_of(rec))
        keys_text = getattr(rec, "keys_text", None) or _text(keys)
        if text is None or keys_text is None or not _utf8(text, keys_text):
            return  # a tuple, say: not kept, read each time
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
        if self.dir is not None:
            self.dir.close()
            self.dir = None


def _text(value: Any) -> Optional[str]:
    """JSON text of value if it reads back exactly (runlevel.json_text), else None."""
    return sandbox.json_text(value)


def lookup(paths: List[str], level: str, index: Optional[Index],
           pool: Any = None) -> Iterator[Tuple[str, Any]]:
    """Per path, in order: ("hit", (record, keys)) from the index, or ("answer", a worker's
    answer): libhdf5 reads a record that is not served from the index only in a child
    process first (records/sandbox.py), several records at once, while the caller works on
    the answers already in."""
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
    answers = (pool or sandbox.pool()).imap(ask) if ask else iter(())
    for got in hits:
        yield ("hit", got) if got is not None else ("answer", next(answers))


def open_index(option: Any = None, warn=_say) -> Optional[Index]:
    """The index for --cache/--no-cache/MPIWRITE_CACHE, or None when it is off.  --cache DIR
    is opened at once: one that cannot be used is a ConfigError (exit 2) naming it; the
    others are a warning when first used, and the records are read without an index."""
    where = location(option)
    if where is None:
        return None
    index = Index(where[0], warn, where[1])
    if option:
        try:
            index.opened()
        except OSError as exc:
            raise ConfigError(f"--cache: {files.about(exc.filename or where[0], exc)}") \
                from None
    return index
