"""IOR's command line as import reads it: what it says about the test (flags and values) where
the output does not say it (import_ior.py, docs/import.md)."""

from __future__ import annotations

import shlex
from typing import Any, Dict

# IOR's short options that take a value (the others are flags).
_VALUED = set("abdDfGiIjJlMNoOQsStTUXx")
_FLAGS = {"w": "write", "r": "read", "F": "fpp", "e": "fsync", "Y": "fsyncperwrite",
          "C": "reorder", "B": "direct", "c": "collective", "z": "random"}


def command_flags(command: str) -> Dict[str, Any]:
    """What an IOR command line says about the test: flags (write, read, fpp, fsync,
    fsyncperwrite, direct, ...) and values (block, transfer, segments, reps, api, tasks,
    testfile, rank_csv: -O saveRankPerformanceDetailsCSV=FILE).  Unparsable parts are left out."""
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    out: Dict[str, Any] = {}
    i = 1 if words and not words[0].startswith("-") else 0
    while i < len(words):
        w = words[i]
        i += 1
        if w.startswith("--"):
            name, _eq, value = w[2:].partition("=")
            if name in ("posix.odirect", "posix.direct"):
                out["direct"] = True
            elif name in ("blockSize", "transferSize", "segmentCount", "repetitions"):
                value = value or (words[i] if i < len(words) else "")
                i += 0 if _eq else 1
                out[{"blockSize": "block", "transferSize": "transfer",
                     "segmentCount": "segments", "repetitions": "reps"}[name]] = value
            continue
        if not w.startswith("-") or len(w) < 2:
            continue
        letters = w[1:]
        for j, c in enumerate(letters):
            if c in _VALUED:
                value = letters[j + 1:] or (words[i] if i < len(words) else "")
                if not letters[j + 1:]:
                    i += 1
                key = {"a": "api", "b": "block", "t": "transfer", "s": "segments",
                       "i": "reps", "N": "tasks", "o": "testfile", "O": "O",
                       "D": "stonewall"}.get(c)
                if key == "O":
                    for opt in value.split(","):
                        k, _e, v = opt.partition("=")
                        if k.strip() in ("useO_DIRECT", "posix.odirect") and v.strip() in ("", "1"):
                            out["direct"] = True
                        elif k.strip().lower() == "saverankperformancedetailscsv" and v.strip():
                            out["rank_csv"] = v.strip()  # IOR compares option names without case
                elif key:
                    out[key] = value
                break
            if c in _FLAGS:
                out[_FLAGS[c]] = True
    return out
