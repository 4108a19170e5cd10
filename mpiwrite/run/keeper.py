"""A node's keeper: what a run leaves behind when its launcher ends it, removed, and said.

Whatever ends the launcher (SIGHUP from a closed terminal, `| head -1` closing its output,
two quick Ctrl-C, SIGKILL of `mpiexec`), the launcher kills the ranks: none of them can remove
its data files, drop its lock file or save a final record.  So each node leader starts a
keeper just before it takes the node's lock (run/layout.RankFiles.take_lock): a small
process in a session of its own (the launcher's kill of the job's process group does not
reach it), that holds the read end of a pipe whose write end only the leader holds.

- The run ends in order: the leader writes `done` and closes the pipe (RankFiles.release_lock,
  on every orderly path: a complete run, a failure the guard caught, an interrupt, a
  timeout); the keeper leaves at once, touching nothing.
- The leader dies first (however: the kernel closes its end of the pipe): the keeper reads
  end-of-file, waits until every rank of its node is gone (each by pid and start time: a
  reused pid is not one of them; at most WAIT seconds, then it leaves without touching a file
  a live rank may write), and removes what its node's ranks made in TARGET: their data files
  (by name: this run's id and one of its ranks; rank 0's node also the shared file and the
  probe), the run's subdirectories once empty, and its node's lock file.  On rank 0's node it
  then rewrites a record still `running` as `interrupted`, saying that the launcher ended it.

It removes nothing but names of its own run, only regular files, relative to the TARGET
folder the leader opened (inherited as a descriptor: no path is looked up again), never
following a link.  Its own failures are silent: it has no terminal, and its only job is a
best effort after the run's own clean-up could not happen (`mpiwrite clean` remains).
"""

from __future__ import annotations

import json
import os
import stat
import sys
import time
from typing import Any, Dict, List

WAIT = 30.0  # seconds the keeper waits for its node's ranks to be gone before it gives up
NAP = 0.1
DONE = b"done\n"


def _alive(pids: Dict[int, int]) -> List[int]:
    """The node's ranks still running (by pid and start time: a reused pid is not one)."""
    from mpiwrite.host import start_ticks

    return [pid for pid, ticks in pids.items() if start_ticks(pid) == ticks]


def _beat(target_fd: int, lock: str) -> None:
    try:
        os.utime(lock, dir_fd=target_fd, follow_symlinks=False)
    except OSError:
        pass


def _regular(dir_fd: int, name: str) -> bool:
    try:
        return stat.S_ISREG(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _unlink(dir_fd: int, name: str) -> int:
    if not _regular(dir_fd, name):
        return 0
    try:
        os.unlink(name, dir_fd=dir_fd)
        return 1
    except OSError:
        return 0


def _ours(name: str, run_id: str, ranks: List[int], first: bool) -> bool:
    """Whether `name` is a data file or probe of this run made on this node."""
    from mpiwrite.vocab import names

    got = names.parse_data_file(name)
    if got is not None and got.run_id == run_id:
        return got.rank in ranks if got.rank is not None else first
    return first and names.parse_probe(name) == run_id


def sweep(target_fd: int, run_id: str, ranks: List[int], first: bool, lock: str,
          keep: bool = False) -> int:
    """Remove this node's files of the run from TARGET (and its run subdirectories, once
    empty), then its lock file; how many files went.  With `keep` (run --keep) the data
    files stay: only the lock file goes."""
    from mpiwrite.vocab import names

    gone = 0
    if keep:
        _unlink(target_fd, lock)
        return 0
    try:
        entries = os.listdir(target_fd)
    except OSError:
        return 0
    for name in entries:
        if _ours(name, run_id, ranks, first):
            gone += _unlink(target_fd, name)
        elif names.parse_subdir(name) == run_id:
            try:
                sub = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                              dir_fd=target_fd)
            except OSError:
                continue
            try:
                for inner in os.listdir(sub):
                    if _ours(inner, run_id, ranks, first):
                        gone += _unlink(sub, inner)
            except OSError:
                pass
            finally:
                os.close(sub)
            try:
                os.rmdir(name, dir_fd=target_fd)  # the last node's keeper empties it
            except OSError:
                pass
    _unlink(target_fd, lock)
    return gone


def mark_record(results_fd: int, record: str, host: str, gone: int) -> None:
    """Rank 0's node: a record still `running` says the launcher ended the run."""
    from mpiwrite import files
    from mpiwrite.records import h5
    from mpiwrite.records.sandbox import read_whole
    from mpiwrite.vocab.status import RunStatus

    path = f"/proc/{os.getpid()}/fd/{results_fd}/{record}"  # the folder the run opened
    rec = read_whole(path)
    if str(rec.status) != RunStatus.RUNNING.value:
        return  # rank 0 saved its end: nothing to say
    for key in h5.ATTR_JSON:  # read back parsed; written as the ledger writes them: JSON
        if key in rec.attrs and not isinstance(rec.attrs[key], str):
            rec.attrs[key] = json.dumps(rec.attrs[key])
    rec.attrs["status"] = RunStatus.INTERRUPTED.value
    rec.attrs["end_time"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    rec.attrs["error"] = (f"the run's processes on {host} ended without finishing in order "
                          "(killed: the launcher ended by a hang-up, a closed output, a "
                          "second Ctrl-C or a kill; or a signal, the OOM killer); the keeper "
                          f"on {host} removed {gone} data file(s) of its node")
    h5.write(rec, record, files.Folder(path.rsplit("/", 1)[0], results_fd))


def _beat_until_told(pipe, target_fd: int, lock: str) -> bytes:
    """While the leader lives: the lock file's times set every BEAT seconds (the heartbeat
    every path to it sees: facts/liveness.py).  What the leader said at its end: DONE, or
    b'' when it died without a word."""
    import select

    from mpiwrite.facts.liveness import BEAT

    fd = pipe.fileno()
    got = b""
    while True:
        ready, _w, _x = select.select([fd], [], [], BEAT)
        if not ready:
            _beat(target_fd, lock)
            continue
        chunk = os.read(fd, len(DONE) - len(got))
        if not chunk:
            return got  # end of file: the leader is gone
        got += chunk
        if len(got) >= len(DONE):
            return got


def keep(info: Dict[str, Any], pipe) -> int:
    """Wait on the pipe; after an end that was not in order, clean this node's part."""
    pids = {int(pid): int(ticks) for pid, ticks in zip(info["pids"], info["ticks"])}
    target_fd, lock = int(info["target_fd"]), str(info["lock"])
    said = _beat_until_told(pipe, target_fd, lock)
    if said == DONE:
        return 0
    if any(ticks < 0 for ticks in pids.values()):
        return 1  # a rank this keeper cannot see (another PID namespace): nothing proven
    end = time.monotonic() + WAIT
    beat = 0.0
    while _alive(pids) and time.monotonic() < end:
        if time.monotonic() - beat >= 1.0:  # the run lives while a rank does: still beating
            _beat(target_fd, lock)
            beat = time.monotonic()
        time.sleep(NAP)
    if _alive(pids):
        return 1  # a rank still runs (stuck in the kernel): leave its files to `clean`
    gone = sweep(target_fd, str(info["run_id"]), [int(r) for r in info["ranks"]],
                 bool(info.get("first")), lock, bool(info.get("keep")))
    if info.get("results_fd") is not None and info.get("record"):
        try:
            mark_record(int(info["results_fd"]), str(info["record"]), str(info.get("host")),
                        gone)
        except Exception:  # noqa: BLE001 - nobody to tell; `show` still calls it abandoned
            return 1
    return 0


def _line(fd: int) -> bytes:
    """The first line on the pipe, read unbuffered (what follows is read by select)."""
    got = b""
    while not got.endswith(b"\n") and len(got) < (1 << 16):
        chunk = os.read(fd, 1)
        if not chunk:
            break
        got += chunk
    return got


def main() -> int:
    os.chdir("/")  # holds no folder of the run's (an unmount must not wait on it)
    pipe = sys.stdin.buffer
    line = _line(pipe.fileno())
    try:
        info = json.loads(line)
        return keep(info, pipe)
    except (ValueError, RecursionError, KeyError, TypeError):  # not what a leader sends
        return 2


if __name__ == "__main__":
    sys.exit(main())
