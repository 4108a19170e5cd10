"""`mpiwrite study`: a matrix of runs declared in one file (docs/study.md).

`study plan FILE` reads the file, checks every option of every point with `mpiwrite run`'s
own rules (so a point is refused exactly as the same `run` would be), and prints the runs in
the order they will run with their key values, how many, and an estimated duration.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Dict, List, NamedTuple, Optional

import click

from mpiwrite.cli.options import rate_from, rate_option, sampling_options
from mpiwrite.errors import ConfigError, RunError
from mpiwrite.study import estimate, order, settle
from mpiwrite.study.plan import Problem, Study, StudyError, load
from mpiwrite.study.points import check, value_text
from mpiwrite.text import printable
from mpiwrite.units import format_seconds, format_size
from mpiwrite.vocab.axes import run_option

# What the man page and `mpiwrite help` show under EXAMPLES (cli/manpage.py)
EXAMPLES = {
    "study": ["mpiwrite study plan examples/checksums.toml",
             "mpiexec -n 8 mpiwrite study run examples/blocks.toml",
             "mpiwrite study report examples/blocks.toml"],
    "study plan": ["mpiwrite study plan examples/checksums.toml",
                  "mpiwrite study plan examples/blocks.toml --rate 400"],
    "study run": ["mpiexec -n 8 mpiwrite study run examples/blocks.toml",
                 "srun -N 4 --ntasks-per-node 16 mpiwrite study run examples/checksums.toml"],
    "study restore": ["srun -N 4 --ntasks-per-node=1 mpiwrite study restore "
                     "examples/checksums.toml"],
    "study report": ["mpiwrite study report examples/blocks.toml",
                    "mpiwrite study report examples/blocks.toml --metric first-done "
                    "--format json"],
}

STARTUP_SECONDS = 120.0  # of the job: Python and MPI on every node, settings read
MARGIN = 1.2  # on the estimate, for the job's --time


def study_job(file: str, nodes: Optional[List[int]], ntasks_per_node: Optional[int],
              time_limit: Optional[str], rate: Optional[float] = None) -> Dict[str, Any]:
    """What `jobscript --study FILE` renders: the allocation the study needs (its largest
    node count and ranks per node, unless given larger), and --time from the estimate with
    start-up and a margin; a given --time-limit shorter than the estimate is refused."""
    from mpiwrite.cli.jobscript import slurm_seconds, slurm_time

    try:
        st = load(file)
    except StudyError as exc:
        more = check(exc.study, values_only=True)[0] if exc.study is not None else []
        fail(file, exc.problems + more)
    problems, configs = check(st)
    if problems:
        fail(file, problems)
    need_nodes = max(st.axes.get("nodes", [1]))
    need_ranks = max(st.axes.get("ranks_per_node", [1]))
    nodes_n = max(nodes or [need_nodes])
    if nodes and len(nodes) > 1:
        raise ConfigError("--nodes: a study's node counts are its `nodes` axis; give one "
                          "count (the allocation) or none")
    if nodes_n < need_nodes:
        raise ConfigError(f"--nodes: {nodes_n} is fewer than the study's {need_nodes}")
    tasks = ntasks_per_node or need_ranks
    if tasks < need_ranks:
        raise ConfigError(f"--ntasks-per-node: {tasks} is fewer than the study's "
                          f"{need_ranks} ranks per node")
    # the job's nodes are not this one: no probe here, the rate given or assumed
    rate = rate or estimate.ASSUMED_RATE
    basis = f"sizes at {rate:g} MB/s per rank"
    spec = settle.for_study(st.settle, [s.name for s in st.settings], configs)
    seconds = estimate.study_seconds(st, configs, rate, spec.mode != "none")
    runs = len(st.runs())
    need = seconds + STARTUP_SECONDS
    if time_limit:
        given = slurm_seconds(time_limit)
        if given < need:
            raise ConfigError(
                f"--time-limit: {time_limit} ({format_seconds(given)}) is shorter than the "
                f"study's estimate of {format_seconds(need)} ({runs} runs from {basis}, plus "
                f"{STARTUP_SECONDS:g} s of start-up); give at least {slurm_time(need)}, or "
                "submit it again after the limit (it resumes)")
    else:
        time_limit = slurm_time(need * MARGIN)
    return {"nodes": [nodes_n], "ntasks_per_node": tasks, "time_limit": time_limit,
            "study": os.path.abspath(file), "results": st.results,
            "estimate": (f"study {st.name}, {runs} runs, estimated {format_seconds(seconds)} "
                         f"from {basis}")}




def fail(path: str, problems: List[Problem]) -> None:
    """One line for every problem, in the file's order; exit 2."""
    for p in sorted(problems, key=lambda p: p.line):
        where = f"{path}:{p.line}" if p.line else path
        sys.stderr.write(printable(f"mpiwrite: error: {where}: {p.where}: {p.message}") + "\n")
    raise SystemExit(2)


@click.group()
def study():
    """A matrix of runs declared in one TOML file: plan it, run it (see docs/study.md)."""


@study.command()
@click.argument("file")
@rate_option
def plan(file, rate):
    """The runs of a study in the order they will run, how many, and how long they take.

    Every problem in the file is one line naming its key and line (exit 2)."""
    rate_from(rate)
    try:
        st = load(file)
    except StudyError as exc:  # the file's shape is wrong: its option values are said too
        more = check(exc.study, values_only=True)[0] if exc.study is not None else []
        fail(file, exc.problems + more)
    problems, configs = check(st)
    if problems:
        fail(file, problems)
    points = st.points()
    runs = st.runs()
    keys = list(st.axes)
    click.echo(printable(f"study {st.name}: {len(points)} point{'s' * (len(points) != 1)} x "
                         f"{st.repeat} repetition{'s' * (st.repeat != 1)} = {len(runs)} runs, "
                         f"order {st.order} (seed {st.order_seed()}"
                         f"{'' if st.seed is not None else ', from the file'})"
                         f"; target {st.target}, results {st.results}"))
    if st.order == "interleaved" and st.settings:
        click.echo(printable(f"mpiwrite: warning: {order.ALIASED}"), err=True)
    widths = [max(len(k), *(len(value_text(p[k])) for p in points)) for k in keys]
    click.echo(printable(("  run  point  rep  " + "  ".join(k.ljust(w) for k, w in
                                                           zip(keys, widths))).rstrip()))
    for n, (i, r) in enumerate(runs):
        cells = "  ".join(value_text(points[i][k]).ljust(w) for k, w in zip(keys, widths))
        click.echo(printable(f"  {n:>3}  {i:>5}  {r:>3}  {cells}".rstrip()))
    balance = order.balance_lines(runs, points, keys) if st.repeat > 1 else []
    for line in balance:  # what the reports need to tell a run's level from the one before
        click.echo(printable(f"run before: {line}"))
    sizes = {c.size for c in configs if c.size}
    size_text = f"; {format_size(max(sizes))} per rank at most" if sizes else ""
    spec = settle.for_study(st.settle, [s.name for s in st.settings], configs)
    speed = estimate.rate_for(st.target, rate) if any(c.size and not c.time_limit
                                                      for c in configs) else None
    total = estimate.study_seconds(st, configs, speed.mb_per_s if speed else 1.0,
                                   spec.mode != "none")
    click.echo(printable(f"estimated duration: {format_seconds(total)} (one launch and "
                         f"{len(runs)} runs: " + (f"sizes at {speed.basis}; " if speed else
                                                  "their time limits; ")
                         + "settles and settings' changes included; docs/study.md)"
                         + size_text))
    why = "as the file says" if st.settle else (
        "the default: buffered runs or a setting of writeback or a cache" if spec.mode != "none"
        else "the default: fsync'd runs, no setting of writeback or a cache")
    click.echo(printable(f"settle before each run: {spec.text()} ({why})"))
    refused = settle.refusal(spec)
    if refused:
        fail(file, [Problem(st.lines.get(("study", "settle"), 0), "[study] settle", refused)])
    for s in st.settings:
        click.echo(printable(f"setting {s.name}: {', '.join(s.values)}; set: {s.set}"
                             f"{'; get: ' + s.get if s.get else ''}"))
    return 0


@study.command(name="run")
@click.argument("file")
@click.option("--results", default=None,
              help="Folder for the records (default: the file's [study] results).")
@click.option("--new", is_flag=True,
              help="Start the study again: run every point even where complete records of "
                   "it exist, and accept a changed file under the same study name.")
def run_study(file, results, new):
    """Run every point of a study inside this one MPI launch, resuming where it stopped.

    Launch it like `run`: `mpiexec -n 8 mpiwrite study run study.toml`.  Points with fewer
    nodes or ranks per node than the launch run on the first ones; settings are applied by
    one rank per node before each point and restored at the end.  Runs already complete in
    the results folder are skipped (run it again after an interruption)."""
    from mpiwrite.run.process import launcher_size
    from mpiwrite.study import execute

    argv = ["mpiwrite"] + sys.argv[1:]
    lines: List[str] = []
    st, configs = None, []
    try:
        st = load(file)
        if results is not None:
            if not results.strip():
                raise StudyError(file, [Problem(0, "--results", "must be a folder")])
            if os.path.lexists(results) and not os.path.isdir(results):
                raise StudyError(file, [Problem(0, "--results", f"not a folder ({results!r})")])
            st = st._replace(results=results)
        problems, configs = check(st)
        if not problems:  # what this node cannot do, before any run
            refused = settle.refusal(settle.for_study(st.settle, [s.name for s in st.settings],
                                                      configs))
            if refused:
                problems.append(Problem(st.lines.get(("study", "settle"), 0),
                                        "[study] settle", refused))
    except StudyError as exc:
        more = check(exc.study, values_only=True)[0] if exc.study is not None else []
        problems = exc.problems + more
    for p in sorted(problems, key=lambda p: p.line):
        where = f"{file}:{p.line}" if p.line else file
        lines.append(f"{where}: {p.where}: {p.message}")
    if lines and launcher_size() <= 1:
        fail(file, problems)
    # under a launcher every rank joins the others to say so (one may read another file)
    return execute.main(st, configs, argv, "\n".join(lines), new)


@study.command(name="restore")
@click.argument("file")
def restore_study(file):
    """Put back the client settings a study left changed on this node.

    A study writes each node's original values down before it changes them (a journal in
    MPIWRITE_STATE, or ~/.local/state/mpiwrite, or /tmp/mpiwrite-state-UID where the home
    cannot be written) and removes the journal once they are back.
    When the launcher killed the ranks first (a hang-up, a closed pipe, SIGKILL), the journal
    stays: this puts back what it holds, on this node; run it once per node
    (`srun -N K --ntasks-per-node=1 mpiwrite study restore FILE`).  FILE is the study file,
    or the study's name when the file is gone: the journal holds the commands.  Refused while
    a launch of the study still runs on this node.  The next `study run` of the study does
    the same, before it reads anything."""
    from mpiwrite.host import host_name
    from mpiwrite.study import journal
    from mpiwrite.study.plan import NAME
    from mpiwrite.study.settings import Settings

    if not os.path.lexists(file) and NAME.match(file):
        name = file  # the file is gone: its study's name names the journal
    else:
        try:
            name = load(file).name
        except StudyError as exc:
            fail(file, exc.problems)
    try:
        host = host_name()
    except ValueError as exc:
        raise ConfigError(f"MPIWRITE_HOSTNAME: {exc}") from None
    try:
        doc = journal.of_study(host, name)
    except journal.JournalError as exc:
        raise RunError(f"study {name} on {host}: {exc}") from None
    if doc is None:
        click.echo(printable(f"study {name}: nothing to put back on {host}"))
        return 0
    settings = Settings([], True, (host, name, "", file))
    try:
        said, trouble = settings.recover()
    finally:
        settings.release()
    if trouble:
        raise RunError(f"study {name} on {host}: {trouble}")
    click.echo(printable(f"study {name}: {said}"))
    return 0


class Opened(NamedTuple):
    """A study file checked as `study run` checks it, and its records: what `study report`,
    `tune report` and `page FILE.toml` read."""
    study: Study
    configs: list  # each point's RunConfig
    store: Any  # answers.results.Store over the results folder
    runs: Any  # answers.study_report.StudyRuns: this study's, of one generation
    point_keys: List[str]


def open_study(file: str, results: Optional[str], generation: Optional[int] = None,
               cache=None, check_study=None) -> Opened:
    """The study file `file` loaded and checked (one line a problem, exit 2), and the records
    of its results folder (or `results`), of `generation` (default: the newest);
    `check_study(st)` may refuse what the caller cannot use (ConfigError)."""
    from mpiwrite.answers.results import Store
    from mpiwrite.answers.study_report import StudyRuns
    from mpiwrite.study import resume
    from mpiwrite.study.execute import fingerprint

    try:
        st = load(file)
    except StudyError as exc:
        fail(file, exc.problems)
    problems, configs = check(st)
    if problems:
        fail(file, problems)
    if check_study is not None:
        check_study(st)
    folder = results if results is not None else st.results
    if not os.path.isdir(folder):
        raise ConfigError(f"--results: {folder!r} is not a folder of records")
    store = Store([folder], **({"level": "full", "cache": cache} if cache is not None else {}))
    fields = {a: resume.field_of(a) for a in st.axes if run_option(a)}
    runs = StudyRuns(store, st.name, fingerprint(st), fields, generation)
    return Opened(st, configs, store, runs, resume.point_keys(st, configs))


@study.command(name="report")
@click.argument("file")
@click.option("--results", default=None,
              help="Folder of the records (default: the file's [study] results).")
@sampling_options
@click.option("--format", "fmt", type=click.Choice(["table", "markdown", "csv", "json"]),
              default="table", show_default=True,
              help="json: docs/output.md (study-report-json.schema.json); csv: a line per "
                   "point with each axis's verdict against its first level.")
@click.option("--plot-dir", default=None, help="Also draw the metric against each axis's "
              "levels, a line per combination of the other axes, into this folder as "
              "STUDY-AXIS.png (needs matplotlib); an axis not drawn is said in one line.")
@click.option("--generation", type=click.IntRange(0), default=None,
              help="Report this generation of the study (each `study run --new` starts "
                   "one; default: the newest).")
@click.option("--skip-bad", is_flag=True, help="Exit 0 even if some records were unreadable.")
def report_study(file, results, metric, unit, warmup, confidence, fmt, plot_dir, generation,
                 skip_bad):
    """One table over the study's axes, and each axis's levels against its first.

    To send it: `mpiwrite page FILE -o FILE.html` writes the same with a plot per axis into
    one HTML file."""
    from mpiwrite.answers.study_report import draw, study_answer, study_report
    from mpiwrite.cli.options import sampling_from

    st, _configs, store, runs, keys = open_study(file, results, generation)
    sampling = sampling_from(metric, unit, warmup, confidence)
    answer = study_answer(runs, st.axes, st.points(), keys, sampling)
    drawn = draw(runs, answer, plot_dir, sampling) if plot_dir is not None else []
    click.echo(study_report(runs, answer, sampling, fmt))
    for line in drawn:  # beside machine output, on stderr: stdout stays one document
        click.echo(line, err=fmt in ("csv", "json"))
    return 1 if store.bad and not skip_bad else 0
