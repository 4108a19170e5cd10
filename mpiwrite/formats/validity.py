"""Whether a run's figures can be taken as a measurement, and the two hashes a third party
re-derives (`mpiwrite verify RECORD`): docs/record-schema.md, "Validity and hashes".

- `assess(rec)`: a verdict with its reasons, as IO500 marks a phase invalid (a run that did
  not complete or was left unsettled, an error counted, a rank that wrote nothing, a stonewall
  shorter than asked, a phase shorter than its stonewall).  An IO500 preset's run is also
  judged by IO500's own rule (a 300 s stonewall), apart: a shorter one is a valid mpiwrite
  measurement that IO500 would not take.
- `config_hash(rec)`: the run keys that decide a figure (settings, durability, node facts
  and tags; not the run's name, hosts, labels or outcomes), as canonical JSON.  Two runs of
  the same settings on nodes with the same facts have the same config hash.
- `result_hash(rec)`: the figures: the ranks', iterations' and samples' tables as stored.

Both are `v1:` and a SHA-256; records/h5.image writes them with the verdict, and a record
whose figures or settings were changed after mpiwrite wrote it no longer matches them.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Dict, List, Optional

import numpy as np

from mpiwrite.formats import summary
from mpiwrite.formats.runkeys import run_keys
from mpiwrite.formats.summary import ITER_DTYPE, RANK_DTYPE, SAMPLE_DTYPE
from mpiwrite.vocab import keys as keytable
from mpiwrite.vocab.presets import PRESETS
from mpiwrite.vocab.status import RunStatus, Status

VERSION = "v2"  # of the hashes: v2 covers the whole record, by the names in `hash_covers`
IO500_STONEWALL = 300.0  # seconds: IO500's rule for its ior-easy and ior-hard phases
NAMED = 3  # ranks named in one reason, then "and N more"
MAX_REASONS = 20  # reasons a verdict holds, the last "and N more reasons" beyond
# a rank that stopped this much before the stonewall ran out of data, not into the stonewall
STONEWALL_SLACK = 0.01
DECIDES = (keytable.SETTING, keytable.DURABILITY, keytable.FACT)
NO_DATA_ENGINES = ("null",)  # engines that write nothing by design (coordination tests)


def _ranks(numbers: List[int]) -> str:
    shown = ", ".join(str(r) for r in numbers[:NAMED])
    return shown + (f" and {len(numbers) - NAMED} more" if len(numbers) > NAMED else "")


def _stonewall_reasons(rec, asked: float) -> List[str]:
    out = []
    for fig in rec._json("stonewall", None) or []:
        if not isinstance(fig, dict):
            continue
        it = fig.get("iteration", "?")
        when = [w for w in fig.get("seconds_at_stonewall") or [] if isinstance(w, (int, float))
                and w == w]
        early = [r for r, w in enumerate(fig.get("seconds_at_stonewall") or [])
                 if isinstance(w, (int, float)) and w == w and w < asked * (1 - STONEWALL_SLACK)]
        if early:
            out.append(f"stonewall shorter than asked: rank(s) {_ranks(early)} had written all "
                       f"their data at {min(when):.3g}s of the {asked:g}s stonewall in "
                       f"iteration {it} (give more --size or --count)")
        ended = [e for e in fig.get("write_seconds") or [] if isinstance(e, (int, float))
                 and e == e]
        if ended and max(ended) < asked * (1 - STONEWALL_SLACK):
            out.append(f"phase shorter than the stonewall: iteration {it}'s writes took "
                       f"{max(ended):.3g}s of the {asked:g}s stonewall")
    return out


def assess(rec) -> Dict[str, Any]:
    """{"valid": bool, "reasons": [...]} and, for an IO500 preset's run, "io500": {"valid",
    "reasons"}.  Pure: from the record's attributes and tables only."""
    reasons: List[str] = []
    status = str(rec.status)
    if status == RunStatus.UNSETTLED:
        reasons.append("unsettled: a setting was not in force on every node, or a client "
                       "fact changed during a timed phase")
    elif status != RunStatus.COMPLETE:
        reasons.append(f"the run did not complete ({status})")
    params = rec.params()
    imported = bool(rec.imported())
    if rec.errors:
        reasons.append(f"{len(rec.errors)} error(s) counted")
    ranks = rec.ranks
    if not imported and len(ranks):
        failed = ranks[(ranks["status"] != int(Status.OK)) | (ranks["errno"] != 0)]
        if len(failed) and not rec.errors:
            reasons.append(f"{len(failed)} rank row(s) failed or counted an error")
        if str(params.get("engine", "posix")) not in NO_DATA_ENGINES:
            ok = ranks[ranks["status"] == int(Status.OK)]
            for it in sorted(set(int(i) for i in ok["iteration"])):
                none = sorted(int(r) for r in ok["rank"][(ok["iteration"] == it)
                                                          & (ok["bytes"] <= 0)])
                if none:
                    reasons.append(f"rank(s) {_ranks(none)} wrote nothing in iteration {it}")
    ramp = params.get("ramp")
    if isinstance(ramp, (int, float)) and ramp > 0 and not imported and len(ranks):
        ok = ranks[ranks["status"] == int(Status.OK)]
        ramp_done = summary.ramped(ok)
        short = ok[~ramp_done]
        for it in sorted(set(int(i) for i in short["iteration"])):
            names = sorted(int(r) for r in short["rank"][short["iteration"] == it])
            reasons.append(f"rank(s) {_ranks(names)} ended before the {ramp:g}s ramp in "
                           f"iteration {it}: their rates are the whole run's (give more "
                           "--size or --time)")
        after = ok[ramp_done & (ok["bytes"] - ok["ramp_bytes"] <= 0)]
        for it in sorted(set(int(i) for i in after["iteration"])):
            names = sorted(int(r) for r in after["rank"][after["iteration"] == it])
            reasons.append(f"rank(s) {_ranks(names)} wrote nothing after the {ramp:g}s ramp "
                           f"in iteration {it} (its end came with the last write: give more "
                           "--size or --time)")
    asked = params.get("stonewall")
    if isinstance(asked, (int, float)) and asked > 0 and not imported:
        reasons.extend(_stonewall_reasons(rec, float(asked)))
    if len(reasons) > MAX_REASONS:  # the record keeps them all the same way (stored)
        reasons = reasons[:MAX_REASONS - 1] + [f"and {len(reasons) - MAX_REASONS + 1} more "
                                               "reasons"]
    out: Dict[str, Any] = {"valid": not reasons, "reasons": reasons}
    preset = params.get("preset")
    if preset in PRESETS:
        io500 = [] if not reasons else ["not valid as an mpiwrite run"]
        if not (isinstance(asked, (int, float)) and asked >= IO500_STONEWALL):
            io500.append(f"IO500 asks a {IO500_STONEWALL:g}s stonewall of {preset}; this "
                         f"run's was {asked:g}s" if isinstance(asked, (int, float))
                         else f"IO500 asks a {IO500_STONEWALL:g}s stonewall of {preset}")
        out["io500"] = {"valid": not io500, "reasons": io500}
    return out


def _digest(data: bytes) -> str:
    return f"{VERSION}:{hashlib.sha256(data).hexdigest()}"


def _plain(value: Any) -> Any:
    """A value as canonical JSON takes it (numpy scalars and arrays unboxed, bytes decoded)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return _plain(value.tolist())
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, bytes):
        return value.decode("utf-8", "surrogateescape")
    return value


def _canonical(value: Any) -> bytes:
    return json.dumps(_plain(value), sort_keys=True, separators=(",", ":"), ensure_ascii=True,
                      allow_nan=True).encode("ascii")


def decided_keys(rec, names: Optional[List[str]] = None) -> Dict[str, str]:
    """The run keys a config hash covers: what decides a figure, as text; with `names`,
    those (a record says which it hashed: a key added later is no change)."""
    keys = run_keys(rec)
    if names is not None:
        return {k: str(keys.get(k, "(absent)")) for k in sorted(names)}
    return {k: str(v) for k, v in sorted(keys.items())
            if keytable.kind(k) in DECIDES and not keytable.volatile(k) and k != "host"}


def config_hash(rec, names: Optional[List[str]] = None) -> str:
    return _digest(_canonical(decided_keys(rec, names)))


# What the v1 hashes of records written before the ramp's fields covered (formats/summary)
_V1_LATER = {"ranks": ("ramp_bytes", "t_ramp"), "iterations": ("ramp_bytes", "whole_MB_per_s")}
TABLES = (("ranks", RANK_DTYPE), ("iterations", ITER_DTYPE), ("samples", SAMPLE_DTYPE))
# the record's lists of objects, as the reader gives them
LISTS = ("nodes", "errors", "client_counters", "layouts", "latency")
# attributes no hash covers: the stamp itself
STAMP = ("validity", "config_hash", "result_hash", "hash_covers")


def covers(rec) -> Dict[str, Any]:
    """What the hashes of a record written now cover: every attribute but the stamp, every
    field of its tables, its lists, its node clocks; the config hash's key names."""
    return {"version": VERSION,
            "attrs": sorted(k for k in rec.attrs if k not in STAMP),
            **{name: list(dtype.names) for name, dtype in TABLES},
            "lists": list(LISTS), "config_keys": sorted(decided_keys(rec))}


def result_hash(rec, cover: Dict[str, Any]) -> str:
    """The record's contents (what `cover` names) as one SHA-256."""
    h = hashlib.sha256()
    for name in cover["attrs"]:
        h.update(b"attr:" + name.encode("utf-8", "surrogateescape") + b"=")
        h.update(_canonical(rec.attrs.get(name)) if name in rec.attrs else b"(absent)")
    for name, _dtype in TABLES:
        table = np.asarray(getattr(rec, name))
        for field in cover[name]:
            h.update(f"{name}.{field}:".encode("ascii", "replace"))
            if field in (table.dtype.names or ()):
                col = np.ascontiguousarray(table[field])
                h.update(col.astype(col.dtype.newbyteorder("<"), copy=False).tobytes())
            else:
                h.update(b"(absent)")
    for name in cover["lists"]:
        h.update(f"list:{name}=".encode("ascii", "replace") + _canonical(getattr(rec, name, None)))
    clocks = getattr(rec, "node_clock", None)
    h.update(b"node_clock=" + (np.ascontiguousarray(clocks, dtype="<f8").tobytes()
                               if clocks is not None else b"(none)"))
    return f"{VERSION}:{h.hexdigest()}"


def _v1_result_hashes(rec) -> List[str]:
    """The result hash as records written before `hash_covers` have it: the three tables in
    their layout of then (before the ramp's fields, or with them: both were written)."""
    return [_v1_result_hash(rec, _V1_LATER), _v1_result_hash(rec, {})]


def _v1_result_hash(rec, leave_out: Dict[str, tuple]) -> str:
    h = hashlib.sha256()
    for name, dtype in TABLES:
        later = leave_out.get(name, ())
        then = np.dtype([(f, dtype[f]) for f in dtype.names if f not in later])
        table = np.asarray(getattr(rec, name))
        data = np.zeros(len(table), dtype=then)
        for f in then.names:
            data[f] = table[f]
        data = data.tobytes()
        h.update(f"{name}:{len(data)}:".encode("ascii"))
        h.update(data)
    return f"v1:{h.hexdigest()}"


def stamp(rec) -> Dict[str, Any]:
    """The attributes records/h5.image writes, derived from the record as a reader sees it:
    the verdict, what the hashes cover, and both hashes."""
    cover = covers(rec)
    return {"validity": assess(rec), "hash_covers": cover,
            "config_hash": config_hash(rec, cover["config_keys"]),
            "result_hash": result_hash(rec, cover)}


def stored(rec) -> Dict[str, Any]:
    """The verdict the record holds, checked (an attribute is untrusted): {} for a record
    without one (written before validity, or not by mpiwrite) or one of the wrong shape."""
    got = rec._json("validity", None)
    if not isinstance(got, dict) or not isinstance(got.get("valid"), bool) \
            or not isinstance(got.get("reasons"), list) \
            or not all(isinstance(r, str) for r in got["reasons"]):
        return {}
    out: Dict[str, Any] = {"valid": got["valid"], "reasons": [r[:1000] for r in
                                                              got["reasons"][:50]]}
    io500 = got.get("io500")
    if isinstance(io500, dict) and isinstance(io500.get("valid"), bool) \
            and isinstance(io500.get("reasons"), list):
        out["io500"] = {"valid": io500["valid"],
                        "reasons": [str(r)[:1000] for r in io500["reasons"][:50]]}
    return out


def is_valid(rec) -> bool:
    """What report and compare count by: the verdict the record holds (records without
    one: valid unless their status says otherwise, which select() asks on its own)."""
    return stored(rec).get("valid", True)


def _short(h: str) -> str:
    return h[:19] + "..." if len(h) > 22 else h


def _cover_of(rec) -> Optional[Dict[str, Any]]:
    """The record's `hash_covers`, checked (an attribute is untrusted): None if absent or of
    the wrong shape."""
    got = rec._json("hash_covers", None)
    if not isinstance(got, dict) or got.get("version") != VERSION:
        return None
    out: Dict[str, Any] = {"version": VERSION}
    for name in ("attrs", "lists", "config_keys") + tuple(t for t, _d in TABLES):
        names = got.get(name)
        if not isinstance(names, list) or len(names) > 4096 or not all(
                isinstance(n, str) and len(n) <= 256 for n in names):
            return None
        out[name] = names
    return out


def rederive(rec) -> List[str]:
    """What does not match in a record read whole: its hashes and verdict derived again from
    its contents against what it holds ([]: it is as mpiwrite wrote it)."""
    held_config = rec.attrs.get("config_hash")
    held_result = rec.attrs.get("result_hash")
    if not held_config and not held_result:
        return ["no hashes: written by mpiwrite "
                f"{rec.attrs.get('mpiwrite_version') or '(unknown version)'} before records "
                "carried them, or not by mpiwrite; it cannot be verified"]
    out = []
    if str(held_result).startswith("v1:"):  # the first records with hashes (2026-12-06)
        both = _v1_result_hashes(rec)
        got_result = held_result if held_result in both else both[0]
        got_config = _v1_config_hash(rec)
        what = "the ranks', iterations' or samples' tables"
    else:
        cover = _cover_of(rec)
        if cover is None:
            return [f"the record's hash_covers is missing or damaged, so its hashes cannot be "
                    f"derived again: changed after mpiwrite wrote it (hashes "
                    f"{_short(str(held_result))})"]
        got_result = result_hash(rec, cover)
        got_config = config_hash(rec, cover["config_keys"])
        what = "its figures, settings, facts, tags or notes"
    if held_result != got_result:
        out.append(f"result hash differs: {what} were changed after mpiwrite wrote it "
                   f"(recorded {_short(str(held_result))}, derived {_short(got_result)})")
    if held_config != got_config:
        out.append(f"config hash differs: the settings, node facts or tags were changed "
                   f"after mpiwrite wrote them (recorded {_short(str(held_config))}, derived "
                   f"{_short(got_config)})")
    held, now = stored(rec), assess(rec)
    if (held.get("valid"), held.get("reasons"), held.get("io500")) != (
            now["valid"], now["reasons"], now.get("io500")):
        out.append("validity differs: the record says "
                   + describe(held) + "; its contents give " + describe(now))
    return out


def _v1_config_hash(rec) -> str:
    text = json.dumps(decided_keys(rec), sort_keys=True, separators=(",", ":"),
                      ensure_ascii=True)
    return f"v1:{hashlib.sha256(text.encode('ascii')).hexdigest()}"


def describe(verdict: Dict[str, Any]) -> str:
    """'valid', 'not valid: reason; reason', or 'no verdict'."""
    if "valid" not in verdict:
        return "no verdict"
    text = "valid" if verdict["valid"] else "not valid: " + "; ".join(verdict["reasons"])
    if isinstance(verdict.get("io500"), dict) and "valid" in verdict["io500"]:
        text += "; IO500: " + describe(verdict["io500"])
    return text
