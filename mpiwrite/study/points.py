"""A study's points checked as `mpiwrite run` checks its options, without click.

Every value of the file's `[run]` table and `[axes]` goes through the option's own converter
(run/options.py: the table `run`'s command line is made from), then every point's whole
combination through run/config.from_params: a point is refused exactly as the same `run`
would be, in the same words, and its RunConfig is what the study runs.  How long they take
is study/estimate.py.
"""

from __future__ import annotations

import os
from typing import Any, Dict, Iterable, List, Tuple

from mpiwrite import structs
from mpiwrite.errors import ConfigError
from mpiwrite.run import config, options
from mpiwrite.study.plan import Problem, Study
from mpiwrite.vocab.axes import run_option


def value_text(v: Any) -> str:
    """A value as the study file writes it (true/false, not Python's True/False)."""
    return ("true" if v else "false") if isinstance(v, bool) else str(v)


def point_text(point: Dict[str, Any]) -> str:
    return ", ".join(f"{k}={value_text(v)}" for k, v in point.items())


def _parsed(opt: options.Opt, value: Any) -> Any:
    """The value as `run` reads the word `--option=VALUE`; ValueError in `run`'s words."""
    if opt.kind in ("flag", "switch") or isinstance(value, bool):
        return options.parse(opt, value)  # "must be true or false", as before
    word = tuple(str(v) for v in value) if isinstance(value, (list, tuple)) else str(value)
    try:
        return options.parse(opt, word)
    except ValueError as exc:
        raise ValueError(f"Invalid value for {opt.shown}: {exc}") from None


def config_of(study: Study, pairs: Iterable[Tuple[str, Any]]):
    """The RunConfig of a point: the study's target and results, the options given
    (key, value), the others at their defaults or from the environment as `run` reads them,
    a preset's where none was given.  ValueError or ConfigError naming the problem."""
    params = options.defaults_of()
    given = set()
    for key, value in pairs:
        opt = options.BY_KEY[key]
        params[opt.name] = _parsed(opt, value)
        given.add(opt.name)
    for name, var in options.FROM_ENVIRONMENT.items():
        if name not in given and os.environ.get(var):
            params[name] = os.environ[var]
    params, _words = options.apply_preset(params, given)
    params.update(target=study.target, results=study.results, json_path=None,
                  no_record=False)
    if "netcheck" not in given:  # a second a point is the study's time, not its question
        params["netcheck"] = False
    return config.from_params(params)


def check(study: Study, values_only: bool = False) -> Tuple[List[Problem], List[Any]]:
    """Every option's value, then every point's combination, checked as `run` checks them:
    (problems, the RunConfig of each point)."""
    problems: List[Problem] = []

    def line(table: str, key: str) -> int:
        return study.lines.get((table, key), study.lines.get((table, ""), 0))

    seen: Dict[Tuple[str, str], Any] = {}  # (axis, its value as `run` reads it) -> value
    for table, items in (("run", study.fixed.items()),
                         ("axes", [(k, v) for k, vs in study.axes.items() for v in vs])):
        for key, value in items:
            if not run_option(key):
                continue
            if key not in options.BY_KEY:
                problems.append(Problem(line(table, key), f"[{table}] {key}",
                                        "not an option of `mpiwrite run`"))
                continue
            try:
                cfg = config_of(study, [(key, value)])
            except (ValueError, ConfigError) as exc:
                problems.append(Problem(line(table, key), f"[{table}] {key} = {value!r}",
                                        str(exc)))
                continue
            if table == "axes":  # `1M`, `1MiB` and 1048576 are one value to `run`
                same = (key, structs.replace(cfg, tags={}).to_json())
                if same in seen:
                    problems.append(Problem(line(table, key), f"[axes] {key}",
                                            f"{value_text(value)!r} is "
                                            f"{value_text(seen[same])!r} again, as `run` "
                                            "reads it (given twice)"))
                seen.setdefault(same, value)
    if problems or values_only:
        return unique(problems), []
    configs = []
    fixed = list(study.fixed.items())
    for i, point in enumerate(study.points()):
        pairs = fixed + [(k, v) for k, v in point.items() if run_option(k)]
        try:
            configs.append(config_of(study, pairs))
        except (ValueError, ConfigError) as exc:
            problems.append(Problem(line("axes", ""), f"point {i} ({point_text(point)})",
                                    str(exc)))
    return unique(problems), configs


def unique(problems: List[Problem]) -> List[Problem]:
    seen, out = set(), []
    for p in problems:
        if (p.where, p.message) not in seen:
            seen.add((p.where, p.message))
            out.append(p)
    return out
