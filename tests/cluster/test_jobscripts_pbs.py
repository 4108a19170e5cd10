"""PBS scripts (PBS Pro/OpenPBS `select=`, Torque `nodes=:ppn=`): rendering as a pure
function, and real jobs submitted with `qsub` through Slurm's Torque wrappers
(slurm-wlm-torque) to the test Slurm, which runs them."""

import os
import shutil
import subprocess

import pytest
from common import MPIWRITE, cli, only_record, records_in

from mpiwrite.cli import jobscript as js
from mpiwrite.cli import pbs
from mpiwrite.errors import ConfigError

STUDY = """\
[study]
name = "pbs"
target = "data"
repeat = 1
[run]
size = "1MiB"
[axes]
block_size = ["256KiB", "1MiB"]
"""


def pbs_lines(text):
    return [ln for ln in text.splitlines() if ln.startswith("#PBS")]


def _job(**kw):
    return js.Job(**{"launcher": "mpirun", "scheduler": "pbs", **kw})


def test_pbs_pro_directives_only_for_given_options():
    text = pbs.render(_job(nodes=[2], ntasks_per_node=8, run_args=["/x", "-t", "5"]))
    assert pbs_lines(text) == ["#PBS -N mpiwrite", "#PBS -l select=2:ncpus=8:mpiprocs=8",
                               "#PBS -l place=scatter", "#PBS -j oe"]
    assert "#SBATCH" not in text and "srun" not in text
    text = pbs.render(_job(nodes=[1, 2, 4], ntasks_per_node=16, partition="workq",
                          account="proj", time_limit="1-02:03:04", output="o.log"))
    assert pbs_lines(text) == [
        "#PBS -N mpiwrite", "#PBS -l select=4:ncpus=16:mpiprocs=16", "#PBS -l place=scatter",
        "#PBS -l walltime=26:03:04", "#PBS -q workq", "#PBS -A proj", "#PBS -j oe",
        "#PBS -o o.log"]
    assert "NODE_COUNTS=(1 2 4)" in text and 'cd "${PBS_O_WORKDIR:-.}"' in text


def test_torque_asks_nodes_and_ppn():
    text = pbs.render(_job(scheduler="torque", nodes=[3], ntasks_per_node=4, time_limit="90"))
    assert pbs_lines(text) == ["#PBS -N mpiwrite", "#PBS -l nodes=3:ppn=4",
                               "#PBS -l walltime=01:30:00", "#PBS -j oe"]


@pytest.mark.parametrize("family,launch", [
    ("mpich", '"$MPIEXEC" -n $(( n * 4 )) -ppn 4 -hosts "$(job_nodes | head -n "$n" | '
              'paste -sd,)"'),
    ("openmpi", '"$MPIEXEC" -np $(( n * 4 )) --map-by ppr:4:node --host "$(job_nodes | '
                'head -n "$n" | sed \'s/$/:4/\' | paste -sd,)"')])
def test_the_ranks_start_with_mpiexec_on_the_jobs_nodes(family, launch):
    text = pbs.render(_job(nodes=[1, 2], ntasks_per_node=4, family=family))
    assert launch in text
    assert "awk '!seen[$0]++' \"$PBS_NODEFILE\"" in text  # a node once, however many procs
    assert subprocess.run(["bash", "-n"], input=text, text=True, timeout=30).returncode == 0


def test_the_node_list_is_pbs_nodefile_once_per_node(tmp_path):
    """The script's own job_nodes function, run by bash on a node file of 2 nodes x 3."""
    text = pbs.render(_job(nodes=[2], ntasks_per_node=3))
    start = text.index("job_nodes() {")
    function = text[start:text.index("\n}\n", start) + 3]
    (tmp_path / "nodefile").write_text("a\na\na\nb\nb\nb\n")
    out = subprocess.run(["bash", "-c", function + "job_nodes | head -n 2 | paste -sd,"],
                         env={"PBS_NODEFILE": str(tmp_path / "nodefile"), "PATH": os.defpath},
                         capture_output=True, text=True, timeout=30)
    assert out.stdout.strip() == "a,b", out.stderr


@pytest.mark.parametrize("job,option", [
    (js.Job(scheduler="pbs", launcher="srun"), "--launcher"),
    (js.Job(scheduler="pbs", launcher="mpirun", stage="/x.tar.gz"), "--stage"),
    (js.Job(scheduler="lsf"), "--scheduler"),
    (js.Job(scheduler="pbs", launcher="mpirun", time_limit="soon"), "--time-limit"),
    (js.Job(scheduler="pbs", launcher="mpirun", partition="a b"), "--partition"),
])
def test_pbs_refuses_what_it_cannot_render(job, option):
    with pytest.raises(ConfigError, match=option):
        pbs.render(job)


def test_the_command_renders_pbs_with_mpiexec_by_default(tmp_path):
    out = cli(["jobscript", "--scheduler", "pbs", "--nodes", "1,2", "--ntasks-per-node", "2",
               "--time-limit", "10", "--", "d", "-s", "1M"], cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "#PBS -l select=2:ncpus=2:mpiprocs=2" in out.stdout
    assert "#PBS -l walltime=00:10:00" in out.stdout and '"$MPIEXEC" ' in out.stdout
    out = cli(["jobscript", "--scheduler", "pbs", "--launcher", "srun"], cwd=tmp_path)
    assert out.returncode == 2 and "PBS has no srun" in out.stderr


def test_a_study_for_pbs_asks_its_largest_point(tmp_path):
    (tmp_path / "s.toml").write_text(STUDY.replace("[axes]", "[axes]\nnodes = [1, 2]"))
    out = cli(["jobscript", "--scheduler", "pbs", "--study", "s.toml"], cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "#PBS -l select=2:ncpus=1:mpiprocs=1" in out.stdout
    assert any(ln.startswith("#PBS -l walltime=") for ln in pbs_lines(out.stdout))
    step = [ln for ln in out.stdout.splitlines() if ln.startswith('"$MPIEXEC"')]
    assert len(step) == 2 and '"$MPIWRITE" study run "$STUDY"' in step[0]
    assert step[1].endswith('"$MPIWRITE" study restore "$STUDY" || status=$?')
    assert "-ppn 1" in step[1]
    assert '"$MPIWRITE" study report "$STUDY"' in out.stdout


def test_walltime_from_every_time_form():
    assert [pbs.walltime(t) for t in ("30", "5:30", "1:00:00", "2-00:00")] == \
        ["00:30:00", "00:05:30", "01:00:00", "48:00:00"]


@pytest.mark.mpi  # --submit (here it finds no qsub)
def test_submit_without_qsub_is_one_line(tmp_path):
    env = {"PATH": str(tmp_path)}  # no qsub there
    out = cli(["jobscript", "--scheduler", "pbs", "--submit", "--", "d", "-s", "1M"],
              cwd=tmp_path, env=env)
    assert out.returncode == 1 and out.stderr.strip().endswith("--submit: qsub not found")


# ------------------------------------------------------ a real Slurm, through its qsub


def qsub(slurm, args, cwd):
    if not shutil.which("qsub") or not shutil.which("qstat"):
        pytest.skip("Slurm's qsub/qstat wrappers are not installed (apt-get install "
                    "slurm-wlm-torque)")
    # qsub's sbatch passes this environment on: a study's journal goes to the test's folder
    env = dict(slurm.env, MPIWRITE_STATE=str(cwd / "state"))
    out = subprocess.run([MPIWRITE, "jobscript", "--submit"] + args, cwd=cwd,
                         capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr + slurm.log()
    job = out.stdout.strip()
    assert job.isdigit(), out.stdout
    seen = subprocess.run(["qstat", job], capture_output=True, text=True, env=slurm.env,
                          timeout=60)
    assert seen.returncode == 0 and job in seen.stdout, seen.stdout + seen.stderr
    state = slurm.wait(job)
    logs = {p.name: p.read_text() for p in cwd.glob(f"*.[oe]{job}")}
    shown = slurm._cmd(["scontrol", "show", "job", job], check=False).stdout.split()
    return job, state, "\n".join(logs.values()), shown


@pytest.mark.mpi
@pytest.mark.slow
def test_a_pbs_script_runs_through_slurms_qsub(slurm, tmp_path):
    job, state, log, shown = qsub(slurm, ["--scheduler", "pbs", "--ntasks-per-node", "3",
                                          "--time-limit", "5", "--", "d", "-s", "2M"],
                                  tmp_path)
    assert state == "COMPLETED", log + slurm.log()
    # sbatch read the #PBS lines (the wrapper itself reads only qsub's own options)
    assert {"JobName=mpiwrite", "TimeLimit=00:05:00", "NumNodes=1", "NumTasks=3"} \
        <= set(shown), shown
    rec = only_record(tmp_path / "results")
    assert rec.status == "complete" and rec.attrs["ranks"] == 3
    assert rec.nodes[0]["slurm"]["job_id"] == job
    assert "ranks_per_node" in log and "MB/s" in log  # the report at the end of the job


@pytest.mark.mpi
@pytest.mark.slow
def test_a_torque_study_runs_through_slurms_qsub(slurm, tmp_path):
    (tmp_path / "s.toml").write_text(STUDY)
    job, state, log, shown = qsub(slurm, ["--scheduler", "torque", "--study", "s.toml",
                                          "--ntasks-per-node", "2"], tmp_path)
    assert state == "COMPLETED", log + slurm.log()
    assert {"JobName=mpiwrite", "NumNodes=1", "NumTasks=2"} <= set(shown), shown
    assert len(records_in(tmp_path / "results")) == 2
    assert "block_size" in log  # study report's table
