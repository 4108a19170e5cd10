"""Client CPU as report and compare metrics: client-cpu and cpu-per-GB.

Records are synthetic ones (tests/synth.py, the real record writer) given known per-rank CPU
seconds, bytes and per-node busy fractions; the expected figures are computed here from the
ranks table as read back, not with mpiwrite's own helpers.  One real run checks the same on
figures a run measured.
"""

import csv
import io
import json
import os
import re

import h5py
import numpy as np
import pytest
import synth
from common import cli, mpirun, only_record, read_record

from mpiwrite.answers import results
from mpiwrite.formats import summary
from mpiwrite.records import h5 as records
from mpiwrite.vocab.status import Status

pytestmark = pytest.mark.timeout(180)

NODES, PER_NODE = 2, 2
# per-rank CPU seconds of iteration 0 (rank 1's was not measured: NaN) and bytes written
CPU = np.array([0.5, np.nan, 1.0, 2.0])
BYTES = np.array([1, 2, 3, 4]) * 2**26
BUSY = np.array([0.3, 0.7])  # per node


def _record(path, run_id, tags, cpu_scale=1.0, busy_scale=1.0, iterations=2):
    """A record whose iteration i has CPU seconds CPU * cpu_scale * (1 + 0.05 i), bytes BYTES,
    node busy BUSY * busy_scale * (1 + 0.02 i); figures derived as a run derives them."""
    synth.make(path, [500.0 + 5 * i for i in range(iterations)], run_id, tags=tags,
               nodes=NODES, ranks_per_node=PER_NODE)
    rec = read_record(str(path))
    its = []
    for i in range(iterations):
        rows = rec.ranks[rec.ranks["iteration"] == i].copy()
        cpu = CPU * cpu_scale * (1 + 0.05 * i)
        rows["cpu_user_seconds"], rows["cpu_system_seconds"] = 0.75 * cpu, 0.25 * cpu
        rows["bytes"] = BYTES
        rows["node_cpu_busy"] = (BUSY * busy_scale * (1 + 0.02 * i))[rows["node"]]
        summary.fill_rates(rows)
        rec.ranks[rec.ranks["iteration"] == i] = rows
        its.append(summary.iteration_summary(rows, None, Status.OK))
    rec.iterations = np.array(its, dtype=summary.ITER_DTYPE)
    os.unlink(path)
    records.write(rec, str(path))
    return str(path)


def _old_record(path, run_id, tags):
    """A record as written before client CPU was measured: no CPU fields at all."""
    synth.make(path, [500.0, 505.0], run_id, tags=tags)
    drop = {"ranks": ("cpu_user_seconds", "cpu_system_seconds", "node_cpu_busy",
                      "node_cpu_iowait"), "iterations": ("node_cpu_busy_max",)}
    with h5py.File(path, "a") as h5:
        for name, fields in drop.items():
            data = h5[name][()]
            keep = [f for f in data.dtype.names if f not in fields]
            out = np.zeros(len(data), dtype=[(f, data.dtype[f]) for f in keep])
            for f in keep:
                out[f] = data[f]
            del h5[name]
            h5.create_dataset(name, data=out)
    return str(path)


def _expected(path):
    """Per good iteration, from the ranks table read back: (busiest node's busy in percent,
    CPU seconds of the measured ranks per 10^9 of their bytes)."""
    rec = read_record(path)
    busy, per_gb = [], []
    for it in rec.iterations["iteration"][rec.iterations["status"] == 0]:
        r = rec.ranks[rec.ranks["iteration"] == it]
        busy.append(100 * max(float(b) for b in r["node_cpu_busy"]))
        cpu, nbytes = 0.0, 0
        for row in r:
            s = float(row["cpu_user_seconds"]) + float(row["cpu_system_seconds"])
            if s == s:
                cpu, nbytes = cpu + s, nbytes + int(row["bytes"])
        per_gb.append(cpu / (nbytes / 1e9))
    return busy, per_gb


def _report(folder, cwd, metric, *extra):
    out = cli(["report", str(folder), "--by", "k", "--metric", metric, *extra], cwd=cwd)
    assert out.returncode == 0, out.stderr
    return out


def test_report_values_equal_the_ranks_table(tmp_path):
    d = tmp_path / "rec"
    d.mkdir()
    paths = [_record(d / f"r{i}.h5", f"2026c-{i:06x}", {"k": "v"}, cpu_scale=1 + 0.1 * i,
                     busy_scale=1 + 0.1 * i) for i in range(3)]
    want = [_expected(p) for p in paths]
    busy = [b for w in want for b in w[0]]
    per_gb = [g for w in want for g in w[1]]
    # the definition: rank 1 (no CPU figure) and its bytes are left out
    assert per_gb[0] == pytest.approx(3.5 / (8 * 2**26 / 1e9))
    assert busy[0] == pytest.approx(70.0)
    for metric, vals in (("client-cpu", busy), ("cpu-per-GB", per_gb)):
        doc = json.loads(_report(d, tmp_path, metric, "--unit", "iteration", "--format",
                                 "json").stdout)
        sfx = {"client-cpu": "cpu_busy_pct", "cpu-per-GB": "cpu_seconds_per_GB"}[metric]
        row = doc["rows"][0]
        assert row["n"] == len(vals) == 6
        assert row[f"mean_{sfx}"] == pytest.approx(np.mean(vals), rel=1e-9)
        assert row[f"min_{sfx}"] == pytest.approx(min(vals), rel=1e-9)
        assert row[f"max_{sfx}"] == pytest.approx(max(vals), rel=1e-9)
        assert row[f"std_{sfx}"] == pytest.approx(np.std(vals, ddof=1), rel=1e-6)
        # one sample per run: each run's mean over its iterations
        doc = json.loads(_report(d, tmp_path, metric, "--format", "json").stdout)
        means = [np.mean(w[0] if metric == "client-cpu" else w[1]) for w in want]
        assert doc["unit"] == "run" and doc["rows"][0]["n"] == 3
        assert doc["rows"][0][f"mean_{sfx}"] == pytest.approx(np.mean(means), rel=1e-9)


def test_the_unit_is_in_text_csv_and_json(tmp_path):
    jsonschema = pytest.importorskip("jsonschema")
    from mpiwrite.formats import contract

    d = tmp_path / "rec"
    d.mkdir()
    for i in range(2):
        _record(d / f"r{i}.h5", f"2026u-{i:06x}", {"k": "v"}, cpu_scale=1 + 0.1 * i)
    for metric, unit, header, sfx in (
            ("cpu-per-GB", "CPU s/GB", "CPU s/GB mean ±95%", "cpu_seconds_per_GB"),
            ("client-cpu", "%", "CPU busy % mean ±95%", "cpu_busy_pct"),
            ("aggregate", "MB/s", "MB/s mean ±95%", "MB_per_s")):
        table = _report(d, tmp_path, metric).stdout
        assert header in table.splitlines()[0], table
        if unit != "MB/s":
            assert "MB/s ±95%" not in table
            assert "rank mean±sd and first-done: write MB/s" in table
        doc = json.loads(_report(d, tmp_path, metric, "--format", "json").stdout)
        jsonschema.validate(doc, contract.schema("report"))
        assert doc["metric_unit"] == unit and doc["higher_is_better"] is (unit == "MB/s")
        assert f"mean_{sfx}" in doc["rows"][0]
        assert ("mean_MB_per_s" in doc["rows"][0]) is (unit == "MB/s")
        head = next(csv.reader(io.StringIO(_report(d, tmp_path, metric, "--format",
                                                   "csv").stdout)))
        assert f"ci_lo_{sfx}" in head and ("ci_lo_MB_per_s" in head) is (unit == "MB/s")
        out = cli(["compare", str(d / "r0.h5"), str(d / "r1.h5"), "--metric", metric, "--json"],
                  cwd=tmp_path)
        assert out.returncode == 0, out.stderr
        cdoc = json.loads(out.stdout)
        jsonschema.validate(cdoc, contract.schema("compare"))
        assert cdoc["metric_unit"] == unit and f"diff_{sfx}" in cdoc
        assert f"mean_{sfx}" in cdoc["a"] and ("diff_MB_per_s" in cdoc) is (unit == "MB/s")
        text = cli(["compare", str(d / "r0.h5"), str(d / "r1.h5"), "--metric", metric],
                   cwd=tmp_path).stdout
        assert re.search(rf"mean -?[\d.]+ {re.escape(unit)},", text), text
        assert ("MB/s" in text) is (unit == "MB/s"), text


def test_a_cpu_document_labelled_as_mb_per_s_is_refused_by_the_schema(tmp_path):
    jsonschema = pytest.importorskip("jsonschema")
    from mpiwrite.formats import contract

    d = tmp_path / "rec"
    d.mkdir()
    _record(d / "r.h5", "2026s-000001", {"k": "v"})
    doc = json.loads(_report(d, tmp_path, "cpu-per-GB", "--format", "json").stdout)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(dict(doc, metric="aggregate"), contract.schema("report"))


def test_records_without_cpu_figures_give_no_sample_and_say_why(tmp_path):
    d = tmp_path / "rec"
    d.mkdir()
    old = _old_record(d / "old.h5", "2026o-000001", {"k": "old"})
    rec = read_record(old)
    assert np.isnan(rec.ranks["cpu_user_seconds"]).all()
    for metric in ("client-cpu", "cpu-per-GB"):
        assert results.metric_values(rec, metric) == []
        out = cli(["report", old, "--by", "k", "--metric", metric], cwd=tmp_path)
        assert out.returncode == 2, out.stdout + out.stderr
        assert f"none has a {metric} figure" in out.stderr and "before" in out.stderr
        assert "Traceback" not in out.stderr
    # measured but switched off (MPIWRITE_NO_ACCOUNTING=1): NaN in the record, no sample
    rec.ranks["cpu_user_seconds"] = 0.0  # a user figure alone is no figure
    assert results.metric_values(rec, "cpu-per-GB") == []
    # mixed with new records: the old run is left out, and stderr says so
    _record(d / "new.h5", "2026o-000002", {"k": "new"})
    out = cli(["report", str(d), "--by", "k", "--metric", "cpu-per-GB", "--format", "json"],
              cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert [r["keys"]["k"] for r in json.loads(out.stdout)["rows"]] == ["new"]
    assert "1 complete run(s) without a cpu-per-GB figure were left out" in out.stderr
    out = cli(["compare", "k=old", "k=new", "--in", str(d), "--metric", "client-cpu"],
              cwd=tmp_path)
    assert out.returncode == 2 and "k=old: 1 complete run, but none has a client-cpu" \
        in out.stderr, out.stderr
    assert cli(["compare", "k=old", "k=new", "--in", str(d)], cwd=tmp_path).returncode == 0
    pytest.importorskip("matplotlib")  # plot's own refusal comes after its import
    out = cli(["plot", "scaling", old, "--metric", "cpu-per-GB", "-o", "x.png"], cwd=tmp_path)
    assert out.returncode == 2 and "cpu-per-GB" in out.stderr and "Traceback" not in out.stderr


@pytest.mark.parametrize("metric,a,b,pct,code,words", [
    ("cpu-per-GB", 1.0, 1.5, 10, 1, "B uses more CPU per GB written"),   # +50%: the regression
    ("cpu-per-GB", 1.5, 1.0, 10, 0, "B uses less CPU per GB written"),   # -33%: an improvement
    ("cpu-per-GB", 1.0, 1.5, 60, 0, "B uses more CPU per GB written"),   # within the allowance
    ("client-cpu", 0.5, 1.0, 10, 1, "B's busiest client uses more CPU"),
    ("client-cpu", 1.0, 0.5, 10, 0, "B's busiest client uses less CPU"),
])
def test_compare_treats_more_cpu_as_the_regression(tmp_path, metric, a, b, pct, code, words):
    rng = np.random.default_rng(11)
    for side, scale in (("a", a), ("b", b)):
        (tmp_path / side).mkdir()
        for rep in range(3):
            s = scale * (1 + 0.01 * rng.standard_normal())
            _record(tmp_path / side / f"{rep}.h5", f"2026{side}-{rep:06x}", {"side": side},
                    cpu_scale=s, busy_scale=s * 0.9)
    args = ["compare", "a", "b", "--metric", metric, "--fail-if-slower", str(pct)]
    out = cli(args + ["--json"], cwd=tmp_path)
    assert out.returncode == code, out.stdout + out.stderr
    doc = json.loads(out.stdout)
    assert doc["real"] is True and doc["higher_is_better"] is False
    assert doc["gate_failed"] is bool(code) and words in doc["verdict"]
    assert (doc["change_pct"] > 0) is (b > a)
    text = cli(args, cwd=tmp_path)
    assert text.returncode == code and words in text.stdout
    assert "less is better" in text.stdout and "B is " not in text.stdout  # faster, slower
    assert ("FAIL (B uses" in text.stdout) is bool(code), text.stdout
    # the same records by MB/s: identical rates, so the gate passes
    assert cli(["compare", "a", "b", "--fail-if-slower", str(pct)], cwd=tmp_path).returncode == 0


@pytest.mark.parametrize("command", ["report", "compare", "plot"])
def test_help_lists_the_cpu_metrics_with_their_units(tmp_path, command):
    flat = re.sub(r"\s+", "", cli([command, "--help"], cwd=tmp_path).stdout)  # wraps anywhere
    assert "|client-cpu|cpu-per-GB|" in flat or "|client-cpu|cpu-per-GB]" in flat
    assert "client-cpu(thebusiestnode'sCPUbusy,in%)" in flat
    assert "cpu-per-GB(clientCPUs/GB" in flat and "MB/s=10^6B/s" in flat


def test_scaling_plot_labels_the_cpu_unit(tmp_path):
    pytest.importorskip("matplotlib")
    d = tmp_path / "rec"
    d.mkdir()
    _record(d / "r.h5", "2026p-000001", {"k": "v"})
    svg = tmp_path / "cpu.svg"
    out = cli(["plot", "scaling", str(d), "--metric", "cpu-per-GB", "-o", str(svg)],
              cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    text = svg.read_text()
    assert "CPU s/GB" in text and "bandwidth" not in text


@pytest.mark.mpi
def test_scaling_plot_of_the_read_phase_says_read_bandwidth(tmp_path):
    """The y label said 'read write bandwidth' for --metric read (found by review)."""
    pytest.importorskip("matplotlib")
    out = mpirun(2, ["run", "d", "-s", "2M", "--read", "--results", "r",
                     "--progress-interval", "0"], cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    svg = tmp_path / "read.svg"
    out = cli(["plot", "scaling", "r", "--metric", "read", "-o", str(svg)], cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    text = svg.read_text()
    assert "read bandwidth" in text and "write bandwidth" not in text


@pytest.mark.mpi
def test_a_real_run_reports_the_cpu_it_measured(tmp_path):
    """16 MiB a rank at 4 KiB blocks: long enough for /proc/stat (10 ms jiffies) to see the
    write phase; a phase shorter than a jiffy on every CPU has no busy figure (NaN, seen in a
    loaded suite at 1 MiB), and this test is about the report, not that limit."""
    out = mpirun(2, ["run", "d", "-s", "16M", "-b", "4k", "-i", "2", "--results", "r",
                     "--tag", "k=v", "--progress-interval", "0"],
                 cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    rec = only_record(tmp_path / "r")
    busy, per_gb = _expected(rec.path)
    assert all(np.isfinite(busy)) and all(v > 0 for v in per_gb)
    for metric, vals, sfx in (("client-cpu", busy, "cpu_busy_pct"),
                              ("cpu-per-GB", per_gb, "cpu_seconds_per_GB")):
        doc = json.loads(_report(tmp_path / "r", tmp_path, metric, "--unit", "iteration",
                                 "--format", "json").stdout)
        row = doc["rows"][0]
        assert row["n"] == 2 and row[f"mean_{sfx}"] == pytest.approx(np.mean(vals), rel=1e-9)
        assert 0 <= row[f"min_{sfx}"] <= row[f"max_{sfx}"] <= (100 if sfx.endswith("pct")
                                                                 else np.inf)


def test_the_gate_fails_when_a_used_no_cpu_and_b_really_does():
    """A's mean of 0 leaves no percent change (NaN); a real increase is then infinitely worse,
    not a pass (found by review: the gate passed while the verdict said B uses more CPU)."""
    from mpiwrite import stats
    from mpiwrite.answers import report

    c = stats.compare([0.0, 0.0, 0.0], [0.9, 1.0, 1.1])
    failed, text = report._gate(c, "cpu-per-GB", 5)
    assert c.real and failed and "A's mean is 0" in text
    assert not report._gate(c, "aggregate", 5)[0]  # more MB/s than nothing is no regression


def test_fail_if_worse_is_the_gate_under_a_name_that_fits_cpu(tmp_path):
    """B spends twice A's CPU per GB: --fail-if-worse (the alias of --fail-if-slower) fails."""
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    for rep in range(3):
        _record(a / f"a{rep}.h5", f"a{rep}", {"s": "a"}, cpu_scale=1.0 + 0.01 * rep)
        _record(b / f"b{rep}.h5", f"b{rep}", {"s": "b"}, cpu_scale=2.0 + 0.01 * rep)
    out = cli(["compare", str(a), str(b), "--metric", "cpu-per-GB", "--fail-if-worse", "10"],
              cwd=tmp_path)
    assert out.returncode == 1 and "more CPU" in out.stdout, out.stdout + out.stderr
