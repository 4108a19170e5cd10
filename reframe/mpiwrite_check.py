"""A ReFrame check for mpiwrite: a parallel fsync'd write, its IOR-style summary line as the
performance figure, and the run's JSON summary as the sanity check.

    reframe -C reframe/settings.py -c reframe/mpiwrite_check.py -r            # this machine
    reframe -C site-config.py -c reframe/mpiwrite_check.py -r \\
        -S target=/lustre/scratch/$USER/mpiwrite -S num_tasks=64 -S size=4G

An existing IOR check needs one line changed: its executable becomes
`mpiwrite run TARGET --ior-summary ...`; its pattern `^Max Write:\\s+(\\S+) MiB/sec` is unchanged.
"""

import reframe.utility.sanity as sn
from reframe.core.builtins import performance_function, run_before, sanity_function, variable

import reframe as rfm


@rfm.simple_test
class MpiwriteWriteCheck(rfm.RunOnlyRegressionTest):
    descr = "mpiwrite: parallel fsync'd single-stream writes, one per rank"
    valid_systems = ["*"]
    valid_prog_environs = ["*"]
    executable = "mpiwrite"
    target = variable(str, value="mpiwrite-data")
    size = variable(str, value="4MiB")
    iterations = variable(int, value=2)
    num_tasks = 2
    tags = {"io", "mpiwrite"}
    reference = {"*": {"max_write": (0, None, None, "MiB/s")}}

    @run_before("run")
    def set_options(self):
        self.job.launcher.options = list(
            self.current_partition.extras.get("launcher_options", []))
        self.executable_opts = ["run", self.target, "-s", self.size, "-i",
                                str(self.iterations), "--results", "records", "--json",
                                "summary.json", "--ior-summary", "--progress-interval", "0"]

    @sanity_function
    def validate(self):
        summary = sn.extractsingle(r'"status": "(\w+)"', "summary.json", 1)
        return sn.all([
            sn.assert_eq(summary, "complete"),
            sn.assert_found(r"^Max Write: \S+ MiB/sec \(\S+ MB/sec\)$", self.stdout),
            sn.assert_eq(sn.extractsingle(r'"ranks": (\d+)', "summary.json", 1, int),
                         self.num_tasks),
        ])

    @performance_function("MiB/s")
    def max_write(self):
        """The same pattern an IOR check uses."""
        return sn.extractsingle(r"^Max Write:\s+(\S+) MiB/sec", self.stdout, 1, float)
