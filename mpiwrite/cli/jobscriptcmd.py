"""`mpiwrite jobscript`: the command; the script itself is rendered by cli/jobscript.py."""

from __future__ import annotations

import os
import sys

import click

from mpiwrite.cli.jobscript import MPIRUN_FAMILIES
from mpiwrite.cli.options import (
    AsciiInt,
)
from mpiwrite.errors import ConfigError, RunError, why
from mpiwrite.text import printable

# What the man page and `mpiwrite help` show under EXAMPLES (cli/manpage.py)
EXAMPLES = {
    "jobscript": ["mpiwrite jobscript --nodes 1,2,4,8 --ntasks-per-node 16 -- "
                 "/lustre/scratch/$USER/mpiwrite -t 200",
                 "mpiwrite jobscript --study examples/checksums.toml --submit"],
}


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
        if not time_limit and cfg is not None:  # a queue wants it; the runs fix their length
            need, basis = js.run_time(cfg, len(shape["nodes"]) * repeat)
            shape["time_limit"] = js.slurm_time(need)
            shape["estimate"] = basis
    if scheduler != "slurm" and _defaulted(ctx, "launcher"):
        launcher = "mpirun"  # PBS has no srun
    if launcher == "mpirun" and srun_mpi != "auto":
        raise ConfigError("--mpi: chooses srun's PMI plugin; it has no meaning with "
                          "--launcher mpirun")
    family = mpi_family
    if family == "auto" and (launcher == "mpirun" or srun_mpi == "auto"):
        family = installed_family()
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
    if scheduler == "slurm":
        text = js.render(job)
    else:
        from mpiwrite.cli import pbs

        text = pbs.render(job)
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


def installed_family() -> str:
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
    return runcmd.config_from(runcmd.apply_preset(sub, sub.params)[0])
