"""The output contract (run --json, report json/csv, compare --json against the shipped JSON
Schemas), the CI gate, the statistics' consistency, and the people-facing fixes."""

import csv
import io
import json
import os
import re
import shutil

import numpy as np
import pytest
import synth
from common import ROOT, cli, mpirun

from mpiwrite import stats
from mpiwrite.formats import contract

jsonschema = pytest.importorskip("jsonschema")


def _strict_json(text):
    """json.loads that refuses NaN/Infinity, which are not JSON."""
    def bad(name):
        raise AssertionError(f"bare {name} in JSON output")
    return json.loads(text, parse_constant=bad)


def _valid(doc, output):
    schema = contract.schema(output)
    assert schema["$schema"].startswith("https://json-schema.org/")
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate(doc, schema)
    assert doc["schema_version"] == contract.OUTPUT_VERSION and doc["output"] == output


# ---------------------------------------------------------------- statistics
def test_t_quantile_is_not_capped_at_1000():
    assert stats.t_ppf(0.9999999, 1) == pytest.approx(3183098.86, rel=1e-6)
    # --confidence 0.9999 with n=2: the interval uses t(0.99995, 1) = 6366.2, not 1000
    s = stats.describe([100.0, 110.0], confidence=0.9999, ratio=False)
    assert (s.hi - s.lo) / 2 == pytest.approx(6366.1977 * np.std([100, 110], ddof=1)
                                              / np.sqrt(2), rel=1e-5)


def test_t_quantile_matches_scipy():
    sst = pytest.importorskip("scipy.stats")
    for df in range(1, 201):
        for p in (1e-9, 0.001, 0.025, 0.3, 0.6, 0.9, 0.975, 0.995, 0.9999, 1 - 1e-7, 1 - 1e-9):
            ref = float(sst.t.ppf(p, df))
            assert stats.t_ppf(p, df) == pytest.approx(ref, rel=1e-6, abs=1e-9), (df, p)


def test_absolute_percent_interval_and_verdict_agree_on_the_real_ab():
    """The reported A/B: the absolute interval said noise, the percent one said real.  On
    the values (ratio=False) Welch's p is 0.063; on the ratio scale (rates: the default,
    explain's one verdict) the test is on the logs, p 0.022, and the change a ratio above -100%."""
    c = stats.compare([254.6, 215.6], [39.1, 40.7], ratio=False)
    assert not c.real and c.p_value == pytest.approx(0.063, abs=0.001)
    assert c.diff_lo < 0 < c.diff_hi and c.pct_lo < 0 < c.pct_hi
    assert c.pct == pytest.approx(-83.03, abs=0.01)
    r = stats.compare([254.6, 215.6], [39.1, 40.7])
    assert r.real and r.scale == "ratio" and r.p_value == pytest.approx(0.0222, abs=0.0001)
    assert -100 < r.pct_lo < r.pct < r.pct_hi < 0 and r.diff_hi < 0
    rng = np.random.default_rng(5)
    for _ in range(300):
        a = 500 + 60 * rng.standard_normal(int(rng.integers(2, 6)))
        b = 470 + 60 * rng.standard_normal(int(rng.integers(2, 6)))
        c = stats.compare(a, b, ratio=bool(rng.integers(0, 2)))
        excl_abs, excl_pct = c.diff_lo > 0 or c.diff_hi < 0, c.pct_lo > 0 or c.pct_hi < 0
        assert excl_abs == excl_pct == c.real


def _sides(tmp_path, a_vals, b_vals, iterations=1, spread=0.0, seed=1):
    rng = np.random.default_rng(seed)
    for side, vals in (("a", a_vals), ("b", b_vals)):
        os.makedirs(tmp_path / side, exist_ok=True)
        for rep, v in enumerate(vals):
            its = v * (1 + spread * rng.standard_normal(iterations))
            synth.make(tmp_path / side / f"{rep}.h5", its, f"2026{side}-{rep:06x}",
                       tags={"side": side})


def test_more_repetitions_advice_is_the_same_in_text_and_json(tmp_path):
    _sides(tmp_path, [700, 760, 690], [650, 720, 640])
    args = ["compare", str(tmp_path / "a"), str(tmp_path / "b")]
    text = cli(args, cwd=tmp_path).stdout
    doc = _strict_json(cli(args + ["--json"], cwd=tmp_path).stdout)
    _valid(doc, "compare")
    assert doc["real"] is False and doc["more_per_side"] >= 1
    m = re.search(r"about (\d+) more repetitions? per side \((\d+) in all\)", text)
    assert m, text
    assert int(m.group(1)) == doc["more_per_side"] and int(m.group(2)) == doc["needed_per_side"]
    assert doc["needed_per_side"] == doc["a"]["n"] + doc["more_per_side"]
    assert re.search(r"95% CI \[-?\d+\.\d, -?\d+\.\d\]", text) and ".." not in text


def test_warmup_and_unit_change_the_samples_and_are_stated(tmp_path):
    synth.make(tmp_path / "w.h5", [483.0, 1332.0, 1700.0], "2026w-000001", tags={"k": "v"})
    synth.make(tmp_path / "x.h5", [500.0, 1300.0, 1690.0], "2026w-000002", tags={"k": "v"})
    def rep(*extra):
        out = cli(["report", str(tmp_path), "--by", "k", "--format", "json", *extra],
                  cwd=tmp_path)
        assert out.returncode == 0, out.stderr
        doc = _strict_json(out.stdout)
        _valid(doc, "report")
        return doc
    auto = rep()
    assert auto["unit"] == "run" and auto["rows"][0]["n"] == 2
    it = rep("--unit", "iteration")
    assert it["unit"] == "iteration" and it["rows"][0]["n"] == 6
    warm = rep("--unit", "iteration", "--warmup", "1")
    assert warm["warmup"] == 1 and warm["rows"][0]["n"] == 4
    assert warm["rows"][0]["min_MB_per_s"] == pytest.approx(1300.0, rel=1e-6)
    table = cli(["report", str(tmp_path), "--by", "k", "--warmup", "1"], cwd=tmp_path).stdout
    assert "samples: one per run (its mean)" in table and "warm-up first 1 dropped" in table
    text = cli(["compare", str(tmp_path / "w.h5"), str(tmp_path / "x.h5"), "--unit",
                "iteration", "--warmup", "1"], cwd=tmp_path).stdout
    assert "one per iteration; warm-up first 1 dropped" in text


# ---------------------------------------------------------------- CI gate
@pytest.mark.parametrize("b_vals,pct,code", [
    ([600, 605, 598, 602], 10, 1),   # 25% slower, real: fails the 10% gate
    ([600, 605, 598, 602], 30, 0),   # real but within the 30% allowance
    ([790, 810, 805, 795], 1, 0),    # the same: within noise
    ([900, 905, 898, 902], 1, 0),    # faster never fails
    ([300, 1300, 200, 1400], 10, 0),  # slower on average but not real: no failure
])
def test_fail_if_slower_gate(tmp_path, b_vals, pct, code):
    _sides(tmp_path, [800, 805, 798, 802], b_vals)
    out = cli(["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--fail-if-slower",
               str(pct), "--json"], cwd=tmp_path)
    assert out.returncode == code, out.stdout + out.stderr
    doc = _strict_json(out.stdout)
    _valid(doc, "compare")
    assert doc["gate_failed"] is bool(code) and doc["fail_if_slower_pct"] == pct
    text = cli(["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--fail-if-slower",
                str(pct)], cwd=tmp_path)
    assert text.returncode == code and ("FAIL" in text.stdout) == bool(code)


# ---------------------------------------------------------------- people
def test_same_record_counted_once_with_a_note(tmp_path):
    os.makedirs(tmp_path / "r")
    synth.make(tmp_path / "r" / "one.h5", [800.0], "2026d-000001", tags={"k": "v"})
    synth.make(tmp_path / "r" / "two.h5", [810.0], "2026d-000002", tags={"k": "v"})
    os.makedirs(tmp_path / "copy")
    shutil.copy(tmp_path / "r" / "one.h5", tmp_path / "copy" / "one-again.h5")
    out = cli(["report", "r", "./r/", "copy", "--by", "k", "--format", "json", "--unit",
               "iteration"], cwd=tmp_path)
    doc = _strict_json(out.stdout)
    assert doc["rows"][0]["n"] == 2 and doc["rows"][0]["runs"] == 2
    assert doc["duplicate_records"] == 1
    table = cli(["report", "r", "copy", "--by", "k"], cwd=tmp_path).stdout
    assert "repeated a run already read (same run id) and counted once" in table


def test_show_a_folder_a_suffix_and_names_in(tmp_path):
    os.makedirs(tmp_path / "one")
    synth.make(tmp_path / "one" / "x.h5", [800.0, 820.0], "20260101T000000Z-abc123",
               nodes=1, ranks_per_node=1)
    out = cli(["show", "one"], cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "1 rank on 1 node;" in out.stdout and "1 ranks" not in out.stdout
    assert "per node, iteration 1:" in out.stdout
    assert "per rank, slowest first, iteration 1:" in out.stdout
    assert cli(["show", "abc123", "--in", "one"], cwd=tmp_path).returncode == 0
    missing = cli(["show", "abc123", "--in", "nowhere"], cwd=tmp_path)
    assert missing.returncode == 2 and "--in" in missing.stderr
    assert "PATHS" not in missing.stderr
    nomatch = cli(["show", "zzz999", "--in", "one"], cwd=tmp_path)
    assert nomatch.returncode == 2 and "--in" in nomatch.stderr


def test_mount_options_are_not_repeated():
    from mpiwrite.answers.show import unique_options

    assert unique_options("rw,relatime,rw,seclabel,relatime") == "rw,relatime,seclabel"


@pytest.mark.parametrize("command", ["report", "compare", "plot"])
def test_metric_choices_are_listed_in_help(tmp_path, command):
    out = cli([command, "--help"], cwd=tmp_path).stdout
    assert "aggregate|first-done|rank-mean|per-node" in re.sub(r"\s+", "", out).replace(
        "[", "").replace("]", "") or "aggregate|first-done" in out.replace(" ", "")


def test_run_help_says_what_MB_and_M_mean_and_layout_choices(tmp_path):
    out = re.sub(r"\s+", " ", cli(["run", "--help"], cwd=tmp_path).stdout)
    assert "1M = 2^20" in out and "1MB = 10^6" in out and "5min" in out
    assert "fpp|shared" in out.replace(" ", "") or "[fpp|shared]" in out


def test_time_in_bare_m_is_refused(tmp_path):
    # --engine null: were "1m" accepted, a minute of no I/O rather than of real writes
    out = cli(["run", "d", "-t", "1m", "--no-record", "--engine", "null"], cwd=tmp_path,
              timeout=20)
    assert out.returncode == 2 and "ambiguous" in out.stderr and "min" in out.stderr
    assert not os.path.exists(tmp_path / "d")


def test_license_matches_pyproject():
    root = str(ROOT)
    with open(os.path.join(root, "pyproject.toml")) as fh:
        assert 'license = { text = "MIT" }' in fh.read()
    with open(os.path.join(root, "LICENSE")) as fh:
        text = fh.read()
    assert text.startswith("MIT License") and "WITHOUT WARRANTY OF ANY KIND" in text


# ---------------------------------------------------------------- real runs, every output
@pytest.mark.mpi
def test_every_machine_output_of_real_runs_validates(tmp_path):
    docs = []
    for n, sums in ((2, "on"), (3, "off"), (2, "off")):
        out = mpirun(n, ["run", "d", "-s", "2M", "-i", "2", "--results", "r", "--tag",
                         f"sums={sums}", "--json", "-", "--ior-summary", "--units", "MiB"],
                     cwd=tmp_path)
        assert out.returncode == 0, out.stderr
        doc = _strict_json(out.stdout)
        _valid(doc, "run")
        for key in ("schema_version", "mpiwrite_version", "start_time", "end_time",
                    "command_line"):
            assert doc[key], key
        assert "--ior-summary" in doc["command_line"]
        # IOR's line, as an IOR ReFrame check reads it; MiB and MB agree
        m = re.search(r"^Max Write: (\S+) MiB/sec \((\S+) MB/sec\)$", out.stderr, re.M)
        assert m, out.stderr
        assert float(m.group(1)) * 2**20 == pytest.approx(float(m.group(2)) * 1e6, rel=1e-3)
        assert "MiB/s" in out.stderr
        assert "per node, iteration 1:" in out.stderr and doc["summary"]["nodes_iteration"] == 1
        docs.append(doc)
    vocab = set(contract.STAT_KEYS)
    assert vocab <= set(docs[0]["summary"]["aggregate"])
    rep = cli(["report", "r", "--by", "sums", "--format", "json"], cwd=tmp_path)
    assert rep.returncode == 0, rep.stderr
    rdoc = _strict_json(rep.stdout)
    _valid(rdoc, "report")
    assert vocab <= set(rdoc["rows"][0])
    rows = list(csv.DictReader(io.StringIO(cli(["report", "r", "--by", "sums", "--format",
                                                "csv"], cwd=tmp_path).stdout)))
    assert vocab <= set(rows[0]) and rows[0]["schema_version"] == str(contract.OUTPUT_VERSION)
    cmp_ = cli(["compare", "sums=on", "sums=off", "--in", "r", "--json"], cwd=tmp_path)
    assert cmp_.returncode == 0, cmp_.stderr
    cdoc = _strict_json(cmp_.stdout)  # side A has one run: NaN intervals must be null
    _valid(cdoc, "compare")
    assert vocab <= set(cdoc["a"]) and cdoc["a"]["n"] == 1 and cdoc["a"]["ci_lo_MB_per_s"] is None


def test_man_pages_from_the_click_commands(tmp_path):
    from mpiwrite.cli import manpage

    assert manpage.main([str(tmp_path)]) == 0
    names = sorted(os.listdir(tmp_path))
    assert "mpiwrite.1" in names and "mpiwrite-compare.1" in names and "mpiwrite-run.1" in names
    text = (tmp_path / "mpiwrite-compare.1").read_text()
    assert text.startswith('.TH "MPIWRITE-COMPARE" "1"') and "fail\\-if\\-slower" in text
    if shutil.which("man"):
        import subprocess

        out = subprocess.run(["man", "-l", str(tmp_path / "mpiwrite-report.1")],
                             capture_output=True, text=True, env=dict(os.environ, MANWIDTH="80"))
        assert out.returncode == 0 and "--warmup" in out.stdout.replace("‐", "-")


def test_shell_completion_offers_metric_choices(tmp_path):
    out = cli(["report"], cwd=tmp_path, env={"_MPIWRITE_COMPLETE": "bash_complete",
                                             "COMP_WORDS": "mpiwrite report x --metric ",
                                             "COMP_CWORD": "4"})
    assert "plain,first-done" in out.stdout and "plain,per-node" in out.stdout


def test_default_grouping_is_fstype_client_checksums(tmp_path):
    synth.make(tmp_path / "a.h5", [800.0], "2026g-000001", lustre="2.15.3", checksums="on")
    synth.make(tmp_path / "b.h5", [700.0], "2026g-000002", lustre="2.15.3", checksums="off")
    doc = _strict_json(cli(["report", str(tmp_path), "--format", "json"], cwd=tmp_path).stdout)
    _valid(doc, "report")
    assert doc["by"] == ["fstype", "client", "checksums"]
    assert [r["keys"] for r in doc["rows"]] == [
        {"fstype": "lustre", "client": "lustre 2.15.3", "checksums": "off"},
        {"fstype": "lustre", "client": "lustre 2.15.3", "checksums": "on"}]
