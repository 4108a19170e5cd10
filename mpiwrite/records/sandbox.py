"""The HDF5 library run on untrusted records only in child processes (docs/security.md).

A crafted or bit-flipped record can make libhdf5 crash (SIGSEGV, glibc's heap checks) inside
attribute or table reads: in the reading process that would take every good record of a
report down with it.  So a record that is not served from the index is first read in a
worker: a long-lived child process (as many as cores, at most MAX_WORKERS) that reads
records as it is asked and answers with plain JSON, never pickle:

  `runlevel`  the record's run-level material (runlevel._extract), which the parent checks
              again (runlevel.build) as it checks a row of the index: the child is not trusted
  `whole`     the record read whole and checked (h5._read), sent pickled (record_of):
              libhdf5 never runs on a record in the parent (the one exception to "never
              pickle": the child is this program, docs/security.md)

A worker that dies on a record (a signal, or any end without an answer), or that gives no
answer for HANG_SECONDS (libhdf5 loops forever on some damaged records), is ended and started
again for the records that remain; the record is tried once more in a fresh worker (so a
worker killed from outside does not condemn a record), then called bad: "the HDF5 library
crashed reading it" or "did not finish reading it".  Workers write no core files, their
stderr (HDF5's and glibc's messages) is dropped, and their address space is bounded
(MEMORY_BYTES more than they hold after start-up: a record's declared sizes are bounded
before anything is allocated, this is the backstop).

A worker is forked from the command where that is safe (one thread, no MPI loaded, no HDF5
file open in it): the command loads the HDF5 library and the readers once (it never runs them
on a record itself), and each worker starts without an interpreter and its imports of its
own (about half a second of CPU each, most of a small `report`'s cost).  Elsewhere (a
program with threads, such as a notebook; an MPI rank) a worker is a fresh interpreter
(`python -m mpiwrite.records.worker`), as before.  Either way it answers the same requests.
"""

from __future__ import annotations

import atexit
import base64
import importlib
import json
import os
import selectors
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from typing import Any, Deque, Dict, Iterator, List, Optional, Tuple

MAX_WORKERS = 4
AHEAD = 16  # requests sent to a worker before its answers come back
ATTEMPTS = 2
HANG_SECONDS = 60.0  # a worker that answers nothing for this long is ended
HANG_ENV = "MPIWRITE_RECORD_HANG_SECONDS"  # a site's (or a test's) own limit instead
WORKER = "mpiwrite.records.worker"  # the worker's program (run by name, never imported here)
MEMORY_BYTES = 3 * 2**31  # three tables of the largest size recordcheck lets through


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def hang_seconds() -> float:
    """HANG_SECONDS, or the environment's MPIWRITE_RECORD_HANG_SECONDS (0.1 to 86400 s);
    ConfigError (one line, exit 2) for anything else."""
    text = os.environ.get(HANG_ENV)
    if text is None:
        return HANG_SECONDS
    from mpiwrite.errors import ConfigError
    from mpiwrite.text import printable

    try:
        value = float(text) if len(text) <= 32 else float("nan")
    except ValueError:
        value = float("nan")
    if not 0.1 <= value <= 86400:  # NaN fails too
        raise ConfigError(f"{HANG_ENV}={printable(text[:40])!s}: not a number of seconds "
                          "from 0.1 to 86400")
    return value


def crashed(path: str, code: int, hung: bool = False, seconds: Optional[float] = None) -> str:
    if hung:
        return (f"{path}: the HDF5 library did not finish reading it in "
                f"{HANG_SECONDS if seconds is None else seconds:g} s; not read")
    from mpiwrite.procs import signal_name

    how = signal_name(-code) if code < 0 else f"exit status {code}"
    return f"{path}: the HDF5 library crashed reading it ({how}); not read"


def _forkable() -> bool:
    """Whether a worker may be forked from this process: it can fork, runs one thread (a
    fork copies only the caller's: another's locks would be held for ever in the child), has
    no MPI loaded (a rank's network and shared memory are not the child's to copy) and holds
    no HDF5 file open (the child's library would share its state)."""
    if not hasattr(os, "fork") or threading.active_count() != 1 or "mpi4py.MPI" in sys.modules:
        return False
    try:  # the threads of C libraries too (numpy's BLAS with more than one)
        if len(os.listdir("/proc/self/task")) != 1:
            return False
    except OSError:
        pass  # no /proc: Python's own count it is
    h5f = sys.modules.get("h5py.h5f")
    try:
        return h5f is None or int(h5f.get_obj_count(h5f.OBJ_ALL, h5f.OBJ_FILE)) == 0
    except Exception:  # noqa: BLE001 - an h5py that cannot say: a fresh interpreter then
        return False


def _die_with(parent: int) -> None:
    """This worker ends when the command does, however it ends (SIGKILL too): Linux's
    parent-death signal, then a check that the parent had not already gone."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass  # not Linux: its end is still seen on its pipe
    if os.getppid() != parent:
        os._exit(1)


class _Forked:
    """A worker forked from this command, with the part of subprocess.Popen's surface that
    _Worker uses (stdin, stdout, kill, wait)."""

    def __init__(self) -> None:
        # the worker is a program this module runs by its name, forked or spawned (`-m`),
        # never a module it imports: the worker imports this one and the readers, which
        # import this one (the house holds the import graph free of cycles)
        worker = importlib.import_module(WORKER)
        worker.preload()  # once here, not in every worker
        down_r, down_w = os.pipe()  # requests: command -> worker
        up_r, up_w = os.pipe()  # answers: worker -> command
        parent = os.getpid()
        try:
            pid = os.fork()
        except OSError:  # no process to be had (EAGAIN, ENOMEM): the caller spawns instead
            for fd in (down_r, down_w, up_r, up_w):
                os.close(fd)
            raise
        if pid == 0:  # the worker: never returns into the command's code
            code = 1
            try:
                _die_with(parent)  # a command killed for good takes its workers along
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                signal.signal(signal.SIGHUP, signal.SIG_DFL)
                null = os.open(os.devnull, os.O_WRONLY)
                os.dup2(down_r, 0)
                os.dup2(up_w, 1)
                os.dup2(null, 2)
                # none of the command's files: another worker's pipes held open here would
                # keep it from ever seeing its end
                os.closerange(3, max(3, os.sysconf("SC_OPEN_MAX")))
                # the command's own streams (what it has buffered) are never flushed from
                # here: held until os._exit, fresh ones on the worker's pipes in their place
                _held = (sys.stdin, sys.stdout, sys.stderr)
                sys.stdin, sys.stdout, sys.stderr = (
                    open(fd, mode, closefd=False) for fd, mode in ((0, "r"), (1, "w"),
                                                                   (2, "w")))
                worker.serve()  # its program's loop, as `python -m` runs it
                code = 0
            except BaseException:  # noqa: BLE001 - its end is its answer
                pass
            finally:
                os._exit(code)  # no atexit, no flush of the command's buffers
        os.close(down_r)
        os.close(up_w)
        self.pid = pid
        self.returncode: Optional[int] = None
        self.stdin = open(down_w, "wb")
        self.stdout = open(up_r, "rb", buffering=0)

    def kill(self) -> None:
        if self.returncode is None:
            try:
                os.kill(self.pid, signal.SIGKILL)  # our own child, by its pid
            except ProcessLookupError:
                pass

    def wait(self, timeout: Optional[float] = None) -> int:
        end = None if timeout is None else time.monotonic() + timeout
        while self.returncode is None:
            pid, status = os.waitpid(self.pid, 0 if end is None else os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
            elif time.monotonic() >= end:
                raise subprocess.TimeoutExpired(f"record worker {self.pid}", timeout)
            else:
                time.sleep(0.01)
        return self.returncode


class _Worker:
    def __init__(self) -> None:
        if _forkable():
            try:
                self._started(_Forked())
                return
            except OSError:
                pass  # a fork refused: a fresh interpreter, which says why if it fails too
        import mpiwrite

        env = dict(os.environ)
        top = os.path.dirname(os.path.dirname(os.path.abspath(mpiwrite.__file__)))
        env["PYTHONPATH"] = os.pathsep.join(p for p in (top, env.get("PYTHONPATH")) if p)
        try:
            self.proc = subprocess.Popen([sys.executable, "-m", WORKER],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.DEVNULL, env=env, close_fds=True)
        except OSError as exc:
            from mpiwrite.errors import RunError

            raise RunError(f"cannot start a process to read records in ({sys.executable}: "
                           f"{exc.strerror or exc})") from None
        self._started(self.proc)

    def _started(self, proc) -> None:
        self.proc = proc
        self.fd = self.proc.stdout.fileno()
        self.buf = b""
        self.sent: Deque[int] = deque()  # job numbers whose answers are awaited, in order
        self.since = time.monotonic()  # of its last answer, or of a request to an idle one
        self.hung = False

    def send(self, n: int, op: str, path: str) -> bool:
        try:
            self.proc.stdin.write((json.dumps({"op": op, "path": path}) + "\n").encode())
            self.proc.stdin.flush()
        except OSError:  # it died: its end is seen on its output
            return False
        if not self.sent:
            self.since = time.monotonic()
        self.sent.append(n)
        return True

    def lines(self) -> Optional[List[bytes]]:
        """The complete answers read now; None at the worker's end."""
        data = os.read(self.fd, 1 << 20)
        if not data:
            return None
        self.buf += data
        *done, self.buf = self.buf.split(b"\n")
        if done:
            self.since = time.monotonic()
        return done

    def end(self) -> int:
        if self.hung:
            self.proc.kill()  # our own child, by its pid
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                f.close()
            except OSError:
                pass
        try:
            return self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()  # our own child, by its pid
            return self.proc.wait()


class Pool:
    """Workers started on first use, kept for the process (closed at exit)."""

    def __init__(self, size: Optional[int] = None):
        self.size = size or min(_cores(), MAX_WORKERS)
        self.hang = hang_seconds()
        self.workers: List[_Worker] = []

    def run(self, jobs: List[Tuple[str, str]]) -> List[Dict[str, Any]]:
        """The answers to (op, path) jobs, in order: {"ok": True, ...} or {"ok": False,
        "error": message naming the file}."""
        return list(self.imap(jobs))

    def imap(self, jobs: List[Tuple[str, str]]) -> Iterator[Dict[str, Any]]:
        """The answers, in order, each as soon as it and those before it are in: the caller
        works on one while the workers read the next ones."""
        out: List[Optional[Dict[str, Any]]] = [None] * len(jobs)
        todo: Deque[int] = deque(range(len(jobs)))
        tries = [0] * len(jobs)
        want = min(self.size, len(jobs))
        while len(self.workers) < want:
            self.workers.append(_Worker())
        sel = selectors.DefaultSelector()
        done = 0
        try:
            for w in self.workers:
                sel.register(w.fd, selectors.EVENT_READ, w)
            while done < len(jobs):
                for w in list(self.workers):
                    while todo and len(w.sent) < AHEAD:
                        n = todo.popleft()
                        if not w.send(n, *jobs[n]):
                            todo.appendleft(n)
                            break
                if out[done] is not None:
                    got, out[done] = out[done], None
                    done += 1
                    yield got  # type: ignore[misc]
                    continue
                now = time.monotonic()
                for w in self.workers:
                    if w.sent and now - w.since > self.hang and not w.hung:
                        w.hung = True
                        w.proc.kill()  # our own child, by its pid: its end is read below
                for key, _ev in sel.select(timeout=1.0):
                    w = key.data
                    lines = w.lines()
                    if lines is None:
                        sel.unregister(w.fd)
                        self._died(w, jobs, out, todo, tries)
                        if todo or any(x.sent for x in self.workers if x is not w):
                            fresh = _Worker()
                            self.workers.append(fresh)
                            sel.register(fresh.fd, selectors.EVENT_READ, fresh)
                        continue
                    for line in lines:
                        n = w.sent.popleft()
                        out[n] = _answer(line, jobs[n][1])
        finally:
            sel.close()
            for w in [w for w in self.workers if w.sent]:  # left mid-way: its answers are
                w.hung = True  # of no one now: ended at once, not waited for (a stuck read)
                w.end()
                self.workers.remove(w)

    def _died(self, w: _Worker, jobs, out, todo, tries) -> None:
        code = w.end()
        self.workers.remove(w)
        if not w.sent:
            return
        first = w.sent.popleft()
        tries[first] += 1
        if tries[first] >= ATTEMPTS or w.hung:  # a hang is not tried again: 60 s each
            out[first] = {"ok": False, "error": crashed(jobs[first][1], code, w.hung,
                                                          self.hang)}
        else:
            w.sent.appendleft(first)
        todo.extendleft(reversed(w.sent))  # the others were not read: again, in order

    def close(self) -> None:
        for w in self.workers:
            w.end()
        self.workers = []


def _answer(line: bytes, path: str) -> Dict[str, Any]:
    try:
        got = json.loads(line)
        if isinstance(got, dict) and isinstance(got.get("ok"), bool):
            return got
    except ValueError:
        pass
    return {"ok": False, "error": f"{path}: the record reader gave no answer"}


def json_text(value: Any) -> Optional[str]:
    """JSON text of value if it reads back as the very value (types kept, NaN equal), else
    None (a tuple, a dict key that is not text).  What reads back exactly is known from the
    types alone (dicts with text keys, lists, text, numbers, None), so the text is not
    parsed again (a cold report asks this of every record's part and keys)."""
    try:
        text = json.dumps(value)  # a cycle or a depth beyond Python's: no text
    except (TypeError, ValueError, RecursionError):
        return None
    return text if plain(value) else None


def plain(value: Any) -> bool:
    """Whether value is made of JSON's own types only (dicts with text keys, lists, text,
    numbers, None): what reads back from JSON text as it was."""
    todo = [value]
    while todo:
        v = todo.pop()
        if isinstance(v, dict):
            for k, x in v.items():
                if not isinstance(k, str):
                    return False
                todo.append(x)
        elif isinstance(v, list):
            todo.extend(v)
        elif not (v is None or isinstance(v, (str, int, float))):
            return False
    return True


_POOL: Optional[Pool] = None


def pool() -> Pool:
    global _POOL
    if _POOL is None:
        _POOL = Pool()
        atexit.register(_POOL.close)
    return _POOL


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def unb64(text: Any) -> bytes:
    if not isinstance(text, str):
        raise ValueError("not base64 text")
    return base64.b64decode(text.encode("ascii"), validate=True)


def read_whole(path: str):
    """The record at `path` as a worker read and checked it whole (h5._read there)."""
    from mpiwrite.errors import RecordError

    got = pool().run([("whole", path)])[0]
    if not got["ok"]:
        raise RecordError(str(got.get("error")))
    return record_of(got, path)


def pack_record(rec) -> str:
    """A worker's whole record for its answer (pickle, base64).  The command never parses
    an untrusted record with libhdf5 itself: a worker that survived a damaged record does
    not show that libhdf5 would in the command (a bit-flipped record read cleanly in a
    worker and then aborted `show` in the command, depending on the checkout's path)."""
    import pickle

    return b64(pickle.dumps(rec, protocol=pickle.HIGHEST_PROTOCOL))


def record_of(got: Dict[str, Any], path: str):
    """The RunRecord in a worker's answer (pack_record).  The worker is this program's own
    child, of the same user: its pickle is trusted as the program is (docs/security.md)."""
    import pickle

    from mpiwrite.errors import RecordError
    from mpiwrite.records.model import RunRecord

    ident = _ident(got)
    try:
        rec = pickle.loads(unb64(got["record"]))
    except (KeyError, ValueError, TypeError, pickle.UnpicklingError, EOFError) as exc:
        raise RecordError(f"{path}: the record reader's answer is not usable ({exc})") \
            from None
    if not isinstance(rec, RunRecord):
        raise RecordError(f"{path}: the record reader's answer is not a record")
    rec.path, rec.identity = path, ident  # the file the worker read, as it answered
    return rec


def _ident(got: Dict[str, Any]) -> Tuple[int, ...]:
    ident = got.get("ident")
    if not (isinstance(ident, list) and len(ident) == 5
            and all(type(x) is int for x in ident)):
        raise ValueError("no file identity in the answer")
    return tuple(ident)
