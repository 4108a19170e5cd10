"""The one way mpiwrite runs an external command (docs/architecture.md, "Commands").

Every command that is not mpiwrite itself (node facts, `lfs`, a study's `set` and `get`,
`squeue`, `sbatch`, the MPI probe) goes through `run_bounded`:

- bounded in time: the command runs in a session (process group) of its own, and on time-out
  the whole group is killed, so a shell's children go with it;
- bounded in output: at most `output_cap` bytes of each stream are kept; a command that goes
  on printing past the cap is ended at once (a `get` that never stops printing would grow the
  rank's memory at GB/s), and the outcome says it overflowed;
- not held by a child: once the command itself has exited, a child that keeps its output open
  (`sh -c 'sleep 200 & cat value'`) is given `HELD_GRACE` seconds, then the group is killed
  and the command's own answer stands;
- never reading the terminal: stdin is /dev/null unless input is given;
- never outliving its job where asked: `stop` (a callable, looked at every 0.1 s) ends the
  group when it turns true (a signal to the rank), and `with_parent` makes the kernel kill
  the command when this process dies (PR_SET_PDEATHSIG, set by a small exec wrapper: a
  rank killed by MPI_Abort or SIGKILL takes its forward `set` with it; docs/failures.md).

Pure standard library and imported only where a command runs: a rank's start-up loads none
of it (docs/scaling.md).
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import time
from typing import Callable, List, Mapping, NamedTuple, Optional, Sequence, Tuple

OUTPUT_CAP = 64 * 1024  # bytes kept of each stream unless the caller asks otherwise
HELD_GRACE = 0.5  # seconds a child may keep the pipes open after the command exited
CHUNK = 65536


class Outcome(NamedTuple):
    argv: List[str]
    code: Optional[int]  # exit status; -N for signal N; None when it did not end by itself
    out: bytes  # at most the cap
    err: bytes  # at most the cap (empty when stderr was merged into out)
    timed_out: bool = False
    overflowed: bool = False  # printed more than the cap: ended, its output cut
    missing: bool = False  # the program could not be started (not found, not executable)
    error: str = ""  # why it could not be started
    stopped: bool = False  # ended because `stop` turned true (the caller's job is ending)

    @property
    def ok(self) -> bool:
        return self.code == 0 and not (self.timed_out or self.overflowed or self.missing)

    def text(self, stream: str = "out") -> str:
        return (self.out if stream == "out" else self.err).decode("utf-8", "replace")

    def why(self, timeout: float, cap: int = OUTPUT_CAP) -> str:
        """One short reason why the command did not answer cleanly ('' when it did)."""
        if self.missing:
            return self.error or "command not found"
        if self.timed_out:
            return f"no answer within {timeout:g} s"
        if self.overflowed:
            return f"printed more than {cap} bytes; ended"
        if self.stopped:
            return "ended: the job it belongs to is ending"
        if self.code is None:
            return "did not end"
        if self.code < 0:
            return f"killed by {signal_name(-self.code)}"
        if self.code:
            return f"exit {self.code}"
        return ""


def signal_name(signum: int) -> str:
    """SIGSEGV for 11: how a process that a signal ended is named ("signal N" if unknown)."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def run_bounded(argv: Sequence[str], timeout: float, output_cap: int = OUTPUT_CAP,
                input: Optional[bytes] = None, merge_stderr: bool = False,
                env: Optional[Mapping[str, str]] = None,
                held_grace: float = HELD_GRACE, stop: Optional[Callable[[], bool]] = None,
                with_parent: bool = False) -> Outcome:
    """Run `argv` (no shell) within `timeout` seconds and `output_cap` bytes a stream;
    ended early when `stop()` turns true, and with this process when `with_parent`."""
    words = [str(w) for w in argv]
    launch = ([sys.executable, "-I", "-S", "-c", _WITH_PARENT, str(os.getpid())] + words
              if with_parent else words)
    try:
        proc = subprocess.Popen(
            launch, stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE,
            start_new_session=True, env=None if env is None else dict(env))
    except FileNotFoundError:
        return Outcome(words, None, b"", b"", missing=True, error="command not found")
    except OSError as exc:
        return Outcome(words, None, b"", b"", missing=True,
                       error=exc.strerror or type(exc).__name__)
    if input is not None:
        try:
            proc.stdin.write(input)
        except (BrokenPipeError, OSError):
            pass
        finally:
            try:
                proc.stdin.close()
            except OSError:
                pass
    got = {proc.stdout: bytearray()}
    if not merge_stderr:
        got[proc.stderr] = bytearray()
    sel = selectors.DefaultSelector()
    for stream in got:
        os.set_blocking(stream.fileno(), False)
        sel.register(stream, selectors.EVENT_READ)
    end = time.monotonic() + timeout
    exited_at: Optional[float] = None
    timed_out = overflowed = stopped = False
    try:
        while sel.get_map():
            now = time.monotonic()
            if now >= end:
                timed_out = True
                break
            if stop is not None and exited_at is None and stop():
                stopped = True
                break
            if exited_at is None and proc.poll() is not None:
                exited_at = now
            if exited_at is not None and now - exited_at >= held_grace:
                break  # a child holds the pipes: the command's own answer stands
            wait = min(end - now, 0.1 if exited_at is None else held_grace)
            for key, _ in sel.select(max(wait, 0.0)):
                try:
                    data = os.read(key.fileobj.fileno(), CHUNK)
                except BlockingIOError:
                    continue
                if not data:
                    sel.unregister(key.fileobj)
                    continue
                buf = got[key.fileobj]
                room = output_cap - len(buf)
                if len(data) > room:
                    buf += data[:max(room, 0)]
                    overflowed = True
                else:
                    buf += data
            if overflowed:
                break
    except BaseException:  # an interrupt of ours: the command does not outlive it
        sel.close()
        _kill_group(proc)
        proc.wait()
        raise
    held = bool(sel.get_map())  # pipes still open: the command or a child of it
    sel.close()
    if timed_out or overflowed or held or stopped:
        _kill_group(proc)  # the command's session: its children go with it
    try:  # a command that closed its output and goes on is still bounded by `timeout`
        code: Optional[int] = proc.wait(timeout=max(end - time.monotonic(), 0.01))
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill_group(proc)
        proc.wait()
    for stream in got:
        stream.close()
    if timed_out or stopped:
        code = None
    out = bytes(got[proc.stdout])
    err = b"" if merge_stderr else bytes(got[proc.stderr])
    if with_parent and code in (126, 127) and err.startswith(_CANNOT):
        return Outcome(words, None, b"", b"", missing=True,
                       error=err[len(_CANNOT):].decode("utf-8", "replace").strip())
    return Outcome(words, code, out, err, timed_out=timed_out, overflowed=overflowed,
                   stopped=stopped)


_CANNOT = b"mpiwrite-exec: "
# The exec wrapper of `with_parent`: SIGKILL when the parent dies (Linux's prctl; elsewhere
# the command runs as it would have), nothing if the parent is already gone, then the command
# itself in its place.  Why it could not be started goes back marked (run_bounded's `missing`).
_WITH_PARENT = """
import os, sys
try:
    import ctypes
    ctypes.CDLL(None, use_errno=True).prctl(1, 9, 0, 0, 0)
except (AttributeError, OSError, ImportError):
    pass
if os.getppid() != int(sys.argv[1]):
    os._exit(137)
try:
    os.execvp(sys.argv[2], sys.argv[2:])
except FileNotFoundError:
    sys.stderr.write("mpiwrite-exec: command not found")
    os._exit(127)
except OSError as exc:
    sys.stderr.write("mpiwrite-exec: " + (exc.strerror or type(exc).__name__))
    os._exit(126)
"""


_KEPT: List[subprocess.Popen] = []  # helpers started here: held, so none is reaped unseen


def start_helper(argv: Sequence[str], pass_fds: Sequence[int] = (),
                 env: Optional[Mapping[str, str]] = None
                 ) -> Optional[Tuple[int, subprocess.Popen]]:
    """Start a helper that must outlive this process (a node's keeper, run/keeper.py): in a
    session of its own (a kill of the launcher's process group does not reach it), its output
    to /dev/null, its stdin the read end of a pipe.  Returns the pipe's write end (this
    process alone holds it, close-on-exec: when this process dies the helper reads its end)
    and the process, or None when it could not be started.  It runs in / (it holds no folder
    by its path, and no module there shadows a real one)."""
    r, w = os.pipe()
    os.set_inheritable(w, False)
    try:
        proc = subprocess.Popen(list(argv), stdin=r, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True,
                                close_fds=True, pass_fds=tuple(pass_fds), cwd="/",
                                env=None if env is None else dict(env))
    except (OSError, ValueError):
        os.close(w)
        return None
    finally:
        os.close(r)
    _KEPT.append(proc)
    return w, proc
