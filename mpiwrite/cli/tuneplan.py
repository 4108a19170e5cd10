"""`mpiwrite tune plan` and `tune report`: a screening study over a client's tunables, written
as a study file (so `study plan|run|report` and `jobscript --study` take it), and its answer:
each factor's main effect, ranked (docs/tune.md).  `tune list|get|set`: cli/tune.py."""

from __future__ import annotations

import json
import math
import os
import shlex
import sys
from typing import Any, Dict, List, Optional, Tuple

import click

from mpiwrite.cli.options import rate_from, rate_option, sampling_options
from mpiwrite.cli.tune import _SYSROOT, readable, tunable_of, tune, where_of
from mpiwrite.errors import ConfigError
from mpiwrite.text import printable

# What the man page and `mpiwrite help` show under EXAMPLES (cli/manpage.py)
EXAMPLES = {
    "tune list": ["mpiwrite tune list /lustre/scratch/$USER/mpiwrite",
                 "mpiwrite tune list /mnt/nfs --format json"],
    "tune get": ["mpiwrite tune get 'osc.*.max_rpcs_in_flight' /lustre/scratch/$USER/mpiwrite"],
    "tune set": ["mpiwrite tune set 'osc.*.max_rpcs_in_flight' 16 /lustre/scratch/$USER/mpiwrite"],
    "tune plan": ["mpiwrite tune plan /lustre/scratch/$USER/mpiwrite -o tune.toml "
                 "--budget 30min",
                  "mpiwrite tune plan /lustre/scratch/$USER/mpiwrite -o tune.toml "
                  "--from results/mpiwrite-20261129T220833Z-524bd3.h5"],
    "tune report": ["mpiwrite tune report tune.toml",
                   "mpiwrite tune report tune.toml --format json"],
    "tune": ["mpiwrite tune list /lustre/scratch/$USER/mpiwrite",
            "mpiwrite tune plan /lustre/scratch/$USER/mpiwrite -o tune.toml --budget 30min",
            "mpiwrite tune report tune.toml --format json"],
}

MAX_REPEAT = 20


def _levels(spec: str) -> Tuple[str, List[str]]:
    name, sep, values = spec.partition("=")
    levels = [v.strip() for v in values.split(",") if v.strip()]
    if not sep or not name.strip() or len(levels) != 2:
        raise ConfigError(f"--param {spec!r}: must be NAME=LOW,HIGH (two levels)")
    return name.strip(), levels


def _factors(client, where, params: List[str], only: Optional[List[str]] = None
             ) -> List[Tuple[Any, List[str], str]]:
    """(tunable, [first level, second level], value now): the first level is the value now
    when it is one of the two (the report's `current`).  `only`: the catalogue's tunables
    to take (--from: those acting on the run's limit)."""
    from mpiwrite.clients import tuning

    wanted = [_levels(p) for p in params] if params else [
        (t.name, []) for t in client.tunables.values() if not t.remount
        and (only is None or t.name in only)]
    names = [w[0] for w in wanted]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ConfigError(f"--param {twice[0]}: given twice; give each tunable once")
    out = []
    for (t, now), (_name, levels) in zip(readable(client, where, [w[0] for w in wanted])
                                         if params else _readable_ones(client, where, wanted),
                                         wanted):
        if now is None:  # left out: cannot be read back, so a study could not restore it
            continue
        offered = tuning.offered(t, where)
        if levels:
            checked = []
            for v in levels:
                good, why = tuning.checked(t, v, offered)
                if good is None:
                    raise ConfigError(f"--param: {why}")
                checked.append(good)
            if checked[0] == checked[1]:
                raise ConfigError(f"--param {t.name}: both levels are {checked[0]}")
        else:
            other = [tuning.checked(t, v, offered)[0] for v, _ in t.worth_trying(now)]
            other = [v for v in other if v is not None and v != now]
            if not other:
                continue
            checked = [now, other[0]]
        if now in checked:
            checked = [now] + [v for v in checked if v != now]
        out.append((t, checked, now))
    if not out:
        raise ConfigError("TARGET: no tunable of its client can be read and changed here")
    return out


def _from_limit(record: str, client) -> List[str]:
    """The names of the client's tunables that act on the limit the run `record` met
    (answers/limits.py), said on standard output; ConfigError where it has no verdict or no
    tunable acts on it."""
    from mpiwrite.answers import limits
    from mpiwrite.cli.lookup import one_run

    try:
        rec, _code = one_run(record, ["results"], False)
    except ConfigError as exc:
        raise ConfigError(str(exc).replace("RUN:", "--from:", 1)) from None
    got = limits.of_record(rec)
    if got is None:
        raise ConfigError(f"--from: {printable(record)!r} has no limit verdict (no good "
                          "iteration with per-rank figures: an imported or failed run)")
    from mpiwrite.clients.tunables import acting_on

    names = [t.name for t in acting_on(client.tunables, got["limit"]) if not t.remount]
    said = f"the run's limit: {got['limit']} ({got['confidence']}): {got['evidence']}"
    if not names:
        raise ConfigError(f"--from: {said}; no tunable of the {client.name} client's "
                          f"catalogue acts on it (try: {got['advice']})")
    click.echo(printable(f"{said}; factors acting on it: {', '.join(names)}"))
    return names


def _readable_ones(client, where, wanted):
    """Without --param: the catalogue's tunables that can be read back (others left out)."""
    from mpiwrite.clients import tuning

    for name, _ in wanted:
        t = tunable_of(client, name)
        value, why = tuning.read(t, where)
        if value is None:
            sys.stderr.write(printable(f"mpiwrite: {name} left out: cannot be read back "
                                       f"({why})") + "\n")
        yield (t, value) if value is not None else (t, None)


def setting_name(tunable: str) -> str:
    return tunable.replace("*.", "").replace("*", "")


@tune.command(name="plan")
@click.argument("target")
@click.option("-o", "--output", required=True, help="The study file to write (.toml).")
@click.option("--param", "params", multiple=True, help="NAME=LOW,HIGH: a tunable and its two "
              "levels (repeatable); default: the catalogue's, at the value now and the first "
              "other candidate.")
@click.option("--budget", default="30min", show_default=True,
              help="Time for the whole study: repetitions are fitted to it.")
@click.option("--run", "run_opts", multiple=True, help="OPTION=VALUE: a fixed `run` option "
              "(time=20s, block_size=1MiB, fsync=true; repeatable).")
@click.option("--name", default="tune", show_default=True, help="The study's name.")
@click.option("--results", default="results", show_default=True)
@click.option("--from", "from_run", default=None, metavar="RECORD",
              help="A run whose limit (as `show` names it) chooses the factors: the "
                   "catalogue's tunables that act on it (instead of them all).")
@rate_option
@_SYSROOT
def plan(target, output, params, budget, run_opts, name, results, from_run, rate, sysroot):
    """Write a screening study over the tunables of the client serving TARGET: two levels
    each, k factors in about k+1 points, repetitions fitted to the budget, in a balanced
    seeded order (each level after each level about equally often)."""
    from mpiwrite.files import check_output
    from mpiwrite.study import estimate
    from mpiwrite.study.design import design
    from mpiwrite.study.plan import StudyError, parse
    from mpiwrite.study.points import check
    from mpiwrite.units import format_seconds, parse_time

    if os.path.lexists(output):
        raise ConfigError(f"-o: {output!r} exists; give a new file")
    check_output("-o", output)
    try:
        seconds_budget = parse_time(budget)
    except ValueError as exc:
        raise ConfigError(f"--budget: {exc}") from None
    if seconds_budget <= 0:
        raise ConfigError(f"--budget: {budget!r} leaves no time for a run")
    for what, path in (("TARGET", os.path.abspath(target)), ("--sysroot", sysroot or "")):
        if "{value}" in path:  # a study replaces {value} in its set and get commands
            raise ConfigError(f"{what}: {printable(path)!r} holds '{{value}}', which a study "
                              "would replace in its set and get commands; give a path "
                              "without it")
    client, where = where_of(target, sysroot)
    if "{value}" in where.sysroot:  # as resolved (a link to a folder holding it)
        raise ConfigError(f"--sysroot: {printable(where.sysroot)!r} holds '{{value}}', which "
                          "a study would replace in its commands; give a path without it")
    only = None
    if from_run is not None:
        if params:
            raise ConfigError("--from: give --from or --param, not both (--from chooses "
                              "the factors)")
        only = _from_limit(from_run, client)
    factors = _factors(client, where, list(params), only)
    fixed: Dict[str, Any] = {}
    for opt in run_opts:
        key, sep, value = opt.partition("=")
        if not sep:
            raise ConfigError(f"--run {opt!r}: must be OPTION=VALUE")
        fixed[key.strip().replace("-", "_")] = _toml_value(value.strip())
    if "time" not in fixed and "size" not in fixed:
        fixed["time"] = "20s"
    names = [setting_name(t.name) for t, _, _ in factors]
    d = design(names)
    seed = int.from_bytes(os.urandom(4), "big")  # written in the file: its order is fixed
    from mpiwrite.study import settle

    spec = settle.default(names, str(fixed.get("fsync", True)).lower() == "false"
                          and str(fixed.get("direct", False)).lower() != "true")
    helper = [sys.executable, "-m", "mpiwrite", "tune"]
    root = ["--sysroot", where.sysroot] if where.sysroot != "/" else []
    target_abs = os.path.abspath(target)

    def body(repeat: int) -> str:
        out = [f"# written by mpiwrite tune plan: {d.kind}, {len(d.rows)} points for "
               f"{len(factors)} factor(s) at two levels", "# main effects only; cannot be "
               "told apart: " + ("; ".join(d.aliases) if d.aliases else "nothing"),
               "# the first value of each setting is its value when planned (the report's "
               "`current`)", "", "[study]", f"name = {json.dumps(name)}",
               f"target = {json.dumps(target_abs)}", f"results = {json.dumps(results)}",
               f"repeat = {repeat}", 'order = "balanced"',
               "# the run order's seed: each repetition a permutation of the points, each "
               "level following each level about equally often (docs/study.md)",
               f"seed = {seed}"]
        if spec.mode != "none":
            out += ["# before each run, flush and wait for the node's dirty pages: a run's "
                    "writeback left to the next is carry-over (docs/study.md, Settle)",
                    f"settle = {json.dumps(spec.text())}"]
        out += ["", "[run]"]
        out += [f"{k} = {json.dumps(v)}" for k, v in fixed.items()]
        for (t, levels, now), sname in zip(factors, names):
            why = "; ".join(f"{v}: {w}" for v, w in t.worth_trying(now)) or "levels as given"
            out += ["", f"# {t.name}: {t.about} (now {now}; {t.how}); {why}", "[[setting]]",
                    f"name = {json.dumps(sname)}", f"values = {json.dumps(levels)}",
                    f"scope = {json.dumps(t.scope)}",
                    "set = " + json.dumps(shlex.join(helper + ["set"] + root + [
                        t.name, "{value}", target_abs]).replace("'{value}'", "{value}")),
                    "get = " + json.dumps(shlex.join(helper + ["get"] + root + [
                        t.name, target_abs]))]
        for row in d.rows:
            cells = ", ".join(f'{json.dumps("setting." + n)} = {json.dumps(lv[0 if x < 0 else 1])}'
                              for n, x, lv in zip(names, row, [f[1] for f in factors]))
            out += ["", "[[point]]", cells.replace(", ", "\n")]
        return "\n".join(out) + "\n"

    def study_of(repeat: int):
        from mpiwrite.study.plan import tomllib

        text = body(repeat)
        try:
            st = parse(tomllib.loads(text), text, output)
        except StudyError as exc:
            raise ConfigError(f"--run: {exc.problems[0].where}: {exc.problems[0].message}") \
                from None
        problems, configs = check(st)
        if problems:
            raise ConfigError(f"--run: {problems[0].where}: {problems[0].message}")
        return text, st, configs

    # the same estimate as `study plan` prints for the file written (study/estimate.py)
    text, st, configs = study_of(1)
    # a user's bad input is named first; then, before the target is probed for a rate, a
    # tunable only root may set is refused with what an administrator would run
    _refuse_root_ones(factors, target, params, run_opts, budget)
    speed = estimate.rate_for(target, rate_from(rate)).mb_per_s \
        if any(c.size and not c.time_limit for c in configs) else 1.0
    settles = spec.mode != "none"
    # a round as this machine runs it, with the margin a study's launches, settles and
    # settings take beyond it on several hosts (docs/study.md): the budget is not overrun
    per_round = (estimate.study_seconds(st, configs, speed, settles)
                 - estimate.STARTUP_SECONDS) * estimate.BUDGET_MARGIN
    repeat = min(MAX_REPEAT, int((seconds_budget - estimate.STARTUP_SECONDS) // per_round))
    if repeat < 2:
        least = 2 * per_round + estimate.STARTUP_SECONDS + 0.05  # two rounds and the launch
        raise ConfigError(f"--budget: {budget} fits {repeat} round(s) of the {len(d.rows)} "
                          f"points ({format_seconds(per_round)} each); a verdict needs 2: give "
                          f"at least {math.ceil(least)}s, or a shorter --run time")
    text, st, configs = study_of(repeat)
    total = estimate.study_seconds(st, configs, speed, settles)
    from mpiwrite import files

    files.write_new(output, text.encode())
    click.echo(printable(f"{output}: {d.kind}, {len(d.rows)} points x {repeat} repetitions "
                         f"= {len(d.rows) * repeat} runs, about "
                         f"{format_seconds(total)}; factors: "
                         + ", ".join(f"{t.name} {a}/{b}" for t, (a, b), _ in factors)))
    click.echo(printable(f"next: mpiexec -n N mpiwrite study run {output}; then mpiwrite tune "
                         f"report {output}"))
    return 0


def _refuse_root_ones(factors, target: str, params, run_opts, budget: str) -> None:
    """As a user, tunables that need root to set: no study planned (it would fail at its
    first `set`); what an administrator would run is printed, then one error line (exit 2)."""
    if os.geteuid() == 0:
        return
    need = [(t, levels, now) for t, levels, now in factors if t.root]
    if not need:
        return
    import pwd

    try:
        me = pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        me = f"uid {os.geteuid()}"
    target_abs = os.path.abspath(target)
    plan_words = ["mpiwrite", "tune", "plan", target_abs, "-o", "tune.toml", "--budget", budget]
    for t, levels, _now in factors:
        plan_words += ["--param", f"{t.name}={','.join(levels)}"]
    for opt in run_opts:
        plan_words += ["--run", opt]
    lines = ["# These tunables need root to set; an administrator can run the study (the study "
             "sets each", "# value before its runs and puts back the value now after them):",
             shlex.join(plan_words), "mpiexec -n N mpiwrite study run tune.toml",
             "# or set one value for you on every node, and put it back afterwards:"]
    for t, levels, now in need:
        other = next((v for v in levels if v != now), levels[-1])
        lines.append(shlex.join(["mpiwrite", "tune", "set", t.name, other, target_abs])
                     + "    # then, to restore: "
                     + shlex.join(["mpiwrite", "tune", "set", t.name, now, target_abs]))
    click.echo("\n".join(printable(ln) for ln in lines))
    raise ConfigError(f"{', '.join(t.name for t, _, _ in need)}: setting "
                      f"{'it' if len(need) == 1 else 'them'} needs root, and you are {me}: "
                      "no study planned (what an administrator would run is above; `tune "
                      "list` marks such tunables)")


def _toml_value(text: str):
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    return int(text) if text.isascii() and text.isdigit() else text  # not '²' (isdigit)


@tune.command(name="report")
@click.argument("file")
@click.option("--results", default=None,
              help="Folder of the records (default: the file's [study] results).")
@sampling_options
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table",
              show_default=True)
def report(file, results, metric, unit, warmup, confidence, fmt):
    """Each factor's main effect in percent with its interval and p, ranked; the factors the
    design cannot tell apart; the recommended setting and the confirmation to run next."""
    from mpiwrite.answers import tune_report
    from mpiwrite.cli.options import confidence_from
    from mpiwrite.cli.study import open_study

    confidence = confidence_from(confidence)  # in [0.5, 1) as everywhere: not 0, nan, 1
    from mpiwrite.study.design import design

    def two_levels(st):
        if not tune_report.is_tune_study(st):
            raise ConfigError(f"{file}: not a tune study (every setting at two levels)")

    st, configs, store, runs, keys = open_study(file, results, check_study=two_levels)
    got = tune_report.answer(st, keys, runs, metric, warmup, confidence,
                             design([s.name for s in st.settings]).aliases,
                             where_text=f"{file}: ", results=results or st.results)
    found, chosen, confirm, aliases = got["found"], got["chosen"], got["confirm"], got["aliases"]
    levels, ys, left_out = got["levels"], got["ys"], store.not_complete()
    if fmt == "json":
        click.echo(json.dumps({"study": st.name, "metric": metric, "runs": len(ys),
                               "method": found["method"], "df": found["df"],
                               "left_out_terms": found["dropped"],
                               "factors": [_clean(r) for r in found["factors"]],
                               "cannot_tell_apart": aliases, "recommended": chosen,
                               "confirm": confirm, "left_out": left_out}, indent=1))
    else:
        text = tune_report.text(found, aliases, chosen, confirm, metric, levels)
        click.echo("\n".join(printable(line) for line in text.split("\n")))
    if left_out:
        said = ", ".join(f"{n} {state}" for state, n in sorted(left_out.items()))
        sys.stderr.write(f"mpiwrite: {sum(left_out.values())} run(s) left out ({said})\n")
    return 0


def _clean(row: Dict[str, Any]) -> Dict[str, Any]:
    """JSON without NaN."""
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else v)
            for k, v in row.items()}
