"""The options of `mpiwrite run`, declared once (docs/architecture.md, "Change recipes").

Each entry is an option's whole spec: its parameter name (the RunConfig field it sets, where
`field`), its flags, its kind, its default as a user writes it, its help.  From this table:

- cli/runcmd.py makes the click options (the same help, defaults and order as before);
- `parse` converts a value as the command line would (no click: a study's points and the
  ranks that take rank 0's options check values with it, cli/ranks.py, study/points.py);
- run/config.from_params maps the parsed options onto RunConfig (the `field` entries one to
  one; the few that combine, such as --tag with --tag-file, by name there);
- `option_name` names the option of a setting in messages.

Pure standard library and the vocabulary: a rank's start-up imports it (docs/scaling.md).
"""

from __future__ import annotations

from typing import Any, Callable, Dict, NamedTuple, Optional, Tuple

from mpiwrite.units import RATE_UNITS, format_size, parse_size, parse_time
from mpiwrite.vocab import defaults
from mpiwrite.vocab.offsets import PATTERNS

ASCII_INT_MOST = 2 ** 62


class Opt(NamedTuple):
    name: str  # the parameter's name
    flags: Tuple[str, ...]  # as click takes them: ("-b", "--block-size"), ("--fsync/--no-fsync",)
    kind: str  # size, duration, int, choice, flag (--x), switch (--x/--no-x), text, texts
    default: Any = None  # as a user writes it (click shows it so), or None
    help: str = ""
    choices: Tuple[str, ...] = ()
    metavar: str = ""
    envvar: str = ""
    field: bool = True  # sets the RunConfig field of its name (from_params, one to one)

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


def ascii_int(value: Any, most: int = ASCII_INT_MOST) -> int:
    """An integer written in ASCII digits (an optional '-'), at most `most` in size: Python's
    int() also takes '١٢' (Arabic-Indic digits), '1_0' and ' 12 ', which would record 12
    iterations from a typo or a pasted value.  ValueError says why not."""
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    else:
        text = str(value)
        digits = text[1:] if text.startswith("-") else text
        if not (digits.isascii() and digits.isdigit()):
            raise ValueError(f"{text!r} is not a whole number in digits 0-9")
        number = int(text)
    if abs(number) > most:
        raise ValueError(f"{number} is beyond {most}")
    return number


def size(value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        n = value
    else:
        n = parse_size(value)
    if n <= 0:
        raise ValueError(f"{value!r} must be larger than 0")
    return n


def duration(value: Any) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return parse_time(value)


D = defaults
# the engines and presets are named where they live (engines/, cli/presets.py); their
# choices are filled in by `choices_of` when asked, so that this table imports neither
TABLE: Tuple[Opt, ...] = (
    Opt("layout", ("--layout",), "choice", "fpp",
        "fpp: a file per rank; shared: one file, a contiguous segment per rank (N-to-1).",
        choices=("fpp", "shared")),
    Opt("block_size", ("-b", "--block-size"), "size", format_size(D.BLOCK),
        "Bytes per write call. Sizes: k, M, G and KiB, MiB, GiB are binary (1M = 2^20 bytes); "
        "kB, MB, GB are decimal (1MB = 10^6 bytes, unlike fio)."),
    Opt("size", ("-s", "--size"), "size", None,
        f"Bytes per rank [default: {format_size(D.SIZE)} unless --time or --count is given]."),
    Opt("count", ("--count",), "int", None, "Blocks per rank (instead of --size)."),
    Opt("time_limit", ("-t", "--time"), "duration", None,
        "Stop writing after this long, counting only completed writes (lmdd time=): 60, 60s, "
        "5min, 1h. A bare 'm' is refused (IOR's -t 1m is a transfer size)."),
    Opt("fsync", ("--fsync/--no-fsync",), "switch", D.FSYNC,
        "fsync after the last write, inside the timed interval (lmdd fsync=1)."),
    Opt("fsync_every", ("--fsync-every",), "int", D.FSYNC_EVERY,
        "Also fsync after every N blocks."),
    Opt("direct", ("--direct",), "flag", False, "O_DIRECT with an aligned buffer."),
    Opt("iterations", ("-i", "--iterations"), "int", D.ITERATIONS, "Repetitions."),
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
        "--time, at least 60s, when --time is given, else none; 0: none]."),
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
    Opt("files_per_dir", ("--files-per-dir",), "int", D.FILES_PER_DIR,
        "Spread file-per-rank files over subdirectories of at most N files."),
    Opt("verify", ("--verify",), "flag", False,
        "Read every block back and check it (timed separately)."),
    Opt("verify_shift", ("--verify-shift",), "int", 0,
        "Verify the data of the rank N positions away (defeats the client cache)."),
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
        envvar="MPIWRITE_SYSROOT"),
    Opt("engine", ("--engine",), "choice", "posix",
        "posix: write()/pwrite() and fsync(); mpiio: MPI_File_write_at(_all) and "
        "MPI_File_sync; null: no I/O at all (tests of the coordination).", choices=("*engines",)),
    Opt("pattern", ("--pattern",), "choice", PATTERNS[0],
        "Where each block goes: sequential; strided: the ranks' blocks interleaved in one "
        "shared file (IOR -s with -t = -b); random: the rank's own blocks in a seeded random "
        "order, each once (IOR -z).", choices=tuple(PATTERNS)),
    Opt("seed", ("--seed",), "int", 0,
        "The order of --pattern random (recorded; the same seed writes the same offsets)."),
    Opt("collective", ("--collective/--independent",), "switch", None,
        "MPI-IO: MPI_File_write_at_all or MPI_File_write_at [default: independent with "
        "--engine mpiio]."),
    Opt("mpiio_hints", ("--mpiio-hint",), "texts", None,
        "An MPI_Info hint for MPI_File_open, e.g. romio_cb_write=enable, cb_nodes=2, "
        "striping_factor=4 (repeatable; the hints in force are recorded).",
        metavar="KEY=VALUE", field=False),
    Opt("stonewall", ("--stonewall",), "duration", None,
        "IO500's stonewall with wear-out: every rank stops issuing writes after this long, "
        "then the ranks that wrote less go on until they have written as much as the most "
        "productive one (IOR -D with stoneWallingWearOut=1)."),
    Opt("preset", ("--preset",), "choice", None,
        "IO500's write phases: the options it stands for are printed and recorded; each can "
        "still be given (ior-easy-write: file per rank, 2MiB, stonewall 300s; ior-hard-write: "
        "shared strided 47008-byte blocks, stonewall 300s).", choices=("*presets",),
        field=False),
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
BY_NAME: Dict[str, Opt] = {o.name: o for o in TABLE}
BY_KEY: Dict[str, Opt] = {o.key: o for o in TABLE}
# options a rank may take from its own environment (click's envvar; cli/ranks.py)
FROM_ENVIRONMENT: Dict[str, str] = {o.name: o.envvar for o in TABLE if o.envvar}


def choices_of(opt: Opt) -> Tuple[str, ...]:
    """The option's choices; the engines' and presets' names from where they are declared."""
    if opt.choices == ("*engines",):
        from mpiwrite.engines import base

        return tuple(base.names())
    if opt.choices == ("*presets",):
        from mpiwrite.vocab.presets import PRESETS

        return tuple(sorted(PRESETS))
    return opt.choices


_KINDS: Dict[str, Callable[[Any], Any]] = {"size": size, "duration": duration,
                                           "int": ascii_int, "text": str}


def parse(opt: Opt, value: Any) -> Any:
    """`value` as the command line reads it for this option (a study's TOML value or a word);
    ValueError says why not, in click's words where click had them."""
    if opt.kind in ("flag", "switch"):
        if not isinstance(value, bool):
            raise ValueError("must be true or false")
        return value
    if isinstance(value, bool):
        raise ValueError("must be a value, not true or false")
    if opt.kind == "texts":
        return tuple(str(v) for v in value) if isinstance(value, (list, tuple)) \
            else (str(value),)
    if opt.kind == "choice":
        allowed = choices_of(opt)
        if str(value) not in allowed:
            raise ValueError(f"{str(value)!r} is not one of "
                             + ", ".join(repr(c) for c in allowed) + ".")
        return str(value)
    return _KINDS[opt.kind](value)


def defaults_of() -> Dict[str, Any]:
    """Every option's parameter at its default, parsed (what click gives when none is
    given; the environment not read)."""
    out: Dict[str, Any] = {"target": None}
    for o in TABLE:
        if o.default is None:
            out[o.name] = () if o.kind == "texts" else None
        elif o.kind in ("flag", "switch"):
            out[o.name] = bool(o.default)
        else:
            out[o.name] = parse(o, o.default)
    return out


# The option that sets each RunConfig field, for messages about settings: the table's long
# flags, and the few fields that more than one option sets.
_MESSAGE_NAMES: Dict[str, str] = {
    "target": "TARGET", "tags": "--tag/--tag-file", "results": "--results/--no-record",
    "size": "--size/--count", "fsync": "--fsync/--no-fsync",
    **{o.name: o.long for o in TABLE if o.name not in ("tags", "results", "size", "fsync")}}


def option_name(field: str) -> str:
    return _MESSAGE_NAMES.get(field, "--" + field.replace("_", "-"))


def flag_for(name: str, value: Any) -> str:
    """How the option that sets `name` to `value` is written: --collective, --independent
    (a switch given false), --mpiio-hint."""
    opt = BY_NAME[name]
    return opt.secondary if value is False and opt.secondary else opt.long


def find(key: str) -> Optional[Opt]:
    """The option of a study key (`block_size`) or parameter name (`time_limit`)."""
    return BY_KEY.get(key) or BY_NAME.get(key)


def _preset_word(name: str, value) -> str:
    """How the option is written on the command line (what the preset line prints)."""
    flag = BY_NAME[name].long
    if value is True:
        return flag
    if isinstance(value, float):
        return f"{flag} {value:g}s"
    return f"{flag} {value}"


def apply_preset(params: dict, given) -> Tuple[dict, list]:
    """`params` with --preset's options where the user gave none (`given`: the names given);
    and the options the preset set, as words.  A preset sets only what was left at its
    default (cli/presets.py, docs/engines.md)."""
    from mpiwrite.vocab.presets import PRESETS

    name = params.get("preset")
    if not name:
        return params, []
    out, words = dict(params), []
    for key, value in PRESETS[name].items():
        if key not in given and not (key == "count" and params.get("size") is not None):
            out[key] = value
            words.append(_preset_word(key, value))
    return out, words
