"""Man pages: generated from the click help, shipped in man/, installed to share/man/man1."""

import os
import subprocess
import sys
import zipfile

import pytest
from common import ROOT


def _body(text: str) -> str:
    return "\n".join(ln for ln in text.splitlines() if not ln.startswith(".TH "))  # no date


def test_shipped_man_pages_match_the_command_line(tmp_path):
    out = subprocess.run([sys.executable, "-m", "mpiwrite.cli.manpage", str(tmp_path)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    fresh = sorted(p.name for p in tmp_path.glob("*.1"))
    assert fresh == sorted(p.name for p in (ROOT / "man").glob("*.1")), "run: mpiwrite-man man"
    for name in fresh:
        assert _body((tmp_path / name).read_text()) == _body((ROOT / "man" / name).read_text()), \
            f"man/{name} is out of date: run `mpiwrite-man man`"


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
