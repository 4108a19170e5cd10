"""Looking up records for a command: the store over PATHS, a refusal where no --in folder
exists, a comma list of keys."""

from __future__ import annotations

import os

from mpiwrite.errors import ConfigError


def open_store(paths, skip_bad: bool, option: str = "PATHS", level: str = "full", cache=None):
    from mpiwrite.answers.results import Store

    store = Store(paths, option=option, level=level, cache=cache)
    if store.bad and not skip_bad:
        return store, 1
    return store, 0


def refuse_missing_in(where, what: str) -> None:
    """ConfigError when none of the --in folders exists (where KEY=VALUE and run ids look)."""
    if not any(os.path.lexists(w) for w in where):
        names = ", ".join(repr(w) for w in where)
        raise ConfigError(f"{what}, so it is looked up in --in {names}, which does not exist "
                          "(give --in FOLDER)")


def key_list(text: str):
    return [k.strip() for k in text.split(",") if k.strip()] if text else []


def one_run(run: str, where, skip_bad: bool):
    """(the record, exit code) of RUN: a record file, a folder holding one record, or a run
    id, its start or its random suffix looked up in the --in folders (`where`)."""
    import os

    from mpiwrite.errors import ConfigError

    code = 0
    if os.path.isdir(run):
        store, code = open_store([run], skip_bad, "RUN")
        if store.conflicts:
            raise ConfigError(f"RUN: {store.conflict_text(next(iter(store.conflicts)))}")
        if len(store.runs) != 1:
            raise ConfigError(f"RUN: {run!r} is a folder with {len(store.runs)} readable "
                              "records, not one; give one record file, or a run id with --in "
                              "FOLDER")
        return store.runs[0], code
    if os.path.lexists(run):
        from mpiwrite.records.store import FolderStore

        return FolderStore().whole(run), 0  # RecordError: named, exit 1 (libhdf5 in a child)
    refuse_missing_in(where, f"RUN: {run!r} is not a file")
    store, code = open_store(where, skip_bad, "--in")
    return store.find_run(run), code
