"""`mpiwrite compare`: is B different from A, with a verdict and its interval."""

from __future__ import annotations

import os

import click

from mpiwrite.cli.lookup import open_store, refuse_missing_in
from mpiwrite.cli.options import (
    cache_choice,
    cache_options,
    invalid_option,
    sampling_from,
    sampling_options,
    units_option,
    where_filter,
    where_option,
)
from mpiwrite.errors import ConfigError

# What the man page and `mpiwrite help` show under EXAMPLES (cli/manpage.py)
EXAMPLES = {
    "compare": ["mpiwrite compare checksums=on checksums=off --in results/",
               "mpiwrite compare build=main build=$GIT_SHA --in results/ --fail-if-slower 5"],
}


@click.command()
@click.argument("a")
@click.argument("b")
@click.option("--in", "paths_in", multiple=True, default=["results"], show_default=True,
              help="Where KEY=VALUE filters look for records (repeatable).")
@where_option
@sampling_options
@click.option("--fail-if-slower", "--fail-if-worse", "fail_pct", type=float, default=None,
              metavar="PCT",
              help="Exit 1 when B is slower than A by more than PCT percent (with "
                   "client-cpu or cpu-per-GB: uses more CPU; --fail-if-worse reads better "
                   "there) and the difference is real at --confidence (a CI gate); else "
                   "exit 0.")
@click.option("--json", "as_json", is_flag=True,
              help="Machine-readable output (docs/output.md).")
@click.option("--skip-bad", is_flag=True, help="Exit 0 even if some records were unreadable.")
@invalid_option
@units_option
@cache_options
def compare(a, b, paths_in, where, metric, unit, warmup, confidence, fail_pct, as_json,
            skip_bad, include_invalid, units, cache_dir, no_cache):
    """Is B different from A?  Each is a record, a folder, or KEY=VALUE[,...] over --in.

    Values holding ',' or '=' are quoted: KEY="a,b" (or KEY=a\\,b).

    To send it: `mpiwrite page PATHS --by KEY -o FILE.html` writes each group against the
    one measured first, with plots, into one HTML file."""
    from mpiwrite.answers.report import compare_text, select_side
    from mpiwrite.answers.results import level_for

    if fail_pct is not None and not 0 <= fail_pct < 100:
        raise ConfigError("--fail-if-slower: expected a percentage from 0 to 100, e.g. 5")
    sampling = sampling_from(metric, unit, warmup, confidence, units)
    level, cache = level_for(metric), cache_choice(cache_dir, no_cache)
    needs_in = [(name, x) for name, x in (("A", a), ("B", b)) if not os.path.lexists(x)]
    if needs_in:
        name, x = needs_in[0]
        if "=" not in x:
            raise ConfigError(f"{name}: {x!r} is neither a record path nor a KEY=VALUE filter")
        refuse_missing_in(paths_in, f"{name}: {x!r} is not a path")
    store, code = open_store(paths_in, skip_bad, "--in", level, cache) if needs_in \
        else (None, 0)
    flt = where_filter(where)  # report's, explain's and page's filter: every one holds
    side_a, bad_a, dup_a = select_side(a, store, "A", level, cache, flt, include_invalid)
    side_b, bad_b, dup_b = select_side(b, store, "B", level, cache, flt, include_invalid)
    if (bad_a or bad_b) and not skip_bad:
        code = 1
    text, doc, failed = compare_text(side_a, side_b, a, b, sampling, fail_pct,
                                     max(dup_a, dup_b))
    if as_json:
        from mpiwrite.formats import contract

        click.echo(contract.dumps(doc))
    else:
        click.echo(text)
    return 1 if failed else code
