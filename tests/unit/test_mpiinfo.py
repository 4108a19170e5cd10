"""MPI family and launcher, on strings and environments captured from the real thing.

The MPICH, Open MPI and launcher environments were captured on this machine (the MPICH 5.0.2
wheel, Debian's Open MPI 4.1.4, Slurm 22.05's srun with its pmi2 and pmix plugins); the
others are as printed by those libraries in published job logs.
"""

import os

import pytest

from mpiwrite.facts import mpiinfo

MPICH_WHEEL = (
    "MPICH Version:      5.0.2\nMPICH Release date: Fri Sep 25 20:45:26 UTC 2026\n"
    "MPICH ABI:          18:2:6\nMPICH Device:       ch4:ucx ofi\n"
    "MPICH configure:    --with-device=ch4:ucx,ofi --with-pm=hydra:gforker\n"
    "MPICH CC:           cc\nMPICH Custom Information:\thttps://pypi.org/p/mpich/5.0.2/\n")
OPENMPI_DEBIAN = ("Open MPI v4.1.4, package: Debian OpenMPI, ident: 4.1.4, repo rev: v4.1.4, "
                  "May 26, 2022\x00")
OPENMPI_5 = ("Open MPI v5.0.10, package: Open MPI brew@Sequoia-arm64.local Distribution, "
             "ident: 5.0.10, repo rev: v5.0.10, Feb 23, 2026")
INTEL = "Intel(R) MPI Library 2021.6 for Linux* OS\n"
INTEL_2019 = "Intel(R) MPI Library 2019 Update 6 for Linux* OS\n\n"
CRAY = ("MPI VERSION    : CRAY MPICH version 8.1.25.17 (ANL base 3.4a2)\n"
        "MPI BUILD INFO : Sun Feb 26 16:42 2023 (git hash aecd99f)\n")
MVAPICH2 = ("MVAPICH2 Version:       2.3.7\nMVAPICH2 Release date:  Wed March 02 22:00:00 EST "
            "2022\nMVAPICH2 Device:        ch3:mrail\n")
MVAPICH3 = "MVAPICH Version:  3.3b2\nMVAPICH Release date: Mon Apr  9 17:58:42 CDT 2018\n"


@pytest.mark.parametrize("text,expected", [
    (MPICH_WHEEL, "mpich"), (OPENMPI_DEBIAN, "openmpi"), (OPENMPI_5, "openmpi"),
    (INTEL, "intelmpi"), (INTEL_2019, "intelmpi"), (CRAY, "cray-mpich"),
    (MVAPICH2, "mvapich"), (MVAPICH3, "mvapich"), ("", "unknown"), ("MS-MPI 10.1", "unknown"),
])
def test_family_of_real_library_strings(text, expected):
    assert mpiinfo.family(text) == expected
    assert mpiinfo.family(text) in mpiinfo.FAMILIES


# Environments of rank 1 (only the variables that matter, values as they were).
HYDRA = {"MPI_LOCALNRANKS": "2", "MPI_LOCALRANKID": "1", "PMI_FD": "11",
         "PMI_HOSTNAME": "vm", "PMI_RANK": "1", "PMI_SIZE": "2"}
OMPI_MPIRUN = {"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2",
               "OMPI_MCA_orte_hnp_uri": "2129723392.0;tcp://192.0.2.2:34307",
               "OMPI_MCA_ess_base_vpid": "1", "PMIX_NAMESPACE": "2129723393",
               "PMIX_RANK": "1", "PMIX_VERSION": "4.2.2rc2"}
SRUN_PMIX = {"PMIX_NAMESPACE": "slurm.pmix.615007.0", "PMIX_RANK": "1",
             "PMIX_VERSION": "4.2.2rc2", "SLURM_JOB_ID": "615007", "SLURM_MPI_TYPE": "pmix",
             "SLURM_PROCID": "1", "SLURM_STEPID": "0", "SLURM_STEP_ID": "0"}
SRUN_PMI2 = {"PMI_FD": "13", "PMI_JOBID": "615008.0", "PMI_RANK": "1", "PMI_SIZE": "2",
             "SLURM_JOB_ID": "615008", "SLURM_MPI_TYPE": "pmi2", "SLURM_PROCID": "1",
             "SLURM_STEP_ID": "0"}
# Launchers inside an allocation: Hydra starts its proxies as a Slurm step, Open MPI's
# mpirun its orted daemons on other nodes the same way; their ranks see the step too.
HYDRA_IN_SLURM = dict(HYDRA, SLURM_JOB_ID="615010", SLURM_PROCID="0", SLURM_STEP_ID="0",
                      SLURM_STEP_NUM_TASKS="1")
OMPI_IN_SLURM = dict(OMPI_MPIRUN, SLURM_JOB_ID="615009", SLURM_STEP_ID="0")


@pytest.mark.parametrize("environ,expected", [
    (HYDRA, "mpiexec-hydra"), (OMPI_MPIRUN, "mpirun"), (SRUN_PMIX, "srun"),
    (SRUN_PMI2, "srun"), (HYDRA_IN_SLURM, "mpiexec-hydra"), (OMPI_IN_SLURM, "mpirun"),
    ({"PATH": "/usr/bin", "SLURM_JOB_ID": "7"}, "singleton"),  # python in a batch script
    ({"PMIX_RANK": "0", "PMIX_NAMESPACE": "x"}, "pmix"), ({"PMI_RANK": "0"}, "pmi"),
    ({"MV2_COMM_WORLD_RANK": "0", "MPIRUN_RANK": "0"}, "mpirun_rsh"),
    ({"PALS_RANKID": "0", "PMI_RANK": "0"}, "mpiexec-pals"), ({"ALPS_APP_PE": "0"}, "aprun"),
    ({"FLUX_JOB_ID": "f1", "PMI_RANK": "0"}, "flux"), ({}, "singleton"),
])
def test_launcher_from_the_environment(environ, expected):
    assert mpiinfo.launcher(environ) == expected


def test_launcher_reads_os_environ_by_default(monkeypatch):
    for key in list(os.environ):
        monkeypatch.delenv(key)
    monkeypatch.setenv("SLURM_STEP_ID", "3")
    assert mpiinfo.launcher() == "srun"


def test_the_mpiio_implementation_is_read_from_the_hints_in_force():
    from mpiwrite.engines.mpiio import io_implementation

    romio = {"cb_buffer_size": "16777216", "romio_cb_write": "automatic",
             "romio_filesystem_type": "UFS: Generic ROMIO driver for all UNIX-like file systems"}
    assert io_implementation(romio, "MPICH Version:      5.0.2\nMPICH Release date: x") == \
        "ROMIO (MPICH Version: 5.0.2; driver UFS)"
    ompi = "Open MPI v4.1.4, package: Debian OpenMPI, ident: 4.1.4, repo rev: v4.1.4"
    assert io_implementation({}, ompi) == "OMPIO (Open MPI v4.1.4)"
    assert io_implementation({"romio_cb_write": "enable"}, ompi) == "ROMIO (Open MPI v4.1.4)"
    assert io_implementation({}, "MPICH Version: 5.0.2").startswith("unknown")
