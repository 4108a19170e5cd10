"""Debian's Open MPI for real: one host, emulated hosts, the test Slurm, and a failing rank.

The same install (mpi4py >= 4.1 loads the library MPI4PY_LIBMPI names) runs under Open MPI's
mpirun, under srun's PMIx plugin with Open MPI and under srun's PMI-2 plugin with MPICH.
"""

import json
import os

import hosts as hostlib
import ompi
import pytest
from conftest import MPIWRITE, only_record

from mpiwrite import mpiinfo

pytestmark = [pytest.mark.mpi,
              pytest.mark.skipif(bool(ompi.why_not()), reason=f"Open MPI: {ompi.why_not()}")]

ARGS = ["--progress-interval", "0"]


def recorded_launcher(rec) -> str:
    return mpiinfo.launcher(json.loads(rec.attrs["environment"]))


@pytest.mark.parametrize("n", [1, 2, 4])
def test_one_host_oversubscribed_complete_record(tmp_path, n):
    out = ompi.mpirun(n, ["run", "d", "-s", "2M", "--results", "r", *ARGS], cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    rec = only_record(tmp_path / "r")
    assert rec.status == "complete" and rec.attrs["ranks"] == n
    assert rec.attrs["mpi_library"].startswith("Open MPI v")
    assert mpiinfo.family(rec.attrs["mpi_library"]) == "openmpi"
    assert recorded_launcher(rec) == "mpirun"
    assert int(rec.ranks["bytes"].sum()) == n * 2 * 2**20
    assert not os.path.exists(tmp_path / "d")


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
    names = [f"h{i}" for i in range(nhosts)]
    assert f"ranks {2 * nhosts} on {nhosts} nodes ({', '.join(names)})" in out.stdout
    rec = only_record(tmp_path / "r")
    assert rec.status == "complete" and mpiinfo.family(rec.attrs["mpi_library"]) == "openmpi"
    assert [n["host"] for n in rec.nodes] == names
    assert sorted(rec.ranks["node"]) == sorted(i for i in range(nhosts) for _ in range(2))
    assert recorded_launcher(rec) == "mpirun"
