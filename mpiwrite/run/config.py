"""Validated run settings.

Everything a rank needs to know about a run is in :class:`RunConfig`; it is built and checked
on every rank from the same command line (rank 0's and the ranks that parse their own before
MPI starts; the others from rank 0's parsed options, `from_params`), so bad input fails
identically everywhere with exit code 2 and nothing is created.
"""

from __future__ import annotations

import json
import os
import re
from typing import Dict, Optional

from mpiwrite import structs
from mpiwrite.engines import base as engines
from mpiwrite.errors import ConfigError, why
from mpiwrite.run import options
from mpiwrite.text import printable
from mpiwrite.units import MAX_BYTES, MAX_SECONDS
from mpiwrite.vocab import defaults
from mpiwrite.vocab import keys as keytable
from mpiwrite.vocab.offsets import PATTERNS
from mpiwrite.vocab.pattern import HEADER

ENGINES = engines.names()  # posix; null writes nothing (coordination tests)
LAYOUTS = options.BY_NAME["layout"].choices  # fpp: a file per rank; shared: one file
MAX_COUNT = keytable.MAX_COUNT  # the counts' largest (the table's `most`), --read-shift's
HEADER_BYTES = HEADER.size  # the per-block pattern header
STALL_INTERVALS = 3  # --stall's default, in progress intervals
RANDOM_BYTES_PER_BLOCK = 8  # --pattern random: a rank's shuffled block order, 8 bytes a block
MAX_RANDOM_ORDER = 1 << 30  # at most 1 GiB of it a rank (2^27 blocks: 128 TiB of 1 MiB ones)
DIRECT_ALIGN = 512  # smallest logical block size; the preflight probe checks the real one
RAMP_LEAST = 0.1  # --ramp's least: the write loop's look-up (engines/writeloop.POLL_SECONDS)

# Keys that reports group by; a user tag may not shadow them (vocab/keys.py).
RUN_KEYS = keytable.BUILTIN
_TAG_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}\Z")


# RunConfig's fields that are options, one for each `field` entry of the options' table
# (vocab/keys.OPTIONS), with its default there: a new option is a field without a line here
_OptionFields = type("_OptionFields", (), {
    "__annotations__": {o.name: "Any" for o in options.FIELDS},
    **{o.name: options.field_default(o) for o in options.FIELDS}})


@structs.value(frozen=True)
class RunConfig(_OptionFields):
    """Every option's field (layout, block_size, size, time_limit, fsync, ... as the table
    has them), then what more than one option makes."""
    target: str = defaults.TARGET
    results: Optional[str] = defaults.RESULTS  # --results, or None with --no-record
    tags: Dict[str, str] = structs.field(dict)  # --tag and --tag-file
    mpiio_hints: Dict[str, str] = structs.field(dict)  # --mpiio-hint: MPI_Info, as asked
    preset: str = ""  # the IO500 phase whose options this run took (cli/presets.py)

    @property
    def striped(self) -> bool:
        """A Lustre layout was asked for: the files go into a run directory that has it."""
        return any(v is not None for v in (self.stripe_count, self.stripe_size, self.ost_index))

    def watchdog_seconds(self) -> Optional[float]:
        """How long one iteration's write phase may take before the run is ended."""
        if self.timeout is not None:
            return self.timeout if self.timeout > 0 else None
        if self.time_limit is not None or self.stonewall is not None:
            return max(60.0, 3 * ((self.time_limit or self.stonewall) + (self.ramp or 0)))
        return None

    def timed_seconds(self) -> Optional[float]:
        """How long one iteration writes when a time limit ends it: the limit and a --ramp
        before it (None: its size ends it)."""
        return self.time_limit + (self.ramp or 0) if self.time_limit else None

    def stall_seconds(self) -> Optional[float]:
        """How long a rank's bytes may not grow before it is named stalled (None: never)."""
        if self.stall is not None:
            return self.stall or None
        return STALL_INTERVALS * self.progress_interval or None

    def to_json(self) -> str:
        return json.dumps(structs.asdict(self), sort_keys=True)


DEFAULTS = RunConfig()  # every default (vocab/defaults.py); the command line reads them here


option_name = options.option_name  # the option that sets each RunConfig field (messages)


def _fail(option: str, message: str) -> ConfigError:
    return ConfigError(f"{option}: {message}")


def _tag_problem(text: str):
    """(key, value, None) for a good KEY=VALUE, else (key, None, (what is wrong with the key
    shown, what is wrong without showing anything of the text))."""
    if "=" not in text:
        return None, None, (f"{text!r} is not KEY=VALUE", "not KEY=VALUE")
    key, value = text.split("=", 1)
    key = key.strip()
    if not _TAG_KEY.match(key):
        return key, None, (f"key {key!r} must start with a letter and use [A-Za-z0-9_.-]",
                           "the key must start with a letter and use [A-Za-z0-9_.-]")
    if key in RUN_KEYS:
        return key, None, (f"key {key!r} is a built-in run key; choose another name",
                           "the key is a built-in run key; choose another name")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return key, None, (f"value of {key!r} is not valid UTF-8", "the value is not valid UTF-8")
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        return key, None, (f"value of {key!r} contains a newline or control character",
                           "the value contains a control character")
    if len(value) > 1024:
        return key, None, (f"value of {key!r} is longer than 1024 characters",
                           "the value is longer than 1024 characters")
    return key, value, None


def parse_tag(text: str) -> tuple:
    key, value, problem = _tag_problem(text)
    if problem:
        raise _fail("--tag", problem[0])
    return key, value


TAG_FILE_LIMIT = 2**20


def _tag_file_lines(tag_file: str):
    """(line number, text) of a --tag-file's KEY=VALUE lines.  A regular file only, not
    followed if it is a symlink (someone else's link to a root-only file would turn its
    lines into tags of a world-readable record), never blocking (a FIFO), at most 1 MiB."""
    from mpiwrite import files
    from mpiwrite.files import read_regular

    try:
        data = read_regular(tag_file, TAG_FILE_LIMIT, follow=False)
        untrusted = files.untrusted(tag_file, os.stat(tag_file, follow_symlinks=False))
    except OSError as exc:
        raise _fail("--tag-file", f"cannot read {tag_file!r}: "
                    f"{why(exc)}") from None
    if untrusted:  # as a study file: what another user can change is not this user's input
        raise _fail("--tag-file", f"{tag_file!r}: {untrusted}; use a file only you or root "
                                  "can change")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise _fail("--tag-file", f"{tag_file!r} is not UTF-8 text") from None
    # lines as an editor counts them: "\n" only (splitlines() would also split at \f, \x1c,
    # U+2028, ... and the line numbers in messages would not match)
    for number, line in enumerate(text.split("\n"), 1):
        line = line.rstrip("\r").strip(" \t")
        if line and not line.startswith("#"):
            yield number, line


def parse_tags(items, tag_file: Optional[str] = None) -> Dict[str, str]:
    """Tags from repeated --tag and a --tag-file (one KEY=VALUE per line, # comments).

    A bad --tag-file line is named by file and line number only: it may hold a secret."""
    tags: Dict[str, str] = {}
    for text in items or ():
        key, value = parse_tag(text)
        if key in tags:
            raise _fail("--tag", f"key {key!r} given twice")
        tags[key] = value
    if tag_file:
        for number, text in _tag_file_lines(tag_file):
            if "=" in text:  # `fs = scratch` is fs=scratch, as people write such files
                key, value = text.split("=", 1)
                text = key.strip(" \t") + "=" + value.strip(" \t")
            key, value, problem = _tag_problem(text)
            if problem is None and key in tags:
                problem = (None, "the key is given twice")
            if problem:
                raise _fail("--tag-file", f"{tag_file!r} line {number}: {problem[1]}")
            tags[key] = value
    return tags


def _is_utf8(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check_target_name(target: str) -> str:
    if not target or not target.strip():
        raise _fail("TARGET", "is empty; expected a directory")
    try:
        target.encode("utf-8")
    except UnicodeEncodeError:
        raise _fail("TARGET", "is not valid UTF-8") from None
    if os.path.realpath(target) == "/":
        raise _fail("TARGET", "refusing to write into / (give a directory on the filesystem "
                    "to test)")
    return target


def build(
    *,
    target: Optional[str] = None,
    layout: str = LAYOUTS[0],
    block_size: int = defaults.BLOCK,
    size: Optional[int] = None,
    count: Optional[int] = None,
    time_limit: Optional[float] = None,
    **kwargs,
) -> RunConfig:
    """Check the combination of options and resolve defaults into a RunConfig."""
    target = check_target_name(target if target is not None else defaults.TARGET)
    if layout not in LAYOUTS:
        raise _fail("--layout", f"{layout!r} is not one of {', '.join(LAYOUTS)}")
    if block_size < HEADER_BYTES:
        raise _fail("--block-size", f"must be at least {HEADER_BYTES} bytes (the block header)")
    if block_size > 2**31:
        raise _fail("--block-size", "must be at most 2GiB")
    if count is not None and count <= 0:
        raise _fail("--count", "must be a positive number of blocks")
    if time_limit is not None and not time_limit > 0:
        raise _fail("--time", "must be a positive duration")
    if size is not None and count is not None and size != count * block_size:
        raise _fail("--count", "conflicts with --size (give one, or make size = count x block)")
    if count is not None and count > MAX_BYTES // block_size:
        raise _fail("--count", f"{count} blocks of {block_size} bytes is too large")
    if size is None and count is not None:
        size = count * block_size
    stonewall = kwargs.get("stonewall")
    if size is None and time_limit is None and stonewall is None:
        size = defaults.SIZE
    if size is not None and size < block_size:
        raise _fail("--block-size", f"{block_size} bytes is larger than --size {size} bytes")
    if layout == "shared" and size is None:
        raise _fail("--layout", "shared needs --size or --count to place each rank's segment")
    direct = kwargs.get("direct", defaults.DIRECT)
    if direct and block_size % DIRECT_ALIGN:
        raise _fail("--block-size", f"with --direct must be a multiple of {DIRECT_ALIGN} bytes")
    if direct and size is not None and size % DIRECT_ALIGN:
        raise _fail("--size", f"with --direct must be a multiple of {DIRECT_ALIGN} bytes")
    if kwargs.get("iterations", defaults.ITERATIONS) < 1:
        raise _fail("--iterations", "must be at least 1")
    if kwargs.get("delay", defaults.DELAY) < 0:
        raise _fail("--delay", "must not be negative")
    fsync_every = kwargs.get("fsync_every", defaults.FSYNC_EVERY)
    if fsync_every < 0:
        raise _fail("--fsync-every", "must be a positive number of blocks")
    if fsync_every and not kwargs.get("fsync", defaults.FSYNC):
        raise _fail("--fsync-every", "conflicts with --no-fsync")
    if not kwargs.get("sample_interval", defaults.SAMPLE_INTERVAL) > 0:
        raise _fail("--sample-interval", "must be a positive duration")
    if kwargs.get("progress_interval", defaults.PROGRESS_INTERVAL) < 0:
        raise _fail("--progress-interval", "must not be negative (0 turns progress off)")
    if kwargs.get("timeout") is not None and kwargs["timeout"] < 0:
        raise _fail("--timeout", "must not be negative (0 turns the watchdog off)")
    if kwargs.get("steady") is not None:
        from mpiwrite.formats import steady

        try:
            spec = steady.parse(kwargs["steady"])
        except ValueError as exc:
            raise _fail("--steady", str(exc)) from None
        every = kwargs.get("sample_interval", defaults.SAMPLE_INTERVAL)
        if not spec.dur >= 2 * every:
            raise _fail("--steady", f"its window ({spec.dur:g}s) must hold at least two "
                                    f"samples: at least {2 * every:g}s with --sample-interval "
                                    f"{every:g}s")
    ramp = kwargs.get("ramp")
    if ramp is not None and not ramp >= RAMP_LEAST:
        raise _fail("--ramp", f"must be at least {RAMP_LEAST:g}s (the write loop looks up "
                              f"from writing every {RAMP_LEAST:g}s: a shorter ramp cannot end "
                              "on time)")
    if ramp is not None and stonewall is not None:
        preset = kwargs.get("preset")
        raise _fail("--ramp", "cannot be given with --stonewall (IO500's stonewall counts "
                              "from the first write)" + (
                                  f"; --preset {preset} sets --stonewall" if preset else ""))
    timeout = kwargs.get("timeout")
    if timeout and time_limit and timeout <= time_limit:
        raise _fail("--timeout", f"must be longer than --time ({time_limit:g}s)")
    if kwargs.get("files_per_dir", defaults.FILES_PER_DIR) < 1:
        raise _fail("--files-per-dir", "must be at least 1")
    if kwargs.get("stall") is not None and not kwargs["stall"] >= 0:
        raise _fail("--stall", "must not be negative (0: never name a stalled rank)")
    for name in (o.name for o in options.FIELDS if o.kind == "duration"):
        value = time_limit if name == "time_limit" else kwargs.get(name)
        if value is not None and not value <= MAX_SECONDS:  # also refuses NaN
            raise _fail(option_name(name), f"must be at most {MAX_SECONDS / 86400:.0f} days")
    for opt in (o for o in options.FIELDS if o.most is not None):
        if kwargs.get(opt.name, 0) > opt.most:
            raise _fail(option_name(opt.name), f"must be at most {opt.most}")
    if size is not None and size > MAX_BYTES:
        raise _fail("--size", f"must be at most {MAX_BYTES} bytes")
    read_shift = kwargs.get("read_shift")
    if read_shift is not None and not 0 <= read_shift <= MAX_COUNT:
        raise _fail("--read-shift", f"must be between 0 and {MAX_COUNT}")
    if (read_shift is not None or kwargs.get("drop_cache")) and not kwargs.get("read"):
        raise _fail("--read-shift" if read_shift is not None else "--drop-cache",
                    "needs --read")
    if kwargs.get("read") and kwargs.get("verify_shift"):
        raise _fail("--verify-shift", "with --read, the read phase verifies the file it reads "
                    "(choose it with --read-shift)")
    if kwargs.get("engine", ENGINES[0]) not in ENGINES:
        raise _fail("--engine", f"{kwargs['engine']!r} is not one of {', '.join(ENGINES)}")
    engine = engines.get(kwargs.get("engine", ENGINES[0]))
    problem = engine.problem(kwargs, options.flag_for)
    if problem:
        raise _fail(*problem)
    if engine.has(engines.COLLECTIVE) and kwargs.get("collective") is None:
        kwargs["collective"] = False  # MPI-IO writes independently unless told
    _check_patterns(layout, block_size, size, time_limit, kwargs)
    sysroot = kwargs.get("sysroot", "/")
    if sysroot != "/":
        from mpiwrite import sysroot as sysroots

        sysroots.check(sysroot)
    if kwargs.get("verify_shift", 0) < 0:
        raise _fail("--verify-shift", "must not be negative")
    if kwargs.get("verify_shift", 0):
        kwargs["verify"] = True
    if kwargs.get("results") is not None and not str(kwargs["results"]).strip():
        raise _fail("--results", "is empty; expected a directory")
    if kwargs.get("live_jsonl") is not None:
        if kwargs["live_jsonl"] == "-" and kwargs.get("json_path") == "-":
            raise _fail("--live-jsonl", "- and --json - would share standard output; send "
                        "one of them to a file")
        if not str(kwargs["live_jsonl"]).strip():
            raise _fail("--live-jsonl", "is empty; expected a file or -")
        if not kwargs.get("progress_interval", 1.0):
            raise _fail("--live-jsonl", "needs progress: --progress-interval 0 sends none")
    for field in ("results", "json_path", "live_jsonl"):  # kept as text
        if kwargs.get(field) is not None and not _is_utf8(str(kwargs[field])):
            raise _fail(option_name(field).split("/")[0], "the name is not UTF-8")
    return RunConfig(target=target, layout=layout, block_size=block_size, size=size,
                     time_limit=time_limit, **kwargs)


HINT_KEY = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,126}\Z")


def parse_hints(items) -> Dict[str, str]:
    """--mpiio-hint KEY=VALUE (repeatable) as the MPI_Info's keys and values."""
    hints: Dict[str, str] = {}
    for text in items or ():
        if "=" not in text:
            raise _fail("--mpiio-hint", f"{printable(text)!r} is not KEY=VALUE")
        key, value = (x.strip() for x in text.split("=", 1))
        if not HINT_KEY.match(key):
            raise _fail("--mpiio-hint", f"key {printable(key)!r} must start with a letter and "
                        "use [A-Za-z0-9_.-] (MPI_MAX_INFO_KEY)")
        if not value or len(value) > 1023 or any(ord(c) < 32 or ord(c) > 126 for c in value):
            raise _fail("--mpiio-hint", f"value of {key!r} must be 1 to 1023 printable ASCII "
                        "characters (MPI_MAX_INFO_VAL)")
        if key in hints:
            raise _fail("--mpiio-hint", f"key {key!r} given twice")
        hints[key] = value
    return hints


def _check_patterns(layout: str, block_size: int, size: Optional[int],
                    time_limit: Optional[float], kw: dict) -> None:
    """--pattern, --seed, --stonewall and the MPI-IO options against the rest (exit 2)."""
    pattern = kw.get("pattern", PATTERNS[0])
    if pattern not in PATTERNS:
        raise _fail("--pattern", f"{pattern!r} is not one of {', '.join(PATTERNS)}")
    if pattern == "strided" and layout != "shared":
        raise _fail("--pattern", "strided interleaves the ranks' blocks in one file: it needs "
                    "--layout shared")
    if pattern != "sequential":
        if size is None:
            raise _fail("--pattern", f"{pattern} needs --size or --count (the blocks it "
                        "places)")
        if size % block_size:
            raise _fail("--size", f"with --pattern {pattern} must be a whole number of blocks "
                        f"of {block_size} bytes")
        blocks = size // block_size
        if pattern == "random" and blocks * RANDOM_BYTES_PER_BLOCK > MAX_RANDOM_ORDER:
            # each rank holds its shuffled order of blocks in memory (vocab/offsets.py)
            from mpiwrite.units import format_size as _fmt

            raise _fail("--pattern", f"random keeps each rank's order of its {blocks:,} "
                        f"blocks in memory: {_fmt(blocks * RANDOM_BYTES_PER_BLOCK)} a rank, "
                        f"more than {_fmt(MAX_RANDOM_ORDER)}; give larger blocks or fewer")
    if not 0 <= kw.get("seed", 0) < 2**63:
        raise _fail("--seed", "must be between 0 and 2^63-1")
    stonewall = kw.get("stonewall")
    if stonewall is not None:
        if not stonewall > 0:
            raise _fail("--stonewall", "must be a positive duration")
        if time_limit is not None and stonewall > time_limit:
            raise _fail("--stonewall", f"{stonewall:g}s is longer than --time "
                        f"({time_limit:g}s), which bounds the wear-out too")
    shared_mpiio = layout == "shared" and kw.get("collective") is not None
    if (shared_mpiio and not kw.get("collective") and kw.get("fsync_every") and time_limit
            and stonewall is None):
        raise _fail("--fsync-every", "with --time on a shared file in independent MPI-IO, "
                    "ranks would call the collective MPI_File_sync different numbers of "
                    "times (use --collective or --stonewall)")


def from_params(p: dict) -> RunConfig:
    """A checked RunConfig from the parameters of the `run` command, by name (ConfigError if
    bad).  On this rank: its working folder, its --tag-file.  Click-free, so that a rank that
    takes rank 0's parsed parameters builds its own settings without click (cli/ranks.py)."""
    try:
        os.getcwd()
    except FileNotFoundError:  # a ConfigError: under a launcher the ranks agree on one line
        raise ConfigError("the current folder was removed; change to an existing folder") \
            from None
    # every option that sets its RunConfig field one to one, from the table; then the few
    # that combine or stand for something else
    fields = {o.name: p.get(o.name) for o in options.FIELDS}
    fields.update(count=p.get("count"), results=None if p.get("no_record") else p.get("results"),
                  tags=parse_tags(p.get("tags"), p.get("tag_file")),
                  sysroot=p.get("sysroot") or "/", pattern=p.get("pattern") or PATTERNS[0],
                  seed=p.get("seed") or 0, mpiio_hints=parse_hints(p.get("mpiio_hints")),
                  preset=p.get("preset") or "")
    return build(target=p.get("target"), **fields)


# Options of `run` that may come from the environment (click's envvar): a rank that takes
# rank 0's parsed options reads these from its own (cli/ranks.py; a node's --sysroot).
FROM_ENVIRONMENT = options.FROM_ENVIRONMENT

# Settings that may differ between nodes: each node reads its own facts.
NODE_LOCAL = ("sysroot",)


def differing_options(root: dict, mine: dict) -> list:
    """The options whose values differ between rank 0's settings and this rank's."""
    return sorted({option_name(k) for k in set(root) | set(mine)
                   if k not in NODE_LOCAL and root.get(k) != mine.get(k)})
