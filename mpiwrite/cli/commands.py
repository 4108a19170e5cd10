"""Commands beyond `run` and `env`, each a thin layer over its module.  None starts MPI."""

from __future__ import annotations

import os
import sys

import click

from mpiwrite.cli.jobscript import MPIRUN_FAMILIES
from mpiwrite.cli.options import (
    FILTER_HELP,
    FORMATS,
    INT,
    AsciiInt,
    Where,
    cache_choice,
    cache_options,
    sampling_from,
    sampling_options,
    units_option,
    where_filter,
    where_option,
)
from mpiwrite.errors import ConfigError, RecordError, RunError, why
from mpiwrite.text import printable


def _store(paths, skip_bad: bool, option: str = "PATHS", level: str = "full", cache=None):
    from mpiwrite.answers.results import Store

    store = Store(paths, option=option, level=level, cache=cache)
    if store.bad and not skip_bad:
        return store, 1
    return store, 0


def _missing_in(where, what: str) -> None:
    """ConfigError when none of the --in folders exists (where KEY=VALUE and run ids look)."""
    if not any(os.path.lexists(w) for w in where):
        names = ", ".join(repr(w) for w in where)
        raise ConfigError(f"{what}, so it is looked up in --in {names}, which does not exist "
                          "(give --in FOLDER)")


def _keys(text: str):
    return [k.strip() for k in text.split(",") if k.strip()] if text else []


@click.command()
@click.argument("paths", nargs=-1, required=True)
@click.option("--record", "record_paths", multiple=True, default=["results"],
              show_default=True, help="The runs' records (files or folders): block size, "
              "bytes per rank and file lengths come from there (repeatable).")
def verify(paths, record_paths):
    """Check data files kept with --keep (files or folders): every block's header and body.

    Run id, iteration and rank come from each file's name; block size and lengths from the
    run's record when one is found (else inferred, and the length is not checked)."""
    from mpiwrite.answers.verify import data_files, parse_name, verify_file

    bad = 0
    found = list(data_files(paths))
    if not found:
        raise ConfigError("PATHS: no mpiwrite data files found")
    recs = _RecordFinder(record_paths)
    for path in found:
        name = parse_name(path)
        rec = recs.get(name.run_id) if name else None
        rep = verify_file(path, rec)
        shown = printable(path)
        if rep.error:
            bad += 1
            click.echo(f"{shown}: error: {printable(rep.error)}")
            continue
        for m in rep.mismatches:
            bad += 1
            click.echo(f"{shown}: mismatch at offset {m.offset} ({rep.where(m.offset)}): "
                       f"expected {m.expected}, found {m.found}")
        if not rep.mismatches:
            note = "" if rep.length_checked else (
                f", length not checked (no record of run {printable(name.run_id)}; "
                "give --record)")
            click.echo(f"{shown}: ok ({rep.blocks} blocks of {rep.block_size} bytes){note}")
    if bad:
        raise RunError(f"verify: {bad} problem(s) in {len(found)} file(s)")


class _RecordFinder:
    """The record of a run id among the --record files and folders (read once, then cached);
    an unreadable record is named once on stderr and not used."""

    def __init__(self, paths):
        self.paths = [p for p in paths if os.path.lexists(p)]
        self.cache = {}

    def get(self, run_id: str):
        if run_id in self.cache:
            return self.cache[run_id]
        from mpiwrite.records.h5 import record_path
        from mpiwrite.records.store import FolderStore

        rec = None
        for p in self.paths:
            path = p if not os.path.isdir(p) else record_path(p, run_id)
            if not os.path.lexists(path):
                continue
            try:
                got = FolderStore().whole(path)  # libhdf5 on it in a child only
            except RecordError as exc:
                sys.stderr.write(f"mpiwrite: warning: {printable(exc)}\n")
                continue
            if got.run_id == run_id:
                rec = got
                break
        self.cache[run_id] = rec
        return rec


@click.command()
@click.argument("paths", nargs=-1, required=True)
@click.option("--by", default="fstype,client,checksums", show_default=True,
              help="Comma-separated run keys or tags to group by.")
@sampling_options
@click.option("--baseline", default=None,
              help=f"The row to compare against: {FILTER_HELP}.")
@click.option("--format", "fmt", type=FORMATS, default="table", show_default=True,
              help="json and csv follow the output contract (docs/output.md).")
@click.option("--skip-bad", is_flag=True, help="Exit 0 even if some records were unreadable.")
@where_option
@units_option
@cache_options
def report(paths, by, metric, unit, warmup, confidence, baseline, fmt, skip_bad, where, units,
           cache_dir, no_cache):
    """One row per configuration over the records under PATHS (files, folders, globs)."""
    from mpiwrite.answers.report import format_rows, lacking_keys, report_rows
    from mpiwrite.answers.results import level_for

    sampling = sampling_from(metric, unit, warmup, confidence, units)
    store, code = _store(paths, skip_bad, level=level_for(metric),
                         cache=cache_choice(cache_dir, no_cache))
    flt = where_filter(where)
    if flt:
        if store.select() and not store.select(flt):
            raise ConfigError(f"--where: no complete run matches {', '.join(where)}")
        store = Where(store, flt)
    keys = _keys(by)
    rows, used = report_rows(store, keys, sampling, baseline)
    if not rows:
        text = _no_rows_text(store, metric, warmup)
        if store.bad:
            raise RunError(f"{text}; {len(store.bad)} unreadable record(s) skipped")
        raise ConfigError(text)
    click.echo(format_rows(rows, keys, fmt, sampling, used, len(store.duplicates)))
    for key, n in lacking_keys(store, keys).items():
        sys.stderr.write(printable(f"mpiwrite: {n} run(s) without {key!r}: grouped under "
                                   f"'-'") + "\n")
    _note_runs_without(store, metric, warmup)
    skipped = store.not_complete()
    if skipped:
        said = ", ".join(f"{n} {state}" for state, n in sorted(skipped.items()))
        sys.stderr.write(f"mpiwrite: {sum(skipped.values())} run(s) that did not complete were "
                         f"left out ({said})\n")
        from mpiwrite.answers.state import ABANDONED

        if ABANDONED in skipped:
            sys.stderr.write("mpiwrite: an abandoned run was killed for good; `mpiwrite clean "
                             "TARGET --results DIR` removes the data files it left\n")
    return code


def _no_rows_text(store, metric: str, warmup: int) -> str:
    """Why a report is empty: no complete run, or complete runs without the metric's figure
    (e.g. client CPU in records from before it was measured)."""
    from mpiwrite.answers.report import no_figure_text, within_warmup

    complete = len(store.select())
    if complete:
        return no_figure_text("PATHS", complete, metric, warmup,
                              within_warmup(store.select(), metric, warmup))
    others = store.not_complete()
    said = ", ".join(f"{n} {state}" for state, n in sorted(others.items()))
    return "PATHS: no complete runs found" + (
        f" ({sum(others.values())} run(s) that did not complete: {said})" if others else "")


def _note_runs_without(store, metric: str, warmup: int) -> None:
    """Name on stderr the complete runs left out for lack of the figure, so a report over old
    and new records does not silently stand for fewer runs than were given."""
    from mpiwrite.answers.report import within_warmup
    from mpiwrite.answers.results import CPU_METRICS, CPU_MISSING, a_figure, metric_values

    short = within_warmup(store.select(), metric, warmup)
    if short:
        sys.stderr.write(f"mpiwrite: {short} complete run(s) left out: --warmup {warmup} "
                         f"leaves out every iteration they have\n")
    left = sum(1 for r in store.select() if not metric_values(r, metric, warmup)) - short
    if left:
        why = f" ({CPU_MISSING})" if metric in CPU_METRICS else ""
        sys.stderr.write(f"mpiwrite: {left} complete run(s) without {a_figure(metric)} were "
                         f"left out{why}\n")


@click.command()
@click.argument("a")
@click.argument("b")
@click.option("--in", "where", multiple=True, default=["results"], show_default=True,
              help="Where KEY=VALUE filters look for records (repeatable).")
@sampling_options
@click.option("--fail-if-slower", "--fail-if-worse", "fail_pct", type=float, default=None,
              metavar="PCT",
              help="Exit 1 when B is slower than A by more than PCT percent (with "
                   "client-cpu or cpu-per-GB: uses more CPU; --fail-if-worse reads better "
                   "there) and the difference is real at --confidence (a CI gate); else "
                   "exit 0.")
@click.option("--json", "as_json", is_flag=True,
              help="Machine-readable output (docs/output.md).")
@click.option("--skip-bad", is_flag=True, help="Exit 0 even if some records were unreadable.")
@units_option
@cache_options
def compare(a, b, where, metric, unit, warmup, confidence, fail_pct, as_json, skip_bad, units,
            cache_dir, no_cache):
    """Is B different from A?  Each is a record, a folder, or KEY=VALUE[,...] over --in.

    Values holding ',' or '=' are quoted: KEY="a,b" (or KEY=a\\,b)."""
    from mpiwrite.answers.report import compare_text, select_side
    from mpiwrite.answers.results import level_for

    if fail_pct is not None and not 0 <= fail_pct < 100:
        raise ConfigError("--fail-if-slower: expected a percentage from 0 to 100, e.g. 5")
    sampling = sampling_from(metric, unit, warmup, confidence, units)
    level, cache = level_for(metric), cache_choice(cache_dir, no_cache)
    needs_in = [(name, x) for name, x in (("A", a), ("B", b)) if not os.path.lexists(x)]
    if needs_in:
        name, x = needs_in[0]
        if "=" not in x:
            raise ConfigError(f"{name}: {x!r} is neither a record path nor a KEY=VALUE filter")
        _missing_in(where, f"{name}: {x!r} is not a path")
    store, code = _store(where, skip_bad, "--in", level, cache) if needs_in else (None, 0)
    side_a, bad_a, dup_a = select_side(a, store, "A", level, cache)
    side_b, bad_b, dup_b = select_side(b, store, "B", level, cache)
    if (bad_a or bad_b) and not skip_bad:
        code = 1
    text, doc, failed = compare_text(side_a, side_b, a, b, sampling, fail_pct,
                                     max(dup_a, dup_b))
    if as_json:
        from mpiwrite.formats import contract

        click.echo(contract.dumps(doc))
    else:
        click.echo(text)
    return 1 if failed else code


@click.command()
@click.argument("run")
@click.option("--in", "where", multiple=True, default=["results"], show_default=True,
              help="Where to look for a run given by its id.")
@click.option("--iteration", type=INT, default=None, help="Per-rank table of this iteration.")
@click.option("--by", "by", type=click.Choice(["rank", "target"]), default="rank",
              show_default=True, help="target: also per storage target (OST, brick, pool), "
              "over every iteration's files (or --iteration's): ranks, bytes, rates, and which "
              "is slower than the others beyond noise.")
@click.option("--skip-bad", is_flag=True, help="Exit 0 even if some records were unreadable.")
def show(run, where, iteration, by, skip_bad):
    """One run in full: parameters, nodes, per-node and per-rank figures, warnings.

    RUN is a record file, a folder holding one record, or a run id, its start or its
    random suffix (the last part, e.g. 524bd3) looked up in --in."""
    from mpiwrite.answers.results import run_keys
    from mpiwrite.answers.show import show_text

    code = 0
    if os.path.isdir(run):
        store, code = _store([run], skip_bad, "RUN")
        if store.conflicts:
            raise ConfigError(f"RUN: {store.conflict_text(next(iter(store.conflicts)))}")
        if len(store.runs) != 1:
            raise ConfigError(f"RUN: {run!r} is a folder with {len(store.runs)} readable "
                              "records, not one; give one record file, or a run id with --in "
                              "FOLDER")
        rec = store.runs[0]
    elif os.path.lexists(run):
        from mpiwrite.records.store import FolderStore

        rec = FolderStore().whole(run)  # RecordError: named, exit 1 (libhdf5 in a child only)
    else:
        _missing_in(where, f"RUN: {run!r} is not a file")
        store, code = _store(where, skip_bad, "--in")
        rec = store.find_run(run)
    try:
        keys = run_keys(rec)
        text = show_text(rec, keys, iteration)
        if by == "target":
            from mpiwrite.answers.targets import target_lines

            text += "\n" + "\n".join(target_lines(
                rec, iterations=None if iteration is None else [iteration]))
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise RunError(f"{rec.path}: unusable record ({type(exc).__name__}: {exc})") from None
    click.echo(text)
    return code


@click.command()
@click.argument("kind", type=click.Choice(["scaling", "ranks", "timeline"]))
@click.argument("paths", nargs=-1, required=True)
@click.option("-o", "--output", required=True, help="Output file: .png, .svg or .pdf.")
@click.option("--by", default="", help="Group runs into lines by these keys (scaling).")
@click.option("--x", "xkey", type=click.Choice(["nodes", "ranks"]), default="nodes",
              show_default=True)
@sampling_options
@click.option("--iteration", type=INT, default=None, help="Iteration (ranks, timeline).")
@click.option("--skip-bad", is_flag=True)
@units_option
@cache_options
def plot(kind, paths, output, by, xkey, metric, unit, warmup, confidence, iteration,
         skip_bad, units, cache_dir, no_cache):
    """Draw a scaling curve, per-rank figures of one run, or a throughput timeline."""
    from mpiwrite import files
    from mpiwrite.answers import plot as plots
    from mpiwrite.answers.results import level_for

    plots.check_output(output)
    files.check_output("-o", output)
    sampling = sampling_from(metric, unit, warmup, confidence, units)
    cache = cache_choice(cache_dir, no_cache)
    store, code = _store(paths, skip_bad, level=level_for(metric) if kind == "scaling"
                         else "full", cache=cache)
    try:
        if kind == "scaling":
            plots.scaling(store, output, _keys(by), xkey, sampling)
        else:
            runs = store.runs
            if len(runs) != 1:
                raise ConfigError(f"PATHS: {kind} draws one run; {len(runs)} records given")
            getattr(plots, kind)(runs[0], output, iteration)
    except OSError as exc:
        raise RunError(f"-o: cannot write {output!r}: {why(exc)}") from None
    click.echo(printable(output))
    return code


@click.command(context_settings={"show_default": True})
@click.option("--nodes", default="1", help="Node count, or a list like 1,2,4,8 for a "
              "scaling study.")
@click.option("--ntasks-per-node", type=AsciiInt(10 ** 5), default=1)
@click.option("--partition", default=None)
@click.option("--account", default=None)
@click.option("--time-limit", default=None, help="Slurm time, e.g. 30, 1:00:00, 1-00:00 "
              "(PBS: the same as walltime=HH:MM:SS).")
@click.option("--scheduler", type=click.Choice(["slurm", "pbs", "torque"]), default="slurm",
              help="Whose directives: slurm (#SBATCH), pbs (PBS Pro and OpenPBS: #PBS -l "
              "select=N:ncpus=K:mpiprocs=K) or torque (#PBS -l nodes=N:ppn=K); PBS jobs "
              "start the ranks with mpiexec.")
@click.option("--launcher", default="srun", help="srun (PMI) or mpirun (mpiexec); with "
              "--scheduler pbs or torque always mpirun.")
@click.option("--mpi", "srun_mpi", type=click.Choice(["auto", "pmix", "pmi2", "none"]),
              default="auto", help="srun --mpi=...; auto: pmix for Open MPI, pmi2 for the "
              "MPICH family (the MPI that mpi4py loads here).")
@click.option("--mpi-family", type=click.Choice(["auto", *MPIRUN_FAMILIES]), default="auto",
              help="Whose mpirun syntax --launcher mpirun renders; auto: mpi4py's MPI here.")
@click.option("--mpiexec", "mpiexec_path", default=None,
              help="The mpirun/mpiexec for --launcher mpirun [default: the family's].")
@click.option("--repeat", type=AsciiInt(10 ** 4), default=1, help="Runs per node count.")
@click.option("--job-name", default="mpiwrite")
@click.option("--results", default="results", help="Folder for records (or give --results "
              "after `--`, once).")
@click.option("-o", "--output", "out_file", default=None, help="Write the script here.")
@click.option("--submit", is_flag=True, help="Hand the script to sbatch; print the job id "
              "(exit 1 if squeue says it can never start, e.g. PartitionNodeLimit).")
@click.option("--study", "study_file", default=None, help="Render one `study run` step for "
              "this study file: the allocation and --time come from the study.")
@click.option("--stage", default=None, metavar="TARBALL", help="A packed environment "
              "(conda-pack, or a venv made at --stage-dir) sent to every node with sbcast and "
              "unpacked there; mpiwrite runs from it (docs/scaling.md).")
@click.option("--stage-dir", default="/tmp/mpiwrite-env", help="Node-local folder --stage "
              "unpacks into; created by the job, removed at its end.")
@click.argument("run_args", nargs=-1, type=click.UNPROCESSED)
@click.pass_context
def jobscript(ctx, nodes, ntasks_per_node, partition, account, time_limit, scheduler, launcher,
              srun_mpi, mpi_family, mpiexec_path, repeat, job_name, results, out_file, submit,
              study_file, stage, stage_dir, run_args):
    """Render a batch script (Slurm's sbatch, PBS's or Torque's qsub); arguments after `--`
    go to `mpiwrite run` unchanged."""
    import shutil

    from mpiwrite import files
    from mpiwrite.cli import jobscript as js

    if out_file:
        files.check_output("-o", out_file)
    shape = {"nodes": js.parse_nodes(nodes), "ntasks_per_node": ntasks_per_node,
             "time_limit": time_limit,
             "results": None if _defaulted(ctx, "results") else results}
    if study_file:
        from mpiwrite.cli.study import study_job

        if run_args or repeat != 1:
            raise ConfigError("--study: the study file holds the run options and repetitions;"
                              " give no --repeat and nothing after `--`")
        given = shape["results"]
        shape = study_job(study_file, None if _defaulted(ctx, "nodes") else shape["nodes"],
                          None if _defaulted(ctx, "ntasks_per_node") else ntasks_per_node,
                          time_limit)
        shape["results"] = given or shape["results"]
    else:
        cfg = _check_run_args(ctx, list(run_args))
        warning = js.time_warning(time_limit, cfg, len(shape["nodes"]) * repeat)
        if warning:
            sys.stderr.write(printable(f"mpiwrite: warning: {warning}") + "\n")
    if scheduler != "slurm" and _defaulted(ctx, "launcher"):
        launcher = "mpirun"  # PBS has no srun
    if launcher == "mpirun" and srun_mpi != "auto":
        raise ConfigError("--mpi: chooses srun's PMI plugin; it has no meaning with "
                          "--launcher mpirun")
    family = mpi_family
    if family == "auto" and (launcher == "mpirun" or srun_mpi == "auto"):
        family = _installed_family()
    if launcher == "srun":
        srun_mpi = js.srun_mpi_for(family) if srun_mpi == "auto" else srun_mpi
        if not srun_mpi:
            sys.stderr.write("mpiwrite: could not tell which MPI mpi4py loads here; the "
                             "script's srun uses the site's default --mpi\n")
    elif family not in js.MPIRUN_FAMILIES:
        raise ConfigError(f"--mpi-family: mpi4py here loads {family!r} MPI, which has no "
                          "mpirun syntax here; give --mpi-family or use --launcher srun")
    here = shutil.which("mpiwrite") or os.path.join(os.path.dirname(sys.executable), "mpiwrite")
    if stage is not None and not os.path.isfile(stage):
        raise ConfigError(f"--stage: {stage!r} is not a file (a packed environment)")
    job = js.Job(**shape, partition=partition, account=account,
                 stage=os.path.abspath(stage) if stage else None, stage_dir=stage_dir,
                 launcher=launcher, mpi=srun_mpi if launcher == "srun" else "pmi2",
                 family=family if launcher == "mpirun" else "mpich",
                 repeat=repeat, job_name=job_name, mpiwrite=os.path.abspath(here),
                 libmpi=os.environ.get("MPI4PY_LIBMPI") or None, run_args=list(run_args),
                 mpiexec=mpiexec_path or _mpirun_of(family, here), scheduler=scheduler)
    text = js.render(job)
    if out_file:
        try:  # a new file renamed over the name: never written through a planted link
            files.replace_file(out_file, text.encode(), mode=0o755)
        except OSError as exc:
            raise RunError(f"-o: cannot write {out_file!r}: {why(exc)}") from None
    if submit and scheduler != "slurm":
        from mpiwrite.cli import pbs

        click.echo(pbs.submit_text(text, out_file))
    elif submit:
        job_id, problem = js.submit(text)
        click.echo(job_id)
        if problem:  # queued, but it can never start (PartitionNodeLimit): say so, exit 1
            raise RunError(problem)
    elif not out_file:
        click.echo(text, nl=False)


def _defaulted(ctx, name: str) -> bool:
    return ctx.get_parameter_source(name) == click.core.ParameterSource.DEFAULT


def _installed_family() -> str:
    """The family of the MPI library mpi4py loads here (MPI4PY_LIBMPI, modules), without
    starting MPI in this process; 'unknown' if it cannot be loaded."""
    from mpiwrite.facts import mpiinfo
    from mpiwrite.procs import run_bounded

    out = run_bounded([sys.executable, "-m", "mpi4py", "--mpi-lib-version"], 60.0)
    return mpiinfo.family(out.text()) if out.ok else "unknown"


def _mpirun_of(family: str, mpiwrite_path: str) -> str:
    """The family's launcher: Hydra's mpiexec beside mpiwrite (the mpich wheel) or on PATH;
    Open MPI's mpirun on PATH, passing over an MPICH mpirun that shadows it."""
    import os
    import shutil

    if family != "openmpi":
        return _beside(mpiwrite_path, "mpiexec")
    for name in ("mpirun", "mpirun.openmpi", "orterun", "prterun"):
        found = shutil.which(name)
        if found and not os.path.exists(os.path.join(os.path.dirname(found), "mpichversion")):
            return found
    return "mpirun"


def _beside(path: str, name: str) -> str:
    """`name` from the same bin folder as `path` when it is there (a virtualenv's MPI)."""
    import os
    import shutil

    here = os.path.join(os.path.dirname(os.path.abspath(path)), name)
    return here if os.path.exists(here) else (shutil.which(name) or name)


def _check_run_args(ctx, args) -> None:
    """Parse the run arguments as `mpiwrite run` would, so mistakes surface now (exit 2)."""
    from mpiwrite.cli import runcmd

    help_names = set(ctx.help_option_names)
    for arg in args:
        if arg == "--":
            break
        if arg in help_names:
            raise ConfigError(f"RUN_ARGS: {arg} after `--` would ask `mpiwrite run` for its "
                              "help instead of a job; see `mpiwrite run --help`")
    sub = runcmd.run.make_context("run", list(args), parent=ctx)
    return runcmd.config_from(sub.params)
