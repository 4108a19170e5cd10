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


def io_implementation(hints: Mapping[str, str], library_version: str) -> str:
    """The MPI-IO implementation behind a file, from the hints the library holds for it
    (MPI_File_get_info) and the library's version string: ROMIO (MPICH and its derivatives,
    and Open MPI with its romio component) lists `romio_*` hints and names its driver
    (`romio_filesystem_type`: UFS, LUSTRE, NFS, ...); Open MPI's own OMPIO lists none.  The
    same write through the two is not the same measurement (0.895 of IOR's under ROMIO beside
    IOR's OMPIO on tmpfs, 1.016 with the same MPI)."""
    lib = (library_version or "").replace("\x00", "").strip().splitlines()
    lib_text = " ".join(lib[0].split(",")[0].split()) if lib else "unknown"
    if any(str(k).startswith("romio_") for k in hints):
        # "UFS: Generic ROMIO driver for all UNIX-like file systems": its name
        driver = str(hints.get("romio_filesystem_type", "")).split(":")[0].strip()
        return f"ROMIO ({lib_text}" + (f"; driver {driver}" if driver else "") + ")"
    if family(library_version) == "openmpi":
        return f"OMPIO ({lib_text})"
    return f"unknown ({lib_text})"
