"""The names of the metrics that report, compare, plot and explain take (--metric), written
once: the command line offers them (cli/options.py) without importing numpy, and
answers/results.py maps each to its figures."""

NAMES = ("aggregate", "first-done", "rank-mean", "per-node", "read", "ior", "client-cpu",
         "cpu-per-GB", "stonewall")
