"""PBS scripts (PBS Pro, OpenPBS, Torque) for one run, a scaling study, repetitions or a
study: pure functions over the same Job as the Slurm scripts (cli/jobscript.py), and the
`qsub` that submits one, kept apart.

The directives: `#PBS -l select=N:ncpus=K:mpiprocs=K` (N chunks, one a node with
`place=scatter`: PBS Pro's and OpenPBS's form) or Torque's `-l nodes=N:ppn=K` (each server
refuses or misreads the other's form: `--scheduler pbs` renders the first, `torque` the
second), `-l walltime=HH:MM:SS`,
`-q` the queue, `-A` the account, `-j oe` one output file.  PBS has no srun: the ranks start with
the MPI's own mpiexec on the nodes `$PBS_NODEFILE` lists (one line per MPI process; the
unique names in order are the nodes), or, where that is not set (Slurm's `qsub` wrapper,
docs/jobscripts.md), on Slurm's node list.  A PBS job starts in $HOME: the script changes
to `$PBS_O_WORKDIR`, where qsub was run.
"""

from __future__ import annotations

import shlex
from typing import List

from mpiwrite.cli import jobscript as js
from mpiwrite.errors import ConfigError, RunError

QSUB_TIMEOUT = 120.0  # seconds: a busy server answers slowly, a dead one never
# The job's nodes, one a line, in order: PBS's node file (a line per MPI process), or
# Slurm's node list under Slurm's qsub wrapper, which sets no PBS_NODEFILE.
NODES_FUNCTION = [
    "# The job's nodes, one a line: PBS's node file lists one per MPI process.",
    "job_nodes() {",
    '  if [ -n "${PBS_NODEFILE:-}" ]; then awk \'!seen[$0]++\' "$PBS_NODEFILE"',
    '  else scontrol show hostnames "$SLURM_JOB_NODELIST"  # Slurm\'s qsub wrapper',
    "  fi",
    "}",
]
PBS_HOSTS = "job_nodes"


def walltime(time_limit: str) -> str:
    """A Slurm-style --time-limit (MM, MM:SS, HH:MM:SS, D-HH:MM...) as PBS's HH:MM:SS."""
    seconds = js.slurm_seconds(time_limit)
    return f"{seconds // 3600:02d}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def check(job) -> None:
    if job.launcher != "mpirun":
        raise ConfigError("--launcher: PBS has no srun; its jobs start ranks with mpiexec "
                          "(--launcher mpirun, the default with --scheduler pbs)")
    if job.stage:
        raise ConfigError("--stage: sends the environment with Slurm's sbcast; with "
                          "--scheduler pbs stage it yourself (docs/scaling.md)")


def directives(job) -> List[str]:
    """The #PBS lines; an option left out gives no line."""
    n, k = max(job.nodes), job.ntasks_per_node
    lines = [f"#PBS -N {job.job_name}"]
    if job.scheduler == "torque":
        lines.append(f"#PBS -l nodes={n}:ppn={k}")
    else:
        lines += [f"#PBS -l select={n}:ncpus={k}:mpiprocs={k}", "#PBS -l place=scatter"]
    if job.time_limit:
        lines.append(f"#PBS -l walltime={walltime(job.time_limit)}")
    if job.partition:
        lines.append(f"#PBS -q {job.partition}")
    if job.account:
        lines.append(f"#PBS -A {job.account}")
    lines.append("#PBS -j oe")
    if job.output:
        lines.append(f"#PBS -o {job.output}")
    return lines


def _head(job, what: str) -> List[str]:
    return [
        "#!/bin/bash",
        *directives(job),
        f"# Rendered by `mpiwrite jobscript --scheduler {job.scheduler}`: {what};",
        f"# launched with {job.family}'s mpiexec on the job's nodes. Edit freely.",
        "set -uo pipefail",
        "exec 2>&1  # one output file (-j oe), also where a qsub wrapper keeps them apart",
        'cd "${PBS_O_WORKDIR:-.}" || exit 1  # a PBS job starts in $HOME',
        *NODES_FUNCTION,
        "",
    ]


def render(job) -> str:
    """The script of a run, a scaling study or repetitions (or of a study: render_study)."""
    job = js.check(job)
    check(job)
    if job.study:
        return render_study(job)
    results = js.agreed_results(job)
    run_args = list(job.run_args)
    if js.results_in(run_args) is None:
        run_args += ["--results", results]
    scaling = len(job.nodes) > 1
    what = (f"a scaling study over {', '.join(map(str, job.nodes))} nodes" if scaling
            else f"one run on {job.nodes[0]} node(s)")
    return "\n".join([
        *_head(job, f"{what}, {job.ntasks_per_node} task(s) per node, "
                             f"{job.repeat} repetition(s) each"),
        *([f"# walltime from {job.estimate}."] if job.estimate else []),
        *js.tool_lines(job),
        f"RESULTS={shlex.quote(results)}",
        "# Arguments for `mpiwrite run` (target, sizes, iterations, tags, results folder).",
        f"RUN_ARGS=({shlex.join(run_args)})",
        f"NODE_COUNTS=({' '.join(map(str, job.nodes))})",
        *js.order_lines(job),
        "",
        "status=0",
        "rep=0",
        'for counts in "${ORDER[@]}"; do',
        "  rep=$(( rep + 1 ))",
        "  for n in $counts; do",
        '    echo "== mpiwrite: $n node(s), repetition $rep"',
        f"    {js.launch_line(job, hosts=PBS_HOSTS)} || status=$?",
        "  done",
        "done",
        "",
        "# One row per node count (and per tag); a failed run above is left out of it.",
        '"$MPIWRITE" report "$RESULTS" --by nodes,ranks_per_node --skip-bad || true',
        *(["# The scaling curve (needs matplotlib: pip install 'mpiwrite[plot]').",
           '"$MPIWRITE" plot scaling "$RESULTS" --x nodes -o "$RESULTS/scaling.png" '
           "--skip-bad || true"] if scaling else []),
        'exit "$status"',
        "",
    ])


def render_study(job) -> str:
    """One `study run` over the whole allocation, then `study report`; submitted again
    after the walltime, it resumes."""
    results = job.results or "results"
    mw = '"$MPIWRITE" study run "$STUDY" --results "$RESULTS"'
    return "\n".join([
        *_head(job, job.estimate or "a study"),
        "# Cut by the walltime? Submit it again: `study run` skips the runs already complete.",
        *js.tool_lines(job),
        f"STUDY={shlex.quote(job.study)}",
        f"RESULTS={shlex.quote(results)}",
        "",
        "status=0",
        f"n={max(job.nodes)}",
        js.launch_line(job, mw, hosts=PBS_HOSTS) + " || status=$?",
        js.RESTORE_COMMENT,
        js.restore_line(job, hosts=PBS_HOSTS),
        '"$MPIWRITE" study report "$STUDY" --results "$RESULTS" || true',
        'exit "$status"',
        "",
    ])


def submit(path: str) -> str:
    """Hand the script at `path` to qsub (PBS's, Torque's, or Slurm's wrapper); its job id.
    RunError when qsub is missing or fails."""
    import shutil

    from mpiwrite.procs import run_bounded
    from mpiwrite.text import printable

    if not shutil.which("qsub"):
        raise RunError("--submit: qsub not found")
    out = run_bounded(["qsub", path], QSUB_TIMEOUT)
    said = printable(out.text("err").strip() or out.text().strip())[:300]
    if out.timed_out:
        raise RunError(f"qsub: no answer within {QSUB_TIMEOUT:g} s; the job may have been "
                       "queued (qstat shows it)")
    if not out.ok:
        raise RunError(f"qsub: {out.why(QSUB_TIMEOUT)}" + (f": {said}" if said else ""))
    job_id = out.text().strip().splitlines()[-1].strip() if out.text().strip() else ""
    if not job_id:
        raise RunError(f"qsub: printed no job id{': ' + said if said else ''}")
    return printable(job_id)


def submit_text(text: str, path=None) -> str:
    """qsub the script: the file -o wrote, or a copy in a private folder removed once qsub
    has read it (qsub, like sbatch, keeps its own copy of the script)."""
    import os
    import tempfile

    if path:
        return submit(os.path.abspath(path))
    folder = tempfile.mkdtemp(prefix="mpiwrite-qsub-")
    try:
        script = os.path.join(folder, "mpiwrite.pbs")
        fd = os.open(script, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o700)
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        return submit(script)
    finally:
        for name in os.listdir(folder):
            os.unlink(os.path.join(folder, name))
        os.rmdir(folder)
