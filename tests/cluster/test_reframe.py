"""The shipped ReFrame check, run by a real ReFrame (reframe-hpc from PyPI): on this machine
with the local scheduler and mpiexec, and through the test Slurm with srun (root only)."""

import json
import os

import pytest
from common import BIN, MPIEXEC, bounded, clean_env
from common import ROOT as REPO

ROOT = str(REPO)
CHECK = os.path.join(ROOT, "reframe", "mpiwrite_check.py")
SETTINGS = os.path.join(ROOT, "reframe", "settings.py")
REFRAME = os.path.join(BIN, "reframe")


def run_reframe(tmp_path, system, extra_env=None, ntasks=2, timeout=240):
    if not os.path.exists(REFRAME):
        pytest.skip("reframe not installed (pip install reframe-hpc)")
    if MPIEXEC is None:
        pytest.skip("no mpiexec (pip install mpich)")
    env = clean_env(extra_env)
    env["PATH"] = BIN + os.pathsep + env.get("PATH", "")
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    env["HOME"] = str(tmp_path)  # ReFrame's results database and caches stay in the test
    report = tmp_path / "report.json"
    out = bounded([REFRAME, "-C", SETTINGS, "-c", CHECK, "--system", system, "-r",
                   "--prefix", str(tmp_path / "rfm"), "--report-file", str(report),
                   "-S", f"num_tasks={ntasks}", "--nocolor"], timeout, cwd=str(tmp_path),
                  env=env)
    return out, json.loads(report.read_text()) if report.exists() else None


def _perf(report):
    case = report["runs"][0]["testcases"][0]
    assert case["result"] == "pass", case
    (name, (value, _ref, _lo, _hi, unit, result)), = case["perfvalues"].items()
    return {"name": name.rsplit(":", 1)[-1], "value": value, "unit": unit, "result": result}


@pytest.mark.mpi
def test_reframe_check_with_the_local_launcher(tmp_path):
    out, report = run_reframe(tmp_path, "local:default", ntasks=3)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "P: max_write:" in out.stdout and "MiB/s" in out.stdout
    perf = _perf(report)
    assert perf["name"] == "max_write" and perf["value"] > 0 and perf["unit"] == "MiB/s"
    scripts = list((tmp_path / "rfm").rglob("*.sh"))
    assert scripts and "mpiexec -n 3 mpiwrite run" in scripts[0].read_text()




@pytest.mark.slow
@pytest.mark.mpi
def test_reframe_check_through_slurm(slurm, tmp_path):
    out, report = run_reframe(tmp_path, "local:slurm", {"SLURM_CONF": slurm.conf}, ntasks=2)
    assert out.returncode == 0, out.stdout + out.stderr + slurm.log()
    assert _perf(report)["value"] > 0
    scripts = list((tmp_path / "rfm").rglob("*.sh"))
    text = scripts[0].read_text()
    assert "#SBATCH --ntasks=2" in text and "srun --mpi=pmi2 mpiwrite run" in text
