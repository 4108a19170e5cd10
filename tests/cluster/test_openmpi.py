"""Debian's Open MPI for real: one host, emulated hosts, the test Slurm, and a failing rank.

The same install (mpi4py >= 4.1 loads the library MPI4PY_LIBMPI names) runs under Open MPI's
mpirun, under srun's PMIx plugin with Open MPI and under srun's PMI-2 plugin with MPICH.
"""

import glob
import json
import os
import signal
import subprocess
import sys
import time

import pytest
from common import MPIEXEC, MPIWRITE, clean_env, mounted, needs_root, only_record, records_in
from testbed import hosts as hostlib
from testbed import ompi

from mpiwrite.facts import mpiinfo

pytestmark = [pytest.mark.mpi,
              pytest.mark.skipif(bool(ompi.why_not()), reason=f"Open MPI: {ompi.why_not()}")]

ARGS = ["--progress-interval", "0"]


def recorded_env(rec) -> dict:
    env = rec.attrs["environment"]
    return json.loads(env) if isinstance(env, str) else env


def recorded_launcher(rec) -> str:
    launcher = mpiinfo.launcher(recorded_env(rec))
    assert rec.attrs["launcher"] == launcher  # what the run recorded of itself
    return launcher


@pytest.mark.parametrize("n", [1, 2, 4])
def test_one_host_oversubscribed_complete_record(tmp_path, n):
    out = ompi.mpirun(n, ["run", "d", "-s", "2M", "--results", "r", *ARGS], cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stray == []  # no process of the job outlived it
    rec = only_record(tmp_path / "r")
    assert rec.status == "complete" and rec.attrs["ranks"] == n
    assert rec.attrs["mpi_library"].startswith("Open MPI v")
    assert mpiinfo.family(rec.attrs["mpi_library"]) == "openmpi"
    assert recorded_launcher(rec) == "mpirun"
    assert int(rec.ranks["bytes"].sum()) == n * 2 * 2**20
    assert not os.path.exists(tmp_path / "d")


def test_the_mpiio_implementation_is_a_fact_compare_names(tmp_path):
    """The same MPI-IO run under Open MPI (OMPIO, its default) and under the MPICH wheel
    (ROMIO): each record names its implementation, and compare names the difference."""
    from common import MPIEXEC, cli, mpirun

    args = ["run", "d", "-s", "2M", "--engine", "mpiio", "--layout", "shared", *ARGS]
    out = ompi.mpirun(2, args + ["--results", "ompi"], cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert only_record(tmp_path / "ompi").keys()["mpiio"].startswith("OMPIO (Open MPI v")
    if MPIEXEC is None:
        pytest.skip("no MPICH mpiexec (pip install mpich)")
    out = mpirun(2, args + ["--results", "mpich"], cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert only_record(tmp_path / "mpich").keys()["mpiio"].startswith("ROMIO (MPICH")
    said = cli(["compare", "mpich", "ompi"], cwd=tmp_path).stdout
    assert "     mpiio: ROMIO (MPICH" in said and "-> OMPIO (Open MPI v" in said, said


# ------------------------------------------------------------------ emulated hosts
@pytest.fixture
def can_emulate():
    reason = hostlib.why_not()
    if reason:
        pytest.skip(f"emulated hosts: {reason}")


@pytest.mark.slow
@pytest.mark.parametrize("nhosts", [2, 3])
def test_across_emulated_hosts_record_names_them(tmp_path, can_emulate, nhosts):
    with ompi.OmpiHosts(nhosts, tmp_path) as h:
        cmd = h.mpirun(list(range(nhosts)), per_host=2) + [
            "-np", str(2 * nhosts), MPIWRITE, "run", str(tmp_path / "d"), "-s", "2M",
            "--results", str(tmp_path / "r"), *ARGS]
        out = ompi.launch(cmd, tmp_path, timeout=120)
    assert h.leftovers() == []
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stray == []  # no process of the job outlived it
    names = [f"h{i}" for i in range(nhosts)]
    assert f"ranks {2 * nhosts} on {nhosts} nodes ({', '.join(names)})" in out.stdout
    rec = only_record(tmp_path / "r")
    assert rec.status == "complete" and mpiinfo.family(rec.attrs["mpi_library"]) == "openmpi"
    assert [n["host"] for n in rec.nodes] == names
    assert list(rec.ranks["node"]) == [i for i in range(nhosts) for _ in range(2)]
    assert recorded_launcher(rec) == "mpirun"


# ------------------------------------------------------------------ the test Slurm


def srun_plugins(slurm) -> str:
    out = subprocess.run(["srun", "--mpi=list"], capture_output=True, text=True,
                         env=slurm.env, timeout=30)
    return out.stdout + out.stderr


@pytest.mark.slow
@pytest.mark.parametrize("plugin,family", [("pmix", "openmpi"), ("pmi2", "mpich")])
def test_srun_starts_each_mpi_through_its_plugin(slurm, tmp_path, plugin, family):
    """srun --mpi=pmix with Open MPI and --mpi=pmi2 with MPICH: the run completes, no process
    outlives the job, and the record names the MPI, the launcher and the plugin."""
    if family == "openmpi":
        if plugin not in srun_plugins(slurm):
            pytest.skip("Slurm has no pmix plugin (apt-get install slurm-wlm-basic-plugins)")
        environ = ompi.env({"SLURM_CONF": slurm.conf})
    else:
        if MPIEXEC is None:
            pytest.skip("no MPICH (pip install mpich)")
        environ = clean_env({"SLURM_CONF": slurm.conf})
    out = ompi.launch(["srun", f"--mpi={plugin}", "-n", "3", "--kill-on-bad-exit=1", MPIWRITE,
                       "run", "d", "-s", "2M", "--results", "r", *ARGS],
                      tmp_path, timeout=120, environ=environ)
    assert out.returncode == 0, out.stdout + out.stderr + slurm.log()
    assert out.stray == []  # no process of the job outlived it
    rec = only_record(tmp_path / "r")
    assert rec.status == "complete" and rec.attrs["ranks"] == 3
    assert mpiinfo.family(rec.attrs["mpi_library"]) == family
    assert recorded_launcher(rec) == "srun"
    assert recorded_env(rec)["SLURM_MPI_TYPE"] == plugin


# ------------------------------------------------------------------ a failing rank ends the job
@pytest.mark.slow
def test_unwritable_target_on_one_host_ends_the_job(tmp_path, can_emulate):
    """h1 sees a read-only filesystem over the target; h0 and h2 could write for 20 s.  The
    open fails on h1's ranks only, and Open MPI's job must end at once, every rank stopped."""
    data = tmp_path / "data"
    start = time.monotonic()
    # The shared disk is a 2 GiB tmpfs (RAM): ranks that are not stopped fill it within a second
    # (and fail the test) instead of filling the machine's disk for 20 s.  hosts.py mounts
    # "tmpfs -o size=SIZE" over it on h1; ",ro" makes that copy read-only.
    with mounted(data, "tmpfs", "size=2g"), \
            ompi.OmpiHosts(3, tmp_path, mounts={1: (str(data), "8m,ro")}) as h:
        cmd = h.mpirun([0, 1, 2], per_host=2) + [
            "-np", "6", MPIWRITE, "run", str(data), "-t", "20", "--no-fsync",
            "--results", str(tmp_path / "res"), *ARGS]
        out = ompi.launch(cmd, tmp_path, timeout=60)
        left = os.listdir(data)
    took = time.monotonic() - start
    assert h.leftovers() == []
    assert out.returncode == 1, out.stdout + out.stderr
    assert out.stray == []  # no process of the job outlived it
    # Healthy ranks that were not stopped would write for the full 20 s after start-up.
    assert took < 20, f"the job took {took:.1f}s: the healthy ranks ran on"
    assert "on h1" in out.stderr and "Read-only file system" in out.stderr
    rec = only_record(tmp_path / "res")
    assert rec.status == "failed"
    failed = {int(r["rank"]) for r in rec.ranks if r["status"] == 1}
    assert failed == {2, 3}, [(e["rank"], e["phase"], e["message"]) for e in rec.errors]
    healthy = rec.ranks[rec.ranks["status"] != 1]
    assert (healthy["t_write_end"] - healthy["t_write_start"] < 10).all()  # stopped early
    assert left == []


@needs_root
@pytest.mark.slow
def test_full_results_disk_ends_the_job(tmp_path):
    """The results folder is a 1 MiB tmpfs that the test fills once the run has stored its
    first record: rank 0 cannot write the next one.  Every rank must still exit, with 1.
    Five iterations of 8 MiB half a second apart keep the run going while the disk fills."""
    res = tmp_path / "res"
    with mounted(res, "tmpfs", "size=1m"):
        cmd = [ompi.mpirun_path(), "--oversubscribe", "-np", "2", MPIWRITE, "run",
               str(tmp_path / "d"), "-s", "8M", "-i", "5", "--delay", "0.5", "--results",
               str(res), *ARGS]
        proc = ompi.start(cmd, tmp_path)
        try:
            end = time.monotonic() + 30
            while not records_in(res) and time.monotonic() < end and proc.poll() is None:
                time.sleep(0.05)
            assert records_in(res), "the run never stored its first record"
            with open(res / "filler", "wb") as fh:
                with pytest.raises(OSError, match="No space left"):
                    while True:
                        fh.write(b"\0" * 65536)
                        fh.flush()
        finally:
            out = ompi.finish(proc, timeout=40)
        assert out.returncode == 1, out.stdout + out.stderr
        assert out.stray == []
        assert "record not saved" in out.stderr and "No space left" in out.stderr
        assert not glob.glob(str(res / ".mpiwrite-*"))  # no temporary file left behind
    assert not os.path.exists(tmp_path / "d") or os.listdir(tmp_path / "d") == []


# ------------------------------------------------------------------ rendered jobscripts
def submit(slurm, args, cwd):
    """`mpiwrite jobscript --submit ARGS` with Open MPI as the MPI mpi4py loads."""
    out = subprocess.run([MPIWRITE, "jobscript", "--submit", *args], cwd=cwd,
                         capture_output=True, text=True, timeout=90,
                         env=ompi.env({"SLURM_CONF": slurm.conf}))
    assert out.returncode == 0, out.stderr
    job = out.stdout.strip()
    state = slurm.wait(job, timeout=120)
    return job, state, (cwd / f"slurm-{job}.out").read_text()


@pytest.mark.slow
@pytest.mark.parametrize("launcher,expected", [("srun", "srun"), ("mpirun", "mpirun")])
def test_rendered_jobscript_runs_under_open_mpi(slurm, tmp_path, launcher, expected):
    if launcher == "srun" and "pmix" not in srun_plugins(slurm):
        pytest.skip("Slurm has no pmix plugin")
    args = ["--ntasks-per-node", "3", "--launcher", launcher, "--", "d", "-s", "2M", *ARGS]
    text = subprocess.run([MPIWRITE, "jobscript", *args], capture_output=True, text=True,
                          timeout=90, env=ompi.env()).stdout
    assert ("srun --mpi=pmix " if launcher == "srun" else "--map-by ppr:3:node --host") in text
    job, state, log = submit(slurm, args, tmp_path)
    assert state == "COMPLETED", log + slurm.log()
    rec = only_record(tmp_path / "results")
    assert rec.status == "complete" and rec.attrs["ranks"] == 3
    assert mpiinfo.family(rec.attrs["mpi_library"]) == "openmpi"
    assert recorded_launcher(rec) == expected
    assert rec.nodes[0]["slurm"]["job_id"] == job
    assert "ranks_per_node" in log and "MB/s" in log  # the script's report ran


@pytest.mark.slow
def test_killed_rank_ends_the_job(tmp_path):
    """Rank 1 is killed (as the OOM killer would) during a 20 s run (100 iterations of 1 MiB,
    0.2 s apart, so that little lands on disk): Open MPI's mpirun must end the job at once,
    and no rank may outlive it."""
    cmd = [ompi.mpirun_path(), "--oversubscribe", "-np", "3", MPIWRITE, "run",
           str(tmp_path / "d"), "-s", "1M", "-i", "100", "--delay", "0.2", "--results",
           str(tmp_path / "r"), *ARGS]
    proc = ompi.start(cmd, tmp_path)
    try:
        end = time.monotonic() + 30
        while not records_in(tmp_path / "r") and time.monotonic() < end:
            time.sleep(0.05)
        assert records_in(tmp_path / "r"), "the run never started"
        rank1 = [pid for pid in ompi.tagged(proc.tag)
                 if "OMPI_COMM_WORLD_RANK=1" in ompi.environ_of(pid)]
        assert len(rank1) == 1, rank1
        os.kill(rank1[0], signal.SIGKILL)
        killed = time.monotonic()
    finally:
        out = ompi.finish(proc, timeout=60)
    took = time.monotonic() - killed
    assert out.returncode != 0, out.stdout + out.stderr
    assert out.stray == []
    # The others would go on for about 18 s; allow for a loaded machine.
    assert took < 12, f"the job went on for {took:.1f}s after rank 1 died"
    assert "signal 9" in out.stderr or "Killed" in out.stderr, out.stderr


BUGGY_RANK = """\
# mpiwrite with a bug that only this rank hits: making its write buffer raises a plain
# RuntimeError, after the collective set-up that every rank went through.
import sys

from mpiwrite.cli import main as cli
from mpiwrite.vocab import pattern


def bug(*args, **kwargs):
    raise RuntimeError("injected bug on this rank")


pattern.make_buffer = bug
cli.main(sys.argv[1:])
"""


@pytest.mark.slow
def test_unexpected_error_on_one_rank_ends_the_job(tmp_path):
    """Rank 2 raises an error nobody planned for (a bug, not an OSError) while it prepares to
    write; ranks 0 and 1 go on, write their 4 MiB and then wait for it.  The job must end, and no
    rank may be left behind.  (mpiwrite needs an abort guard for this.)"""
    buggy = tmp_path / "buggy_rank.py"
    buggy.write_text(BUGGY_RANK)
    args = ["run", str(tmp_path / "d"), "-s", "4M", "--results", str(tmp_path / "r"), *ARGS]
    cmd = [ompi.mpirun_path(), "--oversubscribe", "-np", "2", MPIWRITE, *args, ":",
           "-np", "1", sys.executable, str(buggy), *args]
    start = time.monotonic()
    out = ompi.launch(cmd, tmp_path, timeout=30)
    took = time.monotonic() - start
    assert out.stray == []
    assert out.returncode != 0, out.stdout + out.stderr
    assert "injected bug on this rank" in out.stderr
    assert took < 20, f"the job took {took:.1f}s"


@pytest.mark.timeout(120)
def test_a_launcher_and_a_library_of_different_families_are_refused(tmp_path):
    """MPICH's mpiexec starting ranks that load Open MPI's library: every rank is a singleton,
    and n one-rank runs must not be recorded as complete.  The job refuses with one line per
    rank, exit 2, and nothing is created.  (The other way round, MPICH's library refuses
    Open MPI's PMIx in MPI_Init by itself.)"""
    out = ompi.launch([MPIEXEC, "-n", "2", MPIWRITE, "run", "d", "-s", "1M", "--results", "r",
                       "--progress-interval", "0"], tmp_path, 60, ompi.env())
    assert out.returncode == 2, out.stderr
    said = [ln for ln in out.stderr.splitlines() if ln.startswith("mpiwrite: error:")]
    assert said and all("the launcher started 2 ranks but MPI sees 1" in ln for ln in said)
    assert not (tmp_path / "r").exists() and not (tmp_path / "d").exists()
