"""fio's `--output-format=json` (and `json+`) as imported tests (docs/import.md).

One test per fio group (`groupid`): the jobs of a group ran together, like the ranks of one
run, so the group is one run with a rank per job (`numjobs` of a `group_reporting` entry).
Its figure is fio's group aggregate: the bytes of all its jobs over the longest job's runtime,
as fio's own "Run status group" line computes it; per-job figures are kept in `original`.  Write
and read go to the write and read columns.  fio runs each job once: one iteration.
"""

from __future__ import annotations

from typing import Any, Dict, List

from mpiwrite.formats.numbers import (
    BYTES,
    COUNT,
    EPOCH,
    INDEX,
    MS,
    RANKS,
    Kind,
    number,
    obj,
    parse_json,
    shown,
)
from mpiwrite.importers.base import (
    UNKNOWN,
    Importer,
    Phase,
    Source,
    Test,
    iso_utc,
    refuse,
    size_text,
)
from mpiwrite.text import printable
from mpiwrite.units import MB, format_size

# fio options that decide durability, in the order they are named
_FSYNC_EVERY = ("fsync", "fdatasync")
_FSYNC_END = ("end_fsync", "fsync_on_close")


def _doc(src: Source) -> Dict[str, Any]:
    text = src.text
    start = text.find("{")
    if start < 0:
        raise refuse(src.path, "no JSON object: not fio's JSON output")
    before = text[:start].strip().splitlines()
    failed = [ln for ln in before if "error" in ln.lower()]
    if failed:
        raise refuse(src.path, f"fio reported {printable(failed[0][:120])!r} before its JSON: "
                     "nothing imported")
    if before:  # fio's notes on stderr when both went to one file
        src.repairs.append(f"ignored {len(text[:start].strip().splitlines())} line(s) printed "
                           "before fio's JSON ("
                           f"{text[:start].strip().splitlines()[0][:100]!r})")
    body = text[start:]
    try:
        doc, end = parse_json(body, src.path, raw=True)
    except ValueError as exc:
        raise refuse(src.path, f"not valid JSON ({str(exc)[:80]}): cut short, or not fio's "
                     "JSON output") from None
    if body[end:].strip():
        raise refuse(src.path, "text after fio's JSON (several outputs in one file?); import "
                     "each output from its own file")
    if not isinstance(doc, dict) or "fio version" not in doc or not isinstance(
            doc.get("jobs"), list):
        raise refuse(src.path, "JSON without fio's `fio version` and `jobs`: not fio's output")
    return doc


def _num(d: Dict[str, Any], key: str, kind: Kind, path: str, where: str):
    """d[key] checked as a number of `kind` (formats/numbers.py), the refusal naming it."""
    return number(d.get(key), kind, path, f"{where}: {key}")


def _options(doc: Dict[str, Any], job: Dict[str, Any], path: str,
             where: str) -> Dict[str, str]:
    opts = dict(obj(doc.get("global options"), path, "global options", {}))
    opts.update(obj(job.get("job options"), path, f"{where}: job options", {}))
    return {str(k): str(v) for k, v in opts.items()}


def _whole(opts: Dict[str, str], name: str, kind: Kind, path: str, where: str):
    """An option fio prints as digits (numjobs=2, fsync=4) as a checked number; None when it
    is not digits (fio's `fsync=true` and the like are read as flags)."""
    text = opts.get(name, "").strip()
    return number(text, kind, path, f"{where}: option {name}") if text.isdigit() else None


def _on(opts: Dict[str, str], name: str) -> bool:
    return opts.get(name, "0").strip().lower() not in ("0", "false", "no", "off", "")


def _durability(test: Test, opts: Dict[str, str], path: str) -> None:
    p = test.params
    every = next((n for n in (_whole(opts, k, COUNT, path, test.label) for k in _FSYNC_EVERY)
                  if n), None)
    end = any(_on(opts, k) for k in _FSYNC_END)
    p["fsync"] = bool(every or end)
    if every:
        p["fsync_every"] = int(every)
    p["direct"] = _on(opts, "direct")
    how = [k for k in _FSYNC_EVERY + _FSYNC_END + ("direct", "sync") if k in opts]
    test.derived["params.fsync"] = ("from the job options " + ", ".join(how) if how else
                                    "fio's default: no fsync, no O_DIRECT")
    if _on(opts, "sync"):
        test.notes.append("sync=1: every write was O_SYNC")


# fio's access pattern as run keys (report's durability keys: a random or mixed job is never
# pooled with a sequential write), with fio's defaults where the job does not say
_MIXED = ("rw", "readwrite", "randrw", "trimwrite", "randtrimwrite")
# fio's own values of rw (fio's HOWTO: readwrite=str), each optionally ":N" (an offset step)
_RW = ("read", "write", "trim", "randread", "randwrite", "randtrim", "rw", "readwrite",
       "randrw", "trimwrite", "randtrimwrite")
# the options whose difference makes two jobs different measurements
_SAME_IN_GROUP = ("rw", "readwrite", "bs", "blocksize", "iodepth", "ioengine", "direct",
                  "fsync", "fdatasync", "end_fsync", "fsync_on_close", "sync", "rwmixread",
                  "rwmixwrite")


def _check_pattern(opts: Dict[str, str], path: str, where: str) -> None:
    """rw, iodepth and rwmixread/rwmixwrite as fio itself takes them; refused otherwise."""
    for name in ("rw", "readwrite"):
        text = opts.get(name)
        if text is not None:
            mode, _sep, step = text.strip().partition(":")
            if mode not in _RW or (step and not (step.isascii() and step.isdigit())):
                raise refuse(path, f"{where}: option {name}={shown(text, 40)} is not one of "
                             f"fio's ({', '.join(_RW)}, each optionally :N)")
    text = opts.get("iodepth")
    if text is not None and not (text.isascii() and text.isdigit() and 0 < int(text) < 2**31):
        raise refuse(path, f"{where}: option iodepth={shown(text, 40)} is not a positive "
                     "whole number")
    for name in ("rwmixread", "rwmixwrite"):
        text = opts.get(name)
        if text is not None and not (text.isascii() and text.isdigit() and int(text) <= 100):
            raise refuse(path, f"{where}: option {name}={shown(text, 40)} is not a percentage "
                         "0 to 100")


def _pattern(test: Test, opts: Dict[str, str], path: str, did: str = "read") -> Dict[str, str]:
    """`did`: the direction the job's figures show, for a job that names no rw (fio's default
    is read, but a job whose options were not printed may have written)."""
    def said(name: str, default: str) -> str:
        return printable((opts.get(name) or default).strip()[:64])

    _check_pattern(opts, path, test.label)
    rw = said("rw", opts.get("readwrite") or did)
    mixed = rw.split(":")[0] in _MIXED
    write_share = _whole(opts, "rwmixwrite", COUNT, path, test.label)
    if not mixed:
        mix = "n/a"
    elif opts.get("rwmixread") or write_share is None or write_share > 100:
        mix = said("rwmixread", "50")
    else:
        mix = str(100 - write_share)
    keys = {"rw": rw, "rwmixread": mix, "iodepth": said("iodepth", "1"),
            "ioengine": said("ioengine", "psync")}
    given = [k for k in ("rw", "rwmixread", "iodepth", "ioengine") if opts.get(k)]
    test.derived["keys.rw, rwmixread, iodepth, ioengine"] = (
        "from the job options " + ", ".join(given) + "; " if given else "") + (
        "without rw, what the job did (write, read, or rw when both had bytes); fio's "
        "defaults otherwise (rwmixread=50 for a mixed job, n/a for others, iodepth=1, "
        "ioengine=psync)")
    if mixed:
        test.notes.append(f"rw={rw} rwmixread={mix}: a mixed job; its writes and reads ran "
                          "together, each column holds one direction's bytes over its runtime")
    return keys


def _kb_base(opts: Dict[str, str]) -> int:
    return 1000 if opts.get("kb_base") == "1000" else 1024


def parse(src: Source, command: str = "") -> List[Test]:
    doc = _doc(src)
    version = str(doc.get("fio version", ""))
    stamp = doc.get("timestamp")
    groups: Dict[int, List[Dict[str, Any]]] = {}
    for i, job in enumerate(doc["jobs"]):
        if not isinstance(job, dict):
            raise refuse(src.path, f"jobs[{i}] is not a job")
        err = job.get("error")
        if err:
            raise refuse(src.path, f"fio job {shown(job.get('jobname'), 60)} ended with "
                         f"error {shown(err)}: nothing imported")
        gid = number(job.get("groupid", 0), INDEX, src.path, f"jobs[{i}]: groupid")
        groups.setdefault(gid, []).append(job)
    if not groups:
        raise refuse(src.path, "fio's JSON lists no job")
    out = []
    for index, (gid, jobs) in enumerate(sorted(groups.items())):
        names = sorted({str(j.get("jobname")) for j in jobs})
        label = f"group {gid} (job {', '.join(names)[:60]})"
        opts = _options(doc, jobs[0], src.path, label)
        for other in jobs[1:]:  # one entry is one measurement: jobs that differ are refused
            theirs = _options(doc, other, src.path, label)
            differ = [k for k in _SAME_IN_GROUP if theirs.get(k) != opts.get(k)]
            if differ:
                raise refuse(src.path, f"{label}: its jobs differ in {', '.join(differ)} "
                             "(one group is one measurement): run them in groups of their "
                             "own (new_group) to import them")
        numjobs = _whole(opts, "numjobs", RANKS, src.path, label) or 1
        # group_reporting (given on the command line it is in no options): one entry for
        # numjobs clones; without it, an entry per clone
        reporting = _on(opts, "group_reporting") or (len(jobs) == 1 and numjobs > 1)
        ranks = numjobs if reporting else len(jobs)
        test = Test(index=index, label=label, tool="fio", tool_version=version, fmt="fio-json",
                    ranks=ranks, nodes=1, command=command,
                    command_source="--command" if command else UNKNOWN)
        if stamp is not None and number(stamp, EPOCH, src.path, "timestamp") > 0:
            longest = max(_num(j, "job_runtime", MS, src.path, label)
                          if j.get("job_runtime") is not None else 0.0 for j in jobs) / 1e3
            test.end_time = iso_utc(stamp)
            test.start_time = iso_utc(stamp - longest)
            test.derived["start_time"] = ("fio's timestamp (when it reported, UTC) less the "
                                          "longest job_runtime")
        phases = {}
        for op in ("write", "read"):
            where = f"{label}: {op}"
            parts = [obj(j.get(op) or None, src.path, where, {"io_bytes": 0, "runtime": 0,
                                                       "total_ios": 0}) for j in jobs]
            nbytes = sum(_num(p, "io_bytes", BYTES, src.path, where) for p in parts)
            if not nbytes:
                continue
            runtime = max(_num(p, "runtime", MS, src.path, where) for p in parts) / 1e3
            if runtime <= 0:
                raise refuse(src.path, f"{where}: {nbytes} bytes in a runtime of 0 ms")
            ios = sum(_num(p, "total_ios", COUNT, src.path, where) for p in parts)
            phases[op] = Phase(bytes=[nbytes], MB_per_s=[nbytes / runtime / MB])
            if ios and op == "write" and nbytes % ios == 0:
                test.params["block_size"] = nbytes // ios
            test.original.append({"operation": op, "jobs": [
                {"jobname": j.get("jobname"), "io_bytes": p.get("io_bytes"),
                 "bw_bytes": p.get("bw_bytes"), "runtime_ms": p.get("runtime"),
                 "iops": p.get("iops"), "total_ios": p.get("total_ios")}
                for j, p in zip(jobs, parts)]})
        test.write, test.read = phases.get("write"), phases.get("read")
        if "block_size" not in test.params and opts.get("bs"):
            try:
                test.params["block_size"] = size_text(opts["bs"].split(",")[0],
                                                      base=_kb_base(opts))
            except ValueError:
                pass
        if test.write and test.params.get("block_size"):
            test.params["size"] = test.write.bytes[0] // max(ranks, 1)
        test.params.update(iterations=1, engine=f"fio {opts.get('ioengine', 'psync')}",
                           target=opts.get("filename") or opts.get("directory") or "")
        test.params["layout"] = "shared" if opts.get("filename") and ranks > 1 else "fpp"
        _durability(test, opts, src.path)
        test.keys = {"fsync": f"every {test.params['fsync_every']}"
                     if test.params.get("fsync_every") else
                     ("on" if test.params["fsync"] else "off"),
                     "direct": "on" if test.params["direct"] else "off",
                     "layout": test.params["layout"], "engine": test.params["engine"],
                     "block_size": format_size(test.params["block_size"])
                     if test.params.get("block_size") else UNKNOWN,
                     **_pattern(test, opts, src.path,
                                "rw" if test.write and test.read else
                                "write" if test.write else "read")}
        test.exact += ["bytes (io_bytes)", "read_bytes", "tool_version"] + \
            ([] if reporting else ["ranks (jobs)"])
        test.exact += [
                       "end_time (fio's timestamp)"]
        test.derived.update({
            "aggregate_MB_per_s": "the group's io_bytes / its longest runtime (fio's group "
                                  "aggregate), in 10^6 B/s; fio's runtime is in ms",
            "params.block_size": "io_bytes / total_ios (else the bs option)",
            "params.layout": "shared when the jobs name one filename, else a file per job",
            "nodes": "1: fio runs its jobs on the host it runs on (client/server mode aside)"})
        if test.read:
            test.derived["read_aggregate_MB_per_s"] = "as the write figure, for reads"
        if reporting:
            test.notes.append("group_reporting: fio summed its jobs into one entry")
            test.derived["ranks"] = "numjobs of the group's one entry (group_reporting)"
        # the node facts: unknown unless stated (importers/base.py adds them)
        test.unknown += ["host"] + ([] if command else ["command_line"])
        out.append(test)
    return out


def detect(text: str) -> bool:
    return '"fio version"' in text[:4096]


IMPORTER = Importer(name="fio", title="fio", detect=detect, parse=parse)
