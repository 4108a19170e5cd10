"""What is printed and rendered: spreadsheet formulas in CSV cells, markdown
that makes links or HTML, bidi and zero-width characters, mathtext in plot labels."""

import pytest
import synth
from common import cli

from mpiwrite.text import csv_cell, markdown_cell, printable

pytestmark = pytest.mark.timeout(60)

FORMULAS = ["=cmd|' /C calc'!A0", '=HYPERLINK("http://x","y")', "+1+1", "-2+3", "@SUM(A1)",
            "\tx", "\rx"]
INVISIBLE = ["\u202a", "\u202b", "\u202c", "\u202d", "\u202e", "\u2066", "\u2067", "\u2068",
             "\u2069", "\u200b", "\u200c", "\u200d", "\u200e", "\u200f", "\u2028", "\u2029",
             "\ufeff"]


def _main(args, capsys):
    from mpiwrite.cli import main as cli_mod

    with pytest.raises(SystemExit) as info:
        cli_mod.main(list(args))
    out = capsys.readouterr()
    return info.value.code, out.out, out.err


def _records(tmp_path, tags):
    d = tmp_path / "rec"
    d.mkdir()
    for i, (key, value) in enumerate(tags):
        synth.make(d / f"r{i}.h5", [500.0 + i, 510.0 + i], f"id{i}", tags={key: value})
    return d


@pytest.mark.parametrize("ch", INVISIBLE, ids=[f"U+{ord(c):04X}" for c in INVISIBLE])
def test_printable_escapes_bidi_and_zero_width(ch):
    shown = printable(f"run {ch}gnp.exe")
    assert ch not in shown and f"\\u{ord(ch):04x}" in shown
    assert printable("é 中 ü") == "é 中 ü"  # other text as it is


@pytest.mark.parametrize("value", FORMULAS, ids=range(len(FORMULAS)))
def test_csv_cells_are_no_formulas(tmp_path, capsys, value):
    assert csv_cell(value)[0] not in "=+-@\t\r"
    d = _records(tmp_path, [("cfg", value), ("cfg", "plain")])
    code, out, err = _main(["report", str(d), "--by", "cfg", "--format", "csv"], capsys)
    assert code == 0, err
    firsts = [line.split(",")[0].strip('"') for line in out.splitlines()[1:]]
    assert "plain" in firsts
    assert all(c[:1] not in ("=", "+", "-", "@", "\t", "\r") for c in firsts), firsts


def test_markdown_cells_make_no_links_code_or_html(tmp_path, capsys):
    evil = "<img src=x onerror=alert(1)> [x](javascript:alert(1)) `code` *b* a\nb"
    assert markdown_cell("a|b") == "a\\|b"
    d = _records(tmp_path, [("cfg", evil), ("cfg", "plain")])
    code, out, err = _main(["report", str(d), "--by", "cfg", "--format", "markdown"], capsys)
    assert code == 0, err
    row = next(r for r in out.splitlines() if "img" in r)
    assert "\\<img" in row and "\\[x\\]" in row and "\\`code\\`" in row and "\\*b\\*" in row
    assert "<img" not in row.replace("\\<img", "")
    rows = [r for r in out.splitlines() if r.startswith("|")]
    assert len({r.replace("\\|", "").count("|") for r in rows}) == 1


@pytest.mark.parametrize("fmt", ["table", "markdown", "csv"])
def test_report_and_show_escape_bidi(tmp_path, capsys, fmt):
    d = _records(tmp_path, [("cfg", "\u202egnp.exe\u2066\u200b"), ("cfg", "b")])
    code, out, err = _main(["report", str(d), "--by", "cfg", "--format", fmt], capsys)
    assert code == 0 and "\u202e" not in out and "\u2066" not in out and "\u200b" not in out
    code, out, err = _main(["show", str(d / "r0.h5")], capsys)
    assert code == 0 and "\u202e" not in out and "u202e" in out


def test_run_header_escapes_bidi_in_target(tmp_path):
    out = cli(["run", "t\u202egnp.exe", "-s", "64k", "-b", "64k", "--results", "r"],
              cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "\u202e" not in out.stdout + out.stderr and "t\\u202egnp.exe" in out.stdout


@pytest.mark.parametrize("tags", [[("cfg", "cost $x^$"), ("cfg", "$\\frac{a}{$")]])
def test_plot_labels_are_not_mathtext(tmp_path, capsys, tags):
    pytest.importorskip("matplotlib")
    d = _records(tmp_path, tags)
    png = tmp_path / "p.png"
    code, out, err = _main(["plot", "scaling", str(d), "--by", "cfg", "-o", str(png)], capsys)
    assert code == 0, err
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
