"""Reports, comparisons, show, plots and the Python API over real and synthetic records."""

import csv
import io
import json
import os
import xml.etree.ElementTree as ET

import h5py
import numpy as np
import pytest
import synth
from common import ROOT, cli, mpirun, read_record

from mpiwrite import stats

STUDY = {name: mbps for name, (mbps, _lustre, _checksums) in synth.ORIGINAL.items()}


@pytest.fixture
def study(tmp_path):
    """Three client configurations, five runs of two iterations each, ~1% noise (the
    original study, as `python tests/synth.py DIR` writes it for the README)."""
    folder = tmp_path / "study"
    synth.original_study(folder)
    return folder


def test_t_distribution_matches_tables():
    assert stats.t_ppf(0.975, 1) == pytest.approx(12.7062, abs=1e-4)
    assert stats.t_ppf(0.975, 5) == pytest.approx(2.5706, abs=1e-4)
    assert stats.t_ppf(0.975, 30) == pytest.approx(2.0423, abs=1e-4)
    assert stats.t_cdf(2.0, 10) == pytest.approx(0.963306, abs=1e-6)


def test_report_finds_the_original_losses(study, tmp_path):
    out = cli(["report", str(study), "--by", "build", "--baseline", "build=1.6.4.3",
               "--format", "json"], cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    rows = {r["keys"]["build"]: r for r in doc["rows"]}
    # two iterations per run: by default one sample per run (its mean), and it says so
    assert doc["unit"] == "run" and doc["unit_requested"] == "auto"
    assert rows["1.6.4.3"]["runs"] == 5 and rows["1.6.4.3"]["n"] == 5
    for name, mbps in STUDY.items():
        r = rows[name]
        assert r["ci_lo_MB_per_s"] < r["mean_MB_per_s"] < r["ci_hi_MB_per_s"]
        assert r["mean_MB_per_s"] == pytest.approx(mbps, rel=0.01)
    for name, expect in (("1.6.5-off", -18.0), ("1.6.5-on", -61.0)):
        r = rows[name]
        truth = (STUDY[name] / STUDY["1.6.4.3"] - 1) * 100
        assert r["change_pct"] == pytest.approx(expect, abs=1.0)
        assert r["change_ci_lo_pct"] <= truth <= r["change_ci_hi_pct"]
        assert r["verdict"] == "real"


def test_report_table_fits_100_columns_and_other_formats(study, tmp_path):
    base = ["report", str(study), "--by", "build,checksums", "--baseline",
            "build=1.6.4.3"]
    table = cli(base, cwd=tmp_path)
    assert table.returncode == 0, table.stderr
    assert max(len(ln) for ln in table.stdout.splitlines()) <= 100, table.stdout
    assert "1.6.5-on" in table.stdout and "base" in table.stdout
    assert "samples: one per run (its mean)" in table.stdout
    md = cli(base + ["--format", "markdown"], cwd=tmp_path).stdout
    assert md.startswith("| build | checksums |")
    assert len([ln for ln in md.splitlines() if ln.startswith("|")]) == 5
    rows = list(csv.DictReader(io.StringIO(cli(base + ["--format", "csv"], cwd=tmp_path).stdout)))
    assert len(rows) == 3 and float(rows[0]["mean_MB_per_s"]) > 0
    assert rows[0]["unit"] == "run" and rows[0]["warmup"] == "0"


def test_compare_same_distribution_is_within_noise(tmp_path):
    rng = np.random.default_rng(3)
    for side in ("a", "b"):
        os.makedirs(tmp_path / side)
        for rep in range(4):
            synth.make(tmp_path / side / f"{rep}.h5", 700 * (1 + 0.03 * rng.standard_normal(2)),
                       f"{side}{rep}", tags={"side": side})
    out = cli(["compare", "side=a", "side=b", "--in", str(tmp_path), "--json"], cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["real"] is False and "within noise" in doc["verdict"]
    assert doc["test"] == "welch" and doc["a"]["n"] == 4 and doc["unit"] == "run"
    text = cli(["compare", str(tmp_path / "a"), str(tmp_path / "b")], cwd=tmp_path).stdout
    assert "Welch" in text and "within noise" in text and "more repetitions" in text


def test_compare_checksums_on_against_off(study, tmp_path):
    out = cli(["compare", "build=1.6.5-off", "build=1.6.5-on", "--in", str(study)],
              cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "a real difference" in out.stdout and "-52." in out.stdout


def test_bad_records_are_named_and_skipped(study, tmp_path):
    good = sorted(os.listdir(study))[0]
    data = (study / good).read_bytes()
    (study / "truncated.h5").write_bytes(data[: len(data) // 2])
    with h5py.File(study / "foreign.h5", "w") as h5:
        h5["x"] = [1, 2, 3]
    synth.make(study / "future.h5", [800.0], "future")
    with h5py.File(study / "future.h5", "a") as h5:
        h5.attrs["schema_version"] = 99
    out = cli(["report", str(study), "--by", "build"], cwd=tmp_path)
    assert out.returncode == 1
    for name in ("truncated.h5", "foreign.h5", "future.h5"):
        assert name in out.stderr
    assert "newer" in out.stderr and "1.6.5-on" in out.stdout
    assert cli(["report", str(study), "--by", "build", "--skip-bad"],
               cwd=tmp_path).returncode == 0


def test_incomplete_runs_are_left_out(tmp_path):
    synth.make(tmp_path / "ok.h5", [500.0, 510.0], "ok", tags={"k": "v"})
    synth.make(tmp_path / "bad.h5", [9000.0], "bad", tags={"k": "v"}, status="running")
    out = cli(["report", str(tmp_path), "--by", "k", "--format", "json", "--unit",
               "iteration"], cwd=tmp_path)
    assert json.loads(out.stdout)["rows"][0]["n"] == 2
    assert "did not complete" in out.stderr


def test_python_api_tables_join_on_run_id(study):
    pd = pytest.importorskip("pandas")
    from mpiwrite.answers.results import load

    t = load([str(study)])
    assert set(t) == {"runs", "iterations", "ranks", "nodes", "samples"}
    assert len(t["runs"]) == 15 and len(t["iterations"]) == 30
    joined = t["iterations"].merge(t["runs"][["run_id", "checksums"]], on="run_id")
    assert len(joined) == 30 and set(joined["build"]) == set(STUDY)
    assert isinstance(t["ranks"], pd.DataFrame) and "host" in t["ranks"]


def _not_blank_png(path):
    from PIL import Image

    im = np.asarray(Image.open(path).convert("L"), dtype=float)
    assert im.shape[0] > 100 and im.std() > 10


def test_scaling_plot(tmp_path):
    pytest.importorskip("matplotlib")
    for nodes in (1, 2, 4):
        for rep in range(3):
            synth.make(tmp_path / f"s{nodes}-{rep}.h5", [300.0 * nodes ** 0.8 + rep],
                       f"s{nodes}{rep}", nodes=nodes, tags={"study": "scale"})
    png = tmp_path / "scaling.png"
    out = cli(["plot", "scaling", str(tmp_path), "--by", "study", "-o", str(png)], cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    _not_blank_png(png)
    svg = tmp_path / "scaling.svg"
    assert cli(["plot", "scaling", str(tmp_path), "-o", str(svg), "--x", "ranks"],
               cwd=tmp_path).returncode == 0
    root = ET.parse(svg).getroot()
    assert root.tag.endswith("svg")
    assert "MB/s" in svg.read_text() or "MB" in svg.read_text()
    # the legend (matplotlib writes each text as a comment): no "runs:" before the one
    # line's entries without --by; a line per --by group named by it
    text = svg.read_text()
    assert "<!-- geometric mean, error bars 95% CI -->" in text and "runs:" not in text
    assert cli(["plot", "scaling", str(tmp_path), "-o", str(svg), "--by", "study"],
               cwd=tmp_path).returncode == 0
    assert "<!-- study=scale: geometric mean, error bars 95% CI -->" in svg.read_text()


@pytest.mark.mpi
def test_real_runs_report_show_and_plots(tmp_path):
    for sums in ("on", "off"):
        out = mpirun(2, ["run", "d", "-s", "2M", "-i", "2", "--results", "r", "--tag",
                         f"sums={sums}", "--sample-interval", "0.05"], cwd=tmp_path)
        assert out.returncode == 0, out.stderr
    rep = cli(["report", "r", "--by", "sums,ranks"], cwd=tmp_path)
    assert rep.returncode == 0 and "on" in rep.stdout and "off" in rep.stdout
    recs = sorted(os.listdir(tmp_path / "r"))
    show = cli(["show", os.path.join("r", recs[0])], cwd=tmp_path)
    assert show.returncode == 0, show.stderr
    for needle in ("per rank, slowest first", "imbalance", "straggler tail", "per node",
                   "offset s"):
        assert needle in show.stdout
    run_id = recs[0][len("mpiwrite-"):-3]
    assert cli(["show", run_id[:-2], "--in", "r"], cwd=tmp_path).returncode == 0
    pytest.importorskip("matplotlib")  # the plots of the same runs
    for kind in ("ranks", "timeline"):
        png = tmp_path / f"{kind}.png"
        out = cli(["plot", kind, os.path.join("r", recs[0]), "-o", str(png)], cwd=tmp_path)
        assert out.returncode == 0, out.stderr
        _not_blank_png(png)


def test_plot_refuses_an_unknown_suffix(tmp_path):
    out = cli(["plot", "scaling", str(tmp_path), "-o", "x.gif"], cwd=tmp_path)
    assert out.returncode == 2 and "-o" in out.stderr


@pytest.mark.parametrize("metric", ["aggregate", "first-done", "rank-mean", "per-node"])
def test_every_metric_reports(study, tmp_path, metric):
    out = cli(["report", str(study), "--by", "build", "--metric", metric, "--format", "json"],
              cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    rows = {r["keys"]["build"]: r for r in json.loads(out.stdout)["rows"]}
    assert rows["1.6.4.3"]["mean_MB_per_s"] > rows["1.6.5-on"]["mean_MB_per_s"] > 0


def test_unknown_metric_is_bad_input(study, tmp_path):
    out = cli(["report", str(study), "--metric", "fastest"], cwd=tmp_path)
    assert out.returncode == 2 and "--metric" in out.stderr


def test_compare_exits_1_when_a_record_was_unreadable(study, tmp_path):
    (study / "broken.h5").write_bytes(b"\x89HDF\r\n\x1a\n" + b"\0" * 100)
    out = cli(["compare", "build=1.6.5-off", "build=1.6.5-on", "--in", str(study)],
              cwd=tmp_path)
    assert out.returncode == 1 and "broken.h5" in out.stderr and "verdict" in out.stdout
    out = cli(["compare", "build=1.6.5-off", "build=1.6.5-on", "--in", str(study),
               "--skip-bad"], cwd=tmp_path)
    assert out.returncode == 0


def test_runs_with_different_durability_are_never_pooled_silently(tmp_path):
    """fsync'd runs pooled with --no-fsync ones gave 1,251.6 +-1,218 MB/s: refuse, naming the
    setting and --by, unless the setting is a grouping key."""
    import synth
    from common import cli

    d = tmp_path / "rec"
    d.mkdir()
    synth.make(d / "a.h5", [300.0, 310.0], "run-a", tags={"cfg": "x"})
    synth.make(d / "b.h5", [2200.0, 2300.0], "run-b", tags={"cfg": "x"},
               params={"fsync": False})
    out = cli(["report", str(d), "--by", "cfg"], cwd=tmp_path)
    assert out.returncode == 2 and "fsync" in out.stderr and "--by" in out.stderr
    out = cli(["report", str(d), "--by", "cfg,fsync"], cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "on" in out.stdout and "off" in out.stdout
    synth.make(d / "c.h5", [305.0, 315.0], "run-c", tags={"cfg": "y"})
    out = cli(["compare", "cfg=x", "cfg=y", "--in", str(d)], cwd=tmp_path)
    assert out.returncode == 2 and "fsync" in out.stderr


def test_every_node_fact_is_a_grouping_key_and_compare_names_what_else_differs(tmp_path):
    """The original question: after checksums, "is there some other parameter to play with?"
    Two groups whose nodes differ in the CPU model and one OSC tunable besides the tag."""
    import synth
    from common import cli

    d = tmp_path / "rec"
    d.mkdir()
    for i, (cpu, rpcs) in enumerate([("AMD 2354", 8), ("AMD 2354", 8), ("Intel X5450", 32),
                                      ("Intel X5450", 32)]):
        path = d / f"r{i}.h5"
        synth.make(path, [300.0 + i, 310.0 + i], f"run-{i}", tags={"ver": "old" if i < 2
                                                                  else "new"})
        from mpiwrite.records import h5 as records

        rec = read_record(str(path))
        rpc = 2**20 if i < 2 else 2**18  # and one counter: the client's write RPC size
        rec.client_counters = [{"iteration": 0, "node": 0, "delta": {
            "kind": "lustre", "write_bytes": 64 * 2**20, "write_rpcs": 64 * 2**20 // rpc}}]
        for n in rec.nodes:
            n["cpu_model"] = cpu
            n.setdefault("lustre", {})["osc"] = [{"device": f"OST{k}", "max_rpcs_in_flight": rpcs}
                                                 for k in range(2)]
        path.unlink()
        records.write(rec, str(path))
    out = cli(["report", str(d), "--by", "cpu_model,lustre.osc.max_rpcs_in_flight", "--format",
               "json"], cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)["rows"]
    assert {(r["keys"]["cpu_model"], r["keys"]["lustre.osc.max_rpcs_in_flight"]) for r in rows} \
        == {("AMD 2354", "8"), ("Intel X5450", "32")}
    out = cli(["compare", "ver=old", "ver=new", "--in", str(d), "--json"], cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    diff = json.loads(out.stdout)["differing_facts"]
    assert diff["cpu_model"] == {"a": ["AMD 2354"], "b": ["Intel X5450"]}
    assert diff["lustre.osc.max_rpcs_in_flight"] == {"a": ["8"], "b": ["32"]}
    assert diff["client write RPC size (bytes per RPC, from its counters)"] == {
        "a": ["1048576"], "b": ["262144"]}
    assert "ver" not in diff  # the selecting key
    assert not any(k.endswith("device") for k in diff)  # names, not settings
    text = cli(["compare", "ver=old", "ver=new", "--in", str(d)], cwd=tmp_path).stdout
    assert "also different between A and B:" in text and "cpu_model: AMD 2354 -> Intel X5450" \
        in text


def test_the_readme_example_is_what_report_prints(study, tmp_path):
    readme = (ROOT / "README.md").read_text()
    block = readme.split("mpiwrite report original-study --by lustre,checksums --baseline "
                         "lustre=1.6.4.3\n```\n```\n", 1)[1].split("```", 1)[0]
    out = cli(["report", str(study), "--by", "lustre,checksums", "--baseline",
               "lustre=1.6.4.3"], cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout == block


@pytest.mark.timeout(300)
def test_the_readme_examples_are_what_the_regenerating_command_prints(tmp_path):
    """`python tests/readme_examples.py --check` (the original study's report table, the
    imported IOR and lmdd table, the IOR history compared with mpiwrite runs) passes on the
    README; on a copy with a stale table it fails
    with the difference, and `--write` puts back exactly what the commands print."""
    import shutil
    import subprocess
    import sys

    root = ROOT
    script = [sys.executable, str(root / "tests" / "readme_examples.py")]
    ok = subprocess.run(script + ["--check"], capture_output=True, text=True, timeout=280)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    stale = tmp_path / "README.md"
    shutil.copy(root / "README.md", stale)
    good = stale.read_text()
    assert good.count("1.6.5    on            5  5      324.0 ±2.7") == 1
    stale.write_text(good.replace("1.6.5    on            5  5      324.0 ±2.7",
                                  "1.6.5    off           5  4      324.0 ±2.7"))
    # the stale table's example alone (every example was made and checked above)
    only = "report original-study"
    bad = subprocess.run(script + ["--check", str(stale), only], capture_output=True,
                         text=True, timeout=280)
    assert bad.returncode == 1 and "+1.6.5    on            5  5      324.0 ±2.7" in bad.stdout
    wrote = subprocess.run(script + ["--write", str(stale), only], capture_output=True,
                           text=True, timeout=280)
    assert wrote.returncode == 0 and stale.read_text() == good, wrote.stdout + wrote.stderr
