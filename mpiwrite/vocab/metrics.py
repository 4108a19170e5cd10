"""Every metric that report, compare, plot, explain and study report take (--metric), declared
once.  From this table come the names the command line offers (cli/options.py, without
numpy), the --metric help, the figures answers/results.py reads for each, their units and
direction, and the metric enums and stat blocks of the shipped JSON Schemas
(formats/schemagen.py; tests/cli/test_schemas.py holds the files equal to the table).

A new metric is one entry here, plus, when its values are not a column of the iterations
table, the code that computes them (answers/results.py, by `source`).
"""

from __future__ import annotations

from typing import Dict, NamedTuple, Tuple

# how a metric's values are found (answers/results.py): a column of the iterations table,
# the per-node totals of the per-rank table, client CPU, or the record's stonewall figures
COLUMN, PER_NODE, CPU, STONEWALL = "column", "per-node", "cpu", "stonewall"


class Metric(NamedTuple):
    """One metric: its name, what one value is (the help's words), where its values come
    from, and how its numbers read: the unit shown, the suffix of its JSON and CSV keys
    (`mean_<suffix>`: the contract puts units in names), the report's column header, whether
    more is better (what `compare` calls a regression), the decimals shown, the unit of a
    difference, and the words the schemas use for the unit.  `whole`: its values need the
    whole record (the per-rank table or the stonewall figures), not only the run-level part.
    `rank_figure`: within one run it names the ranks' own write rates (explain of one run)."""
    name: str
    help: str
    source: str = COLUMN
    column: str = ""
    unit: str = "MB/s"
    suffix: str = "MB_per_s"
    header: str = "MB/s"
    higher_is_better: bool = True
    digits: int = 1
    diff_unit: str = ""
    unit_words: str = "MB/s: 10^6 bytes per second"
    whole: bool = False
    rank_figure: bool = False


TABLE: Tuple[Metric, ...] = (
    Metric("aggregate", "bytes of all ranks / time to the last rank done",
           column="aggregate_MB_per_s", rank_figure=True),
    Metric("first-done", "bytes of all ranks / time to the first rank done",
           column="first_done_MB_per_s"),
    Metric("rank-mean", "the mean of the ranks' own rates", column="rank_mean_MB_per_s",
           rank_figure=True),
    Metric("per-node", "the mean of the nodes' summed rank rates", source=PER_NODE, whole=True),
    Metric("read", "the --read phase's aggregate", column="read_aggregate_MB_per_s"),
    Metric("ior", "IOR's bandwidth, open included", column="aggregate_with_open_MB_per_s"),
    # IO500's stonewall figure (run --stonewall): the bytes at the stonewall over its time
    Metric("stonewall", "the bytes written when --stonewall's time was up / that time",
           source=STONEWALL, whole=True),
    # the busiest node's CPU busy fraction over each iteration's write phase, in percent
    Metric("client-cpu", "the busiest node's CPU busy, in %", source=CPU, unit="%",
           suffix="cpu_busy_pct", header="CPU busy %", higher_is_better=False,
           diff_unit="points",
           unit_words="percent: the busiest node's CPU busy fraction x 100"),
    # client CPU seconds (user + system: the ranks, and the client's own processes where
    # measured: answers/clientcpu.py) per 10^9 bytes written
    Metric("cpu-per-GB", "client CPU s/GB: user + system seconds of all ranks and of the "
           "client's own processes, a FUSE daemon or Lustre's or NFS's kernel threads, per "
           "10^9 bytes written", source=CPU, unit="CPU s/GB", suffix="cpu_seconds_per_GB",
           header="CPU s/GB", higher_is_better=False, digits=3,
           unit_words="client CPU seconds (user + system) per 10^9 bytes written", whole=True),
)

BY_NAME: Dict[str, Metric] = {m.name: m for m in TABLE}
NAMES: Tuple[str, ...] = tuple(BY_NAME)
RATE_SUFFIX = "MB_per_s"
RATES: Tuple[str, ...] = tuple(m.name for m in TABLE if m.suffix == RATE_SUFFIX)


def help_text() -> str:
    """The --metric help, from the table: the rates, then the metrics in other units."""
    rates = ", ".join(f"{m.name} ({m.help})" for m in TABLE if m.name in RATES)
    others = " and ".join(f"{m.name} ({m.help})" for m in TABLE if m.name not in RATES)
    return (f"What one value is: {rates}, all in MB/s = 10^6 B/s; {others}, where less is "
            "better.")
