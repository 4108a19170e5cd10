"""Options that several commands share (report, compare, plot, study report, explain):
sampling, units, the index of records; one definition each, so that their names, defaults
and help never drift apart."""

from __future__ import annotations

import click

from mpiwrite.errors import ConfigError
from mpiwrite.run.options import ASCII_INT_MOST, ascii_int
from mpiwrite.vocab import metrics  # the table of metrics (no numpy)


class AsciiInt(click.ParamType):
    """An integer written in ASCII digits (run/options.ascii_int: the one rule, for `run`'s
    options, a study's points and every other command's)."""

    name = "integer"

    def __init__(self, most: int = ASCII_INT_MOST):
        self.most = most

    def convert(self, value, param, ctx):
        try:
            return ascii_int(value, self.most)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


INT = AsciiInt()
FORMATS = click.Choice(["table", "markdown", "csv", "json"])
METRIC_HELP = metrics.help_text()  # from the table of metrics, as the names are
UNIT_HELP = ("The sample of the statistics: run (each run's mean over its iterations), "
             "iteration (each iteration), auto (run when runs have several iterations).")
WARMUP_HELP = "Leave out the first N iterations of every run (warm-up)."


def sampling_from(metric, unit, warmup, confidence, units="MB"):
    from mpiwrite.answers.report import Sampling

    if warmup < 0:
        raise ConfigError("--warmup: expected 0 or more iterations")
    return Sampling(metric, unit, warmup, confidence_from(confidence), units)


def sampling_options(f):
    """--metric, --unit, --warmup and --confidence, the same for report and compare."""
    for opt in reversed([
        click.option("--metric", type=click.Choice(list(metrics.NAMES)),
                     default="aggregate", show_default=True, help=METRIC_HELP),
        click.option("--unit", type=click.Choice(["auto", "run", "iteration"]),
                     default="auto", show_default=True, help=UNIT_HELP),
        click.option("--warmup", type=INT, default=0, show_default=True, help=WARMUP_HELP),
        click.option("--confidence", type=float, default=0.95, show_default=True,
                     help="Confidence of the intervals and of the test."),
    ]):
        f = opt(f)
    return f


def confidence_from(value: float) -> float:
    if not 0.5 <= value < 1:
        raise ConfigError("--confidence: expected a fraction such as 0.95")
    return value


def cache_options(f):
    """--cache DIR and --no-cache: where the index of records already read is kept."""
    for opt in reversed([
        click.option("--cache", "cache_dir", default=None, metavar="DIR",
                     help="Keep the index of records already read in DIR [default: "
                          "$MPIWRITE_CACHE, else $XDG_CACHE_HOME/mpiwrite or "
                          "~/.cache/mpiwrite; MPIWRITE_CACHE=off: none]."),
        click.option("--no-cache", is_flag=True,
                     help="Read every record, without the index (the answers are the same)."),
    ]):
        f = opt(f)
    return f


def units_option(f):
    return click.option("--units", type=click.Choice(["MB", "MiB"]), default="MB",
                        show_default=True,
                        help="Rates in MB/s (10^6 B/s, lmdd's) or MiB/s (2^20 B/s, IOR's), "
                             "on screen and in JSON and CSV (their keys name the unit).")(f)


def cache_choice(cache_dir, no_cache):
    if no_cache and cache_dir:
        raise ConfigError("--cache: cannot be given with --no-cache")
    return False if no_cache else cache_dir


FILTER_HELP = ("KEY=VALUE[,...]; quote values holding ',' or '=' (KEY=\"a,b\") or use "
               "a backslash (KEY=a\\,b)")


def where_option(f):
    """`--where KEY=VALUE[,...]` (repeatable: all must hold): explain's and report's filter,
    in the syntax of compare's sides."""
    return click.option("--where", "where", multiple=True, metavar="KEY=VALUE[,...]",
                        help=f"Only the runs with these keys: {FILTER_HELP} (repeatable: "
                             "all must hold).")(f)


def invalid_option(f):
    """`--include-invalid`: count the complete runs whose records say they are not valid."""
    return click.option("--include-invalid", is_flag=True,
                        help="Also count complete runs whose record says they are not valid "
                             "(a rank that wrote nothing, an error, a stonewall shorter than "
                             "asked: `mpiwrite show RUN` says why) [default: left out and "
                             "counted on stderr].")(f)


MIN_RATE, MAX_RATE = 1e-3, 1e7  # MB/s per rank assumed in an estimate (--rate)


def rate_option(f):
    """`--rate MB/s`: the rate per rank a plan's estimate takes for size-bound runs (study
    plan, tune plan)."""
    return click.option("--rate", type=float, default=None,
                        help="MB/s per rank assumed for size-bound runs in the estimate "
                             "[default: measured now by one 16 MiB fsync'd write into the "
                             "target, removed after].")(f)


def rate_from(rate):
    if rate is not None and not MIN_RATE <= rate <= MAX_RATE:  # NaN fails too
        raise ConfigError(f"--rate: must be a rate from {MIN_RATE:g} to {MAX_RATE:g} MB/s per "
                          "rank")
    return rate


def where_filter(where) -> dict:
    """The --where texts as one filter."""
    from mpiwrite.answers.results import parse_filter

    flt: dict = {}
    for text in where:  # repeatable: all must hold, so one key cannot take two values
        for key, value in parse_filter(text, "--where").items():
            if key in flt and flt[key] != value:
                raise ConfigError(f"--where: {key}={flt[key]} and {key}={value} cannot both "
                                  "hold (each --where adds a condition); give one")
            flt[key] = value
    return flt


class Where:
    """A store seen through --where: select() keeps only the runs every filter matches."""

    def __init__(self, store, flt: dict):
        self.store, self.flt = store, flt

    def select(self, flt=None, complete_only: bool = True):
        return self.store.select({**self.flt, **(flt or {})}, complete_only)

    def __getattr__(self, name):
        return getattr(self.store, name)


# Other tools' names for mpiwrite's options (fio's --bs and --runtime, IOR's transfer size,
# dd's and lmdd's bs=): an unknown option with one of these names is answered with
# mpiwrite's name, where click's spelling match would offer unrelated ones (--bs: --json).
OTHER_TOOLS_NAMES = {
    "--bs": "--block-size", "--blocksize": "--block-size", "--block_size": "--block-size",
    "--transfer-size": "--block-size", "--transfersize": "--block-size",
    "--xfersize": "--block-size", "--runtime": "--time", "--time-based": "--time",
    "--numjobs": None,  # fio's jobs are the launch's ranks: said below
}
NOT_AN_OPTION = {"--numjobs": "the number of writers is the launch's: mpiexec -n N"}


def suggest_for_unknown(exc: click.NoSuchOption) -> None:
    """Give click's error mpiwrite's name for an option other tools spell differently, when
    the command has that option (its `possibilities`, printed as 'Did you mean')."""
    name = exc.option_name
    if name in NOT_AN_OPTION:
        exc.message = f"No such option: {name} ({NOT_AN_OPTION[name]})"
        exc.possibilities = None
        return
    ours = OTHER_TOOLS_NAMES.get(name)
    cmd = exc.ctx.command if exc.ctx is not None else None
    if ours and cmd is not None and any(
            ours in p.opts for p in cmd.get_params(exc.ctx) if isinstance(p, click.Option)):
        exc.possibilities = [ours]
