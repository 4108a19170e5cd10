"""A study file: one TOML file declares a matrix of runs (docs/study.md).

    [study]   name, target, repeat, order (balanced | random | interleaved | sequential),
              seed, settle (writeback[:BOUND] | sleep:DURATION | drop-caches | none),
              results
    [run]     fixed `mpiwrite run` options, long names with `_` for `-` (time = "200s")
    [axes]    option = [values...]: every combination is a point (and `nodes`,
              `ranks_per_node`: subsets of the allocation)
    [[setting]] name, values, set = "command {value}", get = "command": a client setting
              applied on every node before each point, read before the study, restored after;
              scope ("node", or "once": set from one place for the whole allocation), settle
              (seconds to wait until `get` shows the value), remount (a command run after
              `set` where needs_remount = true: refused without it)
    [[point]] axis = value, ...: the points themselves (a screening design: `mpiwrite tune
              plan`), instead of every combination of the axes

This module reads and checks the file's shape and expands it into the runs in the order they
will run; what each option's value means is checked by the command line (cli/study.py) with
`mpiwrite run`'s own rules, so a point is refused exactly as the same `run` would be.
"""

from __future__ import annotations

import itertools
import os
import re
import shlex
import sys
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

from mpiwrite.study import order
from mpiwrite.study import settle as settling
from mpiwrite.vocab.axes import kind_of

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.9/3.10
    import tomli as tomllib

NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}\Z")  # \Z: "$" would let a trailing newline in
ORDERS = order.ORDERS
STUDY_KEYS = {"name", "target", "repeat", "order", "seed", "results", "description", "settle"}
SETTING_KEYS = {"name", "values", "set", "get", "scope", "settle", "remount", "needs_remount"}
SCOPES = ("node", "once")
SETTLE = 60.0  # seconds a setting may take to show on every node, unless told
# `run` options a study sets itself, not the file: where it writes and what it records
NOT_IN_RUN = {"target", "results", "no_record", "json", "tag", "tag_file"}
MAX_POINTS = 100_000
MAX_REPEAT = 10_000
MAX_RUNS = 100_000  # points x repeat: counted before any list of them is built
MAX_VALUE = 1024  # characters of a setting's value (it is recorded as a tag)


class Problem(NamedTuple):
    line: int
    where: str  # "[run] time", "[[setting]] 2 values"
    message: str


class Setting(NamedTuple):
    name: str
    values: List[str]
    set: str
    get: str
    scope: str = "node"
    settle: float = SETTLE
    remount: str = ""


class Study(NamedTuple):
    name: str
    target: str
    results: str
    repeat: int
    order: str
    seed: Optional[int]
    fixed: Dict[str, Any]  # [run]
    axes: Dict[str, List[Any]]  # [axes], then one axis per setting as setting.NAME
    settings: List[Setting]
    lines: Dict[Tuple[str, str], int]  # (table, key) -> line, for messages
    path: str
    listed: Tuple[Dict[str, Any], ...] = ()  # [[point]] tables: the points, when given
    settle: str = ""  # [study] settle as written ("": the default, study/settle.py)

    def points(self) -> List[Dict[str, Any]]:
        """Every combination of the axes, in the file's order (the last axis varies fastest),
        or the [[point]] tables in theirs."""
        names = list(self.axes)
        if self.listed:
            return [{n: p[n] for n in names} for p in self.listed]
        return [dict(zip(names, values))
                for values in itertools.product(*(self.axes[n] for n in names))]

    def runs(self) -> List[Tuple[int, int]]:
        """(point index, repetition) in the order they run (study/order.py): balanced (each
        repetition a seeded permutation, chosen so that each level follows each level about
        equally often), random (every run shuffled), interleaved (every point once in the
        file's order, then again), sequential (each point's repetitions together)."""
        return order.runs(self.order, self.points(), self.repeat, self.order_seed())

    def order_seed(self) -> int:
        """The seed of the run order: the file's, or one made from its name and points."""
        if self.seed is not None:
            return self.seed
        return order.default_seed(self.name, self.axes, self.listed)


class StudyError(Exception):
    """The file cannot be used; `problems` holds one entry per thing wrong with it."""

    def __init__(self, path: str, problems: List[Problem], study: Optional[Study] = None):
        self.path, self.problems = path, problems
        self.study = study  # what could be read, so that its options are checked too
        super().__init__(f"{path}: {len(problems)} problem(s)")


def _lines(text: str) -> Dict[Tuple[str, str], int]:
    """(table, key) -> the line a key is written on ([[setting]] tables as setting.N)."""
    found: Dict[Tuple[str, str], int] = {}
    table, settings = "", 0
    for no, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        m = re.match(r"^\[\[\s*([A-Za-z0-9_.-]+)\s*\]\]", line)
        if m:
            settings += m.group(1) == "setting"
            table = f"setting.{settings}" if m.group(1) == "setting" else m.group(1)
            found.setdefault((table, ""), no)
            continue
        m = re.match(r"^\[\s*([A-Za-z0-9_.-]+)\s*\]", line)
        if m:
            table = m.group(1)
            found.setdefault((table, ""), no)
            continue
        m = re.match(r"^([A-Za-z0-9_-]+)\s*=", line)
        if m:
            found.setdefault((table, m.group(1)), no)
    return found


def load(path: str) -> Study:
    """Read and check a study file; StudyError listing every problem otherwise."""
    from mpiwrite import files
    from mpiwrite.errors import why

    try:
        fd = files.open_regular(path)
        with open(fd, "rb", closefd=True) as fh:
            untrusted = files.untrusted(path, os.fstat(fd))
            raw = fh.read((1 << 20) + 1)
    except OSError as exc:
        raise StudyError(path, [Problem(0, "", f"cannot read it: {why(exc)}")]) \
            from None
    if untrusted:  # its set and get commands run as this user on every node
        raise StudyError(path, [Problem(0, "not trusted", f"{untrusted}; a study file is run "
                                        "like code (its settings' commands): only yours or "
                                        "root's, in a folder only you or root can change")])
    if len(raw) > 1 << 20:
        raise StudyError(path, [Problem(0, "", "larger than 1 MiB: not a study file")])
    try:
        text = raw.decode("utf-8")
        doc = tomllib.loads(text)
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        m = re.search(r"line (\d+)", str(exc))
        raise StudyError(path, [Problem(int(m.group(1)) if m else 0, "",
                                        f"not valid TOML: {exc}")]) from None
    return parse(doc, text, path)


def parse(doc: Dict[str, Any], text: str, path: str) -> Study:
    lines = _lines(text)
    problems: List[Problem] = []

    def bad(table: str, key: str, message: str) -> None:
        where = f"[{table}] {key}".strip() if not table.startswith("setting.") else \
            f"[[setting]] {table.split('.')[1]} {key}".strip()
        problems.append(Problem(lines.get((table, key), lines.get((table, ""), 0)), where,
                                message))

    for table in sorted(set(doc) - {"study", "run", "axes", "setting", "point"}):
        bad(table, "", "unknown table (expected [study], [run], [axes], [[setting]], "
                       "[[point]])")
    study = doc.get("study")
    if not isinstance(study, dict):
        bad("study", "", "missing: a [study] table with name and target")
        study = {}
    for key in sorted(set(study) - STUDY_KEYS):
        bad("study", key, f"unknown key (expected {', '.join(sorted(STUDY_KEYS))})")
    name = study.get("name")
    if not isinstance(name, str) or not NAME.match(name):
        bad("study", "name", "must be 1 to 64 of A-Z a-z 0-9 _ . - (it names the records)")
    target = study.get("target")
    if not isinstance(target, str) or not target.strip():
        bad("study", "target", "must be the folder to write in")
    results = study.get("results", "results")
    if not isinstance(results, str) or not results.strip():
        bad("study", "results", "must be a folder for the records")
    repeat = study.get("repeat", 1)
    if type(repeat) is not int or not 1 <= repeat <= MAX_REPEAT:
        bad("study", "repeat", f"must be a whole number from 1 to {MAX_REPEAT}")
        repeat = 1
    order_ = study.get("order", order.DEFAULT)
    if order_ not in ORDERS:
        bad("study", "order", f"must be one of {', '.join(ORDERS)}")
    seed = study.get("seed")
    if seed is not None and (type(seed) is not int or not 0 <= seed < 2 ** 63):
        bad("study", "seed", "must be a whole number from 0 to 2^63 - 1")
        seed = None
    settle_text = study.get("settle", "")
    if "settle" in study:
        try:
            settle_text = settling.parse(settle_text).text()
        except ValueError as exc:
            bad("study", "settle", str(exc))
            settle_text = ""
    fixed = doc.get("run", {})
    if not isinstance(fixed, dict):
        bad("run", "", "must be a table of run options")
        fixed = {}
    for key, value in fixed.items():
        if key in NOT_IN_RUN:
            bad("run", key, "is set by the study itself ([study] target and results)")
        elif kind_of(key).in_run_table:
            bad("run", key, kind_of(key).in_run_table)
        elif isinstance(value, (list, dict)):
            bad("run", key, "must be one value (several values are an axis: [axes])")
    axes_doc = doc.get("axes", {})
    if not isinstance(axes_doc, dict):
        bad("axes", "", "must be a table of option = [values]")
        axes_doc = {}
    axes: Dict[str, List[Any]] = {}
    for key, values in axes_doc.items():
        if key in NOT_IN_RUN:
            bad("axes", key, "is set by the study itself, not an axis")
        elif kind_of(key).in_axes_table:
            bad("axes", key, kind_of(key).in_axes_table)
        elif not isinstance(values, list) or not values:
            bad("axes", key, "must be a non-empty list of values")
        elif any(isinstance(v, (list, dict)) for v in values):
            bad("axes", key, "values must be single values")
        elif len(set(map(repr, values))) != len(values):
            bad("axes", key, "lists a value twice (given twice)")
        elif key in fixed:
            bad("axes", key, "is also fixed in [run]: one or the other")
        elif kind_of(key).check(values):
            bad("axes", key, kind_of(key).check(values))
        else:
            axes[key] = values
    settings: List[Setting] = []
    raw_settings = doc.get("setting", [])
    if not isinstance(raw_settings, list):
        bad("setting", "", "must be [[setting]] tables")
        raw_settings = []
    for i, s in enumerate(raw_settings, 1):
        table = f"setting.{i}"
        if not isinstance(s, dict):
            bad(table, "", "must be a table")
            continue
        for key in sorted(set(s) - SETTING_KEYS):
            bad(table, key, f"unknown key (expected {', '.join(sorted(SETTING_KEYS))})")
        sname, values, set_cmd = s.get("name"), s.get("values"), s.get("set")
        ok = True
        if not isinstance(sname, str) or not NAME.match(sname):
            bad(table, "name", "must be 1 to 64 of A-Z a-z 0-9 _ . - (records: setting.NAME)")
            ok = False
        elif any(x.name == sname for x in settings):
            bad(table, "name", f"{sname!r} is given twice")
            ok = False
        if not isinstance(values, list) or not values or not all(
                isinstance(v, (str, int)) and not isinstance(v, bool) for v in values):
            bad(table, "values", "must be a non-empty list of strings or whole numbers")
            ok = False
        elif any(not str(v) or len(str(v)) > MAX_VALUE
                 or any(ord(c) < 32 or ord(c) == 127 for c in str(v)) for v in values):
            bad(table, "values", f"each must be 1 to {MAX_VALUE} characters, without a "
                                 "newline or control character (it is recorded as a tag)")
            ok = False
        elif len({str(v) for v in values}) != len(values):
            bad(table, "values", "lists a value twice (given twice: 1 and \"1\" are the "
                                 "same value to the command)")
            ok = False
        if not isinstance(set_cmd, str) or "{value}" not in set_cmd:
            bad(table, "set", "must be a command with {value} where the value goes")
            ok = False
        get_cmd = s.get("get", "")
        if not isinstance(get_cmd, str):
            bad(table, "get", "must be a command that prints the value now in force")
            ok = False
        for key, cmd in (("set", set_cmd), ("get", get_cmd)):
            try:
                if isinstance(cmd, str):
                    shlex.split(cmd)
            except ValueError as exc:  # as the command is split when it runs
                bad(table, key, f"cannot be split into words ({exc})")
                ok = False
        scope, settle, remount = s.get("scope", "node"), s.get("settle", SETTLE), \
            s.get("remount", "")
        if scope not in SCOPES:
            bad(table, "scope", "must be \"node\" (set on every node) or \"once\" (from one "
                                "place for the whole allocation)")
            ok = False
        if isinstance(settle, bool) or not isinstance(settle, (int, float)) \
                or not 0 < settle <= 3600:
            bad(table, "settle", "must be the seconds to wait for the value, 0 to 3600")
            ok = False
        if not isinstance(remount, str):
            bad(table, "remount", "must be a command")
            ok = False
        elif s.get("needs_remount") is True and not remount.strip():
            bad(table, "needs_remount", "this setting takes effect only on a new mount: give "
                                        "a `remount` command, or leave it out")
            ok = False
        if ok:
            settings.append(Setting(sname, [str(v) for v in values], set_cmd, get_cmd,
                                    str(scope), float(settle), remount))
            axes[f"setting.{sname}"] = [str(v) for v in values]
    listed = _listed(doc.get("point", []), axes, bad)
    count = len(listed) if listed else 1
    for values in axes.values() if not listed else ():
        count *= len(values)
    if count > MAX_POINTS:
        bad("axes", "", f"{count} points: more than {MAX_POINTS}")
    elif count * repeat > MAX_RUNS:
        bad("study", "repeat", f"{count} points x {repeat} repetitions = {count * repeat} "
                               f"runs: more than {MAX_RUNS}")
    found = Study(str(name), str(target or "."), str(results), repeat, str(order_), seed,
                  {k: v for k, v in fixed.items() if k not in NOT_IN_RUN
                   and kind_of(k).in_run_table is None and not isinstance(v, (list, dict))},
                  axes, settings, lines, path, tuple(listed), settle_text)
    if problems:
        raise StudyError(path, problems, found)
    return found


def _listed(points: Any, axes: Dict[str, List[Any]], bad) -> List[Dict[str, Any]]:
    """[[point]] tables: each gives every axis one of its values (settings as setting.NAME)."""
    if not isinstance(points, list):
        bad("point", "", "must be [[point]] tables")
        return []
    out = []
    for i, p in enumerate(points, 1):
        if not isinstance(p, dict) or set(p) != set(axes):
            bad("point", "", f"point {i}: must give each axis one value "
                             f"({', '.join(axes)})")
            continue
        wrong = [k for k, v in p.items() if str(v) not in map(str, axes[k])]
        if wrong:
            bad("point", "", f"point {i}: {wrong[0]} = {p[wrong[0]]!r} is not among its "
                             "values")
            continue
        out.append({k: next(v for v in axes[k] if str(v) == str(p[k])) for k in axes})
    return out

