"""Where records are kept, and the one way to read them: a record store.

A store finds records (`find`: references, here paths), reads their run-level part
(`runlevel`: from the index when it holds the file, else through the sandbox) or a whole
record (`whole`: always through the sandbox), and keeps records (`put_new`: only if the name
is free, as `import` does; `save`: replacing the previous version, as a run's ledger does).
libhdf5 never parses a record in the caller's process: a record that the index does not
answer for is read by a worker of records/sandbox.py, which answers with checked values.

`FolderStore` keeps records as files in folders, with the SQLite index of records already
read (records/index.py) behind it: what every command did before this module.  A store that
keeps records elsewhere (an object store, a database) gives the same methods.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Iterable, Iterator, List, NamedTuple, Optional, Sequence

from mpiwrite import files
from mpiwrite.errors import RecordError
from mpiwrite.records.model import RunRecord
from mpiwrite.text import printable


def _say(text: str) -> None:
    sys.stderr.write(printable(f"mpiwrite: warning: {text}") + "\n")


class Read(NamedTuple):
    """One record asked of a store: its reference, and the record with its run keys, or
    `error` (one line naming the file) and no record."""
    ref: str
    record: Optional[RunRecord]
    keys: Optional[dict]
    error: str = ""


class FolderStore:
    """Records as files under folders, the index of records already read behind them.

    cache: False reads every record (no index); None the user's index (MPIWRITE_CACHE or the
    cache folder); a folder (--cache DIR: a ConfigError here if it cannot be used); or an
    opened index.  pool: the sandbox's workers to read in (default: the command's own, kept
    for the process; `own_pool=True` starts a pool of its own that `close` ends)."""

    def __init__(self, cache: Any = False, warn=_say, own_pool: bool = False):
        self.index = None
        if cache is not False:
            from mpiwrite.records.index import Index, open_index

            self.index = cache if isinstance(cache, Index) else open_index(cache, warn)
        self._own = own_pool
        self._pool = None
        self._leftovers: List[str] = []

    def __enter__(self) -> FolderStore:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def pool(self):
        from mpiwrite.records import sandbox

        if self._pool is None:
            self._pool = sandbox.Pool() if self._own else sandbox.pool()
        return self._pool

    # -- finding ----------------------------------------------------------------------------
    def find(self, paths: Iterable[str], option: str = "PATHS") -> List[str]:
        """The records under files, folders (recursively) and shell globs, each file once
        (records/listing.py); ConfigError naming `option` for a path that is not there."""
        from mpiwrite.records.listing import find

        return find(paths, option, self._leftovers)

    def in_folder(self, folder: str) -> List[str]:
        """The records directly in one folder (not its sub-folders), by name; [] if the
        folder does not exist."""
        from mpiwrite.vocab.names import looks_like_record

        try:
            listing = sorted(os.listdir(folder))
        except FileNotFoundError:
            return []
        return [os.path.join(folder, n) for n in listing if looks_like_record(n)]

    def leftovers(self) -> List[str]:
        """Temporary records left by killed runs, seen by `find` so far."""
        return list(self._leftovers)

    # -- reading ----------------------------------------------------------------------------
    def runlevel(self, refs: Sequence[str]) -> Iterator[Read]:
        """Each record's run-level part (records/runlevel.py) and run keys, in order: from
        the index when it holds this very file, else read by a worker (and then kept in the
        index); the rest of a record is read through the sandbox when first used."""
        return self._read(refs, "run")

    def wholes(self, refs: Sequence[str]) -> Iterator[Read]:
        """Each record read whole by a worker, with its run keys, in order."""
        return self._read(refs, "full")

    def whole(self, ref: str) -> RunRecord:
        """One record read whole by a worker; RecordError naming the file otherwise."""
        from mpiwrite.records import sandbox

        got = self.pool().run([("whole", ref)])[0]
        if not got["ok"]:
            raise RecordError(str(got.get("error")))
        return sandbox.record_of(got, ref)

    def _read(self, refs: Sequence[str], level: str) -> Iterator[Read]:
        from mpiwrite.formats.runkeys import run_keys
        from mpiwrite.records import runrows, sandbox
        from mpiwrite.records.index import lookup

        index = self.index if level == "run" else None
        for path, got in zip(refs, lookup(list(refs), level, index, self.pool())):
            try:
                keys = None
                if got[0] == "hit":
                    rec, keys = got[1]
                elif level == "run":
                    rec = runrows.answered(path, got[1])
                    keys = runrows.keys_of(rec)
                elif got[1]["ok"]:  # as the worker read it whole (never libhdf5 here)
                    rec = sandbox.record_of(got[1], path)
                else:
                    raise RecordError(str(got[1].get("error")))
                if keys is None:
                    keys = run_keys(rec)
                if got[0] != "hit" and index is not None:
                    index.put(os.path.abspath(path), rec.identity, rec, keys)
            except RecordError as exc:
                yield Read(path, None, None, str(exc))
                continue
            except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as exc:
                yield Read(path, None, None,
                           f"{path}: unusable record ({type(exc).__name__}: {exc})")
                continue
            yield Read(path, rec, keys)

    # -- keeping ----------------------------------------------------------------------------
    def put_new(self, rec: RunRecord, folder: files.Folder, name: str) -> bool:
        """Create the record `name` in `folder` only if no file has that name (False if one
        has): O_EXCL, then a hard link (records/h5.write_exclusive)."""
        from mpiwrite.records import h5

        return h5.write_exclusive(rec, folder, name)

    def save(self, rec: RunRecord, path: str, folder: Optional[files.Folder] = None) -> None:
        """Write the record to `path`, replacing the previous version atomically (in
        `folder` by descriptor when given); OSError with errno on any failure."""
        from mpiwrite.records import h5

        h5.write(rec, path, folder)

    def close(self) -> None:
        """Write the index's new rows; end the workers of a pool of its own."""
        if self.index is not None:
            self.index.close()
        if self._own and self._pool is not None:
            self._pool.close()
            self._pool = None
