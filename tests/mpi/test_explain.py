"""`explain` on a history whose answer is known (synth.explain_study: the original study with
CPU types, patched and patchless kernels and hosts), and on records of real runs."""

import json
import os

import pytest
import synth
from common import ROOT, cli, mpirun, read_record

from mpiwrite import stats
from mpiwrite.answers.explain import explain
from mpiwrite.answers.explain_run import explain_run
from mpiwrite.answers.explain_text import format_explain
from mpiwrite.answers.report import Sampling
from mpiwrite.answers.results import Store
from mpiwrite.formats import contract

jsonschema = pytest.importorskip("jsonschema")


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    folder = tmp_path_factory.mktemp("explain") / "history"
    assert synth.explain_study(folder) == 30
    return folder


@pytest.fixture(scope="module")
def doc(history):
    store = Store([str(history)], warn=False)
    return explain(store.select(), store.keys, Sampling())


def _factor(doc, key):
    return next(f for f in doc["factors"] if key in f["keys"])


def _within(doc, key, within):
    return next(w for w in doc["within"] if w["key"] == key and w["within"] == within)


@pytest.mark.timeout(60)
def test_checksums_explain_most_and_are_named_first(doc):
    top = doc["factors"][0]
    assert top["facts"] == ["checksums"] and "lustre.checksums" in top["keys"]
    assert 0.8 < top["variance_share"] <= 1 and top["p_value"] < 0.01
    on = next(g for g in top["groups"] if g["values"] == {"checksums": "on"})
    assert on["runs"] == 10 and on["ci_lo_MB_per_s"] < on["mean_MB_per_s"] < on["ci_hi_MB_per_s"]
    assert on["mean_MB_per_s"] == pytest.approx(326 * (1 + 0.92) / 2, rel=0.03)
    shares = [f["variance_share"] for f in doc["factors"]]
    assert shares == sorted(shares, reverse=True)


@pytest.mark.timeout(60)
def test_kernel_and_lustre_are_one_confounded_factor_with_the_runs_that_would_part_them(doc):
    f = _factor(doc, "lustre")
    assert f["confounded"] and f["facts"][:2] == ["kernel", "lustre"]
    assert "lustre_kernel" in f["facts"]  # patched or patchless goes with them
    assert {"client", "lustre.version"} <= set(f["aliases"]["lustre"])  # restatements
    assert 0.4 < f["variance_share"] < 0.7 and f["p_value"] < 0.01
    k43, k65 = synth.KERNELS["1.6.4.3"][0], synth.KERNELS["1.6.5"][0]
    assert {"kernel": k43, "lustre": "1.6.5"} in f["missing_combinations"]
    assert {"kernel": k65, "lustre": "1.6.4.3"} in f["missing_combinations"]
    text = format_explain(doc)
    assert ("kernel, lustre and lustre_kernel change together here: the runs cannot tell "
            "them apart") in text
    assert f"lustre=1.6.5 with kernel={k43}" in text


@pytest.mark.timeout(60)
def test_effects_within_the_levels_of_another(doc):
    w = _within(doc, "checksums", "lustre")  # checksums within each Lustre build
    assert w["keys"] == ["checksums"] and w["within_keys"][:2] == ["kernel", "lustre"]
    by = {lv["level"]: lv for lv in w["levels"]}
    assert by["1.6.4.3"]["variance_share"] is None and by["1.6.4.3"]["values"] == ["off"]
    assert by["1.6.5"]["variance_share"] > 0.95 and by["1.6.5"]["p_value"] < 0.01
    assert by["1.6.5"]["means"]["off"] > 2 * by["1.6.5"]["means"]["on"]
    assert {"checksums": "on", "lustre": "1.6.4.3"} in w["missing_combinations"]
    # the CPU's 8% is lost beside the checksums' factor of two, and found within them
    cpu = _factor(doc, "cpu_model")
    assert cpu["variance_share"] < 0.05 and cpu["p_value"] > 0.2
    assert cpu["given_others"]["varied"] and cpu["given_others"]["p_value"] < 0.01
    assert cpu["given_others"]["variance_share"] > 0.8 and cpu["hidden"]
    assert not doc["factors"][0]["hidden"]
    within_43 = next(lv for lv in _within(doc, "cpu_model", "lustre")["levels"]
                     if lv["level"] == "1.6.4.3")
    assert within_43["p_value"] < 0.05
    assert within_43["means"]["AMD Opteron 2218"] < within_43["means"]["Intel Xeon 5160"]
    # a host decides its CPU model: no combination to ask for, and its share includes the CPU's
    assert _factor(doc, "host")["determines"] == ["cpu_model"]
    assert _within(doc, "host", "cpu_model")["nested"]
    assert _within(doc, "host", "cpu_model")["missing_combinations"] == []


@pytest.mark.timeout(60)
def test_single_valued_and_per_run_keys_are_listed_not_factors(doc):
    assert doc["same_everywhere"]["fstype"] == "lustre"
    assert doc["same_everywhere"]["block_size"] == "1MiB"
    assert "job" in doc["labels"]  # a job id names a run: a label (vocab/keys.py)
    keys = {k for f in doc["factors"] for k in f["keys"]}
    assert not keys & ({"run_id", "start_time", "job", "status"} | set(doc["same_everywhere"]))
    text = format_explain(doc)
    assert text.count("fstype=lustre") == 1 and "the same everywhere" in text
    assert "labels (name runs, not settings" in text


@pytest.mark.timeout(60)
def test_output_is_deterministic(history, doc):
    store = Store([str(history)], warn=False)
    assert explain(store.select(), store.keys, Sampling()) == doc


@pytest.mark.timeout(60)
def test_variance_share_is_eta_squared_and_its_p_is_bounded():
    y = [1.0, 2.0, 3.0, 11.0, 12.0, 13.0]
    s = stats.variance_share(y, list("aaabbb"))
    assert s.share == pytest.approx(150 / (150 + 4))
    # the smallest p of 2000 permutations, and no smaller than the 2 splits of 20 allow
    assert 1 / 2001 <= s.p_value < 0.2
    assert stats.variance_share(y, list("abcdef")).p_value == 1.0  # a value per sample
    assert stats.variance_share(y, list("aaaaaa")).share == 0.0


@pytest.mark.timeout(120)
def test_cli_json_is_valid_against_the_shipped_schema_and_markdown_reads(history, tmp_path):
    out = cli(["explain", str(history), "--format", "json"], cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    schema = contract.schema("explain")
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate(doc, schema)
    assert doc["output"] == "explain" and doc["factors"][0]["keys"][0] == "checksums"
    assert all(0 <= f["variance_share"] <= 1 for f in doc["factors"])
    bad = dict(doc, factors=[dict(doc["factors"][0], variance_share=1.5)])
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)
    md = cli(["explain", str(history), "--format", "markdown"], cwd=tmp_path)
    assert md.returncode == 0, md.stderr
    assert "## factors, by the share they explain" in md.stdout
    assert "| checksums | runs | MB/s geo. mean [95%] |" in md.stdout
    assert "|---|---|---|" in md.stdout
    amd = cli(["explain", str(history), "--where", "cpu_model=AMD Opteron 2218",
               "--format", "json"], cwd=tmp_path)
    assert amd.returncode == 0 and json.loads(amd.stdout)["runs"] == 15


@pytest.mark.timeout(120)
def test_refusals_are_one_line_and_exit_2(history, tmp_path):
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    synth.make(mixed / "a.h5", [500, 510], "20080101T000000Z-aaaaaa", lustre="1.6.5")
    synth.make(mixed / "b.h5", [900, 910], "20080101T000001Z-bbbbbb", lustre="1.6.5",
               params={"fsync": False})
    for args, needle in (
            (["explain", str(history), "--where", "lustre=9.9"], "--where"),
            # repeated --where all hold: one key cannot take two values (only the last held)
            (["explain", str(history), "--where", "lustre=1.6.5", "--where",
              "lustre=1.6.4.3"], "cannot both hold"),
            (["report", str(history), "--where", "lustre=1.6.5", "--where",
              "lustre=1.6.4.3"], "cannot both hold"),
            (["explain", str(tmp_path / "none")], "does not exist"),
            (["explain", str(history), "--metric", "read"], "read figure")):
        out = cli(args, cwd=tmp_path)
        assert out.returncode == 2, (args, out.stdout, out.stderr)
        assert out.stdout == "" and len(out.stderr.strip().splitlines()) == 1, out.stderr
        assert needle in out.stderr, out.stderr
    both = cli(["explain", str(mixed)], cwd=tmp_path)  # fsync off and on: a section each
    assert both.returncode == 0 and "=== within fsync=off: 1 runs" in both.stdout, both.stderr
    one = cli(["explain", str(mixed), "--where", "fsync=on"], cwd=tmp_path)
    assert one.returncode == 0, one.stderr  # one run: an answer with no factor in it
    assert "no factor" in one.stdout


@pytest.mark.mpi
@pytest.mark.timeout(300)
def test_real_runs_with_two_tags(tmp_path):
    for sums in ("on", "off", "on", "off"):
        out = mpirun(2, ["run", "d", "-s", "1M", "-i", "2", "--results", "r", "--tag",
                         f"sums={sums}"], cwd=tmp_path)
        assert out.returncode == 0, out.stderr
    out = cli(["explain", "r", "--format", "json"], cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    jsonschema.validate(doc, contract.schema("explain"))
    assert doc["runs"] == 4 and doc["unit"] == "run"
    sums = _factor(doc, "sums")
    assert sums["keys"] == ["sums"] and sum(g["runs"] for g in sums["groups"]) == 4
    assert 0 < sums["p_value"] <= 1
    # what every one of these runs shares is listed once, the run's own identity never
    assert doc["same_everywhere"]["fsync"] == "on" and "run_id" not in doc["same_everywhere"]
    text = cli(["explain", os.path.join("r")], cwd=tmp_path)
    assert text.returncode == 0 and "1. sums" in text.stdout



@pytest.mark.timeout(120)
def test_the_readme_example_is_what_explain_prints(tmp_path):
    """The README shows an excerpt ('...' where lines are left out): every other line is
    printed, in that order, by explain on the history synth.py writes for it."""

    readme = (ROOT / "README.md").read_text()
    block = readme.split("mpiwrite explain original-history\n```\n```\n", 1)[1]
    shown = [ln for ln in block.split("```", 1)[0].splitlines() if ln != "..."]
    synth.explain_study(tmp_path / "original-history")
    out = cli(["explain", "original-history"], cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    printed = out.stdout.splitlines()
    at = 0
    for line in shown:
        assert line in printed[at:], line
        at = printed.index(line, at) + (1 if line else 0)


# -- one run: the variation between its ranks --------------------------------------------------
@pytest.fixture(scope="module")
def bricks(tmp_path_factory):
    path = tmp_path_factory.mktemp("one") / "bricks.h5"
    where, rates = synth.bricks_run(str(path))
    return path, where, rates


@pytest.mark.timeout(120)
def test_one_run_names_the_slow_brick_and_what_else_varies(bricks, tmp_path):
    """synth.bricks_run: 12 ranks on 3 hosts, 3 iterations, each file on one of 2 bricks by
    name, brick1 40% slower.  The target is the first factor, brick1 is named slow in the
    target table, hosts and the third host's CPU explain nothing, and a rank decides its host."""
    path, where, rates = bricks
    out = cli(["explain", str(path), "--format", "json"], cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    jsonschema.validate(doc, contract.schema("explain"))
    assert doc["scope"] == "ranks" and doc["unit"] == "rank" and doc["runs"] == 1
    assert doc["samples"] == 36 and doc["ranks"] == 12 and doc["nodes"] == 3
    assert doc["iterations"] == [0, 1, 2]
    top = doc["factors"][0]
    assert top["keys"] == ["target"] and top["variance_share"] > 0.9 and top["p_value"] < 0.01
    on1 = sum(w for it in where for w in it)
    slow = next(g for g in top["groups"] if g["values"] == {"target": synth.BRICKS[1]})
    assert slow["ranks"] == on1 and slow["n"] == on1
    want = [r for it, w in zip(rates, where) for r, b in zip(it, w) if b]
    assert slow["mean_MB_per_s"] == pytest.approx(sum(want) / len(want), rel=1e-6)
    for key in ("host", "cpu_model"):
        assert _factor(doc, key)["p_value"] > 0.05, key
    assert _factor(doc, "rank")["determines"] == ["host", "cpu_model"]
    clear = [f["p_value"] < 0.05 for f in doc["factors"]]  # the clear ones first
    assert clear == sorted(clear, reverse=True)
    rows = {r["target"]: r for r in doc["targets"]["rows"]}
    assert rows[synth.BRICKS[1]]["verdict"] == "slow" and rows[synth.BRICKS[1]]["files"] == on1
    assert rows[synth.BRICKS[0]]["verdict"] == "fast"
    assert rows[synth.BRICKS[1]]["iterations"] == [0, 1, 2]
    text = cli(["explain", str(path)], cwd=tmp_path)
    assert text.returncode == 0, text.stderr
    assert f"  slow: {synth.BRICKS[1]}" in text.stdout.splitlines()
    assert "1. target: " in text.stdout and "12 ranks on 3 node(s) x 3 iteration(s)" in \
        text.stdout
    md = cli(["explain", str(path), "--format", "markdown"], cwd=tmp_path)
    assert md.returncode == 0 and "| target | ranks | files |" in md.stdout, md.stderr
    warm = json.loads(cli(["explain", str(path), "--warmup", "1", "--format", "json"],
                          cwd=tmp_path).stdout)
    assert warm["iterations"] == [1, 2] and warm["samples"] == 24


@pytest.mark.timeout(120)
def test_one_run_refuses_what_has_no_per_rank_meaning(bricks, tmp_path):
    path = str(bricks[0])
    for args, needle in ((["--where", "host=h0"], "--where"), (["--metric", "read"], "--metric"),
                         (["--unit", "run"], "--unit"), (["--warmup", "3"], "--warmup 3")):
        out = cli(["explain", path, *args], cwd=tmp_path)
        assert out.returncode == 2, (args, out.stdout, out.stderr)
        assert out.stdout == "" and len(out.stderr.strip().splitlines()) == 1, out.stderr
        assert needle in out.stderr, out.stderr


@pytest.mark.mpi
@pytest.mark.timeout(300)
def test_one_real_run_explained_by_its_ranks(tmp_path):
    out = mpirun(4, ["run", "d", "-s", "2M", "-i", "2", "--results", "r"], cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    (rec,) = [p for p in (tmp_path / "r").iterdir() if p.suffix == ".h5"]
    got = cli(["explain", str(rec), "--format", "json"], cwd=tmp_path)
    assert got.returncode == 0, got.stderr
    doc = json.loads(got.stdout)
    jsonschema.validate(doc, contract.schema("explain"))
    assert doc["scope"] == "ranks" and doc["samples"] == 8 and doc["ranks"] == 4
    assert doc["targets"]["rows"] == [] and "no storage targets" in doc["targets"]["notes"][0]
    assert {f["key"] for f in doc["factors"]} == {"rank", "iteration"}  # one host, no target
    assert doc["same_everywhere"]["host"]
    folder = cli(["explain", "r"], cwd=tmp_path)  # the folder: the runs, one of them
    assert folder.returncode == 0 and "give its record file" in folder.stdout, folder.stderr


@pytest.mark.timeout(60)
def test_many_cells_sum_by_bincount_as_the_product_does(monkeypatch):
    """stats._cell_term's two ways (a one-hot product, bincount past _MANY_CELLS cells) give
    the same share and p."""
    import numpy as np

    rng = np.random.default_rng(3)
    y = rng.standard_normal(600)
    labels, strata = rng.integers(0, 150, 600), rng.integers(0, 3, 600)
    fast = stats.variance_share(y, labels, strata)
    monkeypatch.setattr(stats, "_MANY_CELLS", 10**9)
    slow = stats.variance_share(y, labels, strata)
    assert fast.share == pytest.approx(slow.share, rel=1e-12) and fast.p_value == slow.p_value


@pytest.mark.timeout(120)
def test_one_run_of_many_ranks_shows_the_extremes_of_each_key(tmp_path):
    """48 ranks x 3 iterations: the text shows a key's 5 lowest and 5 highest groups (the
    JSON has all 48), and a within level's 3 lowest and 3 highest means."""

    path = tmp_path / "many.h5"
    synth.bricks_run(str(path), per_host=16)
    doc = explain_run(read_record(str(path)), Sampling())
    jsonschema.validate(contract.finite(doc), contract.schema("explain"))
    ranks = _factor(doc, "rank")
    assert len(ranks["groups"]) == 48
    text = format_explain(doc)
    block = text.split(next(ln for ln in text.splitlines() if ". rank: " in ln))[1]
    shown = block.split("\n")[1:14]
    assert any("... 38 more (all in --format json)" in ln for ln in shown), shown
    means = sorted(g["mean_MB_per_s"] for g in ranks["groups"])
    assert f"{means[0]:.1f}" in "\n".join(shown) and f"{means[-1]:.1f}" in "\n".join(shown)
    assert max(len(ln) for ln in text.splitlines()) < 600  # not one mean per rank
