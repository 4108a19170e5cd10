"""Which runs of a study are done already, and the one `study run` at a time (docs/study.md).

A point is known by its values, not by its place in the file: its key is the JSON of every
axis's value as the run parameters say it (sizes in bytes, durations in seconds, booleans),
recorded as the tag `study_key`.  So a file whose [axes] lines were swapped, or whose values
are spelled otherwise (`1M`, `1MiB`), resumes the same points.  A record counts as a run done
only if `mpiwrite run` made it (not an import, whose tags are whatever its maker typed), for
this study's name and fingerprint, in its newest generation (`study_generation`: each `--new`
starts one), complete, and its run parameters are the point's.

The records are other people's files too: they are read only through a record store
(records/store.py), whose sandbox reads them in worker processes, never by libhdf5 in the rank
that runs the study (a damaged record can crash or hang libhdf5); one that cannot be read is
named and not counted.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import stat
import sys
from typing import Any, Dict, List, NamedTuple, Sequence, Set, Tuple

from mpiwrite import structs
from mpiwrite.errors import AgreedError, why
from mpiwrite.study.plan import Study
from mpiwrite.text import printable
from mpiwrite.vocab.axes import kind_of, run_option
from mpiwrite.vocab.status import RunStatus

KEY_TAG, GENERATION_TAG = "study_key", "study_generation"
MAX_KEY = 1024  # a tag value's limit: a longer key is recorded as its hash
# study keys whose RunConfig field is named otherwise (the rest: the same name)
FIELD_OF = {"time": "time_limit", "count": "size", "json": "json_path", "tag": "tags"}


def field_of(key: str) -> str:
    return FIELD_OF.get(key, key)


def _plain(value: Any) -> Any:
    """A value as JSON gives it back (what a record's parameters hold)."""
    return json.loads(json.dumps(value, default=str))


def point_values(st: Study, point: Dict[str, Any], cfg: Any) -> Dict[str, Any]:
    """Each axis's value as the run parameters say it: `run`'s own parse of the point."""
    params = structs.asdict(cfg)
    out: Dict[str, Any] = {}
    for axis, value in point.items():
        out[axis] = _plain(kind_of(axis).point_value(value, params, field_of(axis)))
    return out


def point_key(values: Dict[str, Any]) -> str:
    text = json.dumps(values, sort_keys=True, separators=(",", ":"))
    if len(text) > MAX_KEY:
        return "sha256:" + hashlib.sha256(text.encode()).hexdigest()
    return text


def point_keys(st: Study, configs: Sequence[Any]) -> List[str]:
    return [point_key(point_values(st, p, c)) for p, c in zip(st.points(), configs)]


def expected(st: Study, point: Dict[str, Any], cfg: Any) -> Dict[str, Any]:
    """The run parameters a record of this point has: every field the study's options set."""
    params = structs.asdict(cfg)
    keys = [k for k in list(st.fixed) + list(point) if run_option(k)]
    return {field_of(k): _plain(params[field_of(k)]) for k in keys
            if field_of(k) in params and field_of(k) != "tags"}


def matches(rec: Any, point: Dict[str, Any], want: Dict[str, Any]) -> bool:
    """Whether a record's parameters, allocation and settings are the point's."""
    params = rec.params()
    if any(params.get(k) != v for k, v in want.items()):
        return False
    return all(kind_of(k).held(rec, k, v) for k, v in point.items())


def generation(tags: Dict[str, str]) -> int:
    """A record's generation of its study: 0 for records from before generations."""
    try:
        return max(0, int(tags.get(GENERATION_TAG, "0")))
    except ValueError:
        return -1  # not one of mpiwrite's: never the newest


def made_by_run(rec: Any) -> bool:
    """A record `mpiwrite run` made (an import's study tags are whatever its maker typed)."""
    return not rec.imported()


def _warn(text: str) -> None:
    sys.stderr.write(printable(f"mpiwrite: warning: {text}") + "\n")
    sys.stderr.flush()


def read_records(results: str, warn=_warn) -> List[Any]:
    """The run-level part of every record in `results` (not in sub-folders), each read by a
    worker process of the store's own (ended here: this is rank 0 of an MPI job); one that
    cannot be read is named in a warning."""
    from mpiwrite.records.store import FolderStore

    out: List[Any] = []
    with FolderStore(cache=False, own_pool=True) as store:
        for got in store.runlevel(store.in_folder(results)):
            if got.record is not None:
                out.append(got.record)
            else:
                warn(f"skipped {got.error} (not counted as a run of the study)")
    return out


class Done(NamedTuple):
    runs: Set[Tuple[int, int]]  # (point index, repetition) complete
    others: List[str]  # other files' fingerprints under this name, when none is this one's
    generation: int  # the generation the runs of this launch are recorded in


def done_in(results: str, st: Study, fp: str, keys: Sequence[str],
            wants: Sequence[Dict[str, Any]], new: bool, warn=_warn) -> Done:
    """What of this study is complete in `results` (see the module's docstring)."""
    index = {k: i for i, k in enumerate(keys)}
    points = st.points()
    mine: List[Any] = []
    others: Set[str] = set()
    newest = 0
    for rec in read_records(results, warn):
        try:
            tags = rec.tags()
            if tags.get("study") != st.name or not made_by_run(rec):
                continue
            newest = max(newest, generation(tags))
            if tags.get("study_hash") == fp:
                mine.append(rec)
            else:
                others.add(str(tags.get("study_hash")))
        except (AttributeError, TypeError, ValueError):
            continue
    if new:
        return Done(set(), [], newest + 1)
    if not mine:
        return Done(set(), sorted(others), newest + 1 if others else 1)
    gen = max(generation(r.tags()) for r in mine)
    done: Set[Tuple[int, int]] = set()
    for rec in mine:
        tags = rec.tags()
        if generation(tags) != gen or rec.status != RunStatus.COMPLETE:
            continue
        i = index.get(str(tags.get(KEY_TAG)))
        try:
            repeat = int(tags.get("study_repeat", ""))
        except ValueError:
            continue
        if i is not None and 0 <= repeat < st.repeat and matches(rec, points[i], wants[i]):
            done.add((i, repeat))
    return Done(done, [], gen)


def lock_name(st: Study) -> str:
    return f".mpiwrite-study-{st.name}.lock"


def lock(results: str, st: Study) -> int:
    """An exclusive lock on the study in `results` for as long as the descriptor is open:
    AgreedError (exit 2) when another `study run` of it holds it.  The folder is made if
    missing; the lock file is opened without following a link, and must be this user's."""
    from mpiwrite.files import Folder, open_path

    try:
        os.makedirs(results, 0o755, exist_ok=True)
    except FileExistsError:
        raise AgreedError(f"results {results!r}: not a folder") from None
    try:
        folder = Folder.open(results)
    except OSError as exc:
        raise AgreedError(f"results {results}: {why(exc)}") from None
    try:
        fd = open_path(lock_name(st), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
                       | os.O_NONBLOCK, folder.fd, 0o644)
    except OSError as exc:  # a link planted at its name (ELOOP), a folder there, ...
        what = "is a symbolic link (not followed)" if exc.errno == errno.ELOOP else \
            f"cannot be opened ({why(exc)})"
        raise AgreedError(f"results {results}: {lock_name(st)} {what}: remove it") from None
    finally:
        folder.close()
    try:
        got = os.fstat(fd)
        if not stat.S_ISREG(got.st_mode) or got.st_uid != os.geteuid():
            raise AgreedError(f"results {results}: {lock_name(st)} is not a file of this "
                              f"user (uid {got.st_uid}): remove it")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EWOULDBLOCK, errno.EACCES):
                raise AgreedError(f"results {results}: cannot lock {lock_name(st)}: "
                                  f"{why(exc)}") from None
            raise AgreedError(f"study {st.name!r} is running already with results {results} "
                              f"(another `study run` holds {lock_name(st)}): wait for it to "
                              "end, then run again to resume") from None
    except BaseException:
        os.close(fd)
        raise
    return fd
