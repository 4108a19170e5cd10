"""`mpiwrite page`: one self-contained HTML file over records or a study file, well formed,
with no script and no reference out of the file, every string from a record escaped, and
rendered by a real browser (headless Chromium) with every plot drawn."""

import html
import html.parser
import json
import os
import re
import shutil
import xml.etree.ElementTree as ET

import numpy as np
import pytest
import synth
from common import MPIEXEC, bounded, cli, mpirun, read_record

HOSTILE_TAG = '<script>alert(1)</script>"onload=alert(2) x'
HOSTILE_HOST = '<img src=x onerror=alert(3)>"h'
HOSTILE_COMMAND = "mpiwrite run '</pre><script>alert(4)</script>'"
HOSTILE_FOLDER = 'r"onload=alert(5)<script>'
VOID = {"meta", "br", "hr", "img", "input", "link", "col", "area", "base", "wbr", "source"}


class Strict(html.parser.HTMLParser):
    """Every element closed in order (void ones excepted, SVG's self-closed ones allowed);
    the tags, attributes and text met kept for the checks."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack, self.tags, self.attrs, self.text, self.problems = [], [], [], [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attrs.extend(attrs)
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.tags.append(tag)
        self.attrs.extend(attrs)

    def handle_endtag(self, tag):
        if not self.stack or self.stack[-1] != tag:
            self.problems.append(f"</{tag}> closes {self.stack[-1:] or 'nothing'}")
        else:
            self.stack.pop()

    def handle_data(self, data):
        self.text.append(data)


def well_formed(page: str) -> Strict:
    p = Strict()
    p.feed(page)
    p.close()
    assert not p.problems, p.problems[:5]
    assert p.stack == [], p.stack
    assert page.startswith("<!DOCTYPE html>")
    ET.fromstring(page.split("\n", 1)[1])  # also well-formed XML: closed, quoted, escaped
    return p


def self_contained(page: str, p: Strict) -> None:
    """No script, no event attribute, nothing fetched: no http(s) anywhere, no src, every
    href an anchor in the page."""
    assert "script" not in p.tags
    assert "<script" not in page.lower()
    assert not re.search(r"https?:", page, re.IGNORECASE)
    for name, value in p.attrs:
        assert not name.startswith("on"), (name, value)
        assert name not in ("src", "srcset", "action", "formaction"), (name, value)
        if name in ("href", "xlink:href"):
            assert value.startswith("#"), value
    assert "default-src 'none'" in page  # a Content-Security-Policy of its own, too


def hostile_records(folder):
    os.makedirs(folder)
    synth.original_study(folder, runs=3)
    for rep in range(3):  # a fourth row whose tag, host and command are markup
        synth.make(os.path.join(folder, f"<script>-{rep}.h5"), [500.0 + rep, 501.0 + rep],
                   f"hostile-{rep}", tags={"build": HOSTILE_TAG}, hosts=[HOSTILE_HOST],
                   attrs={"command_line": HOSTILE_COMMAND})
    return folder


@pytest.mark.timeout(120)
def test_a_page_of_records_is_well_formed_self_contained_and_escapes_what_records_hold(
        tmp_path):
    folder = hostile_records(str(tmp_path / HOSTILE_FOLDER))
    out = tmp_path / "page.html"
    got = cli(["page", folder, "-o", str(out), "--by", "build"], cwd=tmp_path, timeout=100)
    assert got.returncode == 0, got.stderr
    assert got.stdout.strip() == str(out)
    page = out.read_text(encoding="utf-8")
    p = well_formed(page)
    self_contained(page, p)
    text = "".join(p.text)
    for hostile in (HOSTILE_TAG, HOSTILE_HOST, HOSTILE_COMMAND, HOSTILE_FOLDER):
        assert hostile in text  # shown as text, whole
    assert html.escape(HOSTILE_TAG, quote=True) in page
    assert "<img" not in page
    # the table, the verdicts with their intervals, the facts that differ, the commands and
    # the records it came from
    assert text.count("a real difference") == 3  # three rows against the first, all real
    assert re.search(r"\[-\d+\.\d, -\d+\.\d\]", text)  # a change's interval
    assert "checksums" in text and "lustre" in text  # facts that differ between the rows
    assert "mpiwrite run (synthetic)" in text
    assert os.path.join(folder, "1.6.5-on-2.h5") in text
    assert text.count(".h5") == 12
    assert "mpiwrite page --output" in text and "--by build" in text
    pytest.importorskip("matplotlib")  # the plots (the test-full extra)
    # the per-rank plot of a row's run, inline; the synthetic records hold no samples: said
    assert page.count("<svg ") == 4 + 1  # and the rows side by side (drawn without matplotlib)
    assert "holds no throughput samples" in text
    assert len(set(re.findall(r'\bid="([^"]+)"', page))) == len(re.findall(r'\bid="', page))


@pytest.mark.timeout(120)
def test_the_table_is_reports_and_one_run_is_shown_in_full(tmp_path):
    folder = str(tmp_path / "r")
    synth.original_study(folder, runs=3)
    out = tmp_path / "page.html"
    got = cli(["page", folder, "-o", str(out), "--by", "build"], cwd=tmp_path, timeout=100)
    assert got.returncode == 0, got.stderr
    text = "".join(well_formed(out.read_text(encoding="utf-8")).text)
    rep = cli(["report", folder, "--by", "build"], cwd=tmp_path)
    assert rep.returncode == 0, rep.stderr
    for line in rep.stdout.splitlines()[1:4]:  # each row's mean and interval, as report has
        mean = re.search(r"\d[\d,]*\.\d (±[\d,.]+|\[[^]]+\])", line).group(0)
        assert mean in text, (mean, line)
    assert "explain: aggregate MB/s over 9 runs" in text
    one = tmp_path / "one.html"
    got = cli(["page", os.path.join(folder, "1.6.5-on-1.h5"), "-o", str(one)], cwd=tmp_path,
              timeout=100)
    assert got.returncode == 0, got.stderr
    page = one.read_text(encoding="utf-8")
    text = "".join(well_formed(page).text)
    assert "The run in full" in text and "run 1.6.5-on-1  status complete" in text
    assert "One row: nothing to compare" in text
    assert "each rank's write MB/s within run 1.6.5-on-1" in text  # explain between ranks
    pytest.importorskip("matplotlib")  # the plots (the test-full extra)
    assert page.count("<svg ") == 1


@pytest.mark.timeout(120)
def test_the_base_row_is_the_configuration_measured_first_not_the_first_in_the_alphabet(
        tmp_path):
    """Runs with checksums off first, then on: the page compares on against off (once
    against 'checksums=off' only because 'off' < 'on' happened to hold, and a build called
    'new' measured before one called 'baseline' was compared against the later one)."""
    r = tmp_path / "r"
    r.mkdir()
    for i, (build, rate) in enumerate([("new", 680.0), ("new", 690.0), ("baseline", 830.0),
                                       ("baseline", 835.0)]):
        synth.make(r / f"{i}.h5", [rate, rate + 1], f"run{i}", tags={"build": build},
                   start_time=f"2026-12-0{1 + i}T10:00:00Z")
    out = tmp_path / "page.html"
    got = cli(["page", str(r), "-o", str(out), "--by", "build"], cwd=tmp_path, timeout=100)
    assert got.returncode == 0, got.stderr
    page = out.read_text(encoding="utf-8")
    text = "".join(well_formed(page).text)
    assert "Each row against the base row (build=new)" in text, text[:3000]
    # the page leads with the rows side by side, the base named, each row's interval drawn
    assert page.index('id="chart"') < page.index('id="table"') < page.index('id="verdicts"')
    chart = page[page.index('id="chart"'):page.index('id="table"')]
    assert chart.count("<circle") == 2 and chart.count("stroke-width") == 6  # 2 x 3 lines
    assert "build=new (base)" in chart and "the configuration measured first" in chart


@pytest.mark.timeout(120)
def test_a_page_without_plots_says_so_on_the_terminal_with_the_command_that_adds_them(
        tmp_path):
    """The quick start's install has no matplotlib: `page` printed only the file name and
    the page alone said "No plots".  With matplotlib hidden (a package of that name that
    cannot be imported, first on the path), the terminal says it before the name."""
    folder = str(tmp_path / "r")
    synth.original_study(folder, runs=2)
    hide = tmp_path / "hide" / "matplotlib"
    hide.mkdir(parents=True)
    (hide / "__init__.py").write_text("raise ImportError('hidden by the test')\n")
    env = {"PYTHONPATH": os.pathsep.join(p for p in (str(hide.parent),
                                                      os.environ.get("PYTHONPATH")) if p)}
    got = cli(["page", folder, "-o", "page.html", "--by", "build"], cwd=tmp_path, env=env,
              timeout=100)
    assert got.returncode == 0, got.stderr
    (said,) = [ln for ln in got.stderr.splitlines() if "no plots" in ln]
    assert "-m pip install 'matplotlib>=3.5'" in said, said
    assert got.stdout.strip() == "page.html"
    bare = (tmp_path / "page.html").read_text(encoding="utf-8")
    assert "No plots" in bare
    # the comparison is drawn without matplotlib: one dot a row, before the table
    assert bare.index('id="chart"') < bare.index('id="table"')
    table = bare[bare.index('id="table"'):bare.index('id="verdicts"')]
    assert bare.count("<circle") == table.count("<tr>") - 1 >= 2
    pytest.importorskip("matplotlib")
    drawn = cli(["page", folder, "-o", "page.html", "--by", "build"], cwd=tmp_path,
                timeout=100)
    assert drawn.returncode == 0 and "no plots" not in drawn.stderr, drawn.stderr


@pytest.mark.timeout(60)
@pytest.mark.parametrize("args, says", [
    (["-o", "page.txt"], "-o: 'page.txt' must end in .html"),
    (["-o", "page.html", "--results", "r"], "--results and --generation: only with a study"),
    (["-o", "nofolder/page.html"], "-o"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, says):
    folder = str(tmp_path / "r")
    synth.original_study(folder, runs=2)
    got = cli(["page", folder, *args], cwd=tmp_path)
    assert got.returncode == 2, got.stdout + got.stderr
    assert len(got.stderr.strip().splitlines()) == 1 and says in got.stderr, got.stderr
    assert not (tmp_path / "page.html").exists()


STUDY = """
[study]
name = "grid"
target = "{data}"
results = "{results}"
repeat = 2

[run]
size = "4MiB"
progress_interval = 0
sample_interval = "0.002s"

[axes]
block_size = ["1MiB", "64KiB"]
ranks_per_node = [1, 2]
"""


@pytest.fixture(scope="module")
def study_page(tmp_path_factory):
    """A real study (2 x 2 points, twice, under mpiexec) and its page."""
    if MPIEXEC is None:
        pytest.skip("no mpiexec (pip install mpich)")
    tmp = tmp_path_factory.mktemp("study")
    path = tmp / "s.toml"
    path.write_text(STUDY.format(data=tmp / "data", results=tmp / "results"))
    run = mpirun(2, ["study", "run", str(path)], cwd=tmp, timeout=200)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr
    out = tmp / "grid.html"
    got = cli(["page", str(path), "-o", str(out)], cwd=tmp, timeout=100)
    assert got.returncode == 0, got.stderr
    return out


@pytest.mark.mpi
@pytest.mark.timeout(300)
def test_a_study_page_has_its_verdicts_and_a_plot_per_axis(study_page):
    page = study_page.read_text(encoding="utf-8")
    p = well_formed(page)
    self_contained(page, p)
    text = "".join(p.text)
    assert "mpiwrite study grid" in text
    # a verdict per level against the first (sizes by value: the smallest is the base, as
    # `study report` has it) at each value of the other axis
    assert page.count("<td>block_size</td><td>1MiB vs 64KiB</td>") == 2
    assert page.count("<td>ranks_per_node</td><td>2 vs 1</td>") == 2
    pytest.importorskip("matplotlib")  # the plots (the test-full extra)
    for axis in ("block_size", "ranks_per_node"):
        assert f"against the study's axis {axis}" in text
    # the axis's plot has its levels in the verdicts' order (the first is their base)
    caption = html.escape("aggregate against the study's axis block_size", quote=True)
    figure = next(f for f in page.split("</figure>") if f"<figcaption>{caption}" in f)
    assert figure.index(">64KiB</text>") < figure.index(">1MiB</text>")
    assert "scaling against ranks_per_node" in text
    # four rows, each with its representative run's per-rank plot and timeline
    assert page.count("<figcaption>per-rank rates of run") == 4
    assert page.count("<figcaption>throughput over time, run") == 4
    assert page.count("<svg ") == 11
    assert "study run" in text and str(study_page.parent / "s.toml") in text


def _chromium():
    return shutil.which("chromium") or shutil.which("chromium-browser")


# Run by the browser on a copy of the page only: where each plot lies (CSS pixels, the
# page's own layout) and how tall the page is, written into the title.
PROBE = """<script>
var r = [].map.call(document.querySelectorAll('figure svg'), function (s) {
  var b = s.getBoundingClientRect();
  return [b.left + window.scrollX, b.top + window.scrollY, b.width, b.height]; });
var wide = [].filter.call(document.querySelectorAll('pre, td, th, p, figcaption'),
  function (e) { return e.scrollWidth > e.clientWidth + 1; }).map(function (e) {
  return e.tagName + ': ' + e.textContent.slice(0, 80); });
document.title = JSON.stringify({plots: r, height: document.documentElement.scrollHeight,
  width: document.documentElement.scrollWidth, view: window.innerWidth, wide: wide});
</script>"""


def _browser(args, tmp_path, timeout=90):
    cmd = [_chromium(), "--headless", "--no-sandbox", "--disable-gpu",
           "--disable-dev-shm-usage", "--hide-scrollbars", "--force-device-scale-factor=1",
           f"--user-data-dir={tmp_path / 'profile'}", *args]
    got = bounded(cmd, timeout)  # in its own process group, ended by group on a hang
    assert got.returncode == 0, got.stderr[-2000:]
    return got.stdout


@pytest.mark.mpi
@pytest.mark.timeout(300)
def test_a_real_browser_draws_the_page_and_every_plot(study_page, tmp_path):
    if _chromium() is None:
        pytest.skip("no chromium (Debian: apt-get install chromium)")
    Image = pytest.importorskip("PIL.Image")
    page = study_page.read_text(encoding="utf-8")
    probe = tmp_path / "probe.html"  # the page's CSP would (rightly) stop the probe
    probe.write_text(re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", page)
                     .replace("</body>", PROBE + "</body>"), encoding="utf-8")
    dom = _browser(["--window-size=1200,2000", "--dump-dom", probe.as_uri()], tmp_path)
    found = json.loads(html.unescape(re.search(r"<title>(.*?)</title>", dom, re.S).group(1)))
    plots, height = found["plots"], min(int(found["height"]), 16000)
    assert len(plots) == page.count("<svg ") == 11
    # at 1200 px nothing is cut or scrolls sideways: long text wraps (explain's once did not,
    # on a records page: its explain section is the study's records' here)
    assert found["wide"] == [] and found["width"] <= found["view"], found
    records = tmp_path / "records.html"
    got = cli(["page", str(study_page.parent / "results"), "-o", str(records), "--by",
               "block_size"], cwd=tmp_path, timeout=100)
    assert got.returncode == 0, got.stderr
    rprobe = tmp_path / "rprobe.html"
    rprobe.write_text(re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "",
                             records.read_text(encoding="utf-8"))
                      .replace("</body>", PROBE + "</body>"), encoding="utf-8")
    rdom = _browser(["--window-size=1200,2000", "--dump-dom", rprobe.as_uri()], tmp_path)
    rfound = json.loads(html.unescape(re.search(r"<title>(.*?)</title>", rdom, re.S).group(1)))
    assert "explain" in records.read_text(encoding="utf-8")
    assert rfound["wide"] == [] and rfound["width"] <= rfound["view"], rfound
    shots = {}
    for name, uri in (("page", study_page.as_uri()), ("probe", probe.as_uri())):
        png = tmp_path / f"{name}.png"
        _browser([f"--window-size=1200,{height}", f"--screenshot={png}", uri], tmp_path)
        shots[name] = Image.open(png).convert("RGB")
    shot = shots["page"]
    assert shot.size == (1200, height)
    # the page as sent lays out as the probed copy does (the title is not drawn)
    assert shot.tobytes() == shots["probe"].tobytes()
    grey = shot.convert("L")
    dark = sum(grey.histogram()[:200])
    assert dark > 0.01 * 1200 * height, "the page is (nearly) blank"
    for left, top, width, height_ in plots:
        assert width > 200 and height_ > 150, (left, top, width, height_)
        box = tuple(int(v) for v in (left, top, left + width, top + height_))
        px = np.asarray(shot.crop(box), dtype=int).reshape(-1, 3)
        ink = int((px.min(axis=1) < 200).sum())
        colour = int((px.max(axis=1) - px.min(axis=1) > 60).sum())
        assert ink > 0.01 * len(px), f"plot at {box} is blank"
        assert colour > 100, f"plot at {box} has no coloured data drawn ({colour} pixels)"


@pytest.mark.timeout(180)
def test_a_real_browser_reads_hostile_strings_as_text(tmp_path):
    """What Chromium builds from the page: no script, image or event attribute came out of a
    record, and the hostile tag is a table cell's text."""
    if _chromium() is None:
        pytest.skip("no chromium (Debian: apt-get install chromium)")
    folder = hostile_records(str(tmp_path / HOSTILE_FOLDER))
    out = tmp_path / "page.html"
    got = cli(["page", folder, "-o", str(out), "--by", "build"], cwd=tmp_path, timeout=100)
    assert got.returncode == 0, got.stderr
    dom = _browser(["--window-size=1200,2000", "--dump-dom", out.as_uri()], tmp_path)
    assert "<body" in dom and "</html>" in dom
    assert "<script" not in dom.lower() and "<img" not in dom.lower()
    assert not re.search(r"<[^>]*\son[a-z]+=", dom)
    assert f"<td>{html.escape(HOSTILE_TAG, quote=False)}</td>" in dom


def test_an_svg_with_a_script_or_a_reference_out_is_refused():
    from mpiwrite.answers.htmlout import UnsafeSvg, inline_svg

    good = '<?xml version="1.0"?>\n<svg xmlns="x" width="1"><g id="a"><use xlink:href="#a"/>' \
           '</g><path clip-path="url(#a)"/></svg>'
    made = inline_svg(good, "p1", 'a "label" <b>')
    assert 'id="p1-a"' in made and 'href="#p1-a"' in made and "url(#p1-a)" in made
    assert "xmlns" not in made and "<?xml" not in made
    assert 'aria-label="a &quot;label&quot; &lt;b&gt;"' in made
    for bad in ('<svg><script>x</script></svg>', '<svg><g onload="x"/></svg>',
                '<svg><use href="file:///etc/passwd"/></svg>',
                '<svg><path style="fill: url(data:x)"/></svg>',
                '<svg><foreignObject/></svg>'):
        with pytest.raises(UnsafeSvg):
            inline_svg(bad, "p1", "x")


def test_a_one_rank_timeline_draws_its_rank_not_an_aggregate_over_it(tmp_path):
    pytest.importorskip("matplotlib")
    from mpiwrite.answers import plot as plots
    from mpiwrite.formats import summary

    rec = read_record(synth.make(tmp_path / "t.h5", [800.0], "t-1", ranks_per_node=1))
    r = rec.ranks[0]
    samples = np.zeros(4, dtype=summary.SAMPLE_DTYPE)
    for i, f in enumerate((0.25, 0.5, 0.75, 1.0)):
        samples[i]["rank"], samples[i]["bytes"] = 0, int(r["bytes"] * f)
        samples[i]["t"] = r["t_write_start"] + f * (r["t_close_end"] - r["t_write_start"])
    rec.samples = samples
    drawn = plots.Drawn()
    plots.timeline(rec, drawn)
    assert "rank 0" in drawn.svg and "aggregate" not in drawn.svg


@pytest.mark.timeout(120)
def test_runs_on_several_node_counts_get_a_scaling_plot(tmp_path):
    folder = tmp_path / "r"
    folder.mkdir()
    for nodes in (1, 2, 4):
        for rep in range(2):
            synth.make(folder / f"n{nodes}-{rep}.h5", [300.0 * nodes + rep, 301.0 * nodes],
                       f"n{nodes}-{rep}", nodes=nodes)
    out = tmp_path / "page.html"
    got = cli(["page", str(folder), "-o", str(out), "--by", "nodes"], cwd=tmp_path, timeout=100)
    assert got.returncode == 0, got.stderr
    page = out.read_text(encoding="utf-8")
    well_formed(page)
    pytest.importorskip("matplotlib")  # the plots (the test-full extra)
    assert page.count("<figcaption>scaling against nodes") == 1
    assert page.count("<figcaption>per-rank rates of run") == 3  # one run per row
    assert page.count("<svg ") == 4 + 1  # and the rows side by side (drawn without matplotlib)
