"""Render sbatch scripts for one run, a scaling study, or repetitions; pure functions
(PBS's scripts: cli/pbs.py, from the same pieces; it imports this module, never the
other way round).

Everything after `--` on the command line is handed to `mpiwrite run` unchanged.  A scaling
study is one allocation of the largest node count, with a job step of `-N k -n k*K` for each k
(K tasks per node), so the records carry the node count and `report --by nodes` / `plot
scaling` work on them directly; a study's script ends with both.

The launch line depends on the site's MPI: `srun --mpi=pmix` for Open MPI, `--mpi=pmi2` for
the MPICH family; `mpirun` takes `--map-by ppr:K:node --host` under Open MPI and Hydra's
`-ppn K -hosts` under MPICH, Intel MPI and MVAPICH.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
from typing import List, Optional, Sequence

from mpiwrite.errors import ConfigError

LAUNCHERS = ("srun", "mpirun")
# pbs: PBS Pro and OpenPBS (select=); torque: Torque (nodes=:ppn=); both in cli/pbs.py
SCHEDULERS = ("slurm", "pbs", "torque")
# srun --mpi=VALUE; "" renders no --mpi (the site's MpiDefault).
SRUN_MPI = ("pmix", "pmi2", "none", "cray_shasta", "")
# MPI families whose mpirun/mpiexec this renders: Open MPI's own, or Hydra's.
MPIRUN_FAMILIES = {"openmpi": "openmpi", "mpich": "hydra", "intelmpi": "hydra",
                   "mvapich": "hydra"}
_SRUN_MPI_OF = {"openmpi": "pmix", "mpich": "pmi2", "intelmpi": "pmi2", "mvapich": "pmi2",
                "cray-mpich": "cray_shasta"}
_TIME = re.compile(r"^(\d{1,4}-)?\d{1,6}(:\d{1,2}){0,2}\Z", re.ASCII)  # '١٠' is no time
MOST_NODES = 10 ** 6


@dataclasses.dataclass(frozen=True)
class Job:
    nodes: Sequence[int] = (1,)
    ntasks_per_node: int = 1
    partition: Optional[str] = None
    account: Optional[str] = None
    time_limit: Optional[str] = None
    launcher: str = "srun"
    mpi: str = "pmi2"  # srun --mpi=...
    family: str = "mpich"  # whose mpirun syntax (MPIRUN_FAMILIES)
    repeat: int = 1
    job_name: str = "mpiwrite"
    output: Optional[str] = None
    mpiwrite: str = "mpiwrite"
    mpiexec: str = "mpiexec"
    results: Optional[str] = None
    libmpi: Optional[str] = None  # MPI4PY_LIBMPI when rendered, kept for the job
    run_args: Sequence[str] = ()
    study: Optional[str] = None  # a study file: one `study run` step over the allocation
    stage: Optional[str] = None  # a packed environment sent to every node's local disk
    stage_dir: str = "/tmp/mpiwrite-env"  # where it unpacks (`bin/mpiwrite` inside)
    estimate: str = ""  # what the study's --time rests on, for the script's comment
    scheduler: str = "slurm"  # whose directives: slurm (#SBATCH), pbs or torque (#PBS)


def parse_nodes(text: str) -> List[int]:
    parts = [x.strip() for x in str(text).split(",") if x.strip()]
    if not all(x.isascii() and x.isdigit() for x in parts):  # int() takes '١٠' and '1_0'
        raise ConfigError(f"--nodes: {text!r} is not a number or a list like 1,2,4")
    values = [int(x) for x in parts]
    if any(v > MOST_NODES for v in values):
        raise ConfigError(f"--nodes: {text!r} asks for more than {MOST_NODES} nodes")
    if not values or any(v < 1 for v in values):
        raise ConfigError(f"--nodes: {text!r} needs positive node counts")
    return sorted(set(values))


def srun_mpi_for(family: str) -> str:
    """srun's --mpi plugin for an MPI family (mpiinfo.FAMILIES); '' when not known."""
    return _SRUN_MPI_OF.get(family, "")


def results_in(run_args: Sequence[str]) -> Optional[str]:
    """The --results folder the run arguments give (the last one, as click takes it)."""
    found = None
    args = list(run_args)
    for i, arg in enumerate(args):
        if arg == "--":
            break
        if arg == "--results" and i + 1 < len(args):
            found = args[i + 1]
        elif arg.startswith("--results="):
            found = arg.split("=", 1)[1]
    return found


def agreed_results(job: Job) -> str:
    """One results folder for the runs and the report, or ConfigError when two are given."""
    inner = results_in(job.run_args)
    if inner is not None and job.results is not None and \
            os.path.normpath(inner) != os.path.normpath(job.results):
        raise ConfigError(f"--results: given twice, {job.results!r} for the job and {inner!r} "
                          "for the runs; give it once")
    return inner if inner is not None else (job.results or "results")


def check(job: Job) -> Job:
    if job.scheduler not in SCHEDULERS:
        raise ConfigError(f"--scheduler: {job.scheduler!r} is not one of "
                          f"{', '.join(SCHEDULERS)}")
    if job.launcher not in LAUNCHERS:
        raise ConfigError(f"--launcher: {job.launcher!r} is not one of {', '.join(LAUNCHERS)}")
    if job.mpi not in SRUN_MPI:
        raise ConfigError(f"--mpi: {job.mpi!r} is not one of "
                          f"{', '.join(m for m in SRUN_MPI if m)}")
    if job.launcher == "mpirun" and job.family not in MPIRUN_FAMILIES:
        raise ConfigError(f"--mpi-family: no mpirun syntax for {job.family!r} (one of "
                          f"{', '.join(MPIRUN_FAMILIES)}); use --launcher srun")
    if job.ntasks_per_node < 1:
        raise ConfigError("--ntasks-per-node: must be at least 1")
    if job.repeat < 1:
        raise ConfigError("--repeat: must be at least 1")
    if job.time_limit and not _TIME.match(job.time_limit):
        raise ConfigError(f"--time-limit: {job.time_limit!r} is not a Slurm time "
                          "(MM, MM:SS, HH:MM:SS, D-HH:MM)")
    if job.stage is not None and (not os.path.isabs(job.stage_dir) or
                                  os.path.normpath(job.stage_dir) in ("/", "/tmp")):
        raise ConfigError(f"--stage-dir: {job.stage_dir!r} must be an absolute folder of "
                          "its own (it is created, then removed at the end)")
    if "--" in job.run_args:  # the --results the script adds would land after it
        raise ConfigError("RUN_ARGS: a second `--` would make every run's --results an extra "
                          "argument; give the run options after the first `--` only")
    results = results_in(job.run_args)
    for given in (results, job.results):
        if given is not None and (given.startswith("-") or not given):
            raise ConfigError(f"--results: {given!r} would be read as an option by `report` "
                              "(or is empty); name the folder as ./" + given.lstrip("./"))
    for name in ("partition", "account", "job_name"):
        value = getattr(job, name)
        if value is not None and (not value or any(c.isspace() for c in value)):
            raise ConfigError(f"--{name.replace('_', '-')}: {value!r} must be one word")
    return job


def directives(job: Job) -> List[str]:
    """The #SBATCH lines; an option left out gives no line."""
    lines = [f"#SBATCH --job-name={job.job_name}",
             f"#SBATCH --nodes={max(job.nodes)}",
             f"#SBATCH --ntasks-per-node={job.ntasks_per_node}"]
    if job.partition:
        lines.append(f"#SBATCH --partition={job.partition}")
    if job.account:
        lines.append(f"#SBATCH --account={job.account}")
    if job.time_limit:
        lines.append(f"#SBATCH --time={job.time_limit}")
        # SIGTERM to the tasks (not to srun or this script) a minute before the limit: the
        # ranks stop, record what they measured as "interrupted", and the report still runs.
        lines.append("#SBATCH --signal=TERM@60")
    if job.output:
        lines.append(f"#SBATCH --output={job.output}")
    return lines


def slurm_seconds(text: str) -> int:
    """Seconds of a Slurm time (MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS)."""
    if not _TIME.match(text):
        raise ConfigError(f"--time-limit: {text!r} is not a Slurm time")
    days, rest = (text.split("-", 1) if "-" in text else ("0", text))
    parts = [int(x) for x in rest.split(":")]
    if "-" in text:  # after a day count: hours first
        h, m, sec = (parts + [0, 0])[:3]
    elif len(parts) == 1:  # minutes
        h, m, sec = 0, parts[0], 0
    elif len(parts) == 2:  # minutes:seconds
        h, m, sec = 0, parts[0], parts[1]
    else:
        h, m, sec = parts
    return ((int(days) * 24 + h) * 60 + m) * 60 + sec


def slurm_time(seconds: float) -> str:
    """A Slurm time for `seconds`, rounded up to the minute: H:MM:00 or D-HH:MM:00."""
    minutes = max(1, -(-int(seconds) // 60))
    days, minutes = divmod(minutes, 24 * 60)
    text = f"{minutes // 60}:{minutes % 60:02d}:00"
    return f"{days}-{minutes // 60:02d}:{minutes % 60:02d}:00" if days else text


JOB_START_SECONDS = 120.0  # the job's own start: the allocation, the first imports
LAUNCH_SECONDS = 30.0  # each launch: a job step, Python and MPI on every node
TIME_MARGIN = 1.2


def run_time(cfg, runs: int, rate_MB_per_s: float = 100.0):
    """(seconds the job's runs take, with start-up and a margin; what that rests on): each
    run's time limit times its iterations and the delays between them (or its size at an
    assumed rate per rank), one launch's start-up a run, the job's start."""
    each = cfg.timed_seconds() if cfg.time_limit else (cfg.size or 0) / (rate_MB_per_s * 1e6)
    one = each * cfg.iterations + cfg.delay * (cfg.iterations - 1)
    need = (JOB_START_SECONDS + runs * (one + LAUNCH_SECONDS)) * TIME_MARGIN
    what = "time limits" if cfg.time_limit else f"sizes at {rate_MB_per_s:g} MB/s a rank"
    basis = (f"{runs} run(s) of {one:g} s ({what}, {cfg.iterations} iteration(s)), "
             f"+{LAUNCH_SECONDS:g} s a launch, +{JOB_START_SECONDS:g} s, x{TIME_MARGIN:g}")
    return need, basis


def time_warning(time_limit: Optional[str], cfg, runs: int, rate_MB_per_s: float = 100.0) -> str:
    """A warning when --time-limit is shorter than the runs' own time limits add up to (or
    their sizes at an assumed rate per rank): '' when it fits or cannot be told."""
    if not time_limit or cfg is None:
        return ""
    each = (cfg.timed_seconds() if cfg.time_limit else (cfg.size or 0) / (rate_MB_per_s * 1e6))
    need = (each * cfg.iterations + cfg.delay * (cfg.iterations - 1)) * runs
    given = slurm_seconds(time_limit)
    if given >= need:
        return ""
    basis = "their time limits" if cfg.time_limit else \
        f"their sizes at an assumed {rate_MB_per_s:g} MB/s per rank"
    return (f"--time-limit {time_limit} ({given} s) is shorter than the {runs} run(s) take "
            f"from {basis} (at least {need:.0f} s, without start-up): Slurm will end the job "
            f"before they finish; give at least {slurm_time(need * 1.2 + 120)}")


UNPACK = ('set -e; mkdir "$1"; tar -xzf "$1.tar.gz" -C "$1"; rm -f "$1.'
          'tar.gz"; if [ -x "$1/bin/conda-unpack" ]; then "$1/bin/conda-unpack"; fi')


def stage_lines(job: Job) -> List[str]:
    """Send the packed environment to every node (one sbcast), unpack it into a folder this
    job creates there (mkdir without -p: never into someone else's), and run mpiwrite from it;
    docs/scaling.md."""
    if not job.stage:
        return []
    return [
        "",
        "# The packed environment, staged on every node's local disk (docs/scaling.md): the",
        "# ranks' imports then never reach the shared filesystem.  It unpacks into STAGE_DIR",
        "# (a conda-pack archive, or a venv made at STAGE_DIR and packed with",
        "# `tar -C STAGE_DIR -czf env.tar.gz .`); STAGE_DIR must not exist yet.",
        f"STAGE_TAR={shlex.quote(job.stage)}",
        f"STAGE_DIR={shlex.quote(job.stage_dir)}",
        'sbcast "$STAGE_TAR" "$STAGE_DIR.tar.gz" || { echo "mpiwrite: sbcast of $STAGE_TAR '
        'failed" >&2; exit 1; }',
        'srun --nodes="$SLURM_JOB_NUM_NODES" --ntasks="$SLURM_JOB_NUM_NODES" '
        f"--ntasks-per-node=1 sh -c {shlex.quote(UNPACK)} sh \"$STAGE_DIR\" "
        '|| { echo "mpiwrite: unpacking into $STAGE_DIR failed on a node" >&2; exit 1; }',
        'MPIWRITE="$STAGE_DIR/bin/mpiwrite"',
    ]


def tool_lines(job: Job) -> List[str]:
    """The mpiwrite (and mpirun) the script runs, the MPI library it loads, and the staged
    environment: the same in a run's script and a study's."""
    return [
        "# The mpiwrite to run (the one that rendered this script, unless MPIWRITE is set).",
        f"MPIWRITE=${{MPIWRITE:-{shlex.quote(job.mpiwrite)}}}",
        *([f"MPIEXEC=${{MPIEXEC:-{shlex.quote(job.mpiexec)}}}"] if job.launcher == "mpirun"
          else []),
        *([f"export MPI4PY_LIBMPI=${{MPI4PY_LIBMPI:-{shlex.quote(job.libmpi)}}}"]
          if job.libmpi else []),
        *stage_lines(job),
    ]


def unstage_lines(job: Job) -> List[str]:
    if not job.stage:
        return []
    return ['srun --nodes="$SLURM_JOB_NUM_NODES" --ntasks="$SLURM_JOB_NUM_NODES" '
            '--ntasks-per-node=1 rm -rf "$STAGE_DIR" || true']


SLURM_HOSTS = 'scontrol show hostnames "$SLURM_JOB_NODELIST"'


def launch_line(job: Job, mw: str = '"$MPIWRITE" run "${RUN_ARGS[@]}"',
                hosts: str = SLURM_HOSTS) -> str:
    """The launch of n nodes' ranks; `hosts` prints the allocation's nodes, one a line."""
    k = job.ntasks_per_node
    nodes = f'{hosts} | head -n "$n"'
    if job.launcher == "srun":
        mpi = f"--mpi={job.mpi} " if job.mpi else ""
        # --ntasks as well: a step inherits the job's SLURM_NTASKS (all nodes x k), and with
        # fewer nodes than the allocation srun then ignores --ntasks-per-node and asks for
        # more tasks than the step's nodes hold ("More processors requested than permitted").
        return (f'srun {mpi}--nodes="$n" --ntasks=$(( n * {k} )) --ntasks-per-node={k} '
                f"--kill-on-bad-exit=1 {mw}")
    if MPIRUN_FAMILIES[job.family] == "openmpi":
        return (f'"$MPIEXEC" -np $(( n * {k} )) --map-by ppr:{k}:node '
                f"--host \"$({nodes} | sed 's/$/:{k}/' | paste -sd,)\" {mw}")
    return f'"$MPIEXEC" -n $(( n * {k} )) -ppn {k} -hosts "$({nodes} | paste -sd,)" {mw}'


RESTORE_COMMENT = ("# Whatever the launch's exit: every node puts back what the study left "
                   "changed there (its\n# journal: a launch killed before its own restore); "
                   "where it ended cleanly there is nothing to do.")


def restore_line(job: Job, hosts: str = SLURM_HOSTS) -> str:
    """`study restore` on every node of the launch, one task a node."""
    return launch_line(dataclasses.replace(job, ntasks_per_node=1),
                       '"$MPIWRITE" study restore "$STUDY"', hosts) + " || status=$?"


def _launch_comment(job: Job) -> str:
    if job.launcher == "srun":
        return f"srun --mpi={job.mpi}" if job.mpi else "srun (the site's default --mpi)"
    return f"{job.family}'s mpirun"


def render(job: Job) -> str:
    job = check(job)
    if job.scheduler != "slurm":
        raise ConfigError(f"--scheduler {job.scheduler}: rendered by cli/pbs.py, not here")
    if job.study:
        return render_study(job)
    results = agreed_results(job)
    run_args = list(job.run_args)
    if results_in(run_args) is None:
        run_args += ["--results", results]
    study = len(job.nodes) > 1
    what = (f"a scaling study over {', '.join(map(str, job.nodes))} nodes" if study
            else f"one run on {job.nodes[0]} node(s)")
    return "\n".join([
        "#!/bin/bash",
        *directives(job),
        f"# Rendered by `mpiwrite jobscript`: {what}, {job.ntasks_per_node} task(s) per node,",
        f"# {job.repeat} repetition(s) each, launched with {_launch_comment(job)}. Edit freely.",
        *([f"# --time from {job.estimate}."] if job.estimate else []),
        "set -uo pipefail",
        "",
        *tool_lines(job),
        f"RESULTS={shlex.quote(results)}",
        "# Arguments for `mpiwrite run` (target, sizes, iterations, tags, results folder).",
        f"RUN_ARGS=({shlex.join(run_args)})",
        f"NODE_COUNTS=({' '.join(map(str, job.nodes))})",
        *order_lines(job),
        "",
        "status=0",
        "rep=0",
        'for counts in "${ORDER[@]}"; do',
        "  rep=$(( rep + 1 ))",
        "  for n in $counts; do",
        '    echo "== mpiwrite: $n node(s), repetition $rep"',
        f"    {launch_line(job)} || status=$?",
        "  done",
        "done",
        "",
        "# One row per node count (and per tag); a failed run above is left out of it.",
        '"$MPIWRITE" report "$RESULTS" --by nodes,ranks_per_node --skip-bad || true',
        *(["# The scaling curve (needs matplotlib: pip install 'mpiwrite[plot]').",
           '"$MPIWRITE" plot scaling "$RESULTS" --x nodes -o "$RESULTS/scaling.png" '
           "--skip-bad || true"] if study else []),
        *unstage_lines(job),
        'exit "$status"',
        "",
    ])


def order_lines(job: Job) -> List[str]:
    """Each repetition's node counts in their order: a seeded permutation, balanced for the
    count run before (study/order.py), so that a drift of the filesystem's load over the job
    is spread over every count instead of read as a scaling effect."""
    from mpiwrite.study import order

    points = [{"nodes": n} for n in job.nodes]
    seed = order.default_seed(job.job_name, {"nodes": list(job.nodes)}, ())
    runs = order.runs("balanced", points, job.repeat, seed)
    blocks = [" ".join(str(job.nodes[p]) for p, r in runs if r == rep)
              for rep in range(job.repeat)]
    return [f"# Each repetition's node counts, in the order they run (balanced, seed {seed}): "
            "drift over the", "# job falls on every count alike.",
            "ORDER=(" + " ".join(shlex.quote(b) for b in blocks) + ")"]


def render_study(job: Job) -> str:
    """One `study run` step over the whole allocation (its points run on sub-communicators),
    then `study report`; submitted again after the time limit, it resumes."""
    results = job.results or "results"
    return "\n".join([
        "#!/bin/bash",
        *directives(job),
        f"# Rendered by `mpiwrite jobscript --study`: {job.estimate}; launched with "
        f"{_launch_comment(job)}.",
        "# Cut by the time limit? Submit it again: `study run` skips the runs already "
        "complete. Edit freely.",
        "set -uo pipefail",
        "",
        *tool_lines(job),
        f"STUDY={shlex.quote(job.study)}",
        f"RESULTS={shlex.quote(results)}",
        "",
        "status=0",
        f"n={max(job.nodes)}",
        launch_line(job, '"$MPIWRITE" study run "$STUDY" --results "$RESULTS"') + " || status=$?",
        RESTORE_COMMENT,
        restore_line(job),
        '"$MPIWRITE" study report "$STUDY" --results "$RESULTS" || true',
        *unstage_lines(job),
        'exit "$status"',
        "",
    ])


# squeue's reasons for a pending job that waiting does not cure: a request beyond what the
# partition, the QOS or the association allows a job (Slurm accepts such a job unless
# EnforcePartLimits is set, and it waits for good)
SBATCH_TIMEOUT = 120.0  # seconds: a busy controller answers slowly, a dead one never
SQUEUE_TIMEOUT = 10.0
NEVER_STARTS = {
    "PartitionNodeLimit": "the partition allows fewer nodes than the job asks for",
    "PartitionTimeLimit": "the partition's time limit is shorter than the job's",
    "PartitionConfig": "the partition cannot hold the job as asked (nodes, cores, memory, account)",
    "QOSMaxNodePerJobLimit": "the QOS allows fewer nodes per job",
    "QOSMaxWallDurationPerJobLimit": "the QOS allows a shorter time limit",
    "AssocMaxNodesPerJobLimit": "your association allows fewer nodes per job",
    "AssocMaxWallDurationPerJobLimit": "your association allows a shorter time limit",
    "BadConstraints": "no node has the features asked for",
}


def submit(text: str, look_seconds: float = 2.0):
    """Hand a script to sbatch: (job id, '' or why the queued job can never start).

    Slurm queues a job beyond the partition's limits unless EnforcePartLimits is set, and
    sbatch prints its id like any other; squeue's reason for it (set at submission, looked
    at for up to `look_seconds`) says it will wait for good.  RunError when sbatch fails."""
    import shutil
    import time

    from mpiwrite.errors import RunError
    from mpiwrite.procs import run_bounded

    if not shutil.which("sbatch"):
        raise RunError("--submit: sbatch not found")
    out = run_bounded(["sbatch", "--parsable"], SBATCH_TIMEOUT, input=text.encode())
    if out.timed_out:
        raise RunError(f"sbatch: no answer within {SBATCH_TIMEOUT:g} s; the job may have been "
                       "queued all the same (squeue --me shows it)")
    if not out.ok:
        said = " ".join(out.text("err").split())[:300]
        raise RunError(f"sbatch: {out.why(SBATCH_TIMEOUT)}" + (f": {said}" if said else ""))
    job_id = out.text().strip().split(";")[0]
    if not shutil.which("squeue"):
        return job_id, ""
    end = time.monotonic() + look_seconds
    while True:
        got = run_bounded(["squeue", "-h", "-j", job_id, "-o", "%T|%r"], SQUEUE_TIMEOUT)
        state, _, reason = got.text().strip().partition("|")
        if reason in NEVER_STARTS:
            return job_id, (f"job {job_id} was queued but can never start: squeue says "
                            f"{reason} ({NEVER_STARTS[reason]}); change the request and "
                            f"cancel it (scancel {job_id})")
        # "None": the scheduler has not looked at it yet
        if not got.ok or state != "PENDING" or reason not in ("None", "") \
                or time.monotonic() > end:
            return job_id, ""
        time.sleep(0.2)
