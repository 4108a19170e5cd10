"""The HDF5 library kept apart from records nobody has vetted yet.

libhdf5 trusts the structures of the file it reads: a bit-flipped record made it abort
("corrupted size vs. prev_size", SIGABRT), crash (SIGSEGV) or loop for good, which took
`report --skip-bad` and every good record with it.  No check in Python can come before
libhdf5 parses those structures, and whether a damaged record crashes depends on the state of
the heap (one mutant read alone crashed, read after others it did not, and then corrupted
what came next).  So the run-level part of a record that is not in the index is read in a
child process, which hands back the material (as the index keeps it: JSON text and table
bytes), and this process builds the record from it with the same checks an index row passes
(runlevel.build): the command's own process never parses such a file with libhdf5.  Each
record gets `SECONDS`; a record that kills or stalls the child is named as damaged and a new
child takes the rest.  Cost: one interpreter start per command that reads new records (about
0.3 s), then the reading itself.

`show FILE` has the whole record read in the child (`whole`), and the child's own end watched.
Not covered: other reads of whole tables (per-rank metrics, `verify --record`) happen here,
with libhdf5, after the run-level part read cleanly in the child (docs/security.md).
"""

from __future__ import annotations

import base64
import json
import select
import signal
import subprocess
import sys
from typing import Any, Dict, List, Tuple

SECONDS = 20.0  # one record's read in the child, at most


def _child(whole: bool = False) -> None:
    """For every path on stdin (one JSON string a line) one JSON line: ["ok", doc, its,
    stats, ident] (tables base64), ["bad", RecordError text], or ["self"] (a record too large
    for an image: the parent reads it)."""
    from mpiwrite.errors import RecordError
    from mpiwrite.formats import runlevel

    for line in sys.stdin:
        path = json.loads(line)
        try:
            _rec, material, ident = runlevel.read(path)
            if material is None:
                said: list = ["self"]
            else:
                doc, its, stats = runlevel.encode(material)
                said = ["ok", doc, base64.b64encode(its).decode(),
                        base64.b64encode(stats).decode(), list(ident)]
        except RecordError as exc:
            said = ["bad", str(exc)]
        except Exception as exc:  # noqa: BLE001 - named like any unusable record
            said = ["bad", f"{path}: unusable record ({type(exc).__name__}: {exc})"]
        if whole and said[0] != "bad":  # the whole tables too (show FILE reads them next)
            from mpiwrite.formats import records

            try:
                records.read(path)
            except Exception:  # noqa: BLE001 - the parent names what is wrong
                pass
        sys.stdout.write(json.dumps(said) + "\n")
        sys.stdout.flush()


def _start(whole: bool = False) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", f"from mpiwrite.formats.isolate import _child; _child({whole})"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)


def read_run_levels(paths: List[str], seconds: float = SECONDS,
                    whole: bool = False) -> Dict[str, Tuple[str, Any]]:
    """{path: ("ok", (material, ident)) | ("bad", message) | ("self", None)} for each path,
    read in a child process (see above).  `whole`, for one path: its whole tables are read
    there too, and a child that then dies when it ends (memory corrupted, found at its
    exit) names the record as damaged."""
    import numpy as np

    from mpiwrite.formats import runlevel

    out: Dict[str, Tuple[str, Any]] = {}
    todo = list(paths)
    while todo:
        try:
            proc = _start(whole)
        except OSError:  # no process to spare (ulimit -u): read here, as before
            return out
        done = 0
        try:
            for path in todo:
                try:
                    proc.stdin.write(json.dumps(path) + "\n")
                    proc.stdin.flush()
                except OSError:
                    pass  # it died already: the read below says so
                ready = select.select([proc.stdout], [], [], seconds)[0]
                line = proc.stdout.readline() if ready else ""
                if not line:
                    if proc.poll() is None:
                        proc.kill()  # our own child, by its pid
                    code = proc.wait()
                    how = (f"crashed ({signal.Signals(-code).name})" if ready and code < 0
                           else f"did not finish within {seconds:g}s" if not ready
                           else f"ended its reader (exit {code})")
                    out[path] = ("bad", f"{path}: damaged record: the HDF5 library {how} "
                                        "reading it (in a separate process); not read")
                    break
                said = json.loads(line)
                if said[0] == "ok":
                    material = runlevel.decode(said[1], base64.b64decode(said[2]),
                                               base64.b64decode(said[3]))
                    material["clock"] = np.asarray(material["clock"], dtype=np.float64)
                    out[path] = ("ok", (material, tuple(int(x) for x in said[4])))
                else:
                    out[path] = (said[0], said[1] if len(said) > 1 else None)
                done += 1
        finally:
            if whole and len(paths) == 1 and out.get(paths[0], ("",))[0] != "bad":
                proc.stdin.close()  # the child ends now: its heap is torn down
                try:
                    code = proc.wait(seconds)
                except subprocess.TimeoutExpired:
                    code = 0
                if code < 0:
                    how = f"corrupted memory ({signal.Signals(-code).name} at the end)"
                    out[paths[0]] = ("bad", f"{paths[0]}: damaged record: the HDF5 library "
                                            f"{how} reading it (in a separate process); not read")
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            for stream in (proc.stdin, proc.stdout):
                try:
                    stream.close()
                except OSError:
                    pass
        todo = todo[done + 1:]
    return out
