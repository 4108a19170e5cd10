"""Render sbatch scripts for one run, a scaling study, or repetitions; pure functions.

Everything after `--` on the command line is handed to `mpiwrite run` unchanged.  A scaling
study is one allocation of the largest node count, with a job step of `-N k` for each k, so the
records carry the node count and `report --by nodes` / `plot scaling` work on them directly.
"""

from __future__ import annotations

import dataclasses
import re
import shlex
from typing import List, Optional, Sequence

from mpiwrite.errors import ConfigError

LAUNCHERS = ("srun", "mpirun")
_TIME = re.compile(r"^(\d+-)?\d+(:\d{1,2}){0,2}$")


@dataclasses.dataclass(frozen=True)
class Job:
    nodes: Sequence[int] = (1,)
    ntasks_per_node: int = 1
    partition: Optional[str] = None
    account: Optional[str] = None
    time_limit: Optional[str] = None
    launcher: str = "srun"
    repeat: int = 1
    job_name: str = "mpiwrite"
    output: Optional[str] = None
    mpiwrite: str = "mpiwrite"
    mpiexec: str = "mpiexec"
    results: Optional[str] = None
    run_args: Sequence[str] = ()


def parse_nodes(text: str) -> List[int]:
    try:
        values = [int(x) for x in str(text).split(",") if x.strip()]
    except ValueError:
        raise ConfigError(f"--nodes: {text!r} is not a number or a list like 1,2,4") from None
    if not values or any(v < 1 for v in values):
        raise ConfigError(f"--nodes: {text!r} needs positive node counts")
    return sorted(set(values))


def check(job: Job) -> Job:
    if job.launcher not in LAUNCHERS:
        raise ConfigError(f"--launcher: {job.launcher!r} is not one of {', '.join(LAUNCHERS)}")
    if job.ntasks_per_node < 1:
        raise ConfigError("--ntasks-per-node: must be at least 1")
    if job.repeat < 1:
        raise ConfigError("--repeat: must be at least 1")
    if job.time_limit and not _TIME.match(job.time_limit):
        raise ConfigError(f"--time-limit: {job.time_limit!r} is not a Slurm time "
                          "(MM, MM:SS, HH:MM:SS, D-HH:MM)")
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


def launch_line(job: Job) -> str:
    mw = '"$MPIWRITE" run "${RUN_ARGS[@]}"'
    if job.launcher == "srun":
        return (f'srun --mpi=pmi2 --nodes="$n" --ntasks-per-node={job.ntasks_per_node} '
                f"--kill-on-bad-exit=1 {mw}")
    return (f'"$MPIEXEC" -n $(( n * {job.ntasks_per_node} )) -ppn {job.ntasks_per_node} '
            f'-hosts "$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n "$n" '
            f"| paste -sd,)\" {mw}")


def render(job: Job) -> str:
    job = check(job)
    results = job.results or "results"
    run_args = list(job.run_args)
    if "--results" not in run_args:
        run_args += ["--results", results]
    study = len(job.nodes) > 1
    what = (f"a scaling study over {', '.join(map(str, job.nodes))} nodes" if study
            else f"one run on {job.nodes[0]} node(s)")
    return "\n".join([
        "#!/bin/bash",
        *directives(job),
        f"# Rendered by `mpiwrite jobscript`: {what}, {job.ntasks_per_node} task(s) per node,",
        f"# {job.repeat} repetition(s) each, launched with {job.launcher}. Edit freely.",
        "set -uo pipefail",
        "",
        "# The mpiwrite to run (the one that rendered this script, unless MPIWRITE is set).",
        f"MPIWRITE=${{MPIWRITE:-{shlex.quote(job.mpiwrite)}}}",
        *([f"MPIEXEC=${{MPIEXEC:-{shlex.quote(job.mpiexec)}}}"] if job.launcher == "mpirun"
          else []),
        f"RESULTS={shlex.quote(results)}",
        "# Arguments for `mpiwrite run` (target, sizes, iterations, tags, results folder).",
        f"RUN_ARGS=({shlex.join(run_args)})",
        f"NODE_COUNTS=({' '.join(map(str, job.nodes))})",
        f"REPEAT={job.repeat}",
        "",
        "status=0",
        'for n in "${NODE_COUNTS[@]}"; do',
        '  for rep in $(seq 1 "$REPEAT"); do',
        '    echo "== mpiwrite: $n node(s), repetition $rep"',
        f"    {launch_line(job)} || status=$?",
        "  done",
        "done",
        "",
        "# One row per node count (and per tag); a failed run above is left out of it.",
        '"$MPIWRITE" report "$RESULTS" --by nodes,ranks_per_node --skip-bad || true',
        'exit "$status"',
        "",
    ])
