"""mpiwrite: a parallel, fsync'd single-stream write test for HPC filesystems."""

__version__ = "0.1.0"
SCHEMA_VERSION = 1
