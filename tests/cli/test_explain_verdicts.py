"""One verdict per question.  Outcomes and labels are never factors, a two-level
factor gets compare's Welch test, many keys are corrected as one family, and a rate's
intervals come from its logs (never negative)."""

import csv
import io
import json

import numpy as np
import pytest
import synth
from common import cli, read_record

from mpiwrite import stats
from mpiwrite.answers.explain import analyse
from mpiwrite.formats import contract

jsonschema = pytest.importorskip("jsonschema")
sst = pytest.importorskip("scipy.stats")


@pytest.fixture(scope="module")
def lmdd_seed(tmp_path_factory):
    cwd = tmp_path_factory.mktemp("lmdd")
    assert synth.lmdd_seed(cwd / "seed", cli, cwd) == 40
    return cwd


def _json(args, cwd):
    out = cli(args, cwd=cwd)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.mark.timeout(300)
def test_lmdd_seed_checksums_first_the_bytes_an_outcome_not_a_factor(lmdd_seed):
    """40 lmdd lines of `time=200` runs: the bytes are the rate times 200, an outcome.  The
    first factor is the checksum setting; the build is named with its kernel (confounded)."""
    doc = _json(["explain", "seed", "--format", "json"], lmdd_seed)
    jsonschema.validate(doc, contract.schema("explain"))
    assert doc["factors"][0]["facts"] == ["csum"], doc["factors"][0]["keys"]
    build = next(f for f in doc["factors"] if "build" in f["keys"])
    assert build["confounded"] and set(build["facts"]) == {"build", "kern"}
    keys = {k for f in doc["factors"] for k in f["keys"]}
    assert "size" not in keys and "size" in doc["outcomes"]
    text = cli(["explain", "seed"], cwd=lmdd_seed).stdout
    assert "1. csum: " in text and "build and kern (confounded)" in text
    assert "outcomes (what the runs measured" in text


@pytest.mark.timeout(300)
def test_the_seed_table_as_bare_lines_ranks_checksums_first_and_size_is_no_factor(tmp_path):
    """The seed's 40 lmdd lines as a site keeps them: no --command, tags cpu, kern, build,
    csum and date.  Every line of a file ran 200 s while its MB vary: a time limit, inferred,
    so the bytes are the outcome; csum first, build/date/kern one confounded factor; size
    never a factor (it was first: "100.0%, p 0.015", 40 levels of one run each)."""
    assert synth.lmdd_seed(tmp_path / "seed", cli, tmp_path, command="", dated=True) == 40
    doc = _json(["explain", "seed", "--format", "json"], tmp_path)
    jsonschema.validate(doc, contract.schema("explain"))
    assert doc["factors"][0]["facts"] == ["csum"], [f["keys"] for f in doc["factors"]]
    build = next(f for f in doc["factors"] if "build" in f["keys"])
    assert build["confounded"] and set(build["facts"]) == {"build", "date", "kern"}
    assert "size" not in {k for f in doc["factors"] for k in f["keys"]}
    assert "size" in doc["outcomes"]
    text = cli(["explain", "seed"], cwd=tmp_path).stdout
    assert "1. csum: " in text and "not factors, outcomes" in text and "size" in text
    rec = sorted((tmp_path / "seed").glob("*.h5"))[0]
    shown = cli(["show", str(rec)], cwd=tmp_path).stdout
    assert "time 200" in shown and "inferred: every line of the file ran 200 s" in shown


@pytest.mark.timeout(120)
def test_a_key_with_a_value_for_most_runs_is_not_a_factor(tmp_path):
    """10 runs, a tag with 8 values (two of them twice): it would 'explain' nearly all the
    variance by construction.  Listed apart with its counts, never ranked."""
    rng = np.random.default_rng(2)
    for i in range(10):
        synth.make(tmp_path / f"r{i}.h5", [500.0 * (1 + 0.05 * rng.standard_normal())],
                   f"r-{i}", tags={"note": f"n{min(i, 7) if i < 9 else 0}",
                                   "side": "ab"[i % 2]})
    doc = _json(["explain", ".", "--format", "json"], tmp_path)
    keys = {k for f in doc["factors"] for k in f["keys"]}
    assert "note" not in keys and "side" in keys, keys
    assert "note" in doc["unreplicated"] and "over 10 runs" in doc["unreplicated"]["note"]
    text = cli(["explain", "."], cwd=tmp_path).stdout
    assert "not factors, too few runs at each value" in text and "note (" in text


@pytest.mark.timeout(120)
def test_lmdd_time_limit_is_recorded_and_an_unknown_block_is_unknown(tmp_path):
    lines = tmp_path / "l.txt"
    lines.write_text("166400.0000 MB in 200.0000 secs, 832.0000 MB/sec\n")
    out = cli(["import", "--from", "lmdd", "--command", "lmdd of=/lustre/f time=200 fsync=1",
               "--results", "r", str(lines)], cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    (rec,) = (tmp_path / "r").glob("*.h5")
    from mpiwrite.formats.runkeys import run_keys

    run = read_record(str(rec))
    params, keys = run.params(), run_keys(run)
    assert params["time_limit"] == 200 and "size" not in params, params
    assert "block_size" not in params and keys["block_size"] == "unknown"
    assert keys["size"] == "time" and keys["time_limit"] == 200
    shown = cli(["show", str(rec)], cwd=tmp_path).stdout
    assert "block unknown" in shown and "0B" not in shown, shown


@pytest.mark.timeout(120)
def test_study_labels_and_job_ids_are_labels_not_factors(tmp_path):
    """A study's own tags split the runs exactly as its setting does: they are labels."""
    for i in range(8):
        wb = "on" if i % 2 else "off"
        synth.make(tmp_path / f"r{i}.h5", [500.0 * (1.3 if wb == "on" else 1) + i], f"r-{i}",
                   tags={"wb": wb, "study": "s", "study_point": str(i % 2),
                         "study_key": f"wb={wb}", "study_hash": f"h{i % 2}",
                         "study_repeat": str(i // 2), "study_generation": "0",
                         "job_id": str(100 + i // 2)})
    doc = _json(["explain", ".", "--format", "json"], tmp_path)
    keys = {k for f in doc["factors"] for k in f["keys"]}
    assert keys == {"wb", "tag.wb"} or keys == {"wb"}, keys
    assert {"study_point", "study_key", "study_hash", "study_repeat", "job_id"} <= set(
        doc["labels"])


def _three_against_three(folder):
    a, b = [700.0, 690.0, 712.0], [560.0, 571.0, 549.0]
    for side, vals in (("a", a), ("b", b)):
        for i, v in enumerate(vals):
            synth.make(folder / f"{side}{i}.h5", [v], f"2026{side}-{i:06x}", tags={"side": side})
    return a, b


@pytest.mark.timeout(120)
def test_two_levels_get_compares_welch_p_and_interval_and_the_permutation_floor(tmp_path):
    a, b = _three_against_three(tmp_path)
    doc = _json(["explain", ".", "--format", "json"], tmp_path)
    (f,) = [f for f in doc["factors"] if f["key"] == "side"]
    cmp = _json(["compare", "side=a", "side=b", "--in", ".", "--json"], tmp_path)
    ref = sst.ttest_ind(np.log(b), np.log(a), equal_var=False).pvalue
    assert f["test"] == "welch" and f["p_value_uncorrected"] == pytest.approx(ref, rel=1e-9)
    assert cmp["p_value"] == pytest.approx(ref, rel=1e-9)
    w = f["welch"]
    assert (w["change_pct"], w["change_ci_lo_pct"], w["change_ci_hi_pct"]) == pytest.approx(
        (cmp["change_pct"], cmp["change_ci_lo_pct"], cmp["change_ci_hi_pct"]), rel=1e-9)
    assert f["permutation_min_p"] == pytest.approx(0.1) and f["p_permutation"] > 0.05
    text = cli(["explain", "."], cwd=tmp_path).stdout
    assert "too few runs for a permutation test to reach 0.05 (its smallest p: 0.1)" in text
    assert f"Welch p {ref:.2g}" in text


class _Noise:
    """What explain.analyse reads of a history: runs, values, keys (one per run)."""
    count_key = "runs"

    def __init__(self, rng, runs=20, tags=100):
        self.runs = list(range(runs))
        self.values = list(500 * np.exp(0.05 * rng.standard_normal(runs)))
        self.run_of = list(range(runs))
        self.keys = {f"t{k}": [str(x) for x in rng.integers(0, 2, runs)] for k in range(tags)}

    def per_sample(self, key):
        return self.keys[key]


@pytest.mark.timeout(300)
def test_pure_noise_has_no_clear_key_in_95_percent_of_histories():
    """20 runs, 100 random two-valued tags: uncorrected, most histories have keys with p <
    0.05 (six were seen once); corrected for the keys tried, about 5% have any: fewer than 8
    of 40 (at a true 5%, 8 or more has a chance of 0.0007)."""
    rng = np.random.default_rng(32)
    histories, clear, raw_hits = 40, 0, 0
    for _ in range(histories):
        doc = analyse(_Noise(rng), 0.95, "MB_per_s", permutations=50)
        ps = [f["p_value"] for f in doc["factors"] if f["p_value"] is not None]
        raw = [f["p_value_uncorrected"] for f in doc["factors"]
               if f["p_value_uncorrected"] is not None]
        assert all(p >= r for p, r in zip(ps, raw)) and doc["keys_tried"] == len(raw)
        clear += any(p < 0.05 for p in ps)
        raw_hits += sum(r < 0.05 for r in raw) >= 2
    assert raw_hits > histories / 2
    assert clear < 8, clear


def test_holm_against_a_hand_computation():
    assert stats.holm([0.01, 0.04, None, 0.03]) == pytest.approx([0.03, 0.06, None, 0.06])
    assert stats.holm([0.5, 0.001]) == pytest.approx([0.5, 0.002])
    assert stats.min_permutation_p([3, 3]) == pytest.approx(0.1)
    assert stats.min_permutation_p([5, 5]) == pytest.approx(2 / 252)


def test_ratio_scale_interval_and_welch_match_scipy():
    rng = np.random.default_rng(4)
    for _ in range(200):
        a = np.exp(rng.normal(6, 0.4, int(rng.integers(2, 7))))
        b = np.exp(rng.normal(5.8, 0.4, int(rng.integers(2, 7))))
        c = stats.compare(a, b)
        ref = sst.ttest_ind(np.log(b), np.log(a), equal_var=False)
        assert c.p_value == pytest.approx(ref.pvalue, rel=1e-8) and c.scale == "ratio"
        assert c.pct_lo > -100 and (c.pct_lo < 0 < c.pct_hi) is (not c.real)
        s = stats.describe(a)
        lv = np.log(a)
        tq = sst.t.ppf(0.975, len(a) - 1)
        half = tq * lv.std(ddof=1) / np.sqrt(len(a))
        assert (s.glo, s.ghi) == pytest.approx((np.exp(lv.mean() - half),
                                                np.exp(lv.mean() + half)), rel=1e-9)
        assert s.gmean == pytest.approx(np.exp(lv.mean())) and 0 < s.glo
        # the arithmetic mean's own interval beside it, never the geometric one
        ahalf = tq * a.std(ddof=1) / np.sqrt(len(a))
        assert (s.lo, s.hi) == pytest.approx((a.mean() - ahalf, a.mean() + ahalf), rel=1e-9)
        assert s.mean == pytest.approx(a.mean())
        # compare's absolute difference on the verdict's scale: of the geometric means,
        # the ratio's interval at A's
        ga, gb = np.exp(np.log(a).mean()), np.exp(np.log(b).mean())
        assert c.diff == pytest.approx(gb - ga)
        assert (c.diff_lo, c.diff_hi) == pytest.approx((ga * c.pct_lo / 100, ga * c.pct_hi / 100))


@pytest.mark.timeout(120)
def test_each_interval_sits_beside_its_own_mean_two_runs_far_apart(tmp_path):
    """n = 2 runs at 100 and 2,000 MB/s: the table printed the arithmetic mean (1050) beside
    the geometric mean's interval.  Now the arithmetic mean carries its own Student t
    interval (ci_lo, ci_hi: symmetric, as wide as two runs that far apart deserve), and the
    geometric mean its own (gmean_ci_lo, gmean_ci_hi: from the logs, always positive)."""
    synth.make(tmp_path / "x.h5", [100.0], "r-x", tags={"g": "a"})
    synth.make(tmp_path / "y.h5", [2000.0], "r-y", tags={"g": "a"})
    rep = _json(["report", ".", "--format", "json"], tmp_path)
    jsonschema.validate(rep, contract.schema("report"))
    (row,) = rep["rows"]
    half = sst.t.ppf(0.975, 1) * np.std([100.0, 2000.0], ddof=1) / np.sqrt(2)
    assert row["mean_MB_per_s"] == pytest.approx(1050)
    assert (row["ci_lo_MB_per_s"], row["ci_hi_MB_per_s"]) == pytest.approx(
        (1050 - half, 1050 + half))
    assert row["gmean_MB_per_s"] == pytest.approx(np.sqrt(100.0 * 2000.0))
    assert 0 < row["gmean_ci_lo_MB_per_s"] < row["gmean_MB_per_s"] < row["gmean_ci_hi_MB_per_s"]
    rows = list(csv.DictReader(io.StringIO(cli(["report", ".", "--format", "csv"],
                                               cwd=tmp_path).stdout)))
    assert float(rows[0]["gmean_ci_lo_MB_per_s"]) > 0
    assert float(rows[0]["ci_lo_MB_per_s"]) == pytest.approx(1050 - half)
    table = cli(["report", "."], cwd=tmp_path).stdout
    assert "MB/s mean ±95%" in table.splitlines()[0], table
    assert f"1050.0 ±{half:.1f}".replace(f"{half:.1f}", f"{half:,.1f}") in table or \
        f"1050.0 ±{half:.1f}" in table, table


def _three_block_sizes(folder):
    """A study's runs: block sizes 4KiB, 64KiB, 1MiB x write_behind off/on x 3 repeats;
    write_behind costs 20% at 4KiB only."""
    rng = np.random.default_rng(9)
    for bs, base in ((4096, 120.0), (65536, 600.0), (2**20, 900.0)):
        for wb in ("off", "on"):
            for rep in range(3):
                v = base * (0.8 if wb == "on" and bs == 4096 else 1) * (1 + 0.02 *
                                                                        rng.standard_normal())
                synth.make(folder / f"{bs}-{wb}-{rep}.h5", [v], f"r-{bs}-{wb}-{rep}",
                           tags={"wb": wb, "study_point": f"{bs}{wb}", "study_repeat": str(rep)},
                           params={"block_size": bs})


@pytest.mark.timeout(180)
def test_three_block_sizes_answer_per_stratum_and_agree_with_compare(tmp_path):
    _three_block_sizes(tmp_path)
    out = cli(["explain", ".", "--format", "json"], cwd=tmp_path)
    assert out.returncode == 0, out.stderr  # no refusal: a section per block size
    doc = json.loads(out.stdout)
    jsonschema.validate(doc, contract.schema("explain"))
    assert doc["stratified_by"] == ["block_size"] and doc["scale"] == "log"
    assert doc["factors"][0]["key"] == "block_size"
    assert [p["where"]["block_size"] for p in doc["strata"]] == ["4KiB", "64KiB", "1MiB"]
    for part in doc["strata"]:
        assert part["runs"] == 6
        (f,) = [f for f in part["factors"] if f["key"] == "wb"]
        bs = part["where"]["block_size"]
        cmp = _json(["compare", f"wb=off,block_size={bs}", f"wb=on,block_size={bs}", "--in",
                     ".", "--json"], tmp_path)
        assert f["p_value_uncorrected"] == pytest.approx(cmp["p_value"], rel=1e-9)
        assert (f["p_value"] < 0.05) is cmp["real"] or f["p_value"] >= cmp["p_value"]
        # compare --where, as report, explain and page take it: the same two sides
        where = _json(["compare", "wb=off", "wb=on", "--in", ".", "--where",
                       f"block_size={bs}", "--json"], tmp_path)
        assert where["p_value"] == cmp["p_value"] and where["a"]["n"] == cmp["a"]["n"]
    both = cli(["compare", "wb=off,block_size=4KiB", "wb=on", "--in", ".", "--where",
                "block_size=64KiB"], cwd=tmp_path)
    assert both.returncode == 2 and "cannot both hold" in both.stderr, both.stderr
    text = cli(["explain", "."], cwd=tmp_path).stdout
    assert "=== within block_size=4KiB: 6 runs, n=6 ===" in text
    assert "labels (name runs" in text
    rep = cli(["report", ".", "--by", "wb", "--where", "block_size=64KiB"], cwd=tmp_path)
    assert rep.returncode == 0, rep.stderr
    refused = cli(["report", ".", "--by", "wb"], cwd=tmp_path)
    assert refused.returncode == 2 and "--where block_size=" in refused.stderr


def test_also_different_ranks_settings_first_and_volatile_identifiers_last():
    """compare's "also different" opened with 12 GlusterFS graph identifiers and hid the
    one setting that differed (client.graph.write_behind)."""
    from types import SimpleNamespace

    from mpiwrite.answers.differences import DIFFERENCES_SHOWN, differing_facts

    def run(i, wb):
        keys = {f"client.graph.{k}": f"{k}-{i}" for k in (
            "process-uuid", "volfile-checksum", "client-version", "brick0.process-uuid",
            "brick1.process-uuid", "brick2.process-uuid", "brick3.process-uuid",
            "graph-id", "a-uuid", "b-uuid", "c-uuid", "d-uuid", "e-uuid")}
        keys.update({"client.graph.write_behind": wb, "study_point": str(i), "size": "time",
                     "time_limit": 200, "bytes": str(1000 + i)})
        return SimpleNamespace(keys=keys, iterations=np.zeros(0, dtype=[("x", float)]))

    a, b = [run(0, "on"), run(1, "on")], [run(2, "off"), run(3, "off")]
    diff = differing_facts(a, b, lambda r: r.keys)
    first = list(diff)[:DIFFERENCES_SHOWN]
    assert first[0] == "client.graph.write_behind", first
    assert "study_point" not in diff and "bytes" not in diff


@pytest.mark.timeout(120)
def test_report_orders_sizes_by_value(tmp_path):
    for i, bs in enumerate((2**20, 4 * 2**20, 65536)):
        synth.make(tmp_path / f"{i}.h5", [500.0], f"r-{i}", params={"block_size": bs})
    rows = _json(["report", ".", "--by", "block_size", "--format", "json"], tmp_path)["rows"]
    assert [r["keys"]["block_size"] for r in rows] == ["64KiB", "1MiB", "4MiB"]


def _tmpfs_and_disk(folder, seed=3, within=0.95):
    """16 runs: 64 KiB mostly on tmpfs (6 of 8), 1 MiB mostly on the disk (6 of 8); tmpfs
    about 6.7x the disk; within each, 64 KiB is `within` of 1 MiB."""
    rng = np.random.default_rng(seed)
    i = 0
    for fs, base in (("tmpfs", 4000.0), ("ext4", 600.0)):
        for bs, n in ((65536, 6 if fs == "tmpfs" else 2), (1 << 20, 2 if fs == "tmpfs" else 6)):
            for _ in range(n):
                v = base * (within if bs == 65536 else 1.0) * (1 + 0.01 * rng.standard_normal())
                synth.make(folder / f"r{i}.h5", [v], f"2026-{i:04d}",
                           node_facts=[dict(synth.tmpfs_node(), fs={"fstype": fs})],
                           params={"block_size": bs, "target": f"/mnt/{fs}/x"})
                i += 1


@pytest.mark.timeout(180)
def test_a_confounded_effect_is_named_and_given_within_the_confounder_first(tmp_path):
    """Block size over runs on tmpfs and on a disk: pooled, 64 KiB looks 2.5x faster (it ran
    on tmpfs); within each filesystem it is 5% slower.  explain and compare name fstype and
    give the effect within it before the pooled one."""
    _tmpfs_and_disk(tmp_path)
    doc = _json(["explain", ".", "--format", "json"], tmp_path)
    jsonschema.validate(doc, contract.schema("explain"))
    (f,) = [f for f in doc["factors"] if f["key"] == "block_size"]
    assert f["welch"]["change_pct"] > 50  # the pooled answer: the filesystem's
    assert [c["key"] for c in f["confounded_with"]] == ["fstype"]
    inside = f["within_confounders"]
    assert inside["level"] == "64KiB" and -7 < inside["change_pct"] < -3
    assert inside["change_ci_hi_pct"] < 0 and len(inside["strata"]) == 2
    text = cli(["explain", "."], cwd=tmp_path).stdout
    head = next(ln for ln in text.splitlines() if ln.startswith("1. block_size"))
    assert "(confounded with fstype)" in head
    lines = text.splitlines()
    at = {k: next(i for i, ln in enumerate(lines) if k in ln)
          for k in ("within fstype: 64KiB vs 1MiB", "over all runs, confounded: 64KiB")}
    assert at["within fstype: 64KiB vs 1MiB"] < at["over all runs, confounded: 64KiB"]
    cmp = _json(["compare", "block_size=1MiB", "block_size=64KiB", "--in", ".", "--json"],
                tmp_path)
    jsonschema.validate(cmp, contract.schema("compare"))
    assert [c["key"] for c in cmp["confounded_with"]] == ["fstype"]
    assert -7 < cmp["within_confounders"]["change_pct"] < -3
    said = cli(["compare", "block_size=1MiB", "block_size=64KiB", "--in", "."],
               cwd=tmp_path).stdout
    assert "confounded with fstype: the difference may be fstype's" in said
    assert said.index("within fstype: B vs A") < said.index("B / A over all runs, confounded")
    rep = _json(["report", ".", "--by", "block_size", "--baseline", "block_size=1MiB",
                 "--format", "json"], tmp_path)
    jsonschema.validate(rep, contract.schema("report"))
    (row,) = [r for r in rep["rows"] if r["keys"]["block_size"] == "64KiB"]
    assert row["confounded_with"] == ["fstype"]
    assert -7 < row["within_confounders"]["change_pct"] < -3
    table = cli(["report", ".", "--by", "block_size", "--baseline", "block_size=1MiB"],
                cwd=tmp_path).stdout
    assert "confounded: 64KiB vs 1MiB, runs also differ in fstype; within it: -" in table
    page = cli(["page", ".", "--by", "block_size", "-o", "p.html"], cwd=tmp_path)
    assert page.returncode == 0, page.stderr
    assert "; confounded with fstype (within it: " in (tmp_path / "p.html").read_text()


@pytest.mark.timeout(120)
def test_a_balanced_key_is_not_called_a_confounder(tmp_path):
    """Every block size on both filesystems, two runs each: fstype is no confounder."""
    rng = np.random.default_rng(1)
    i = 0
    for fs, base in (("tmpfs", 4000.0), ("ext4", 600.0)):
        for bs in (65536, 1 << 20):
            for _ in range(3):
                v = base * (0.95 if bs == 65536 else 1.0) * (1 + 0.01 * rng.standard_normal())
                synth.make(tmp_path / f"r{i}.h5", [v], f"2026-{i:04d}",
                           node_facts=[dict(synth.tmpfs_node(), fs={"fstype": fs})],
                           params={"block_size": bs})
                i += 1
    doc = _json(["explain", ".", "--format", "json"], tmp_path)
    assert not any(f.get("confounded_with") for f in doc["factors"]), doc["factors"]
    for part in doc.get("strata", []):
        assert not any(f.get("confounded_with") for f in part["factors"])


def test_the_association_is_bias_corrected_and_its_test_is_scipys():
    from mpiwrite.answers import confounding

    rng = np.random.default_rng(0)
    false = 0
    for _ in range(200):  # hosts drawn at random for 30 runs of a setting: not associated
        setting = [str(x) for x in rng.integers(0, 2, 30)]
        hosts = [f"h{x}" for x in rng.integers(0, 8, 30)]
        false += bool(confounding.confounders(setting, {"host": hosts}))
    assert false <= 200 * 0.08, false
    a = ["x"] * 6 + ["y"] * 6
    b = ["p"] * 5 + ["q"] + ["q"] * 5 + ["p"]
    v, p = confounding.association(a, b)
    table = [[5, 1], [1, 5]]
    ref = sst.chi2_contingency(table, correction=False)
    assert p == pytest.approx(ref.pvalue, rel=1e-9) and 0.3 < v < 1


def test_a_stratum_of_equal_runs_does_not_decide_the_effect_within_it():
    """lmdd lines in whole MB/s: one stratum's runs all equal.  Its zero variance once gave it
    all the weight; the pooled fit weighs it by its runs."""
    from mpiwrite.answers import confounding

    rng = np.random.default_rng(3)
    vals, labels, strata = [], [], []
    for _ in range(3):  # stratum a: y is 10% slower, every run exactly equal
        vals += [1000.0, 900.0]
        labels += ["x", "y"]
        strata += ["a", "a"]
    for _ in range(7):  # stratum b: y is 20% faster, with noise
        vals += [1000.0 * np.exp(0.05 * rng.standard_normal()),
                 1200.0 * np.exp(0.05 * rng.standard_normal())]
        labels += ["x", "y"]
        strata += ["b", "b"]
    got = confounding.within(vals, labels, strata, "x", "y")
    assert got["change_pct"] > 5 and got["change_ci_lo_pct"] < got["change_ci_hi_pct"]
    assert {p["where"] for p in got["strata"]} == {"a", "b"}


def test_equal_runs_are_no_effect_anywhere():
    """32 runs of one figure: no factor is real (rounding to the 16th digit gave p 0.04)."""
    from mpiwrite.answers import tune_report
    from mpiwrite.study.design import design

    x = np.array(design(["a", "b", "c"]).rows * 8)
    y = np.full(len(x), 1234.5678)
    found = tune_report.effects(x, y, ["a", "b", "c"])
    assert all(f["verdict"] != "real" and f["p"] == 1.0 for f in found["factors"]), found


@pytest.mark.timeout(120)
def test_a_tag_is_never_its_own_settings_confounder(tmp_path):
    """compare setting.x=1 against setting.x=0: `tag.setting.x` is the same tag under its
    other name, not a confounder."""
    rng = np.random.default_rng(4)
    for i in range(8):
        v = "10"[i % 2]
        synth.make(tmp_path / f"r{i}.h5", [500.0 * (1.2 if v == "1" else 1.0)
                                          * np.exp(0.02 * rng.standard_normal())],
                   f"r-{i}", tags={"setting.x": v})
    cmp = _json(["compare", "setting.x=0", "setting.x=1", "--in", ".", "--json"], tmp_path)
    assert not cmp["confounded_with"], cmp["confounded_with"]
