"""`run --ramp DURATION`: each rank's first DURATION is written and left out of the rates, on
the common timeline, and the record keeps the whole run's too (formats/summary.counted).
Real runs on 2 ranks; every figure recomputed from the record's own columns."""

import json

import numpy as np
import pytest
from common import cli, mpirun, read_record, records_in

pytestmark = [pytest.mark.timeout(300), pytest.mark.mpi]


def _run(tmp_path, *extra, ranks=2):
    got = mpirun(ranks, ["run", "d", "-b", "256k", "--progress-interval", "0", "--results", "r",
                         *extra], cwd=tmp_path)
    return got, (records_in(tmp_path / "r") or [None])[-1]


def test_the_rates_count_after_each_ranks_ramp_and_the_whole_run_is_kept(tmp_path):
    got, path = _run(tmp_path, "-t", "1", "--ramp", "1", "--json", "j.json")
    assert got.returncode == 0, got.stderr
    rec = read_record(path)
    r, it = rec.ranks, rec.iterations[0]
    assert (r["ramp_bytes"] > 0).all() and (r["ramp_bytes"] < r["bytes"]).all()
    # the ramp ends after its second (an fsync first: every byte counted after it is written
    # after it), and --time counts after it
    assert (r["t_ramp"] - r["t_write_start"] >= 1.0).all()
    assert (r["t_close_end"] - r["t_ramp"] >= 1.0).all()
    assert (r["fsyncs"] >= 2).all()  # the ramp's and the last
    counted = (r["bytes"] - r["ramp_bytes"]).astype(float)
    assert np.allclose(r["MB_per_s"], counted / (r["t_close_end"] - r["t_ramp"]) / 1e6)
    last = r["t_close_end"].max()
    assert it["aggregate_MB_per_s"] == pytest.approx(counted.sum() / (last - r["t_ramp"].min())
                                                     / 1e6)
    assert it["whole_MB_per_s"] == pytest.approx(r["bytes"].sum()
                                                 / (last - r["t_write_start"].min()) / 1e6)
    assert it["ramp_bytes"] == r["ramp_bytes"].sum()
    assert rec.attrs["validity"]["valid"] is True
    assert "ramp included" in got.stdout
    show = cli(["show", path], cwd=tmp_path).stdout
    assert "ramp 1s" in show and "the rates count after each rank's 1s ramp" in show
    doc = json.loads((tmp_path / "j.json").read_text())
    assert doc["iterations"][0]["aggregate_MB_per_s"] == pytest.approx(it["aggregate_MB_per_s"])


def test_a_ramp_is_a_key_of_the_runs_that_used_it(tmp_path):
    for extra in ([], ["--ramp", "0.5"]):
        got, _p = _run(tmp_path, "-t", "1", *extra)
        assert got.returncode == 0, got.stderr
    rep = cli(["report", "r", "--by", "ramp", "--format", "json"], cwd=tmp_path)
    assert rep.returncode == 0, rep.stderr
    assert sorted(str(row["keys"]["ramp"]) for row in json.loads(rep.stdout)["rows"]) == \
        ["-", "0.5"]
    # a rate after a ramp and one of the whole run count different parts: never one mean
    # (a hostile review found report pooling them into a figure neither run had)
    rep = cli(["report", "r"], cwd=tmp_path)
    assert rep.returncode == 2 and "would pool runs with ramp - and 0.5" in rep.stderr, \
        rep.stderr


def test_a_run_that_ends_before_its_ramp_is_not_valid(tmp_path):
    got, path = _run(tmp_path, "-s", "2M", "--ramp", "30")
    assert got.returncode == 0, got.stderr
    verdict = read_record(path).attrs["validity"]
    assert verdict["valid"] is False
    assert "ended before the 30s ramp" in verdict["reasons"][0]
    assert "no rank ended its 30s ramp" in cli(["show", path], cwd=tmp_path).stdout


@pytest.mark.parametrize("extra, said", [
    (["--ramp", "0"], "--ramp: must be at least 0.1s"),
    (["--ramp", "0.05"], "--ramp: must be at least 0.1s"),
    (["--ramp", "1", "--preset", "ior-easy-write"], "--preset ior-easy-write sets --stonewall"),
    (["--steady", "bw:5%:1s"], "--steady: its window (1s) must hold at least two samples"),
    (["--ramp", "1", "--stonewall", "1", "-t", "2"], "--ramp: cannot be given with --stonewall"),
    (["--ramp", "1", "--engine", "mpiio"], "it is an option of the posix engine"),
    (["--ramp", "1", "--engine", "null"], "it is an option of the posix engine"),
])
def test_a_ramp_the_run_cannot_honour_is_refused_before_anything_is_written(tmp_path, extra,
                                                                            said):
    got = cli(["run", "d", "--results", "r", *extra], cwd=tmp_path)
    assert got.returncode == 2 and said in got.stderr, got.stderr
    # one error line (a preset first says what it stands for, on a line of its own)
    assert [ln for ln in got.stderr.splitlines() if "error" in ln] == \
        got.stderr.strip().splitlines()[-1:]
    assert not (tmp_path / "d").exists() and not (tmp_path / "r").exists()


def test_steady_is_found_per_iteration_recorded_and_shown_beside_its_figure(tmp_path):
    got, path = _run(tmp_path, "-t", "1", "-i", "2", "--steady", "bw:100%:0.5s",
                     "--sample-interval", "0.1")
    assert got.returncode == 0, got.stderr
    found = read_record(path)._json("steady", None)
    assert [f["iteration"] for f in found] == [0, 1]
    # within 100% of the mean over half a second: any writing rank is steady at once
    assert all(f["steady"] and f["criterion"] == "bw:100%:0.5s" for f in found)
    assert got.stdout.count("steady from") == 2
    assert cli(["show", path], cwd=tmp_path).stdout.count("  steady from") == 2
    # a criterion no run meets: never steady, said beside the figure in show and report
    got, path = _run(tmp_path, "-t", "0.8", "--steady", "bw_slope:0.0001%:0.5s",
                     "--sample-interval", "0.1")
    assert got.returncode == 0 and "never steady" in got.stdout
    assert "never steady" in cli(["show", path], cwd=tmp_path).stdout
    rep = cli(["report", "r"], cwd=tmp_path)
    assert rep.returncode == 0 and "never became steady" in rep.stderr
    assert "1 run(s) counted had an iteration that never became steady" in rep.stderr


def test_report_and_the_page_say_which_runs_count_after_a_ramp_and_which_never_settled(
        tmp_path):
    """The page and report show the window where it applies: report's notes (and
    the page's, which has no standard error) name the ramp the rates count after, and the
    page the runs that never became steady; runs without either get neither note."""
    got, _p = _run(tmp_path, "-t", "0.5")
    assert got.returncode == 0, got.stderr
    rep = cli(["report", "r"], cwd=tmp_path)
    page = cli(["page", "r", "-o", "p0.html"], cwd=tmp_path)
    assert rep.returncode == 0 and page.returncode == 0, (rep.stderr, page.stderr)
    plain = (tmp_path / "p0.html").read_text()
    assert "ramp:" not in rep.stdout and "ramp: " not in plain and "steady: " not in plain
    got, _p = _run(tmp_path, "-t", "0.8", "--ramp", "0.3", "--steady",
                   "bw_slope:0.0001%:0.5s", "--sample-interval", "0.1")
    assert got.returncode == 0, got.stderr
    rep = cli(["report", "r", "--by", "ramp"], cwd=tmp_path)
    assert rep.returncode == 0, rep.stderr
    assert "ramp: 1 of the 2 run(s) count their rates after a ramp of 0.30s" in rep.stdout
    page = cli(["page", "r", "--by", "ramp", "-o", "p.html"], cwd=tmp_path)
    assert page.returncode == 0, page.stderr
    html = (tmp_path / "p.html").read_text()
    assert "ramp: 1 of the 2 run(s) count their rates after a ramp of 0.30s" in html
    assert "steady: 1 run(s) counted had an iteration that never became steady" in html


def test_a_steady_criterion_that_is_not_fios_is_refused_in_one_line(tmp_path):
    got = cli(["run", "d", "--steady", "slope:1%"], cwd=tmp_path)
    assert got.returncode == 2 and got.stderr.startswith("mpiwrite: error: --steady: ")
    assert len(got.stderr.strip().splitlines()) == 1 and not (tmp_path / "d").exists()


def test_report_window_takes_the_aggregate_over_that_part_of_each_iteration(tmp_path):
    from mpiwrite.formats.summary import bytes_at

    got, path = _run(tmp_path, "-t", "2", "--sample-interval", "0.1", "--fsync-every", "8")
    assert got.returncode == 0, got.stderr
    rec = read_record(path)
    r, s = rec.ranks, rec.samples
    t0 = r["t_write_start"].min()
    want = (bytes_at(t0 + 1.5, s, r) - bytes_at(t0 + 0.5, s, r)) / 1.0 / 1e6
    rep = cli(["report", "r", "--window", "0.5:1.5", "--format", "json"], cwd=tmp_path)
    assert rep.returncode == 0, rep.stderr
    row = json.loads(rep.stdout)["rows"][0]
    assert row["mean_MB_per_s"] == pytest.approx(want, rel=1e-9)
    assert row["mean_MB_per_s"] != pytest.approx(rec.iterations[0]["aggregate_MB_per_s"],
                                                  rel=1e-6)
    assert row["rank_mean_MB_per_s"] is None  # the ranks' rates are no window's
    assert row["last_done_MB_per_s"] is None and row["first_done_MB_per_s"] is None
    assert json.loads(rep.stdout)["window_seconds"] == [0.5, 1.5]
    table = cli(["report", "r", "--window", "0.5:1.5"], cwd=tmp_path).stdout
    assert "window: the aggregate of 0.5s to 1.5s of each iteration" in table
    # a window shorter than the run's sample interval is an interpolation: no figure
    assert cli(["report", "r", "--window", "0.5:0.55"], cwd=tmp_path).returncode == 2
    # a window past the iteration's end: no figure, said
    rep = cli(["report", "r", "--window", "10:20"], cwd=tmp_path)
    assert rep.returncode == 2
    assert "--window: 1 complete run(s), but no iteration wrote until 20s" in rep.stderr
    for bad in ("5", "2:1", "a:b"):
        rep = cli(["report", "r", "--window", bad], cwd=tmp_path)
        assert rep.returncode == 2 and rep.stderr.startswith("mpiwrite: error: --window: ")
