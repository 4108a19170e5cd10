"""mpiwrite: a parallel, fsync'd single-stream write test for HPC filesystems.

From Python, `mpiwrite.load(paths)` gives the records under files, folders and globs as
pandas DataFrames (docs/record-schema.md).  Importing the package loads nothing else: not MPI, not
h5py, not numpy (every rank of a run imports it first).
"""

__version__ = "0.1.0"
# The newest record schema this version reads and writes.  2: rank rows without a node (-1,
# an imported record's: IOR's per-rank CSV), which a reader of 1 takes for damage; only such
# records say 2 (records/h5.schema_of), so every other record stays readable by a reader of 1.
SCHEMA_VERSION = 2


def load(paths, skip_bad=True, tables=("runs", "iterations", "ranks", "nodes", "samples"),
         cache=None):
    """The records under `paths` (a path, a folder, a glob, or a list of them) as pandas
    DataFrames keyed by `run_id`: {"runs", "iterations", "ranks", "nodes", "samples"}, or the
    `tables` asked for.  Without ranks and samples only each record's run-level part is read,
    through the index of records already read (`cache`: None for the user's cache folder or
    MPIWRITE_CACHE, False for none, or a folder).  Bad records are skipped (`skip_bad`) or a
    RecordError naming them.  Records are read in worker processes, never by libhdf5 in this
    one (docs/security.md).  Needs pandas: pip install 'mpiwrite[pandas]'."""
    from mpiwrite.answers.results import load as _load

    return _load(paths, skip_bad=skip_bad, tables=tables, cache=cache)
