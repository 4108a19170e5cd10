"""A worker of records/sandbox.py: reads records as it is asked, answers in JSON.

Run as `python -m mpiwrite.records.worker`: one JSON request a line on stdin ({"op":
"runlevel"|"whole", "path": ...}), one JSON answer a line on stdout.  No core files; the
address space bounded; SIGINT left to the parent (its end is ours: stdin closes).  The one
caller of the HDF5 read (h5._read, runlevel._read_material): tests/cli/test_house.py.
"""

from __future__ import annotations

import json
import signal
import sys
from typing import Any, Dict

from mpiwrite.records import sandbox
from mpiwrite.records.sandbox import MEMORY_BYTES, b64


def _serve_one(op: str, path: str) -> Dict[str, Any]:
    from mpiwrite.formats.runkeys import run_keys
    from mpiwrite.records import h5, runlevel, runrows

    if op == "whole":
        rec = h5._read(path)
        return {"ok": True, "ident": list(getattr(rec, "identity", ()) or ()),
                "record": sandbox.pack_record(rec)}
    # the whole record read and checked, as `show` reads it, from the one image read: a record
    # that cannot be read whole is not a good run anywhere (a bit-flipped table the run-level
    # part does not read once made `report` count a run that `show` refused)
    material, ident = runlevel._read_material(path, whole=True)
    if material is None:  # too large for an image: read whole here, sent whole
        rec = h5._read(path, expect=ident)
        return {"ok": True, "whole": True, "ident": list(ident),
                "record": sandbox.pack_record(rec)}
    rec = runlevel.build(path, material, ident)  # every value checked here
    doc = runrows.doc_of(rec)
    text = sandbox.json_text(doc)  # None: it does not read back exactly, so not kept
    keys = sandbox.json_text(run_keys(rec))  # derived here, where the cores are
    return {"ok": True, "ident": list(ident), "doc": text or json.dumps(doc),
            "keep": text is not None, "keys": keys, "its": b64(rec.iterations.tobytes()),
            "stats": b64(rec.rank_stats.tobytes())}


def preload() -> None:
    """What a worker needs, loaded in the command before it forks workers (records/sandbox.py):
    loaded once there, not in each of them.  Nothing here reads a record."""
    import h5py  # noqa: F401

    from mpiwrite import host  # noqa: F401
    from mpiwrite.formats import runkeys  # noqa: F401
    from mpiwrite.records import h5, runlevel, runrows  # noqa: F401


def serve() -> None:
    """A worker's loop: one JSON request a line in, one JSON answer a line out."""
    import resource

    requests, answers = sys.stdin.buffer, sys.stdout.buffer

    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a crash here leaves no core file
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides; its end ends us
    import h5py  # noqa: F401 - loaded before the address space is bounded

    from mpiwrite.errors import RecordError
    from mpiwrite.formats import runkeys  # noqa: F401
    from mpiwrite.records import h5, runlevel  # noqa: F401

    try:
        from mpiwrite.host import address_space

        held = address_space()
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        want = held + MEMORY_BYTES
        if held and (hard == resource.RLIM_INFINITY or want < hard):  # 0: not known
            resource.setrlimit(resource.RLIMIT_AS, (want, hard))
    except (OSError, ValueError):
        pass

    for line in requests:
        req = json.loads(line)
        path = str(req.get("path"))
        try:
            out = _serve_one(str(req.get("op")), path)
        except RecordError as exc:
            out = {"ok": False, "error": str(exc)}
        except Exception as exc:  # noqa: BLE001 - named as the reading process would
            out = {"ok": False, "error": f"{path}: unusable record ({type(exc).__name__}: "
                                         f"{exc})"}
        answers.write((json.dumps(out) + "\n").encode())
        answers.flush()


if __name__ == "__main__":
    serve()
