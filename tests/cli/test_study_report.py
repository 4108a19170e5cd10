"""`study report` over a study's records: levels in order of value and spelled as the table
spells them, the verdicts of the study's block analysis (Holm-corrected) and repetition
advice, --format csv|json (against the shipped schema), a plot per axis or one line saying
why none.

The records are what `study run` leaves (tests/synth.study_records), written without MPI."""

import csv
import io
import json
import re

import pytest
import synth
from common import cli

from mpiwrite.answers.explain import ALPHA
from mpiwrite.answers.results import Store
from mpiwrite.formats import contract

jsonschema = pytest.importorskip("jsonschema")

STUDY = """
[study]
name = "{name}"
target = "{data}"
results = "{results}"
repeat = {repeat}

[run]
size = "8MiB"

[axes]
{axes}
"""

SETTING = """
[[setting]]
name = "wb"
values = [{values}]
set = "true {{value}}"
"""


def study(tmp_path, axes, repeat=3, name="s", setting=""):
    path = tmp_path / f"{name}.toml"
    path.write_text(STUDY.format(name=name, data=tmp_path / "data", results=tmp_path / "results",
                                 repeat=repeat, axes=axes)
                    + (SETTING.format(values=setting) if setting else ""))
    return str(path)


def _run(args, cwd, code=0):
    out = cli(args, cwd=cwd)
    assert out.returncode == code, out.stdout + out.stderr
    return out


def _json(args, cwd):
    text = _run(args, cwd).stdout

    def bad(name):
        raise AssertionError(f"bare {name} in JSON output")
    return json.loads(text, parse_constant=bad)


def blocks(point):
    """Rates that depend on the block size and O_DIRECT (1MiB = 4MiB)."""
    rate = {"64KiB": 400.0, "1MiB": 500.0, "4MiB": 500.0}[point["block_size"]]
    return rate * (0.7 if point["direct"] else 1.0)


BLOCKS = 'block_size = ["1MiB", "4MiB", "64KiB"]\ndirect = [false, true]'


@pytest.mark.timeout(120)
def test_sizes_in_order_of_value_and_one_spelling_of_each_level(tmp_path):
    """The file's 1MiB, 4MiB, 64KiB are 64KiB, 1MiB, 4MiB in the table and the verdicts (the
    smallest is the base); O_DIRECT is `off`/`on` in both, never `false`/`true`."""
    path = study(tmp_path, BLOCKS)
    assert synth.study_records(path, blocks) == 18
    out = _run(["study", "report", path], tmp_path).stdout
    table, verdicts = out.split("each axis's levels against its first")
    rows = [ln.split()[:2] for ln in table.splitlines()[1:7]]
    assert rows == [[b, d] for b in ("64KiB", "1MiB", "4MiB") for d in ("off", "on")]
    lines = [ln.strip() for ln in verdicts.splitlines()[1:]]
    assert [ln.split(" at ")[0] for ln in lines] == (
        ["block_size 1MiB vs 64KiB", "block_size 4MiB vs 64KiB"] * 2
        + ["direct on vs off"] * 3)
    assert [ln.split(" at ")[1].split(":")[0] for ln in lines[4:]] == [
        "block_size=64KiB", "block_size=1MiB", "block_size=4MiB"]
    assert not re.search(r"\b(true|false)\b", out), out
    md = _run(["study", "report", path, "--format", "markdown"], tmp_path).stdout
    assert "- direct on vs off at block\\_size=64KiB: " in md and "true" not in md
    doc = _json(["study", "report", path, "--format", "json"], tmp_path)
    assert doc["axes"] == [{"name": "block_size", "levels": ["64KiB", "1MiB", "4MiB"],
                            "base": "64KiB"},
                           {"name": "direct", "levels": ["off", "on"], "base": "off"}]
    words = {v["level"] for v in doc["verdicts"]} | {v["against"] for v in doc["verdicts"]}
    table_words = {w for r in doc["rows"] for w in r["keys"].values()}
    assert words == table_words


@pytest.mark.timeout(120)
@pytest.mark.parametrize("values", [("on", "off"), ("1", "0")])
def test_a_settings_values_keep_the_files_order(tmp_path, values):
    """A setting's first value is the baseline the file chose (`1` then `0`, as checksums are
    usually written): the verdicts compare with it and the table lists the levels in the
    same order, numbers or not."""
    base, other = values
    path = study(tmp_path, 'block_size = ["64KiB"]', setting=f'"{base}", "{other}"')
    synth.study_records(path, lambda p: 300.0 if p["setting.wb"] == other else 500.0)
    out = _run(["study", "report", path], tmp_path).stdout
    rows = [ln.split()[:2] for ln in out.splitlines()[1:3]]
    assert rows == [["64KiB", base], ["64KiB", other]]
    (line,) = [ln.strip() for ln in out.splitlines() if ln.strip().startswith("setting.wb")]
    assert line.startswith(f"setting.wb {other} vs {base} at block_size=64KiB: -40.")
    assert re.search(r": a real difference \(p = [0-9.e-]+\): setting\.wb=" + other
                     + " is slower$", line), line


@pytest.mark.timeout(120)
def test_json_is_valid_against_the_shipped_schema_and_csv_says_the_same(tmp_path):
    path = study(tmp_path, BLOCKS)
    synth.study_records(path, blocks)
    doc = _json(["study", "report", path, "--format", "json"], tmp_path)
    schema = contract.schema("study-report")
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate(doc, schema)
    assert doc["output"] == "study-report" and doc["schema_version"] == contract.OUTPUT_VERSION
    assert doc["study"] == "s" and doc["generation"] == 1 and len(doc["rows"]) == 6
    assert len(doc["verdicts"]) == 7 and {v["outcome"] for v in doc["verdicts"]} <= {
        "real", "noise"}
    with pytest.raises(jsonschema.ValidationError):  # the schema can fail
        jsonschema.validate(dict(doc, verdicts=[dict(doc["verdicts"][0], outcome="maybe")]),
                            schema)
    # the table's rows are report's rows over the same runs
    rep = _json(["report", str(tmp_path / "results"), "--by", "block_size,direct", "--format",
                 "json"], tmp_path)
    assert doc["rows"] == rep["rows"]
    text = _run(["study", "report", path, "--format", "csv"], tmp_path).stdout
    lines = list(csv.DictReader(io.StringIO(text)))
    assert [(r["block_size"], r["direct"]) for r in lines] == [
        (r["keys"]["block_size"], r["keys"]["direct"]) for r in doc["rows"]]
    seen = 0
    for r in lines:
        assert float(r["mean_MB_per_s"]) == pytest.approx(
            doc["rows"][lines.index(r)]["mean_MB_per_s"])
        for axis, other in (("block_size", "direct"), ("direct", "block_size")):
            base = doc["axes"][0 if axis == "block_size" else 1]["base"]
            if r[axis] == base:
                assert r[f"{axis}_verdict"] == "base" and r[f"{axis}_change_pct"] == ""
                continue
            (v,) = [v for v in doc["verdicts"] if v["axis"] == axis and v["level"] == r[axis]
                    and v["where"] == {other: r[other]}]
            assert r[f"{axis}_verdict"] == v["outcome"] and r[f"{axis}_against"] == base
            assert float(r[f"{axis}_p_value"]) == pytest.approx(v["p_value"], rel=1e-12)
            assert float(r[f"{axis}_change_ci_lo_pct"]) == pytest.approx(v["change_ci_lo_pct"])
            seen += 1
    assert seen == len(doc["verdicts"])  # every verdict once, on its level's line
    assert lines[0]["schema_version"] == str(contract.OUTPUT_VERSION)


@pytest.mark.timeout(120)
def test_advice_is_the_repetitions_that_settle_and_the_repeat_that_settles_all(tmp_path):
    """A 3% change under 5% noise with 3 runs a side: within noise, and the repetitions that
    would settle it, in compare's words; the study's `repeat` advice is the largest."""
    path = study(tmp_path, 'direct = [false, true]\nblock_size = ["64KiB", "1MiB"]')
    synth.study_records(path, lambda p: 500.0 * (0.97 if p["direct"] else 1.0), seed=4,
                        noise=0.05)
    doc = _json(["study", "report", path, "--format", "json"], tmp_path)
    noise = [v for v in doc["verdicts"] if v["outcome"] == "noise" and v["more_per_side"]]
    assert noise, doc["verdicts"]
    for v in noise:
        assert v["needed_per_side"] == 3 + v["more_per_side"]
        assert re.search(rf"within noise \(p = [0-9.e-]+, Holm over \d+; [0-9.e-]+ alone\); "
                         rf"about {v['more_per_side']} more repetitions? per side "
                         rf"\({v['needed_per_side']} in all\)", v["verdict"]), v["verdict"]
    assert doc["repeat_advice"] == max(v["needed_per_side"] for v in noise)
    text = _run(["study", "report", path], tmp_path).stdout
    assert f"repeat = {doc['repeat_advice']} (now 3 runs a point) would settle" in text


@pytest.mark.timeout(120)
def test_one_sample_a_side_is_cannot_tell_without_nan(tmp_path):
    path = study(tmp_path, 'direct = [false, true]', repeat=1)
    synth.study_records(path, lambda p: 500.0 * (0.7 if p["direct"] else 1.0))
    out = _run(["study", "report", path], tmp_path).stdout
    (line,) = [ln.strip() for ln in out.splitlines() if ln.strip().startswith("direct on")]
    assert "(n 1 vs 1): cannot tell: each side needs at least 2 samples; about 1 more " \
        "repetition per side" in line
    assert "nan" not in out
    doc = _json(["study", "report", path, "--format", "json"], tmp_path)
    jsonschema.validate(doc, contract.schema("study-report"))
    assert doc["verdicts"][0]["outcome"] == "cannot tell"
    assert doc["verdicts"][0]["p_value"] is None and doc["repeat_advice"] == 2


@pytest.mark.timeout(180)
def test_a_plot_per_axis_and_one_line_for_an_axis_not_drawn(tmp_path):
    pytest.importorskip("matplotlib")
    path = study(tmp_path, BLOCKS + '\nlayout = ["fpp"]')
    synth.study_records(path, blocks)
    pics = tmp_path / "pics"
    pics.mkdir()
    out = _run(["study", "report", path, "--plot-dir", str(pics)], tmp_path)
    tail = out.stdout.strip().splitlines()[-3:]
    assert tail == [str(pics / "s-block_size.png"), str(pics / "s-direct.png"),
                    "no plot of layout: it has one level (fpp)"]
    for name in ("s-block_size.png", "s-direct.png"):
        assert (pics / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(p.name for p in pics.iterdir()) == ["s-block_size.png", "s-direct.png"]
    # machine output stays one document on stdout; the lines go to stderr
    js = _run(["study", "report", path, "--format", "json", "--plot-dir", str(pics)], tmp_path)
    json.loads(js.stdout)
    assert "no plot of layout: it has one level (fpp)" in js.stderr
    # a folder that is not there: one line, exit 2, nothing printed
    bad = cli(["study", "report", path, "--plot-dir", str(tmp_path / "none")], cwd=tmp_path)
    assert bad.returncode == 2 and bad.stdout == "", bad.stdout
    assert len(bad.stderr.strip().splitlines()) == 1 and "--plot-dir" in bad.stderr


@pytest.mark.timeout(180)
def test_a_single_level_study_says_why_no_plot_was_drawn(tmp_path):
    pytest.importorskip("matplotlib")
    path = study(tmp_path, 'block_size = ["1MiB"]')
    synth.study_records(path, lambda p: 500.0)
    out = _run(["study", "report", path, "--plot-dir", str(tmp_path)], tmp_path)
    assert out.stdout.strip().splitlines()[-1] == "no plot of block_size: it has one level (1MiB)"
    assert not list(tmp_path.glob("*.png"))


def _groups(store, axis, level, where):
    want = dict(where, **{axis: level})
    return [r for r in store.select() if all(str(store.keys(r).get(k)) == v
                                             for k, v in want.items())]


def _holm(ps):
    order = sorted(range(len(ps)), key=lambda i: ps[i])
    out, running = [0.0] * len(ps), 0.0
    for k, i in enumerate(order):
        running = max(running, min(1.0, (len(ps) - k) * ps[i]))
        out[i] = running
    return out


@pytest.mark.timeout(300)
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_study_verdicts_are_the_block_analysis_of_the_whole_study(tmp_path, seed):
    """Every verdict is the contrast of its two points in one fit over the study's runs on
    the log scale, each point and the repetition blocks (the randomised complete block
    analysis), its p corrected for the number of verdicts (Holm): checked against the
    two-way analysis of variance by hand, with scipy's t.  Compare on the same two groups
    knows nothing of the blocks and is another test; the verdicts say which they are."""
    import numpy as np

    sst = pytest.importorskip("scipy.stats")
    path = study(tmp_path, 'block_size = ["64KiB", "1MiB", "4MiB"]', setting='"on", "off"')
    effect = {"64KiB": 1.0, "1MiB": 1.04, "4MiB": 1.2}

    def rate(p):
        return 500.0 * effect[p["block_size"]] * (0.96 if p["setting.wb"] == "off" else 1.0)
    synth.study_records(path, rate, seed=seed, noise=0.03)
    doc = _json(["study", "report", path, "--format", "json"], tmp_path)
    jsonschema.validate(doc, contract.schema("study-report"))
    assert len(doc["verdicts"]) == 7 and doc["test"] == "model" and doc["correction"] == "holm"
    store = Store([str(tmp_path / "results")])
    # the two-way table: log rate of each (point, repetition)
    cells = {}
    for r in store.select():
        keys = store.keys(r)
        point = (keys["block_size"], keys["setting.wb"])
        cells[(point, r.tags()["study_repeat"])] = float(np.log(r.iterations["aggregate_MB_per_s"]
                                                                 .mean()))
    points = sorted({p for p, _ in cells})
    reps = sorted({b for _, b in cells})
    y = np.array([[cells[(p, b)] for b in reps] for p in points])
    resid = y - y.mean(axis=1, keepdims=True) - y.mean(axis=0, keepdims=True) + y.mean()
    df = (len(points) - 1) * (len(reps) - 1)
    mse = float((resid ** 2).sum()) / df
    alone = []
    for v in doc["verdicts"]:
        (k, x), = v["where"].items()
        a = (v["against"], x) if v["axis"] == "block_size" else (x, v["against"])
        b = (v["level"], x) if v["axis"] == "block_size" else (x, v["level"])
        d = y[points.index(b)].mean() - y[points.index(a)].mean()
        t = d / np.sqrt(2 * mse / len(reps))
        alone.append(2 * sst.t.sf(abs(t), df))
        assert v["change_pct"] == pytest.approx((np.exp(d) - 1) * 100, rel=1e-9)
        assert v["p_value_uncorrected"] == pytest.approx(alone[-1], rel=1e-6)
        assert v["test"] == "model"
    outcomes = set()
    for v, p in zip(doc["verdicts"], _holm(alone)):
        assert v["p_value"] == pytest.approx(p, rel=1e-6)
        assert v["real"] is bool(p < ALPHA) and v["outcome"] == ("real" if p < ALPHA else "noise")
        outcomes.add(v["outcome"])
    assert outcomes == {"real", "noise"}, doc["verdicts"]
    text = _run(["study", "report", path], tmp_path).stdout
    assert "each point, repetition blocks" in text and "Holm" in text


@pytest.mark.timeout(120)
def test_levels_that_look_like_formulas_or_markup_stay_text(tmp_path):
    """A level is a word from the records: a spreadsheet never runs it, markdown never reads
    it as a column or a link."""
    path = study(tmp_path, 'block_size = ["64KiB"]', setting='"=1+2", "|[x](y)|"')
    synth.study_records(path, lambda p: 300.0 if p["setting.wb"] == "=1+2" else 500.0)
    text = _run(["study", "report", path, "--format", "csv"], tmp_path).stdout
    rows = list(csv.reader(io.StringIO(text)))
    assert [r[1] for r in rows[1:]] == ["'=1+2", "|[x](y)|"]
    assert not any(c.startswith(("=", "+", "-", "@")) for r in rows for c in r[:2])
    md = _run(["study", "report", path, "--format", "markdown"], tmp_path).stdout
    (line,) = [ln for ln in md.splitlines() if ln.startswith("- setting")]
    assert line.startswith("- setting.wb \\|\\[x\\](y)\\| vs =1+2 at block\\_size=64KiB: ")


CARRY = {("20", "20"): 4104.0, ("20", "1"): 2846.0, ("1", "20"): 2157.0, ("1", "1"): 1906.0}


@pytest.mark.timeout(300)
@pytest.mark.parametrize("order", ["balanced", "interleaved"])
def test_a_carry_over_as_large_as_the_effect_withholds_the_axis_verdicts(tmp_path, order):
    """The dirty_ratio study's runs as they were measured (the run before moved the rate as
    much as the run's own setting), in a balanced and in an interleaved order: no verdict for
    the setting, one line saying how large the carry-over is and what would help; the JSON
    says the same (outcome carry-over, real false, the axis's carry-over withheld)."""
    path = tmp_path / "s.toml"
    path.write_text(STUDY.format(name="dirty", data=tmp_path / "data",
                                 results=tmp_path / "results", repeat=8, axes="")
                    .replace("repeat = 8", f'repeat = 8\norder = "{order}"')
                    + SETTING.format(values='"20", "1"').replace('"wb"', '"ratio"'))

    def carry(point, before):
        was = before["setting.ratio"] if before else point["setting.ratio"]
        return CARRY[(was, point["setting.ratio"])] / 4104.0

    synth.study_records(str(path), lambda p: 4104.0, noise=0.08, carry=carry)
    doc = _json(["study", "report", str(path), "--format", "json"], tmp_path)
    jsonschema.validate(doc, contract.schema("study-report"))
    (v,) = doc["verdicts"]
    assert v["outcome"] == "carry-over" and v["real"] is False, v
    (c,) = doc["carryover"]
    assert c["axis"] == "setting.ratio" and c["withheld"]
    if not c["aliased"]:
        assert c["levels"][0]["change_pct"] < -25  # -48% in the table above
    text = _run(["study", "report", str(path)], tmp_path).stdout
    assert "carry-over of setting.ratio" in text and "no verdict for setting.ratio" in text
    assert "settle between runs" in text and "real difference" not in text


@pytest.mark.timeout(300)
def test_compare_and_explain_say_the_carry_over_of_a_studys_runs(tmp_path):
    """The same dirty_ratio runs, asked as compare and explain ask: compare withholds its
    verdict (the run before moved the rate as much as the side did), explain prints the
    carry-over beside the setting; runs without a study's order say nothing of it."""
    path = tmp_path / "s.toml"
    path.write_text(STUDY.format(name="dirty", data=tmp_path / "data",
                                 results=tmp_path / "results", repeat=8, axes="")
                    + SETTING.format(values='"20", "1"').replace('"wb"', '"ratio"'))

    def carry(point, before):
        was = before["setting.ratio"] if before else point["setting.ratio"]
        return CARRY[(was, point["setting.ratio"])] / 4104.0

    synth.study_records(str(path), lambda p: 4104.0, noise=0.05, carry=carry)
    cmp = _json(["compare", "setting.ratio=20", "setting.ratio=1", "--in", "results",
                 "--json"], tmp_path)
    jsonschema.validate(cmp, contract.schema("compare"))
    assert cmp["carryover"]["flagged"] and cmp["real"] is False
    assert cmp["carryover"]["carryover_pct"] < -25 and cmp["verdict"].startswith("no verdict")
    text = _run(["compare", "setting.ratio=20", "setting.ratio=1", "--in", "results"],
                tmp_path).stdout
    assert "carry-over: a run after B against one after A" in text
    ex = _json(["explain", "results", "--format", "json"], tmp_path)
    (f,) = [f for f in ex["factors"] if f["key"] == "setting.ratio"]
    # explain's levels in order of value (1 before 20): a run after 20 is the faster
    assert f["carryover"]["flagged"] and f["carryover"]["carryover_pct"] > 25
    said = _run(["explain", "results"], tmp_path).stdout
    assert "carry-over: a run after setting.ratio=20 against one after setting.ratio=1" in said
    plain = tmp_path / "plain"
    plain.mkdir()
    synth.study_records(str(path).replace("s.toml", "s.toml"), lambda p: 4104.0, noise=0.05,
                        generation=2, repeat=3)
    for rec in (tmp_path / "results").glob("g2-*.h5"):
        rec.rename(plain / rec.name)
    cmp = _json(["compare", "setting.ratio=20", "setting.ratio=1", "--in", "plain", "--json"],
                tmp_path)
    assert cmp["carryover"] is None


@pytest.mark.timeout(120)
def test_a_verdicts_direction_is_its_changes(tmp_path):
    """The change and 'B is faster/slower' come from one contrast: over any seed, a positive
    change is never said slower (the rows' raw geometric means once gave the direction)."""
    path = study(tmp_path, 'block_size = ["64KiB", "1MiB"]', setting='"on", "off"')
    synth.study_records(path, lambda p: 500.0 * (1.03 if p["setting.wb"] == "off" else 1.0),
                        seed=9, noise=0.02)
    doc = _json(["study", "report", path, "--format", "json"], tmp_path)
    for v in doc["verdicts"]:
        if v["outcome"] == "real":
            word = "faster" if v["change_pct"] > 0 else "slower"
            assert v["verdict"].endswith(f"is {word}"), v
