"""`page`: one HTML file to send, over records or a study file (answers/page.py, docs/page.md).

One command rather than `--format html` on report, compare, explain, show and study report:
a page holds what those say together (the table, the verdicts, the facts that differ, the
plots, the commands, the records), and the other commands keep their formats as they are.
"""

from __future__ import annotations

import os
import shlex
import sys

import click

from mpiwrite.cli.options import (
    FILTER_HELP,
    Where,
    cache_choice,
    cache_options,
    invalid_option,
    sampling_from,
    sampling_options,
    units_option,
    where_filter,
    where_option,
)
from mpiwrite.errors import ConfigError, RunError, why
from mpiwrite.text import printable

# What the man page and `mpiwrite help` show under EXAMPLES (cli/manpage.py)
EXAMPLES = {
    "page": ["mpiwrite page results/ --by lustre,checksums -o checksums.html",
            "mpiwrite page examples/blocks.toml -o blocks.html",
            "mpiwrite page results/mpiwrite-20261129T220833Z-524bd3.h5 -o run.html"],
}

SUFFIXES = (".html", ".htm")


@click.command()
@click.argument("paths", nargs=-1, required=True)
@click.option("-o", "--output", required=True, help="The page to write: FILE.html.")
@click.option("--by", default="fstype,client,checksums", show_default=True,
              help="Comma-separated run keys or tags to group the table by (records; a study "
                   "groups by its axes).")
@sampling_options
@click.option("--baseline", default=None,
              help=f"The row the others are compared with: {FILTER_HELP} [default: the first "
                   "row].")
@where_option
@units_option
@click.option("--results", default=None,
              help="With a study file: the folder of its records (default: the file's "
                   "[study] results).")
@click.option("--generation", type=click.IntRange(0), default=None,
              help="With a study file: this generation (default: the newest).")
@click.option("--skip-bad", is_flag=True, help="Exit 0 even if some records were unreadable.")
@invalid_option
@cache_options
@click.pass_context
def page(ctx, paths, output, by, metric, unit, warmup, confidence, baseline, where, units,
         results, generation, skip_bad, include_invalid, cache_dir, no_cache):
    """Write one self-contained HTML file to send: table, verdicts, plots, records.

    The page holds the table and the verdicts with their intervals (as report, compare and
    study report give them), the node facts and settings that differ, explain's answer, the
    plots (scaling, per-rank, timeline, one per axis of a study) as inline SVG, the commands
    that made the records and the records themselves.  No script and nothing fetched: it
    opens from a mail.

    PATHS are records, folders or globs (as for `report`), or one study file (.toml), whose
    page is `study report`'s; one record is shown in full (as `show`)."""
    from mpiwrite import files
    from mpiwrite.answers import page as pages
    from mpiwrite.answers import plot as plots
    from mpiwrite.answers.results import Store

    if os.path.splitext(output)[1].lower() not in SUFFIXES:
        raise ConfigError(f"-o: {output!r} must end in .html")
    files.check_output("-o", output)
    sampling = sampling_from(metric, unit, warmup, confidence, units)
    cache = cache_choice(cache_dir, no_cache)
    study_file = paths[0] if len(paths) == 1 and paths[0].endswith(".toml") else None
    if study_file is None and (results is not None or generation is not None):
        raise ConfigError("--results and --generation: only with a study file (PATHS one "
                          ".toml file)")
    study, tune = None, ""
    if study_file:
        if baseline or where:
            raise ConfigError("--baseline and --where: a study's page compares each axis's "
                              "levels with its first; give records to choose a baseline")
        store, runs, study, (st, keys) = _study(study_file, results, generation, cache)
        by = list(study.axes)
        tune = _tune_answer(st, keys, runs, sampling)
    else:
        store = Store(paths, level="full", cache=cache)
        store.include_invalid = include_invalid
        runs = store
        flt = where_filter(where)
        if flt:
            runs = Where(store, flt)
        by = [k.strip() for k in by.split(",") if k.strip()]
    doc = pages.Page(store=runs, by=by, sampling=sampling, command=_command(ctx),
                     baseline=baseline, study=study, bad=list(store.bad), tune=tune)
    text = pages.render(doc)
    try:
        files.replace_file(output, text.encode("utf-8"))
    except OSError as exc:
        raise RunError(f"-o: cannot write {output!r}: {why(exc)}") from None
    try:  # the page's own test of it (loaded already when it was drawn)
        plots._pyplot()
    except ConfigError:  # said on the terminal before the name, not only inside the page
        sys.stderr.write(printable(
            "mpiwrite: the page has no plots: they need matplotlib, which this install "
            f"lacks; `{shlex.quote(sys.executable)} -m pip install 'matplotlib>=3.5'` adds "
            "them (then make the page again)") + "\n")
    click.echo(printable(output))
    return 1 if store.bad and not skip_bad else 0


def _study(file: str, results, generation, cache):
    """(store, the study's runs, answers.page.Study) of a study file, checked as `study
    report` checks it."""
    from mpiwrite.answers.page import Study
    from mpiwrite.cli.study import open_study

    if not os.path.isfile(file):
        raise ConfigError(f"PATHS: {file!r} is not a study file")
    st, _configs, store, runs, keys = open_study(file, results, generation, cache)
    return store, runs, Study(st.name, file, dict(st.axes), st.points(), keys), (st, keys)


def _tune_answer(st, keys, runs, sampling) -> str:
    """tune report's answer of a tune study (every setting at two levels), as text, for
    the top of its page: '' for another study; the reason in a line when its runs cannot
    tell it yet."""
    from mpiwrite.answers import tune_report
    from mpiwrite.study.design import design

    if not tune_report.is_tune_study(st):
        return ""
    try:
        got = tune_report.answer(st, keys, runs, sampling.metric, sampling.warmup,
                                 sampling.confidence,
                                 design([s.name for s in st.settings]).aliases,
                                 results=st.results)
    except ConfigError as exc:
        return f"tune's answer cannot be told yet: {exc}"
    return tune_report.text(got["found"], got["aliases"], got["chosen"], got["confirm"],
                            sampling.metric, got["levels"])


def _command(ctx) -> str:
    """This page's command as typed (the options given, not the defaults)."""
    words = ["mpiwrite", "page"]
    for param in ctx.command.params:
        if ctx.get_parameter_source(param.name) != click.core.ParameterSource.COMMANDLINE:
            continue
        value = ctx.params[param.name]
        if isinstance(param, click.Argument):
            continue
        if getattr(param, "is_flag", False):
            words.append(max(param.opts, key=len))
        else:
            for v in (value if param.multiple else [value]):
                words += [max(param.opts, key=len), str(v)]
    return shlex.join(words + list(ctx.params["paths"]))
