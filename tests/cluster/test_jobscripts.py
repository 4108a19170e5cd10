"""Jobscripts: rendering as a pure function, and real jobs in a real one-node Slurm."""

import os
import shlex
import subprocess
import sys

import pytest
from common import MPIWRITE, clean_env, cli, only_record, read_record, records_in
from common import ROOT as REPO

from mpiwrite.cli import jobscript as js
from mpiwrite.errors import ConfigError

ROOT = str(REPO)


def sbatch_lines(text):
    return {ln for ln in text.splitlines() if ln.startswith("#SBATCH")}


def test_render_only_given_options():
    text = js.render(js.Job(nodes=[2], ntasks_per_node=8, run_args=["/x", "-t", "5"]))
    assert sbatch_lines(text) == {"#SBATCH --job-name=mpiwrite", "#SBATCH --nodes=2",
                                  "#SBATCH --ntasks-per-node=8"}
    text = js.render(js.Job(nodes=[1, 2, 4], ntasks_per_node=16, partition="batch",
                            account="proj", time_limit="1:00:00", output="o-%j.out"))
    assert sbatch_lines(text) == {
        "#SBATCH --job-name=mpiwrite", "#SBATCH --nodes=4", "#SBATCH --ntasks-per-node=16",
        "#SBATCH --partition=batch", "#SBATCH --account=proj", "#SBATCH --time=1:00:00",
        "#SBATCH --signal=TERM@60", "#SBATCH --output=o-%j.out"}
    assert "NODE_COUNTS=(1 2 4)" in text


def test_run_arguments_pass_unchanged_and_quoted():
    text = js.render(js.Job(run_args=["/lustre/my dir", "--time", "200", "-i", "3",
                                      "--tag", "note=it's"]))
    assert "RUN_ARGS=('/lustre/my dir' --time 200 -i 3 --tag 'note=it'\"'\"'s' " in text


@pytest.mark.parametrize("job,option", [
    (js.Job(launcher="ssh"), "--launcher"), (js.Job(ntasks_per_node=0), "--ntasks-per-node"),
    (js.Job(repeat=0), "--repeat"), (js.Job(time_limit="soon"), "--time-limit"),
    (js.Job(time_limit="10\n"), "--time-limit"), (js.Job(time_limit="1:00:00\n"), "--time-limit"),
    (js.Job(partition="a b"), "--partition"),
])
def test_render_refuses_bad_options(job, option):
    with pytest.raises(ConfigError, match=option):
        js.render(job)


def test_a_time_limit_with_a_trailing_newline_is_refused(tmp_path):
    """A regex's `$` matches before a trailing newline: `--time-limit $'10\\n'` once gave a
    blank line among the #SBATCH lines.  Every check of user input matches to the very end."""
    out = cli(["jobscript", "--time-limit", "10\n", "--", "d", "-t", "5"], cwd=tmp_path)
    assert out.returncode == 2 and "--time-limit" in out.stderr, out.stderr
    with pytest.raises(ConfigError, match="--time-limit"):
        js.slurm_seconds("10\n")
    from mpiwrite.records.listing import TMP_NAME
    from mpiwrite.run.config import parse_tags
    from mpiwrite.units import parse_size
    from mpiwrite.vocab import names

    assert names.parse_data_file("mpiwrite-x-i0-r000000.dat\n") is None
    assert names.parse_subdir("mpiwrite-x-d00001\n") is None
    assert names.parse_probe(".mpiwrite-x-probe\n") is None
    assert not TMP_NAME.match(".mpiwrite-x.h5.tmp-12\n")
    assert names.parse_data_file("mpiwrite-x-i0-r000000.dat") is not None
    assert parse_tags(["a=x"]) == {"a": "x"}
    assert parse_size("1M\n") == 2**20  # spaces around a size are allowed, as they were


def test_jobscript_command_checks_run_arguments(tmp_path):
    out = cli(["jobscript", "--nodes", "1,2", "--", "-s", "1Q"], cwd=tmp_path)
    assert out.returncode == 2 and "--size" in out.stderr
    out = cli(["jobscript", "--nodes", "0"], cwd=tmp_path)
    assert out.returncode == 2 and "--nodes" in out.stderr
    out = cli(["jobscript", "--nodes", "1,2", "-o", "job.sh", "--", "/x", "-t", "5"],
              cwd=tmp_path)
    assert out.returncode == 0 and os.access(tmp_path / "job.sh", os.X_OK)
    assert subprocess.run(["bash", "-n", str(tmp_path / "job.sh")]).returncode == 0


def launch(text):
    return next(ln.strip() for ln in text.splitlines() if '"$MPIWRITE" run' in ln)


@pytest.mark.parametrize("mpi,flag", [("pmix", "srun --mpi=pmix "), ("pmi2", "srun --mpi=pmi2 "),
                                      ("none", "srun --mpi=none "), ("", "srun --nodes")])
def test_srun_mpi_plugin(mpi, flag):
    assert launch(js.render(js.Job(mpi=mpi))).startswith(flag)


@pytest.mark.parametrize("environ,netmod", [
    ({"SLURM_MPI_TYPE": "pmi2", "PMI_FD": "7"}, "ofi"),
    ({"SLURM_MPI_TYPE": "pmi2", "PMI_FD": "7", "MPIR_CVAR_CH4_NETMOD": "ucx"}, "ucx"),
    ({"SLURM_MPI_TYPE": "pmix", "PMI_FD": "7"}, None),
    ({"SLURM_MPI_TYPE": "pmi2"}, None),  # not started by the plugin (srun's own env leaked)
    ({"PMI_FD": "7"}, None),  # Hydra's mpiexec: its PMI server reads whole lines
])
def test_mpich_under_slurm_pmi2_defaults_to_ofi(environ, netmod):
    """Slurm's pmi2 plugin cuts PMI-1 lines over 1024 bytes (tests/cluster/test_slurm_nodes.py shows
    the lines); the netmod default is set only under that plugin and never over a site's."""
    from mpiwrite.run.process import slurm_pmi2_netmod

    env = dict(environ)
    assert slurm_pmi2_netmod(env) is (netmod == "ofi" and "MPIR_CVAR_CH4_NETMOD" not in environ)
    assert env.get("MPIR_CVAR_CH4_NETMOD") == netmod
    # libfabric's sockets provider left out only with our own netmod choice
    assert env.get("FI_PROVIDER") == ("^sockets" if netmod == "ofi" else None)


def test_a_sites_libfabric_providers_are_kept_under_pmi2():
    from mpiwrite.run.process import slurm_pmi2_netmod

    env = {"SLURM_MPI_TYPE": "pmi2", "PMI_FD": "7", "FI_PROVIDER": "verbs;ofi_rxm"}
    assert slurm_pmi2_netmod(env) is True
    assert env["MPIR_CVAR_CH4_NETMOD"] == "ofi" and env["FI_PROVIDER"] == "verbs;ofi_rxm"


STUDY = """
[study]
name = "sweep"
target = "data"
repeat = 2

[run]
time = "30s"

[axes]
nodes = [1, 2, 4]
ranks_per_node = [1, 3]
"""


def test_jobscript_for_a_study_asks_for_its_largest_point_and_its_time(tmp_path):
    """4 nodes x 3 tasks (the largest point), one `study run` step over them, and --time from
    12 runs of 30 s plus overhead, start-up and a margin; then `study report`."""
    (tmp_path / "s.toml").write_text(STUDY)
    out = cli(["jobscript", "--study", "s.toml"], cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "#SBATCH --nodes=4" in text and "#SBATCH --ntasks-per-node=3" in text
    limit = next(ln for ln in text.splitlines() if ln.startswith("#SBATCH --time="))
    seconds = js.slurm_seconds(limit.split("=")[1])
    # one launch (1.2 s), 12 runs of 30 s with their final fsync (1 s) and their cost in the
    # study (0.15 s: study/estimate.py), 120 s of the job's start-up, and 20% more
    need = (1.2 + 12 * (30 + 1 + 0.15) + 120) * 1.2
    assert need <= seconds < need + 60
    assert f"STUDY={tmp_path / 's.toml'}" in text
    step = [ln for ln in text.splitlines() if ln.startswith("srun ")]
    assert len(step) == 2 and '"$MPIWRITE" study run "$STUDY"' in step[0]
    assert "--ntasks=$(( n * 3 ))" in step[0] and "n=4" in text
    # whatever the launch's exit, one task a node puts back what a killed launch left
    assert step[1].endswith('"$MPIWRITE" study restore "$STUDY" || status=$?')
    assert "--ntasks=$(( n * 1 )) --ntasks-per-node=1" in step[1]
    assert '"$MPIWRITE" study report "$STUDY"' in text
    assert subprocess.run(["bash", "-n"], input=text, text=True, timeout=30).returncode == 0


@pytest.mark.parametrize("args,message", [
    (["--time-limit", "5"], "is shorter than the study's estimate of"),
    (["--nodes", "2"], "--nodes: 2 is fewer than the study's 4"),
    (["--nodes", "1,4"], "give one count"),
    (["--ntasks-per-node", "2"], "fewer than the study's 3 ranks per node"),
    (["--repeat", "2"], "--study: the study file holds"),
    (["--", "data", "-s", "1M"], "--study: the study file holds"),
])
def test_jobscript_for_a_study_refuses_what_cannot_hold_it(tmp_path, args, message):
    (tmp_path / "s.toml").write_text(STUDY)
    out = cli(["jobscript", "--study", "s.toml", *args], cwd=tmp_path)
    assert out.returncode == 2 and message in out.stderr, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and not out.stdout


def test_a_time_limit_shorter_than_the_runs_is_warned(tmp_path):
    """A scaling study: 2 node counts x 3 repetitions x 3 iterations of 200 s."""
    out = cli(["jobscript", "--nodes", "1,2", "--repeat", "3", "--time-limit", "5", "--",
               "/lustre/x", "-t", "200", "-i", "3"], cwd=tmp_path)
    assert out.returncode == 0 and "#SBATCH --time=5" in out.stdout
    assert "warning: --time-limit 5 (300 s) is shorter than the 6 run(s)" in out.stderr
    assert "at least 3600 s" in out.stderr
    fits = cli(["jobscript", "--time-limit", "10", "--", "/lustre/x", "-t", "200"],
               cwd=tmp_path)
    assert fits.returncode == 0 and "warning" not in fits.stderr


def test_stage_sends_then_runs_from_the_node_local_copy(tmp_path):
    """--stage: one sbcast (never -f: a file already there is not ours), an unpack per node
    into a folder the job creates (mkdir without -p), the runs and the report from it, and
    the folder removed at the end; refused for a missing tarball or a shared folder."""
    tar = tmp_path / "env.tar.gz"
    tar.write_bytes(b"")
    out = cli(["jobscript", "--nodes", "2", "--stage", str(tar), "--stage-dir", "/local/mw",
               "--", "d", "-s", "1M"], cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    send = lines.index(next(ln for ln in lines if ln.startswith("sbcast ")))
    assert lines[send] == ('sbcast "$STAGE_TAR" "$STAGE_DIR.tar.gz" || { echo "mpiwrite: '
                           'sbcast of $STAGE_TAR failed" >&2; exit 1; }')
    assert "sh -c 'set -e; mkdir \"$1\"; tar -xzf" in lines[send + 1]
    assert lines[send + 2] == 'MPIWRITE="$STAGE_DIR/bin/mpiwrite"'
    run = next(i for i, ln in enumerate(lines) if '"$MPIWRITE" run' in ln)
    clean = next(i for i, ln in enumerate(lines) if 'rm -rf "$STAGE_DIR"' in ln)
    assert send < run < clean and lines[-1] == 'exit "$status"'
    assert "STAGE_DIR=/local/mw" in lines and f"STAGE_TAR={tar}" in lines
    assert subprocess.run(["bash", "-n"], input=out.stdout, text=True,
                          timeout=30).returncode == 0
    for args, message in ((["--stage", "nothere.tgz"], "is not a file"),
                          (["--stage", str(tar), "--stage-dir", "/tmp"], "of its own"),
                          (["--stage", str(tar), "--stage-dir", "rel/dir"], "absolute")):
        bad = cli(["jobscript", *args, "--", "d"], cwd=tmp_path)
        assert bad.returncode == 2 and message in bad.stderr, bad.stderr


def test_env_srun_mpi_names_the_plugin_of_the_mpi_mpi4py_loads(tmp_path):
    """What the shipped scripts ask when MPI_PLUGIN is unset: the plugin for the family
    mpi4py loads here, empty (so the script's pmi2) when the library cannot be loaded."""
    probe = subprocess.run([sys.executable, "-m", "mpi4py", "--mpi-lib-version"],
                           capture_output=True, text=True, timeout=60, env=clean_env())
    from mpiwrite.facts import mpiinfo

    out = cli(["env", "--srun-mpi"], cwd=tmp_path)
    assert out.returncode == 0
    assert out.stdout.strip() == js.srun_mpi_for(mpiinfo.family(probe.stdout))
    none = cli(["env", "--srun-mpi"], cwd=tmp_path, env={"MPI4PY_LIBMPI": "libnothere.so"})
    assert none.returncode == 0 and none.stdout == "\n"
    for name in ("single", "scaling", "checksums-ab"):
        with open(os.path.join(ROOT, "jobscripts", f"{name}.sbatch")) as fh:
            text = fh.read()
        assert 'MPI_PLUGIN=${MPI_PLUGIN:-$("$MPIWRITE" env --srun-mpi 2>/dev/null)}' in text
        assert text.index("MPIWRITE=${MPIWRITE:-") < text.index("env --srun-mpi")


def test_srun_step_asks_for_its_own_task_count():
    """Without --ntasks a step inherits the job's task count (the largest node count x K): the
    smaller steps of a study would ask for more tasks than their nodes hold."""
    line = launch(js.render(js.Job(nodes=[1, 2, 3], ntasks_per_node=4)))
    assert '--nodes="$n" --ntasks=$(( n * 4 )) --ntasks-per-node=4 ' in line
    # The line as bash runs it for the 2-node step, with an srun that prints its arguments.
    script = f'srun() {{ printf "%s\\n" "$@"; }}; n=2; MPIWRITE=mw; RUN_ARGS=(/x); {line}'
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=30)
    assert out.stdout.split("\n")[:4] == ["--mpi=pmi2", "--nodes=2", "--ntasks=8",
                                           "--ntasks-per-node=4"], out.stdout + out.stderr


def test_only_a_study_plots_its_scaling_curve():
    plot = '"$MPIWRITE" plot scaling "$RESULTS" --x nodes -o "$RESULTS/scaling.png"'
    assert plot in js.render(js.Job(nodes=[1, 2]))
    assert "plot scaling" not in js.render(js.Job(nodes=[2]))


def test_srun_plugin_per_family():
    assert [js.srun_mpi_for(f) for f in ("openmpi", "mpich", "intelmpi", "mvapich",
                                         "cray-mpich", "unknown")] == \
        ["pmix", "pmi2", "pmi2", "pmi2", "cray_shasta", ""]


def test_mpirun_syntax_per_family():
    ompi = launch(js.render(js.Job(launcher="mpirun", family="openmpi", ntasks_per_node=4)))
    assert ompi.startswith('"$MPIEXEC" -np $(( n * 4 )) --map-by ppr:4:node --host ')
    assert "sed 's/$/:4/'" in ompi and "-ppn" not in ompi and "-hosts" not in ompi
    for family in ("mpich", "intelmpi", "mvapich"):
        hydra = launch(js.render(js.Job(launcher="mpirun", family=family, ntasks_per_node=4)))
        assert hydra.startswith('"$MPIEXEC" -n $(( n * 4 )) -ppn 4 -hosts ')
    with pytest.raises(ConfigError, match="--mpi-family"):
        js.render(js.Job(launcher="mpirun", family="cray-mpich"))


@pytest.mark.parametrize("outer,args,expected", [
    (None, ["/x"], "results"), ("A", ["/x"], "A"), (None, ["/x", "--results=/my"], "/my"),
    (None, ["/x", "--results", "/my"], "/my"), ("/my", ["/x", "--results", "/my/"], "/my/"),
    (None, ["/x", "--results", "a", "--results=b"], "b"),  # click keeps the last
])
def test_one_results_folder_for_runs_and_report(outer, args, expected):
    text = js.render(js.Job(results=outer, run_args=args))
    assert f"RESULTS={expected}\n" in text
    run_args = next(ln for ln in text.splitlines() if ln.startswith("RUN_ARGS="))
    if js.results_in(args) is None:
        assert run_args == f"RUN_ARGS=({shlex.join(args)} --results {expected})"
    else:
        assert run_args == f"RUN_ARGS=({shlex.join(args)})"  # no second --results that wins


def test_two_results_folders_refused():
    with pytest.raises(ConfigError, match="--results: given twice"):
        js.render(js.Job(results="A", run_args=["/x", "--results", "B"]))


def test_jobscript_command_results_help_and_mpi(tmp_path):
    out = cli(["jobscript", "--", "/scratch/x", "--results=/my/records"], cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "RESULTS=/my/records\n" in out.stdout
    assert "RUN_ARGS=(/scratch/x --results=/my/records)\n" in out.stdout  # no second one
    out = cli(["jobscript", "--results", "A", "--", "/x", "--results", "B"], cwd=tmp_path)
    assert out.returncode == 2 and "--results: given twice" in out.stderr and not out.stdout
    for flag in ("--help", "-h"):
        out = cli(["jobscript", "-o", "job.sh", "--", "/x", flag], cwd=tmp_path)
        assert out.returncode == 2 and "mpiwrite run --help" in out.stderr, out.stderr
        assert not out.stdout and not (tmp_path / "job.sh").exists()
    out = cli(["jobscript", "--launcher", "mpirun", "--mpi", "pmix"], cwd=tmp_path)
    assert out.returncode == 2 and "--mpi" in out.stderr
    out = cli(["jobscript", "--launcher", "mpirun", "--mpi-family", "openmpi",
               "--mpiexec", "/opt/ompi/bin/mpirun"], cwd=tmp_path)
    assert out.returncode == 0 and "MPIEXEC=${MPIEXEC:-/opt/ompi/bin/mpirun}" in out.stdout
    assert "--map-by ppr:1:node" in out.stdout


def test_jobscript_detects_the_family_mpi4py_loads(tmp_path):
    """auto: the MPI library mpi4py loads here decides (MPICH wheel: pmi2 and Hydra)."""
    from mpiwrite.facts import mpiinfo

    probe = subprocess.run([sys.executable, "-m", "mpi4py", "--mpi-lib-version"],
                           capture_output=True, text=True, timeout=60, env=clean_env())
    family = mpiinfo.family(probe.stdout)
    out = cli(["jobscript"], cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert f"srun --mpi={js.srun_mpi_for(family)} " in out.stdout
    out = cli(["jobscript"], cwd=tmp_path, env={"MPI4PY_LIBMPI": "libnothere.so"})
    assert out.returncode == 0 and "srun --nodes" in out.stdout
    assert "export MPI4PY_LIBMPI=${MPI4PY_LIBMPI:-libnothere.so}" in out.stdout
    assert "site's default --mpi" in out.stderr
    out = cli(["jobscript", "--launcher", "mpirun"], cwd=tmp_path,
              env={"MPI4PY_LIBMPI": "libnothere.so"})
    assert out.returncode == 2 and "--mpi-family" in out.stderr


@pytest.mark.parametrize("name", ["single.sbatch", "scaling.sbatch", "checksums-ab.sbatch"])
def test_shipped_jobscripts_are_valid_bash(name):
    path = os.path.join(ROOT, "jobscripts", name)
    assert subprocess.run(["bash", "-n", path]).returncode == 0
    with open(path) as fh:
        assert sbatch_lines(fh.read())


# ------------------------------------------------------------------ a real Slurm


def submit(slurm, args, cwd):
    out = subprocess.run([MPIWRITE, "jobscript", "--submit"] + args, cwd=cwd,
                         capture_output=True, text=True, env=slurm.env, timeout=60)
    assert out.returncode == 0, out.stderr
    job = out.stdout.strip()
    assert job.isdigit()
    state = slurm.wait(job)
    log = (cwd / f"slurm-{job}.out").read_text()
    return job, state, log


@pytest.mark.mpi
@pytest.mark.slow
def test_srun_job_records_the_batch_context(slurm, tmp_path):
    job, state, log = submit(slurm, ["--ntasks-per-node", "4", "--", "d", "-s", "2M",
                                     "--tag", "via=srun"], tmp_path)
    assert state == "COMPLETED", log + slurm.log()
    rec = only_record(tmp_path / "results")
    assert rec.status == "complete" and rec.attrs["ranks"] == 4
    ctx = rec.nodes[0]["slurm"]
    assert ctx["job_id"] == job and "step_id" in ctx and ctx["ntasks"] == "4"
    assert "ranks_per_node" in log and "MB/s" in log  # the report at the end of the job


@pytest.mark.mpi
@pytest.mark.slow
def test_mpiexec_inside_the_allocation(slurm, tmp_path):
    job, state, log = submit(slurm, ["--ntasks-per-node", "3", "--launcher", "mpirun", "--",
                                     "d", "-s", "2M"], tmp_path)
    assert state == "COMPLETED", log + slurm.log()
    rec = only_record(tmp_path / "results")
    assert rec.attrs["ranks"] == 3 and rec.nodes[0]["slurm"]["job_id"] == job


@pytest.mark.mpi
@pytest.mark.slow
def test_study_with_repetitions_reports(slurm, tmp_path):
    job, state, log = submit(slurm, ["--nodes", "1", "--ntasks-per-node", "2", "--repeat",
                                     "3", "--", "d", "-s", "1M"], tmp_path)
    assert state == "COMPLETED", log + slurm.log()
    assert len(records_in(tmp_path / "results")) == 3
    assert log.count("== mpiwrite: 1 node(s), repetition") == 3
    table = [ln for ln in log.splitlines() if ln.startswith("1 ")]
    assert table and table[0].split()[2] == "3"  # nodes=1, ranks_per_node=2, runs=3


@pytest.mark.mpi
@pytest.mark.slow
def test_checksums_ab_without_lctl_skips_clearly(slurm, tmp_path):
    out = subprocess.run(["sbatch", "--parsable", "--chdir", str(tmp_path),
                          os.path.join(ROOT, "jobscripts", "checksums-ab.sbatch")],
                         capture_output=True, text=True, env=dict(slurm.env, LCTL="no-lctl"))
    assert out.returncode == 0, out.stderr
    job = out.stdout.strip().split(";")[0]
    assert slurm.wait(job) == "COMPLETED"
    log = (tmp_path / f"mpiwrite-checksums-{job}.out").read_text()
    assert "not found: this is not a Lustre client; skipping" in log


FAKE_LCTL = """#!/bin/bash
# Stands in for lctl on a machine without a Lustre client: reads and sets osc.*.checksums in
# the sysroot that mpiwrite reads its node facts from.
set -e
root=${MPIWRITE_SYSROOT:?}
[ "$1" = get_param ] && { cat "$root"/proc/fs/lustre/osc/*/checksums; exit 0; }
[ "$1" = set_param ] || exit 2
value=${3##*=}
for f in "$root"/proc/fs/lustre/osc/*/checksums; do echo "$value" > "$f"; done
echo "set osc.*.checksums=$value" >> "$root/lctl.log"
"""


@pytest.mark.mpi
@pytest.mark.slow
def test_checksums_ab_alternates_and_compares(slurm, tmp_path):
    import sysroots

    root = sysroots.make(tmp_path / "root", sysroots.lustre_165(1))
    lctl = tmp_path / "lctl"
    lctl.write_text(FAKE_LCTL)
    lctl.chmod(0o755)
    env = dict(slurm.env, LCTL=str(lctl), MPIWRITE_SYSROOT=root, MPIWRITE=MPIWRITE,
               TARGET=str(tmp_path / "data"), RESULTS=str(tmp_path / "res"), PAIRS="2",
               RUN_ARGS="-s 2M -i 2 --progress-interval 0")
    out = subprocess.run(["sbatch", "--parsable", "--chdir", str(tmp_path),
                          os.path.join(ROOT, "jobscripts", "checksums-ab.sbatch")],
                         capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    job = out.stdout.strip().split(";")[0]
    assert slurm.wait(job) == "COMPLETED", slurm.log()
    log = (tmp_path / f"mpiwrite-checksums-{job}.out").read_text()

    recs = [read_record(p) for p in records_in(tmp_path / "res")]
    assert len(recs) == 4
    seen = [(r.tags()["checksums_set"], r.keys()["checksums"]) for r in recs]
    assert sorted(seen) == [("0", "off"), ("0", "off"), ("1", "on"), ("1", "on")]
    assert "A=checksums=on" in log and "B=checksums=off" in log and "verdict:" in log
    sets = (tmp_path / "root" / "lctl.log").read_text().split()
    assert sets[-1] == "osc.*.checksums=1"  # restored to what it was before


@pytest.mark.mpi
@pytest.mark.slow
def test_sigterm_from_slurm_leaves_an_interrupted_record(slurm, tmp_path):
    """What --signal=TERM@60 does before a time limit: Slurm sends SIGTERM to the job's tasks
    (not to srun or the batch script); the ranks record 'interrupted' and the script goes on."""
    import time

    out = subprocess.run([MPIWRITE, "jobscript", "--submit", "--ntasks-per-node", "2", "--",
                          "d", "-t", "60", "--no-fsync", "--progress-interval", "0"],
                         cwd=tmp_path, capture_output=True, text=True, env=slurm.env,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    job = out.stdout.strip()
    end = time.monotonic() + 60
    while time.monotonic() < end and not records_in(tmp_path / "results"):
        time.sleep(0.2)  # the record appears (status running) once the run has started
    time.sleep(2)
    sc = subprocess.run(["scancel", "--signal=TERM", job], env=slurm.env,
                        capture_output=True, text=True)
    assert sc.returncode == 0, sc.stderr + slurm.log()
    slurm.wait(job, timeout=90)
    rec = only_record(tmp_path / "results")
    assert rec.status == "interrupted", (tmp_path / f"slurm-{job}.out").read_text()
    assert rec.ranks["bytes"].sum() > 0
    assert not os.path.exists(tmp_path / "d") or os.listdir(tmp_path / "d") == []
    log = (tmp_path / f"slurm-{job}.out").read_text()
    assert "run interrupted by SIGTERM" in log
    assert "1 run(s) that did not complete" in log  # the script went on to its report


@pytest.mark.mpi
@pytest.mark.slow
def test_a_job_that_can_never_start_is_said_so(slurm, tmp_path):
    """Two nodes from a one-node partition: once sbatch printed a job id and nothing else for
    a job pending for good (PartitionNodeLimit).  Now exit 1 with a line saying so (or
    sbatch's own refusal, where the site enforces the limits at submission)."""
    out = subprocess.run([MPIWRITE, "jobscript", "--submit", "--nodes", "2", "--", "d", "-s",
                          "1M"], cwd=tmp_path, capture_output=True, text=True, env=slurm.env,
                         timeout=60)
    job = out.stdout.strip()
    if job.isdigit():
        slurm.scancel(job)
    assert out.returncode == 1, (out.stdout, out.stderr)
    # Slurm 22.05 says PartitionConfig for more nodes than the partition has (PartitionNodeLimit
    # beyond its MaxNodes)
    assert "can never start" in out.stderr and ("PartitionNodeLimit" in out.stderr
                                                or "PartitionConfig" in out.stderr) \
        or "Node count specification invalid" in out.stderr, out.stderr


@pytest.mark.parametrize("scheduler,line", [("slurm", "#SBATCH --time="),
                                            ("pbs", "#PBS -l walltime=")])
def test_a_plain_run_script_asks_for_the_time_its_runs_take(tmp_path, scheduler, line):
    """-t 200 -i 3 on 1, 2 and 4 nodes, 2 repetitions: 6 runs of 600 s; the script asks a
    queue for them, their launches and start-up with a margin (it asked for nothing)."""
    out = cli(["jobscript", "--scheduler", scheduler, "--nodes", "1,2,4", "--repeat", "2",
               "--", "/lustre/x", "-t", "200", "-i", "3"], cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    asked = next(ln for ln in out.stdout.splitlines() if ln.startswith(line))
    value = asked.split("=", 1)[1]
    if scheduler == "pbs":
        h, m, sec = (int(x) for x in value.split(":"))
        seconds = h * 3600 + m * 60 + sec
    else:
        seconds = js.slurm_seconds(value)
    need = 6 * 600 + 6 * js.LAUNCH_SECONDS + js.JOB_START_SECONDS
    assert need * js.TIME_MARGIN <= seconds < need * js.TIME_MARGIN + 60, (value, need)
    assert "6 run(s) of 600 s (time limits, 3 iteration(s))" in out.stdout


def test_a_scaling_script_interleaves_its_node_counts(tmp_path):
    """Each repetition a permutation of the node counts (not every repetition of 1 node, then
    of 2, ...), the same script for the same job, and run in that order by bash."""
    args = ["jobscript", "--nodes", "1,2,4,8", "--repeat", "4", "--", "d", "-s", "1M"]
    text = cli(args, cwd=tmp_path).stdout
    assert text == cli(args, cwd=tmp_path).stdout  # seeded: the same job, the same order
    order = next(ln for ln in text.splitlines() if ln.startswith("ORDER=("))
    blocks = [b.split() for b in shlex.split(order[len("ORDER=("):-1])]
    assert len(blocks) == 4 and all(sorted(b, key=int) == ["1", "2", "4", "8"] for b in blocks)
    assert len({tuple(b) for b in blocks}) > 1  # not one fixed cycle
    # bash runs them in that order: the loop, with the launch replaced by an echo
    script = text.replace("srun ", "echo ran $n; : ")
    ran = subprocess.run(["bash", "-c", script.split("# One row per node count")[0]],
                         capture_output=True, text=True, timeout=30, cwd=tmp_path,
                         env={"PATH": os.environ["PATH"], "MPIWRITE": "true"})
    got = [ln.split()[1] for ln in ran.stdout.splitlines() if ln.startswith("ran ")]
    assert got == [n for b in blocks for n in b], ran.stdout + ran.stderr
