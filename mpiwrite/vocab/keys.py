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

from mpiwrite.units import RATE_UNITS, format_size
from mpiwrite.vocab import defaults
from mpiwrite.vocab.offsets import PATTERNS

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
    value is part of another key's (no key of its own).  A key that is a run option is
    declared in that option's entry (OPTIONS, `runkey`), with its spelling, type, default
    and help."""
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
    # how much was measured (bytes, time, repetitions): not a difference between the
    # systems or settings of two groups of runs (answers/differences.py)
    amount: bool = False


MAX_COUNT = 10**9  # the largest count an option takes (iterations, fsync every N blocks)


def _opt(kind: str, **attributes) -> Key:
    """The run key an option is (named by its option: OPTIONS)."""
    return Key("", kind, OPTION, **attributes)


# --- The run's options ------------------------------------------------------------------
# Each entry is an option's whole spec: its parameter name (the RunConfig field it sets,
# where `field`), its flags, its kind, its default as a user writes it, its help, and the run
# key it is (`runkey`; the key table below takes it from here).  From this table
# cli/runcmd.py makes the click options; run/options.py parses a value as the command line
# would (a study's points, the ranks that take rank 0's options); run/config.py makes
# RunConfig's fields and maps the parsed options onto them; `option_name` names the option of
# a setting in messages.  An engine's option names its engine (`engine=` in its key): the
# other engines refuse it, and the engine's stream gets it by name (engines/base.py).

class Opt(NamedTuple):
    name: str  # the parameter's name
    flags: Tuple[str, ...]  # as click takes them: ("-b", "--block-size"), ("--fsync/--no-fsync",)
    kind: str  # size, duration, int, choice, flag (--x), switch (--x/--no-x), text, texts
    default: Any = None  # as a user writes it (click shows it so), or None
    help: str = ""
    choices: Tuple[str, ...] = ()
    metavar: str = ""
    envvar: str = ""
    field: bool = True  # a RunConfig field of its name, set one to one (run/config.py)
    # the run key this option is, when it is one (the key's name is the option's; Key)
    runkey: Optional[Key] = None
    # the RunConfig field's value when the option is not given and has no default (--size:
    # the default size unless --time; --sysroot: /)
    unset: Any = None
    most: Optional[int] = None  # a count's largest value (run/config.build refuses more)

    @property
    def long(self) -> str:
        """--block-size, --fsync (the first long flag, without a /--no- part)."""
        return [f for f in self.flags if f.startswith("--")][0].split("/")[0]

    @property
    def secondary(self) -> str:
        """--no-fsync for --fsync/--no-fsync, else ''."""
        first = [f for f in self.flags if f.startswith("--")][0]
        return first.split("/", 1)[1] if "/" in first else ""

    @property
    def key(self) -> str:
        """The study file's key for it: the long name with `_` for `-` (time, block_size)."""
        return self.long[2:].replace("-", "_")

    @property
    def shown(self) -> str:
        """The option as click names it in an error: '-b' / '--block-size'."""
        words = [w for f in self.flags for w in f.split("/")][:2] if self.kind != "switch" \
            else [self.long]
        return " / ".join(f"'{w}'" for w in words)


def _seconds(value: float) -> str:
    return f"{value:g}s" if value else "0"


D = defaults
# the engines and presets are named where they live (engines/, cli/presets.py); their
# choices are filled in by `choices_of` when asked, so that this table imports neither
OPTIONS: Tuple[Opt, ...] = (
    Opt("layout", ("--layout",), "choice", "fpp",
        "fpp: a file per rank; shared: one file, a contiguous segment per rank (N-to-1).",
        choices=("fpp", "shared"),
        runkey=_opt(DURABILITY, stated=True, file_decides=True,
                    value=lambda p, i: p.get("layout"))),
    Opt("block_size", ("-b", "--block-size"), "size", format_size(D.BLOCK),
        "Bytes per write call. Sizes: k, M, G and KiB, MiB, GiB are binary (1M = 2^20 bytes); "
        "kB, MB, GB are decimal (1MB = 10^6 bytes, unlike fio).",
        runkey=_opt(DURABILITY, stated=True, file_decides=True, unit=SIZE,
                    value=lambda p, i: format_size(p.get("block_size", 0)))),
    Opt("size", ("-s", "--size"), "size", None,
        f"Bytes per rank [default: {format_size(D.SIZE)} unless --time or --count is given].",
        runkey=_opt(SETTING, file_decides=True, value=_size, unit=SIZE, amount=True),
        unset=D.SIZE),
    Opt("count", ("--count",), "int", None, "Blocks per rank (instead of --size).",
        field=False),  # run/config.build makes --size of it
    Opt("time_limit", ("-t", "--time"), "duration", None,
        "Stop writing after this long, counting only completed writes (lmdd time=): 60, 60s, "
        "5min, 1h. A bare 'm' is refused (IOR's -t 1m is a transfer size).",
        runkey=_opt(SETTING, file_decides=True, unit=DURATION, amount=True,
                    value=lambda p, i: p.get("time_limit"))),
    Opt("fsync", ("--fsync/--no-fsync",), "switch", D.FSYNC,
        "fsync after the last write, inside the timed interval (lmdd fsync=1).",
        runkey=_opt(DURABILITY, stated=True, file_decides=True, value=lambda p, i: (
            f"every {p['fsync_every']}" if p.get("fsync_every") else _on(p.get("fsync"))))),
    Opt("fsync_every", ("--fsync-every",), "int", D.FSYNC_EVERY,
        "Also fsync after every N blocks.",
        runkey=_opt(SETTING, file_decides=True, part_of="fsync"), most=MAX_COUNT),
    Opt("direct", ("--direct",), "flag", False, "O_DIRECT with an aligned buffer.",
        runkey=_opt(DURABILITY, stated=True, file_decides=True,
                    value=lambda p, i: _on(p.get("direct")))),
    Opt("iterations", ("-i", "--iterations"), "int", D.ITERATIONS, "Repetitions.",
        runkey=_opt(SETTING, file_decides=True, unit=COUNT, amount=True),
        most=MAX_COUNT),
    Opt("delay", ("--delay",), "duration", _seconds(D.DELAY), "Pause between iterations."),
    Opt("keep", ("--keep",), "flag", False, "Keep the data files (default: remove them)."),
    Opt("results", ("--results",), "text", D.RESULTS, "Folder for the HDF5 records.",
        field=False),
    Opt("no_record", ("--no-record",), "flag", False, "Do not write an HDF5 record.",
        field=False),
    Opt("json_path", ("--json",), "text", None,
        "Write a JSON summary to PATH, or '-' for stdout (then the table goes to stderr)."),
    Opt("tags", ("--tag",), "texts", None, "KEY=VALUE stored with the run (repeatable).",
        field=False),
    Opt("tag_file", ("--tag-file",), "text", None,
        "File of KEY=VALUE lines (# comments; spaces around KEY and VALUE are dropped).",
        field=False),
    Opt("sample_interval", ("--sample-interval",), "duration", _seconds(D.SAMPLE_INTERVAL),
        "How often each rank records its bytes written so far."),
    Opt("progress_interval", ("--progress-interval",), "duration",
        _seconds(D.PROGRESS_INTERVAL), "How often rank 0 prints progress (0: never)."),
    Opt("timeout", ("--timeout",), "duration", None,
        "End the run if a rank has not finished its writes after this long [default: 3 x "
        "(--time + --ramp), at least 60s, when --time is given, else none; 0: none]."),
    Opt("stall", ("--stall",), "duration", None,
        "Name a rank whose bytes have not grown for this long, with what it waits on "
        "[default: 3 progress intervals; 0: never]."),
    Opt("live", ("--live/--no-live",), "switch", None,
        "A live table, one row per node, redrawn each progress interval [default: on a "
        "terminal; else one line per interval].", field=False),
    Opt("live_jsonl", ("--live-jsonl",), "text", None,
        "Also stream the progress as one JSON object a progress interval, for dashboards, "
        "to this new file or - (standard output; the console's lines go to standard "
        "error): the time, bytes, rates, ranks done and stalled, and each node's.",
        metavar="PATH"),
    Opt("netcheck", ("--netcheck/--no-netcheck",), "switch", None,
        "Before the first iteration, measure each node's network ceiling: the node leaders "
        "exchange MPI messages for 0.3 s in each of at most three pairings, and each node's "
        "fastest receive is recorded and shown beside its write rate [default: on with more "
        "than one node, "
        "off in a study's points unless its [run] asks]."),
    Opt("files_per_dir", ("--files-per-dir",), "int", D.FILES_PER_DIR,
        "Spread file-per-rank files over subdirectories of at most N files.", most=MAX_COUNT),
    Opt("verify", ("--verify",), "flag", False,
        "Read every block back and check it (timed separately)."),
    Opt("verify_shift", ("--verify-shift",), "int", 0,
        "Verify the data of the rank N positions away (defeats the client cache).",
        most=MAX_COUNT),
    Opt("read", ("--read",), "flag", False,
        "After writing, every rank reads (and with --verify checks) a file another rank "
        "wrote, timed like the writes."),
    Opt("read_shift", ("--read-shift",), "int", None,
        "Read the file of the rank N positions away [default: the ranks per node, so no "
        "client reads what its own cache holds]."),
    Opt("drop_cache", ("--drop-cache",), "flag", False,
        "Before reading, drop the written pages from this node's page cache "
        "(posix_fadvise DONTNEED; not a server's cache)."),
    Opt("sysroot", ("--sysroot",), "text", None,
        "Read /proc and /sys under this folder (tests, modelling).",
        envvar="MPIWRITE_SYSROOT",
        unset="/"),
    Opt("engine", ("--engine",), "choice", "posix",
        "posix: write()/pwrite() and fsync(); mpiio: MPI_File_write_at(_all) and "
        "MPI_File_sync; null: no I/O at all (tests of the coordination).", choices=("*engines",),
        runkey=_opt(DURABILITY, stated=True, file_decides=True,
                    value=lambda p, i: p.get("engine", "posix"))),
    Opt("pattern", ("--pattern",), "choice", PATTERNS[0],
        "Where each block goes: sequential; strided: the ranks' blocks interleaved in one "
        "shared file (IOR -s with -t = -b); random: the rank's own blocks in a seeded random "
        "order, each once (IOR -z).", choices=tuple(PATTERNS),
        runkey=_opt(DURABILITY, value=lambda p, i: str(p.get("pattern") or "sequential"))),
    Opt("seed", ("--seed",), "int", 0,
        "The order of --pattern random (recorded; the same seed writes the same offsets).",
        runkey=_opt(SETTING, value=lambda p, i: p.get("seed", 0)
                    if p.get("pattern") == "random" else ABSENT)),
    Opt("collective", ("--collective/--independent",), "switch", None,
        "MPI-IO: MPI_File_write_at_all or MPI_File_write_at [default: independent with "
        "--engine mpiio].",
        runkey=_opt(DURABILITY, engine="mpiio", value=lambda p, i: ABSENT
            if p.get("collective") is None else p["collective"]
            if isinstance(p["collective"], str) else _on(p["collective"]))),
    Opt("mpiio_hints", ("--mpiio-hint",), "texts", None,
        "An MPI_Info hint for MPI_File_open, e.g. romio_cb_write=enable, cb_nodes=2, "
        "striping_factor=4 (repeatable; the hints in force are recorded).",
        metavar="KEY=VALUE", field=False,
        runkey=_opt(SETTING, engine="mpiio", value=lambda p, i: ABSENT
            if p.get("collective") is None else _hints(p))),
    Opt("ramp", ("--ramp",), "duration", None,
        "Write this long before the rates count (fio's ramp_time): each rank's bytes and time "
        "up to its ramp's end are left out of the rates, and with --time the run writes "
        "--time more after it; with fsync, an fsync ends the ramp, so what counts after it "
        "is what was written after it (the record keeps the whole run's rate too).",
        # a figure after a ramp counts another part of the run than one without: never
        # pooled with it (report, compare, explain: as the durability settings)
        runkey=_opt(DURABILITY, engine="posix", when_used=True, unit=DURATION)),
    Opt("steady", ("--steady",), "text", None,
        "Say whether and when each iteration's aggregate rate became steady, by fio's "
        "criteria: bw_slope:PCT[:DUR] (the slope of the rates over a DUR window, in percent "
        "of their mean a second) or bw:PCT[:DUR] (every rate of the window within PCT of "
        "their mean); DUR 10s if not given. Recorded per iteration and shown beside its "
        "figure; the rates are the samples' (--sample-interval).", metavar="CRITERION"),
    Opt("stonewall", ("--stonewall",), "duration", None,
        "IO500's stonewall with wear-out: every rank stops issuing writes after this long, "
        "then the ranks that wrote less go on until they have written as much as the most "
        "productive one (IOR -D with stoneWallingWearOut=1).",
        runkey=_opt(SETTING, when_used=True, unit=DURATION)),
    Opt("preset", ("--preset",), "choice", None,
        "IO500's write phases: the options it stands for are printed and recorded; each can "
        "still be given (ior-easy-write: file per rank, 2MiB, stonewall 300s; ior-hard-write: "
        "shared strided 47008-byte blocks, stonewall 300s).", choices=("*presets",),
        field=False,
        runkey=_opt(LABEL, when_used=True)),
    Opt("stripe_count", ("--stripe-count",), "int", None, "Lustre: OSTs per file (-1 all).",
        metavar="N"),
    Opt("stripe_size", ("--stripe-size",), "text", None,
        "Lustre: stripe size, a multiple of 64KiB (e.g. 1M, 4MiB).", metavar="S"),
    Opt("ost_index", ("--ost-index",), "int", None, "Lustre: first OST of each file (-1 any).",
        metavar="I"),
    Opt("allow_fill", ("--allow-fill",), "flag", False,
        "Write even when the planned bytes exceed the target filesystem's free space "
        "(checked before any data is written)."),
    Opt("units", ("--units",), "choice", "MB",
        "Rates on screen in MB/s (10^6 B/s, lmdd's) or MiB/s (2^20 B/s, IOR's); records and "
        "JSON stay in MB/s.", choices=tuple(RATE_UNITS), field=False),
    Opt("ior_summary", ("--ior-summary",), "flag", False,
        "Also print IOR's summary line, 'Max Write: X MiB/sec (Y MB/sec)' (the best "
        "iteration, open time included as IOR counts it), for IOR parsers.", field=False),
)


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
    # the run options that are keys, in the options' order (OPTIONS: `runkey`)
    *(o.runkey._replace(name=o.name) for o in OPTIONS if o.runkey is not None),
    # fio's access pattern (imported fio runs have them): a random or mixed job, or one
    # with a queue depth, is not a sequential single-stream write
    Key("rw", DURABILITY, IMPORT, file_decides=True, builtin=False),
    Key("rwmixread", DURABILITY, IMPORT, file_decides=True, builtin=False),
    Key("iodepth", DURABILITY, IMPORT, file_decides=True, builtin=False),
    Key("ioengine", DURABILITY, IMPORT, file_decides=True, builtin=False),
    Key("nodes", SETTING, DERIVED, file_decides=True, unit=COUNT),
    Key("ranks", SETTING, DERIVED, file_decides=True, unit=COUNT),
    Key("ranks_per_node", SETTING, DERIVED, file_decides=True, unit=COUNT),
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
