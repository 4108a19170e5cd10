"""What kind of thing each run key is, written once.

A run's keys (formats/runkeys.py: built-in keys, node facts, tags) are not all settings.  The
answers that look for causes (`explain`'s factors, `compare`'s "also different") read this
table instead of keeping lists of names of their own:

- `setting`: chosen before the run, may change the figure (nodes, fsync, a tuning tag);
- `durability`: a setting that decides what the figure means (report never pools them);
- `fact`: what the nodes were (kernel, client version, checksums); may change the figure;
- `outcome`: what the run measured or what follows from it (bytes written, durations, rates);
  never a cause.  `size` is an outcome in a time-limited run (the bytes are the rate times
  the time) and a setting otherwise: `outcome_keys` decides per run;
- `label`: names a run or a group of runs (run and job ids, a study's point, repeat, hash);
  explains nothing, however the runs are split by it;
- `identity`: a run's own name and state (never listed).

Keys not in the table are settings or facts (tags, dotted node facts), unless their name says
they are labels or outcomes (LABEL_NAMES, OUTCOME_WORDS).
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, Mapping, NamedTuple, Optional, Tuple

from mpiwrite.units import format_size

SETTING, DURABILITY, FACT, OUTCOME, LABEL, IDENTITY = (
    "setting", "durability", "fact", "outcome", "label", "identity")
# where a key's value comes from: a run option; a node fact (flattened from each node's facts
# by the entry's `node`); derived from the record (ids, counts, times, the MPI library); an
# imported record's file only (fio's access pattern); a study's own tags; or only a word
# that tags and other tools' records use (never a key mpiwrite makes)
OPTION, NODE, DERIVED, IMPORT, STUDY, WORD = (
    "option", "node", "derived", "import", "study", "word")
# how a filter value of a key is read (answers/results.matches): bytes (1MB, 1MiB, 4k), seconds
# (200s, 5min), a count; any other key's as text (and on/off words alike)
SIZE, DURATION, COUNT = "size", "duration", "count"


def _lustre(facts: Mapping[str, Any]) -> Mapping[str, Any]:
    lus = facts.get("lustre")
    return lus if isinstance(lus, dict) else {}


def _or(value: Any, missing: str = "unknown") -> str:
    return str(value or missing)


# What a `value` gives for a run that has no such key (an MPI-IO option in a POSIX run).
ABSENT = type("Absent", (), {"__repr__": lambda self: "ABSENT"})()


def _on(flag: Any) -> str:
    return "on" if flag else "off"


def _size(p: Mapping[str, Any], imported: bool) -> str:
    """A time-limited run's bytes are its outcome, not a size it was given (`time`); an
    imported record without a size: unknown."""
    if p.get("size") and not p.get("time_limit") and not p.get("stonewall"):
        return format_size(p["size"])
    return "time" if p.get("time_limit") or p.get("stonewall") or not imported else "unknown"


def _hints(p: Mapping[str, Any]) -> str:
    if isinstance(p.get("mpiio_hints"), str):  # an import that cannot know them: unknown
        return p["mpiio_hints"]
    return ",".join(f"{k}={v}" for k, v in sorted((p.get("mpiio_hints") or {}).items())) \
        or "none"


class Key(NamedTuple):
    """One run key.  `node`: for a node fact, the pure function that flattens one node's
    facts into its value (the record's node column of that name, and the run's key: the
    nodes' common value or `mixed`; formats/nodekeys.summary_value).  `common`: a run key that
    is the nodes' common value (common_keys; explain names these facts first, in this
    order).  `stated`: an imported record states it from the file (formats/runkeys.py
    takes it from the record, not from params).  `file_decides`: an import reads or derives
    it; `import --fact` may not state it.  `builtin`: a key of every run, so a user tag may
    not take its name (run --tag).  `owner`: the client whose setting or fact it is (shown
    with that client: clients/ `own_keys`); `engine`: the engine whose option it is (the
    other engines refuse it: engines/base.Engine.problem); `when_used`: a run option that
    is a key only of the runs that used it (its value as given); `part_of`: an option whose
    value is part of another key's (no key of its own).  An option's spelling,
    type, default and help are its entry in run/options.py."""
    name: str
    kind: str
    source: str
    node: Optional[Callable[[Mapping[str, Any]], str]] = None
    common: bool = False
    stated: bool = False
    file_decides: bool = False
    builtin: bool = True
    owner: str = ""
    when_used: bool = False
    engine: str = ""
    part_of: str = ""  # an option whose value another key carries: fsync's `every N`
    # a run key made from the run's parameters: value(params, imported) -> the key's value,
    # or ABSENT for a run without it (formats/runkeys.run_keys)
    value: Optional[Callable[[Mapping[str, Any], bool], Any]] = None
    unit: str = ""  # SIZE, DURATION or COUNT: how a filter value is read


def _study(name: str, kind: str = LABEL) -> Key:
    return Key(name, kind, STUDY, builtin=False)


def _word(name: str, kind: str) -> Key:
    return Key(name, kind, WORD, builtin=False)


# Every key mpiwrite makes or reads, once.  The node facts come in the order of the
# record's node table (records/h5.py NODE_COLUMNS).
TABLE: Tuple[Key, ...] = (
    Key("run_id", IDENTITY, DERIVED, file_decides=True),
    Key("status", IDENTITY, DERIVED, file_decides=True),
    Key("start_time", IDENTITY, DERIVED, file_decides=True),
    Key("host", FACT, NODE, node=lambda f: _or(f.get("host")), file_decides=True),
    Key("kernel", FACT, NODE, node=lambda f: _or(f.get("kernel")), common=True),
    Key("lustre", FACT, NODE, common=True, owner="lustre", node=lambda f: _or(
        _lustre(f).get("version"), "unknown" if _lustre(f).get("present") else "none")),
    Key("lustre_kernel", FACT, NODE, owner="lustre", node=lambda f: _or(
        _lustre(f).get("kernel"), "unknown" if _lustre(f).get("present") else "n/a")),
    Key("checksums", FACT, NODE, node=lambda f: _or(_lustre(f).get("checksums")), common=True,
        owner="lustre"),
    Key("checksum_type", FACT, NODE, node=lambda f: _or(_lustre(f).get("checksum_type")),
        common=True, owner="lustre"),
    Key("fstype", FACT, NODE, common=True,
        node=lambda f: _or((f.get("fs") if isinstance(f.get("fs"), dict) else {}).get(
            "fstype"))),
    # the client's own words ('nfs 4.2'); facts/nodeinfo.client_of derives it for facts
    # read before the fact existed
    Key("client", FACT, NODE, common=True),
    Key("engine", DURABILITY, OPTION, stated=True, file_decides=True,
        value=lambda p, i: p.get("engine", "posix")),
    Key("fsync", DURABILITY, OPTION, stated=True, file_decides=True, value=lambda p, i: (
        f"every {p['fsync_every']}" if p.get("fsync_every") else _on(p.get("fsync")))),
    Key("direct", DURABILITY, OPTION, stated=True, file_decides=True,
        value=lambda p, i: _on(p.get("direct"))),
    Key("layout", DURABILITY, OPTION, stated=True, file_decides=True,
        value=lambda p, i: p.get("layout")),
    Key("block_size", DURABILITY, OPTION, stated=True, file_decides=True, unit=SIZE,
        value=lambda p, i: format_size(p.get("block_size", 0))),
    # where the blocks go and how MPI-IO writes them: a strided or random write, or a
    # collective one, is not the same measurement as a sequential independent stream
    # (records before patterns: sequential)
    Key("pattern", DURABILITY, OPTION, value=lambda p, i: str(p.get("pattern") or "sequential")),
    # MPI-IO's options: keys of the runs that used MPI-IO only
    Key("collective", DURABILITY, OPTION, engine="mpiio", value=lambda p, i: ABSENT
        if p.get("collective") is None else p["collective"] if isinstance(p["collective"], str)
        else _on(p["collective"])),
    Key("mpiio_hints", SETTING, OPTION, engine="mpiio", value=lambda p, i: ABSENT
        if p.get("collective") is None else _hints(p)),
    Key("seed", SETTING, OPTION, value=lambda p, i: p.get("seed", 0)
        if p.get("pattern") == "random" else ABSENT),
    Key("stonewall", SETTING, OPTION, when_used=True),
    Key("preset", LABEL, OPTION, when_used=True),
    # fio's access pattern (imported fio runs have them): a random or mixed job, or one
    # with a queue depth, is not a sequential single-stream write
    Key("rw", DURABILITY, IMPORT, file_decides=True, builtin=False),
    Key("rwmixread", DURABILITY, IMPORT, file_decides=True, builtin=False),
    Key("iodepth", DURABILITY, IMPORT, file_decides=True, builtin=False),
    Key("ioengine", DURABILITY, IMPORT, file_decides=True, builtin=False),
    Key("nodes", SETTING, DERIVED, file_decides=True, unit=COUNT),
    Key("ranks", SETTING, DERIVED, file_decides=True, unit=COUNT),
    Key("ranks_per_node", SETTING, DERIVED, file_decides=True, unit=COUNT),
    Key("size", SETTING, OPTION, file_decides=True, value=_size, unit=SIZE),
    Key("time_limit", SETTING, OPTION, file_decides=True, unit=DURATION,
        value=lambda p, i: p.get("time_limit")),
    Key("iterations", SETTING, OPTION, file_decides=True, unit=COUNT),
    Key("fsync_every", SETTING, OPTION, file_decides=True, part_of="fsync"),
    Key("mpi", FACT, DERIVED),  # no tool's output names its MPI library: --fact mpi= may
    Key("mpiio", FACT, DERIVED),  # the MPI-IO implementation of an mpiio run: ROMIO or OMPIO
    Key("tool", SETTING, DERIVED, file_decides=True),
    Key("tool_version", FACT, DERIVED, file_decides=True),
    # labels: a study's own tags (study/execute.py)
    *(_study(f"study{part}") for part in ("", "_point", "_repeat", "_hash", "_key",
                                          "_generation", "_order", "_seed", "_seq",
                                          "_prev_key")),
    # what settling before a study's run took and left (study/settle.py): measured
    _study("settle_seconds", OUTCOME), _study("settle_dirty_bytes", OUTCOME),
    # words of tags and other tools' records: ids of jobs and repetitions, what was measured
    *(_word(w, LABEL) for w in ("job", "job_id", "jobid", "slurm_job_id", "SLURM_JOB_ID",
                                "rep", "repeat", "repetition")),
    *(_word(w, OUTCOME) for w in ("bytes", "seconds", "duration", "elapsed", "MB_per_s",
                                  "rate", "bandwidth", "bw")),
)

BY_NAME: Dict[str, Key] = {k.name: k for k in TABLE}
KINDS: Dict[str, str] = {k.name: k.kind for k in TABLE}
# the keys of every run (a tag may not take their names: run/config.py)
BUILTIN: Tuple[str, ...] = tuple(k.name for k in TABLE if k.builtin)
# node facts: the record's node columns, in order; the run keys that are their common value
NODE_COLUMNS: Tuple[str, ...] = tuple(k.name for k in TABLE if k.source == NODE)
COMMON: Tuple[str, ...] = tuple(k.name for k in TABLE if k.common)
# what an imported record states (formats/runkeys.py), what an import decides (not --fact)
STATED: Tuple[str, ...] = tuple(k.name for k in TABLE if k.stated)
FILE_DECIDES: Tuple[str, ...] = tuple(k.name for k in TABLE if k.file_decides)
# the node facts every run has as keys (an import's are unknown unless --fact states them)
FACT_KEYS: Tuple[str, ...] = tuple(k for k in NODE_COLUMNS if not BY_NAME[k].file_decides)
# the node facts a run's header and `show` name whatever the client: what no client owns
SHOWN: Tuple[str, ...] = tuple(k.name for k in TABLE if k.common and not k.owner)
# run options that are keys only of the runs that used them
WHEN_USED: Tuple[str, ...] = tuple(k.name for k in TABLE if k.when_used)

def of_unit(unit: str) -> Tuple[str, ...]:
    """The keys whose filter values are read as `unit` (SIZE, DURATION, COUNT)."""
    return tuple(k.name for k in TABLE if k.unit == unit)


# the run keys made from the run's parameters, in the table's order
FROM_PARAMS: Tuple[Key, ...] = tuple(k for k in TABLE if k.value is not None)


def engine_options(engine: str) -> Tuple[Key, ...]:
    """The options of engines other than `engine` (MPI-IO's collective and hints), which
    `engine` refuses (engines/base.Engine.problem)."""
    return tuple(k for k in TABLE if k.engine and k.engine != engine)


def own_options(engine: str) -> Tuple[Key, ...]:
    """The options `engine` owns (MPI-IO's collective and hints): what its stream is given
    by name (engines/base.StreamPlan.options)."""
    return tuple(k for k in TABLE if k.engine == engine)


def owned(client: str) -> Tuple[str, ...]:
    """The run keys a client owns, in the table's order (its `own_keys`)."""
    return tuple(k.name for k in TABLE if k.owner == client and k.common)


def owners() -> Tuple[str, ...]:
    """Every client that owns keys."""
    return tuple(dict.fromkeys(k.owner for k in TABLE if k.owner))


def node_value(facts: Mapping[str, Any], key: str) -> Optional[str]:
    """A node's value of a node-fact key by its entry's flattening; None for a key whose
    value needs more than the facts (`client` of facts older than the fact); KeyError for a
    key that is no node fact."""
    entry = BY_NAME.get(key)
    if entry is None or entry.source != NODE:
        raise KeyError(key)
    return entry.node(facts) if entry.node else None


# The order in which durability keys are named (report's DURABILITY_KEYS).
DURABILITY_KEYS = tuple(k for k, v in KINDS.items() if v == DURABILITY)

# Any key (a tag, `tag.NAME`) whose last part is one of these words is of that kind.
OUTCOME_WORDS = ("bytes", "seconds", "secs", "duration", "elapsed", "mb_per_s", "mbps",
                 "rate", "bandwidth", "bw", "throughput")


def kind(key: str) -> str:
    """The kind of a run key (the table, then the name's last part: `tag.job` is a label)."""
    if key in KINDS:
        return KINDS[key]
    last = key.rsplit(".", 1)[-1]  # `tag.job`, `slurm.job_id`: the name's last part
    if KINDS.get(last) in (LABEL, OUTCOME):
        return KINDS[last]
    if last.lower() in OUTCOME_WORDS or last.lower().endswith(("_bytes_written", "_seconds")):
        return OUTCOME
    return FACT if "." in key else SETTING


def time_limited(keys: Mapping[str, object]) -> bool:
    """Whether a run ended by a time limit (its bytes are an outcome, not a setting)."""
    limit = keys.get("time_limit")
    return keys.get("size") == "time" or limit not in (None, "", "None", "-", 0, "0")


def outcome_keys(keys: Mapping[str, object]) -> Iterable[str]:
    """The keys of one run that are outcomes there: OUTCOME kinds, and `size` when the run
    was time-limited."""
    out = [k for k in keys if kind(k) == OUTCOME]
    if "size" in keys and time_limited(keys):
        out.append("size")
    return out


# Identifiers a client makes up per mount or process (GlusterFS's graph: process-uuid,
# volfile-checksum, client-version): they differ between any two runs and change no rate.
VOLATILE_ENDINGS = ("uuid", "-checksum", "_checksum", "client-version", "-pid", "_pid",
                    "process-name", "-id", "_id", "graph-id", "mount-time")


def volatile(key: str) -> bool:
    """Whether a key is an identifier that changes from mount to mount (not a setting)."""
    last = key.rsplit(".", 1)[-1].lower()
    return last.endswith(VOLATILE_ENDINGS) or last in ("pid", "uuid", "id")


def relevance(key: str) -> tuple:
    """How a difference between two groups of runs is ranked: settings that decide what a
    rate means first, then other settings and facts, then what is not known to matter,
    volatile identifiers last (a sort key: smaller first)."""
    k = kind(key)
    order = {DURABILITY: 0, SETTING: 1, FACT: 2}.get(k, 4)
    return (3 if volatile(key) else order, key.count("."), key)
