"""`mpiwrite plot`: scaling, per-rank and timeline plots of records."""

from __future__ import annotations

import click

from mpiwrite.cli.lookup import key_list, open_store
from mpiwrite.cli.options import (
    INT,
    cache_choice,
    cache_options,
    sampling_from,
    sampling_options,
    units_option,
)
from mpiwrite.errors import ConfigError, RunError, why
from mpiwrite.text import printable

# What the man page and `mpiwrite help` show under EXAMPLES (cli/manpage.py)
EXAMPLES = {
    "plot": ["mpiwrite plot scaling results/ --x nodes --by lustre -o scaling.png",
            "mpiwrite plot ranks results/mpiwrite-RUN.h5 -o ranks.png"],
}


@click.command()
@click.argument("kind", type=click.Choice(["scaling", "ranks", "timeline"]))
@click.argument("paths", nargs=-1, required=True)
@click.option("-o", "--output", required=True, help="Output file: .png, .svg or .pdf.")
@click.option("--by", default="", help="Group runs into lines by these keys (scaling).")
@click.option("--x", "xkey", type=click.Choice(["nodes", "ranks"]), default="nodes",
              show_default=True)
@sampling_options
@click.option("--iteration", type=INT, default=None, help="Iteration (ranks, timeline).")
@click.option("--skip-bad", is_flag=True)
@units_option
@cache_options
def plot(kind, paths, output, by, xkey, metric, unit, warmup, confidence, iteration,
         skip_bad, units, cache_dir, no_cache):
    """Draw a scaling curve, per-rank figures of one run, or a throughput timeline."""
    from mpiwrite import files
    from mpiwrite.answers import plot as plots
    from mpiwrite.answers.results import level_for

    plots.check_output(output)
    files.check_output("-o", output)
    sampling = sampling_from(metric, unit, warmup, confidence, units)
    cache = cache_choice(cache_dir, no_cache)
    store, code = open_store(paths, skip_bad, level=level_for(metric) if kind == "scaling"
                         else "full", cache=cache)
    try:
        if kind == "scaling":
            plots.scaling(store, output, key_list(by), xkey, sampling)
        else:
            runs = store.runs
            if len(runs) != 1:
                raise ConfigError(f"PATHS: {kind} draws one run; {len(runs)} records given")
            getattr(plots, kind)(runs[0], output, iteration)
    except OSError as exc:
        raise RunError(f"-o: cannot write {output!r}: {why(exc)}") from None
    click.echo(printable(output))
    return code
