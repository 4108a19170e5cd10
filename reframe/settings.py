"""A ReFrame configuration for the mpiwrite check on this machine.

Partition `default`: the local scheduler and `mpiexec -n N` (MPICH's Hydra, e.g. the `mpich`
wheel's, on PATH).  Partition `slurm`: sbatch with squeue polling (no accounting needed) and
`srun --mpi=pmi2` (the MPICH family; use pmix for Open MPI).  Select one with
`--system local:default` or `--system local:slurm`; a site uses its own configuration.
"""

site_configuration = {
    "systems": [{
        "name": "local",
        "descr": "this machine",
        "hostnames": [".*"],
        "partitions": [
            {"name": "default", "scheduler": "local", "launcher": "mpiexec",
             "environs": ["builtin"], "max_jobs": 1},
            {"name": "slurm", "scheduler": "squeue", "launcher": "srun",
             "environs": ["builtin"], "max_jobs": 1,
             "extras": {"launcher_options": ["--mpi=pmi2"]}},
        ],
    }],
}
