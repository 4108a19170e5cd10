"""Man pages: generated from the click help, shipped in man/man1/, installed to
share/man/man1; `mpiwrite help` shows them."""

import os
import pathlib
import re
import shutil
import subprocess
import sys
import zipfile

import pytest
from common import ROOT

SHIPPED = ROOT / "man" / "man1"
PY = [sys.executable, "-m", "mpiwrite"]


def _body(text: str) -> str:
    return "\n".join(ln for ln in text.splitlines() if not ln.startswith(".TH "))  # no date


def test_shipped_man_pages_match_the_command_line(tmp_path):
    out = subprocess.run([sys.executable, "-m", "mpiwrite.cli.manpage", str(tmp_path)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    fresh = sorted(p.name for p in tmp_path.glob("*.1"))
    assert fresh == sorted(p.name for p in SHIPPED.glob("*.1")), "run: mpiwrite-man man/man1"
    for name in fresh:
        assert _body((tmp_path / name).read_text()) == _body((SHIPPED / name).read_text()), \
            f"man/man1/{name} is out of date: run `mpiwrite-man man/man1`"


@pytest.mark.slow
def test_a_wheel_installs_the_man_pages(tmp_path):
    out = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w",
                          str(tmp_path), str(ROOT)], capture_output=True, text=True,
                         timeout=300)
    if out.returncode:
        pytest.skip(f"cannot build a wheel here: {out.stderr.strip()[-300:]}")
    (wheel,) = tmp_path.glob("mpiwrite-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert any(n.endswith("data/share/man/man1/mpiwrite-run.1") for n in names), names[-10:]
    assert any(n.endswith("schemas/run-json.schema.json") for n in names)


def test_every_page_has_examples_and_an_exit_status(tmp_path):
    from mpiwrite.cli import manpage

    paths = manpage.write_pages(str(tmp_path))
    for path in paths:
        with open(path) as fh:
            text = fh.read()
        name = os.path.basename(path)[:-2]
        assert ".SH EXIT STATUS" in text and "\\fB2\\fR" in text, name
        assert ".SH EXAMPLES" in text, name
    with open(os.path.join(tmp_path, "mpiwrite-run.1")) as fh:
        run = fh.read()
    assert "128+N" in run and "mpiexec \\-n 4 mpiwrite run" in run


def test_options_say_their_defaults(tmp_path):
    from mpiwrite.cli import manpage

    manpage.write_pages(str(tmp_path))
    run = (tmp_path / "mpiwrite-run.1").read_text()
    for said in ("[default: 1MiB]", "[default: fpp]", "[default: results]",
                 "[default: \\-\\-fsync]", "[default: 5s]", "[default: 1000]"):
        assert said in run, said
    assert "(default: remove them). [default" not in run  # said once, by its help
    job = (tmp_path / "mpiwrite-jobscript.1").read_text()
    assert "[default: srun]" in job and "[default: /tmp/mpiwrite\\-env]" in job
    assert "\n [default" not in job  # an option without help gets the bracket alone


def test_the_readme_tables_every_run_option_and_names_the_recipes():
    import re

    import click

    from mpiwrite.cli.main import cli

    readme = (ROOT / "README.md").read_text()
    start = readme.index("| option | meaning |")
    table = readme[start:readme.index("\n\n", start)]
    root = click.Context(cli, info_name="mpiwrite")
    run = cli.get_command(root, "run")
    missing = [p.opts for p in run.get_params(click.Context(run, parent=root))
               if isinstance(p, click.Option) and "--help" not in p.opts
               and not any(re.search(r"[`/|]" + re.escape(o) + r"\b", table)
                           for o in p.opts + p.secondary_opts)]
    assert missing == [], f"README's run options table lacks {missing}"
    for recipe in ("packaging/spack/packages/py-mpiwrite/package.py",
                   "packaging/apptainer/mpiwrite.def"):
        assert recipe in readme and (ROOT / recipe).is_file(), recipe


def test_every_command_and_subcommand_has_a_page(tmp_path):
    from mpiwrite.cli import manpage

    names = {os.path.basename(p) for p in manpage.write_pages(str(tmp_path))}
    for name in ("mpiwrite.1", "mpiwrite-run.1", "mpiwrite-help.1", "mpiwrite-study.1",
                 "mpiwrite-study-plan.1", "mpiwrite-study-run.1", "mpiwrite-study-report.1",
                 "mpiwrite-study-restore.1", "mpiwrite-tune-list.1", "mpiwrite-tune-plan.1",
                 "mpiwrite-tune-report.1", "mpiwrite-tune-get.1", "mpiwrite-tune-set.1"):
        assert name in names, name
    study = (tmp_path / "mpiwrite-study.1").read_text()
    assert "mpiwrite\\-plan" not in study and "\\fBmpiwrite\\-study\\-plan\\fR(1)" in study


def test_a_default_is_said_once_and_help_has_no_docstring_indent(tmp_path):
    from mpiwrite.cli import manpage

    manpage.write_pages(str(tmp_path))
    for path in tmp_path.glob("*.1"):
        filled = True
        for line in path.read_text().splitlines():
            assert line.count("[default:") <= 1, (path.name, line)
            filled = {".nf": False, ".fi": True}.get(line, filled)
            assert not (filled and line.startswith(" ")), (path.name, line)  # a forced break


def _refs(text):
    return re.findall(r"\\fB([a-z\\\-]+)\\fR\(1\)", text)


needs_man = pytest.mark.skipif(shutil.which("man") is None,
                               reason="man (man-db) is not installed")


@needs_man
def test_every_page_renders_with_man_and_every_reference_resolves(tmp_path):
    """`man -l` formats each shipped page without a groff warning, within 80 columns; every
    NAME(1) the page names is a shipped page, and `MANPATH=man man -w NAME` finds it."""
    env = dict(os.environ, MANWIDTH="80", LC_ALL="C.UTF-8", MANPAGER="cat", PAGER="cat")
    env.pop("MANPATH", None)
    pages = sorted(SHIPPED.glob("*.1"))
    assert len(pages) >= 20
    followed = set()
    for path in pages:
        out = subprocess.run(["man", "--warnings", "-l", str(path)], capture_output=True,
                             text=True, env=env, timeout=60)
        assert out.returncode == 0 and out.stderr == "", (path.name, out.stderr)
        shown = out.stdout
        assert "NAME" in shown and "EXIT STATUS" in shown and "SEE ALSO" in shown, path.name
        too_long = [ln for ln in shown.splitlines() if len(ln) > 80]
        assert not too_long, (path.name, too_long[:2])
        text = path.read_text()
        refs = [r.replace("\\-", "-") for r in _refs(text.split(".SH SEE ALSO", 1)[1])]
        assert refs or path.name == "mpiwrite.1" or "mpiwrite(1)" in shown, path.name
        for ref in _refs(text):
            name = ref.replace("\\-", "-")
            assert (SHIPPED / f"{name}.1").is_file(), f"{path.name} names {name}(1)"
            followed.add(name)
    for name in sorted(followed):
        where = subprocess.run(["man", "-w", name], capture_output=True, text=True,
                               env=dict(env, MANPATH=str(ROOT / "man")), timeout=60)
        assert where.returncode == 0, (name, where.stderr)
        assert pathlib.Path(where.stdout.strip()).resolve() == (SHIPPED / f"{name}.1").resolve()
    assert {"mpiwrite", "mpiwrite-study-plan", "mpiwrite-tune-set"} <= followed


@needs_man
def test_help_shows_the_page_through_man(tmp_path):
    env = dict(os.environ, MANWIDTH="80", PYTHONPATH=str(ROOT))
    out = subprocess.run(PY + ["help", "study", "plan"], capture_output=True, text=True,
                         env=env, timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("MPIWRITE-STUDY-PLAN(1)")
    assert "SEE ALSO" in out.stdout and "mpiwrite-study-run(1)" in out.stdout


def test_help_without_man_prints_the_plain_help(tmp_path):
    """A PATH where man is not found: the plain text, the examples after it."""
    bare = tmp_path / "bin"
    bare.mkdir()
    env = dict(os.environ, PATH=str(bare), PYTHONPATH=str(ROOT))
    out = subprocess.run(PY + ["help", "run"], capture_output=True, text=True, env=env,
                         timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("Usage: mpiwrite run [OPTIONS] [TARGET]")
    assert "Examples:\n  mpiexec -n 4 mpiwrite run" in out.stdout


@pytest.mark.parametrize("words,said", [
    (["stdy"], "mpiwrite has no command 'stdy'; did you mean 'study'?"),
    (["study", "plna"], "mpiwrite study has no command 'plna'; did you mean 'plan'?"),
    (["run", "extra"], "mpiwrite run has no subcommands")])
def test_help_on_an_unknown_command_is_one_line_and_exit_2(tmp_path, words, said):
    out = subprocess.run(PY + ["help"] + words, capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)), cwd=tmp_path)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.count("\n") == 1 and said in out.stderr, out.stderr


def test_each_commands_examples_live_in_its_own_module():
    """A command's EXAMPLES are in its module, next to its options (a new command brings
    its own); the pages and `mpiwrite help` gather them (manpage.examples)."""
    import importlib

    from mpiwrite.cli import main, manpage

    assert set(main.EXAMPLES) == {"mpiwrite"}
    for name, spec in main.LAZY.items():
        own = getattr(importlib.import_module(spec.split(":")[0]), "EXAMPLES", {})
        assert name in own, f"{spec}: no EXAMPLES for {name!r}"
        assert all(page.split()[0] == name for page in own), (name, list(own))
    assert not hasattr(manpage, "EXAMPLES") and manpage.examples()["timeline"]
