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
