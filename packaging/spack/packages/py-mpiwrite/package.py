# Spack recipe for mpiwrite, for a site's own Spack repository (the older layout, package
# folders named with hyphens; for Spack 1.x repositories with `api: v2.0`, rename the folder
# to py_mpiwrite):
#   spack repo add packaging/spack && spack install py-mpiwrite ^openmpi   (or ^mpich, ...)
# The MPI is whatever py-mpi4py is built against, i.e. the site's `mpi` provider.
#
# How it was checked here: tests/unit/test_packaging.py imports this file with a stand-in for
# `spack.package` that records the directives, and checks the class, its base, the version
# and that every dependency in pyproject.toml is here with the same lower bound.  Spack is
# neither a Debian package nor on PyPI, so no `spack install`, `spack spec` or
# `spack style` was run: the concretization and the build are untested.  Set `git` below to
# where your site keeps mpiwrite's repository (the project has no public release tarball).

from spack.package import *  # noqa: F403


class PyMpiwrite(PythonPackage):  # noqa: F405
    """Parallel, fsync'd, single-stream write test for HPC filesystems (Lustre, GPFS,
    BeeGFS, NFS), one writer per MPI rank, with HDF5 records and statistical comparisons."""

    homepage = "https://example.org/mpiwrite"  # replace with the site's project page
    git = "https://example.org/hpc/mpiwrite.git"  # replace with the site's repository

    license("MIT")  # noqa: F405

    version("main", branch="main")  # noqa: F405

    variant("plot", default=False, description="Plots (matplotlib)")  # noqa: F405
    variant("pandas", default=False, description="The Python load() API (pandas)")  # noqa: F405

    depends_on("python@3.9:", type=("build", "run"))  # noqa: F405
    depends_on("py-setuptools@64:", type="build")  # noqa: F405
    depends_on("py-mpi4py@3.1:", type=("build", "run"))  # noqa: F405
    depends_on("py-numpy@1.21:", type=("build", "run"))  # noqa: F405
    depends_on("py-h5py@3.6:", type=("build", "run"))  # noqa: F405
    depends_on("py-click@8.0:", type=("build", "run"))  # noqa: F405
    # study files: the standard library's tomllib from Python 3.11, tomli before
    depends_on("py-tomli@1.1:", type=("build", "run"), when="^python@:3.10")  # noqa: F405
    depends_on("py-matplotlib@3.5:", type=("build", "run"), when="+plot")  # noqa: F405
    depends_on("py-pandas@1.3:", type=("build", "run"), when="+pandas")  # noqa: F405

    # Importing these starts no MPI (mpi4py.MPI is imported only by `mpiwrite run`).
    import_modules = ["mpiwrite", "mpiwrite.cli.main", "mpiwrite.records.h5",
                      "mpiwrite.cli.jobscript"]
