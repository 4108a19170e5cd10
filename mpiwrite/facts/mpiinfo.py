"""Which MPI family a library string names, and which launcher started this process.

Pure functions over text and an environment mapping, so that they can be tested on the strings
real libraries and launchers produce without starting any of them.  The record stores both,
because the same figures mean different things over a vendor MPI and the PyPI MPICH wheel, and
`srun`, `mpirun` and Hydra place and bind ranks differently.
"""

from __future__ import annotations

import os
from typing import Mapping, Optional

FAMILIES = ("openmpi", "mpich", "intelmpi", "mvapich", "cray-mpich", "unknown")

# Most specific first: Intel MPI, Cray MPICH and MVAPICH are MPICH derivatives whose strings
# may mention MPICH too (Cray's: "CRAY MPICH version 8.1.25.17 (ANL base 3.4a2)").
_MARKERS = (
    ("intel(r) mpi library", "intelmpi"),
    ("intel mpi", "intelmpi"),
    ("cray mpich", "cray-mpich"),
    ("mvapich", "mvapich"),
    ("open mpi", "openmpi"),
    ("mpich", "mpich"),
)


def family(library_version: str) -> str:
    """The MPI family of an `MPI_Get_library_version()` string (FAMILIES), 'unknown' if none."""
    text = (library_version or "").replace("\x00", "").lower()
    for marker, name in _MARKERS:
        if marker in text:
            return name
    return "unknown"


def launcher(environ: Optional[Mapping[str, str]] = None) -> str:
    """How this process was started, from the variables each launcher gives its ranks.

    'mpirun' (Open MPI's mpirun/prterun), 'mpiexec-hydra' (MPICH, Intel MPI), 'srun'
    (Slurm's PMI-2 or PMIx), 'mpirun_rsh' (MVAPICH), 'aprun' (Cray ALPS), 'mpiexec-pals'
    (Cray PALS), 'flux', 'pmix' or 'pmi' (another PMIx / PMI launcher) or 'singleton'.
    Launchers that start their daemons through srun leave SLURM_STEP_ID behind as well, so
    the MPI launchers' own variables are looked at first.
    """
    env = os.environ if environ is None else environ

    def has(*names: str) -> bool:
        return any(n in env for n in names)

    def prefixed(prefix: str) -> bool:
        return any(k.startswith(prefix) for k in env)

    if has("OMPI_COMM_WORLD_SIZE", "OMPI_MCA_orte_hnp_uri") or prefixed("PRTE_"):
        return "mpirun"
    if has("MPI_LOCALNRANKS") or prefixed("HYDRA_") or prefixed("HYD_"):
        return "mpiexec-hydra"
    if has("MPIRUN_RANK", "MV2_COMM_WORLD_RANK"):
        return "mpirun_rsh"
    if has("SLURM_STEP_ID", "SLURM_STEPID"):
        return "srun"
    if has("PALS_RANKID"):
        return "mpiexec-pals"
    if has("ALPS_APP_PE"):
        return "aprun"
    if has("FLUX_JOB_ID"):
        return "flux"
    if has("PMIX_RANK", "PMIX_NAMESPACE"):
        return "pmix"
    if has("PMI_RANK", "PMI_FD", "PMI_PORT"):
        return "pmi"
    return "singleton"

