"""`mpiwrite tune` (docs/tune.md): the catalogue on a Lustre sysroot with a stand-in lctl,
scope and restore through a study, bad input, kernel writeback on the real /proc/sys, and the
screening design's properties."""

import glob
import html
import itertools
import json
import os
import re

import numpy as np
import pytest
import sysroots
from common import cli, is_root, mpirun, read_record, records_in

from mpiwrite import stats
from mpiwrite.answers import tune_report
from mpiwrite.study.design import design

# a stand-in lctl: get_param and set_param over the sysroot's Lustre files; it refuses 9 and
# leaves max_rpcs_in_flight=99 unset while saying it worked (a get that never shows it)
FAKE_LCTL = """#!/bin/bash
root=${MPIWRITE_SYSROOT:?}
files() { local p=${1//.//}; for d in sys/fs/lustre sys/kernel/debug/lustre proc/fs/lustre; do
  ls -d "$root"/$d/$p 2>/dev/null; done; }
case "$1" in
get_param) shift; [ "$1" = -n ] && shift; f=$(files "$1"); [ -n "$f" ] || exit 2
  for x in $f; do cat "$x"; done;;
set_param) p=${2%%=*}; v=${2#*=}; f=$(files "$p"); [ -n "$f" ] || exit 2
  if [ "$v" = 9 ]; then echo "error: set_param: $2: Invalid argument" >&2; exit 22; fi
  echo "$2" >> "$root/lctl.log"; [ "$v" = 99 ] && exit 0
  for x in $f; do echo "$v" > "$x"; done;;
*) exit 2;;
esac
"""


@pytest.fixture
def lustre(tmp_path):
    """A Lustre 2.15 sysroot whose mount table puts the real folder tmp/data on Lustre, and
    a stand-in lctl first on PATH: (env, data folder, sysroot)."""
    data = tmp_path / "data"
    data.mkdir()
    files = sysroots.lustre_215()
    files["proc/mounts"] = (f"10.0.0.1@o2ib:/bigfs {data} lustre rw,flock 0 0\n"
                            "/dev/nvme0n1p1 / xfs rw,relatime 0 0\n")
    root = sysroots.make(tmp_path / "root", files)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "lctl").write_text(FAKE_LCTL)
    (bin_dir / "lctl").chmod(0o755)
    env = {"MPIWRITE_SYSROOT": str(root), "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    return env, str(data), str(root)


def osc(root, param):
    found = set()
    for f in glob.glob(os.path.join(root, "*/fs/lustre/osc/*", param)) + glob.glob(
            os.path.join(root, "proc/fs/lustre/osc/*", param)):
        with open(f) as fh:
            found.add(fh.read().strip())
    return found


def test_tune_list_shows_the_lustre_catalogue_with_values_read_now(lustre, tmp_path):
    env, data, _root = lustre
    out = cli(["tune", "list", data, "--format", "json"], cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stderr
    rows = {r["name"]: r for r in json.loads(out.stdout)}
    for name in ("osc.*.checksums", "osc.*.checksum_type", "osc.*.max_rpcs_in_flight",
                 "osc.*.max_dirty_mb", "osc.*.max_pages_per_rpc", "llite.*.max_cached_mb",
                 "vm.dirty_ratio", "vm.dirty_background_ratio", "vm.dirty_expire_centisecs"):
        assert name in rows and rows[name]["scope"] == "node" and rows[name]["candidates"]
    assert rows["osc.*.checksums"]["value"] == "1"
    assert rows["osc.*.checksum_type"]["value"] == "crc32c"  # the bracketed one is active
    assert "adler" in rows["osc.*.checksum_type"]["range"]
    assert rows["llite.*.max_cached_mb"]["value"] == "128877"  # from the 2.4+ block
    assert rows["vm.dirty_ratio"]["value"] == "40"
    table = cli(["tune", "list", data], cwd=tmp_path, env=env)
    assert table.returncode == 0 and "lustre client serving" in table.stdout


@pytest.mark.parametrize("args, message", [
    (["set", "osc.*.no_such", "1"], "not a tunable of the lustre client"),
    (["set", "osc.*.max_rpcs_in_flight", "100000"], "outside the safe range"),
    (["set", "osc.*.checksums", "2"], "not one of 0, 1"),
    (["set", "osc.*.max_dirty_mb", "lots"], "not a number"),
    (["plan", "-o", "x.toml", "--param", "osc.*.checksums=1"], "two levels"),
    (["plan", "-o", "x.toml", "--param", "osc.*.max_pages_per_rpc=256,99999"],
     "outside the safe range"),
    *((["plan", "-o", "x.toml", "--param", "osc.*.checksums=0,1", "--budget", b], "--budget")
      for b in ("9" * 400, "-5min", "inf", "nan", "0")),
    (["plan", "-o", "x.toml", "--param", "osc.*.checksums=0,1", "--param",
      "osc.*.checksums=1,0"], "given twice"),
    (["plan", "-o", "x.toml", "--param", "osc.*.checksums=0,1", "--run", "iterations=\u00b2"],
     "iterations"),
])
def test_bad_input_is_one_line_and_exit_2(lustre, tmp_path, args, message):
    env, data, root = lustre
    verb, rest = args[0], args[1:]
    words = ["tune", verb] + (rest + [data] if verb == "set" else [data] + rest)
    out = cli(words, cwd=tmp_path, env=env)
    assert out.returncode == 2, out.stdout + out.stderr
    assert message in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert not os.path.exists(os.path.join(root, "lctl.log"))  # nothing was set
    assert not os.path.exists(tmp_path / "x.toml")


def test_a_target_holding_the_value_placeholder_is_refused(lustre, tmp_path):
    """A study replaces {value} in its set and get commands: a path holding it is refused."""
    env, _data, _root = lustre
    odd = tmp_path / "x{value}"
    odd.mkdir()
    out = cli(["tune", "plan", str(odd), "-o", "x.toml", "--param", "osc.*.checksums=0,1"],
              cwd=tmp_path, env=env)
    assert out.returncode == 2 and "{value}" in out.stderr, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and not (tmp_path / "x.toml").exists()


def test_a_tunable_that_cannot_be_read_back_is_refused(lustre, tmp_path):
    env, data, root = lustre
    for f in glob.glob(os.path.join(root, "proc/fs/lustre/osc/*/max_pages_per_rpc")):
        os.remove(f)
    out = cli(["tune", "plan", data, "-o", "x.toml", "--param",
               "osc.*.max_pages_per_rpc=256,1024"], cwd=tmp_path, env=env)
    assert out.returncode == 2 and "cannot be read back" in out.stderr, out.stderr
    assert not os.path.exists(tmp_path / "x.toml")


@pytest.mark.skipif(not is_root(), reason="sets tunables only root may set (Lustre's osc.*, "
                    "vm.dirty_*); as a user `tune plan` refuses them: test_fresh_account.py")
@pytest.mark.parametrize("junk", ["abc", "5" * 5000, "\udcff\udcfe", "inf"])
def test_a_value_that_is_not_the_tunables_kind_is_unreadable_and_never_planned(
        lustre, tmp_path, junk):
    """`get` prints only a value of the tunable's kind in its safe range (exit 1 and why
    otherwise), and `plan` neither plans it nor writes a file a study could not restore."""
    env, data, root = lustre
    found = glob.glob(os.path.join(root, "**/osc/*/max_rpcs_in_flight"), recursive=True)
    assert found
    for f in found:
        with open(f, "w", encoding="utf-8", errors="surrogateescape") as fh:
            fh.write(junk + "\n")
    got = cli(["tune", "get", "osc.*.max_rpcs_in_flight", data], cwd=tmp_path, env=env)
    assert got.returncode == 1 and not got.stdout.strip(), got.stdout + got.stderr
    assert "not an int value" in got.stderr or "safe range" in got.stderr, got.stderr
    assert len(got.stderr.strip().splitlines()) == 1
    out = cli(["tune", "plan", data, "-o", "x.toml", "--param",
               "osc.*.max_rpcs_in_flight=8,16"], cwd=tmp_path, env=env)
    assert out.returncode == 2 and "cannot be read back" in out.stderr, out.stderr
    assert not os.path.exists(tmp_path / "x.toml")
    # without --param it is left out, said, and the others are planned
    out = cli(["tune", "plan", data, "-o", "y.toml", "--budget", "2h", "--run", "size=1MiB"],
              cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stderr
    assert "max_rpcs_in_flight left out: cannot be read back" in out.stderr
    text = (tmp_path / "y.toml").read_text()
    assert "max_rpcs_in_flight" not in text and "null" not in text


def plan(lustre, tmp_path, params, budget="10min"):
    env, data, _root = lustre
    args = ["tune", "plan", data, "-o", "t.toml", "--budget", budget, "--name", "tuned",
            "--results", str(tmp_path / "results"), "--run", "size=1MiB",
            "--run", "progress_interval=0"]
    for p in params:
        args += ["--param", p]
    out = cli(args, cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stderr
    return str(tmp_path / "t.toml")


@pytest.mark.skipif(not is_root(), reason="sets tunables only root may set (Lustre's osc.*, "
                    "vm.dirty_*); as a user `tune plan` refuses them: test_fresh_account.py")
def test_tune_plan_writes_a_study_that_study_plan_takes(lustre, tmp_path):
    env, _data, _root = lustre
    path = plan(lustre, tmp_path, ["osc.*.checksums=1,0", "osc.*.max_rpcs_in_flight=8,32",
                                   "vm.dirty_ratio=40,10"])
    with open(path) as fh:
        text = fh.read()
    assert "2^(3-1) fractional factorial" in text and "checksums = max_rpcs_in_flight x" \
        in text.replace("osc.", "")
    assert text.count("[[point]]") == 4  # 3 factors in 4 points
    out = cli(["study", "plan", path], cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stderr
    assert "4 points" in out.stdout


@pytest.mark.skipif(not is_root(), reason="sets tunables only root may set (Lustre's osc.*, "
                    "vm.dirty_*); as a user `tune plan` refuses them: test_fresh_account.py")
@pytest.mark.mpi
@pytest.mark.timeout(400)
def test_a_tune_study_runs_settles_records_and_restores(lustre, tmp_path):
    """Two node-scope settings through a whole study on 2 ranks: every run complete, each
    record holding per node the values asked, seen before and after; everything back."""
    env, _data, root = lustre
    path = plan(lustre, tmp_path, ["osc.*.checksums=1,0", "osc.*.max_dirty_mb=2000,64"],
                budget="35s")  # two rounds: what the test needs of a whole study
    out = mpirun(2, ["study", "run", path], cwd=tmp_path, timeout=360, env=env)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr
    recs = [read_record(p) for p in records_in(tmp_path / "results")]
    assert recs and all(r.status == "complete" for r in recs)
    for r in recs:
        s = r.client_counters[0]["delta"]["settings"]
        assert s["asked"] == s["before"] == s["after"]
        assert s["asked"]["osc.checksums"] == r.tags()["setting.osc.checksums"]
    assert osc(root, "checksums") == {"1"} and osc(root, "max_dirty_mb") == {"2000"}
    rep = cli(["tune", "report", path, "--format", "json"], cwd=tmp_path, env=env)
    assert rep.returncode == 0, rep.stderr
    got = json.loads(rep.stdout)
    assert {f["name"] for f in got["factors"]} == {"osc.checksums", "osc.max_dirty_mb"}
    assert all({"effect_percent", "ci_percent", "p", "verdict"} <= set(f)
               for f in got["factors"])
    table = cli(["tune", "report", path], cwd=tmp_path, env=env)
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()  # one line each, not one escaped line
    assert "\\n" not in table.stdout and lines[0].startswith("factor"), table.stdout
    assert lines[-1].startswith("confirm next:"), table.stdout
    assert [ln.split()[0] for ln in lines[1:3]] == [f["name"] for f in got["factors"]]
    assert any(ln.startswith("method: least squares on log(metric)") for ln in lines)
    assert sum(ln.startswith("recommended: ") for ln in lines) == 1
    # the study's page leads with tune's answer: what to set, what to confirm next
    page = cli(["page", path, "-o", "tune.html"], cwd=tmp_path, env=env, timeout=120)
    assert page.returncode == 0, page.stderr
    html_text = (tmp_path / "tune.html").read_text(encoding="utf-8")
    first = html_text.index("<section id=")
    assert html_text[first:].startswith('<section id="tune">'), html_text[first:first + 200]
    recommended = [ln for ln in lines if ln.startswith("recommended: ")][0]
    assert html.escape(recommended, quote=False) in html_text
    assert "confirm next:" in html_text
    # the table in the file's order of levels (checksums 1,0; max_dirty_mb 2000,64)
    cells = re.findall(r"<tr><td>([^<]*)</td><td>([^<]*)</td>", html_text)
    assert cells[:2] == [("1", "2000"), ("1", "64")], cells[:4]
    for bad in ("0", "nan", "1", "1.5"):  # a confidence as everywhere: a fraction below 1
        out = cli(["tune", "report", path, "--confidence", bad], cwd=tmp_path, env=env)
        assert out.returncode == 2 and "--confidence" in out.stderr, (bad, out.stderr)
    # the runs of one level gone: no effect is invented for it (it once said -100 %)
    for r, p in zip(recs, records_in(tmp_path / "results")):
        if r.tags()["setting.osc.max_dirty_mb"] == "64":
            os.remove(p)
    out = cli(["tune", "report", path], cwd=tmp_path, env=env)
    assert out.returncode == 2 and "osc.max_dirty_mb=64" in out.stderr, out.stdout + out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and "%" not in out.stdout


@pytest.mark.skipif(not is_root(), reason="sets tunables only root may set (Lustre's osc.*, "
                    "vm.dirty_*); as a user `tune plan` refuses them: test_fresh_account.py")
@pytest.mark.mpi
@pytest.mark.timeout(300)
def test_a_get_that_never_shows_the_value_is_exit_1_and_restored(lustre, tmp_path):
    """lctl says it set max_rpcs_in_flight=99 but the file keeps 8: the settle limit ends the
    study with one line naming the node and what it still shows; checksums are back."""
    env, _data, root = lustre
    path = plan(lustre, tmp_path, ["osc.*.checksums=1,0", "osc.*.max_rpcs_in_flight=8,99"],
                budget="1min")
    with open(path) as fh:
        text = fh.read().replace('scope = "node"', 'scope = "node"\nsettle = 2')
    os.chmod(path, 0o644)
    with open(path, "w") as fh:
        fh.write(text)
    out = mpirun(2, ["study", "run", path], cwd=tmp_path, timeout=240, env=env)
    assert out.returncode == 1, out.stdout[-2000:] + out.stderr
    line = [ln for ln in out.stderr.splitlines() if "settle" in ln]
    assert line and "osc.max_rpcs_in_flight=99" in line[0] and "still shows 8" in line[0]
    assert osc(root, "checksums") == {"1"} and osc(root, "max_rpcs_in_flight") == {"8"}


@pytest.mark.skipif(not is_root(), reason="needs root: /proc/sys/vm")
def test_kernel_writeback_is_set_and_read_back_on_the_real_proc_sys(tmp_path):
    path = "/proc/sys/vm/dirty_expire_centisecs"
    with open(path) as fh:
        original = fh.read().strip()
    new = "2900" if original != "2900" else "3100"
    try:
        out = cli(["tune", "set", "vm.dirty_expire_centisecs", new, str(tmp_path)],
                  cwd=tmp_path)
        assert out.returncode == 0, out.stderr
        got = cli(["tune", "get", "vm.dirty_expire_centisecs", str(tmp_path)], cwd=tmp_path)
        assert got.stdout.strip() == new
        bad = cli(["tune", "set", "vm.dirty_expire_centisecs", "5", str(tmp_path)],
                  cwd=tmp_path)
        assert bad.returncode == 2 and "safe range" in bad.stderr
    finally:
        with open(path, "w") as fh:
            fh.write(original + "\n")
    with open(path) as fh:
        assert fh.read().strip() == original


@pytest.mark.parametrize("k", list(range(1, 24)))
def test_the_design_is_balanced_orthogonal_and_about_k_plus_1_runs(k):
    d = design([f"f{i}" for i in range(k)])
    cols = list(zip(*d.rows))
    assert len(d.rows) <= max(2, k + 5) and len(d.rows) >= k + 1
    assert all(sum(c) == 0 for c in cols)
    assert all(sum(a * b for a, b in zip(x, y)) == 0 for x, y in itertools.combinations(cols, 2))
    assert len({tuple(r) for r in d.rows}) == len(d.rows)


def test_a_real_effect_whose_current_level_is_better_is_said_so():
    """Nothing to change is not 'no real effect' when the current level won."""
    rng = np.random.default_rng(7)
    x = np.array([[a, b] for a, b in itertools.product((-1, 1), repeat=2)] * 4)
    y = 100 - 40 * (x[:, 0] > 0) + rng.normal(0, 1, len(x))
    found = tune_report.effects(x, y, ["a", "b"])
    levels = {"a": ["1", "0"], "b": ["x", "y"]}
    chosen = tune_report.recommend(found, levels, True)
    assert chosen == {"a": "1", "b": "x"}
    text = tune_report.text(found, [], chosen, tune_report.confirmation(found, levels, chosen),
                            "aggregate")
    assert text.splitlines()[-1] == ("confirm next: nothing to change; the current level is "
                                     "the better one of a")


def test_effects_rank_the_factor_that_matters_first():
    rng = np.random.default_rng(7)
    d = design(["a", "b", "c"])
    x = np.array(d.rows * 4)
    y = 100 - 20 * (x[:, 1] > 0) + rng.normal(0, 1, len(x))  # b costs 20%
    found = tune_report.effects(x, y, ["a", "b", "c"])
    first = found["factors"][0]
    assert first["name"] == "b" and first["verdict"] == "real"
    assert -23 < first["effect_percent"] < -17
    assert all(f["verdict"] == "within noise" for f in found["factors"][1:])
    chosen = tune_report.recommend(found, {"a": ["1", "2"], "b": ["on", "off"],
                                           "c": ["x", "y"]}, True)
    assert chosen["b"] == "on"


# The dirty_ratio study as its runs were measured (medians, MB/s): the previous
# run's setting moved the rate as much as the run's own.
CARRY = {("20", "20"): 4104.0, ("20", "1"): 2846.0, ("1", "20"): 2157.0, ("1", "1"): 1906.0}


def _carry_study(order_name, seed, reps=8, noise=0.08):
    """Runs of a 2x2 tune study (dirty_ratio 20/1 with the carry-over above, a null second
    factor) in the given order: x, y, prev, blocks as tune report builds them."""
    from mpiwrite.answers import carryover
    from mpiwrite.study import order

    points = [{"r": a, "e": b} for a, b in itertools.product(("20", "1"), ("3000", "500"))]
    rng = np.random.default_rng(seed)
    xs, ys, prev, reps_of, last = [], [], [], [], None
    for p, rep in order.runs(order_name, points, reps, seed):
        cur = points[p]
        rate = CARRY[(last["r"] if last else cur["r"], cur["r"])]
        ys.append(rate * np.exp(noise * rng.standard_normal()))
        xs.append([-1 if cur["r"] == "20" else 1, -1 if cur["e"] == "3000" else 1])
        prev.append([0, 0] if last is None else [-1 if last["r"] == "20" else 1,
                                                 -1 if last["e"] == "3000" else 1])
        reps_of.append(rep)
        last = cur

    class Rec:
        def __init__(self, rep):
            self.rep = rep

        def tags(self):
            return {"study_repeat": str(self.rep)}

    blocks = carryover.blocks_of([Rec(r) for r in reps_of])
    return np.array(xs), np.array(ys), np.array(prev), blocks


@pytest.mark.parametrize("order_name", ["balanced", "random", "interleaved"])
def test_a_carry_over_as_large_as_the_effect_withholds_the_recommendation(order_name):
    """In every order, over 40 seeded studies: never 'recommended: dirty_ratio=1' (the
    slower value), and the report says why (the run before moved the rate as much)."""
    levels = {"dirty_ratio": ["20", "1"], "expire": ["3000", "500"]}
    for seed in range(40):
        x, y, prev, blocks = _carry_study(order_name, seed)
        found = tune_report.effects(x, y, ["dirty_ratio", "expire"], prev=prev, blocks=blocks)
        chosen = tune_report.recommend(found, levels, True)
        assert chosen["dirty_ratio"] == "20", (order_name, seed, found["factors"])
        ratio = next(f for f in found["factors"] if f["name"] == "dirty_ratio")
        assert ratio["verdict"] == "carry-over" and ratio["carryover_flagged"]
        assert ratio["carryover_percent"] < -25  # -42% in the table above
        text = tune_report.text(found, [], chosen,
                                tune_report.confirmation(found, levels, chosen), "aggregate",
                                levels)
        assert "carry-over: a run after dirty_ratio=1 against one after dirty_ratio=20" in text
        assert "no verdict for dirty_ratio" in text and "settle" in text
        assert "blocks" in found["method"] and "previous run" in found["method"]


def test_a_fixed_cycle_of_two_points_cannot_tell_the_factor_from_the_run_before():
    """Two points alternating: the previous level is minus the run's own, the two columns
    are one: 'cannot tell', never a verdict."""
    x = np.array([[-1], [1]] * 6)
    prev = -x.copy()
    prev[0] = 0  # the launch's first run: its run before is not known
    y = np.where(x[:, 0] > 0, 100.0, 50.0) * (1 + 0.01 * np.arange(12))
    found = tune_report.effects(x, y, ["a"], prev=prev)
    (f,) = found["factors"]
    assert f["verdict"].startswith("cannot tell (aliased"), f
    assert found["unknown_predecessor"] == 1 and "left out" in found["method"]
    chosen = tune_report.recommend(found, {"a": ["x", "y"]}, True)
    assert chosen == {"a": "x"}


def test_effects_are_ratios_whose_interval_never_passes_minus_100_percent():
    """Two runs a point, far apart: a linear fit gave [-166.8%, +95.2%]."""
    x = np.array([[-1], [1], [-1], [1]])
    y = np.array([1000.0, 100.0, 3000.0, 2500.0])
    found = tune_report.effects(x, y, ["a"])
    (f,) = found["factors"]
    lo, hi = f["ci_percent"]
    assert -100 < lo < f["effect_percent"] < hi and found["log"]


def test_the_p_values_are_corrected_for_the_number_of_factors():
    rng = np.random.default_rng(3)
    d = design(["a", "b", "c", "d"])
    x = np.array(d.rows * 3)
    y = 500 * np.exp(0.05 * rng.standard_normal(len(x)) + 0.04 * x[:, 0])
    found = tune_report.effects(x, y, ["a", "b", "c", "d"])
    raw = [f["p_uncorrected"] for f in found["factors"]]
    assert [f["p"] for f in found["factors"]] == pytest.approx(stats.holm(raw))
    assert "Holm" in found["method"]


def test_repetition_blocks_take_drift_out_of_the_noise():
    """The filesystem slowed 30% between two repetitions: with the blocks in the fit the
    interval is the run-to-run noise's, not the drift's."""
    from mpiwrite.answers import carryover

    rng = np.random.default_rng(5)
    x = np.array([[-1], [1], [1], [-1]] * 4)
    rep = np.repeat(np.arange(4), 4)
    y = 800 * np.exp(0.1 * x[:, 0] - 0.3 * rep + 0.02 * rng.standard_normal(16))

    class Rec:
        def __init__(self, r):
            self.r = r

        def tags(self):
            return {"study_repeat": str(self.r)}

    blocked = tune_report.effects(x, y, ["a"], blocks=carryover.blocks_of([Rec(r) for r in rep]))
    plain = tune_report.effects(x, y, ["a"])
    w = [f["factors"][0]["ci_percent"][1] - f["factors"][0]["ci_percent"][0]
         for f in (blocked, plain)]
    assert w[0] < w[1] / 3 and blocked["factors"][0]["verdict"] == "real"


def test_a_stalled_run_is_left_out_as_an_outlier_and_said_so():
    """Two runs at a third of the rate (a stall) among 64 runs 5% apart: left out of the fit
    and named; the 10% effect is still found.  Without stalls, no run is left out."""
    rng = np.random.default_rng(11)
    d = design(["a", "b"])
    x = np.array(d.rows * 16)
    y = 1000 * np.exp(0.05 * rng.standard_normal(len(x)) + np.log(1.1) * (x[:, 0] > 0))
    clean = tune_report.effects(x, y, ["a", "b"])
    assert clean["outliers"] == [] and "outliers" not in clean["method"]
    y[[5, 40]] /= 3
    found = tune_report.effects(x, y, ["a", "b"])
    assert found["outliers"] == [5, 40] and "2 run(s) left out as outliers" in found["method"]
    a = next(f for f in found["factors"] if f["name"] == "a")
    assert a["verdict"] == "real" and 5 < a["effect_percent"] < 16


@pytest.mark.skipif(not is_root(), reason="sets tunables only root may set (Lustre's osc.*, "
                    "vm.dirty_*); as a user `tune plan` refuses them: test_fresh_account.py")
def test_the_budget_a_refusal_asks_for_is_taken_and_buys_two_rounds(lustre, tmp_path):
    """`--budget: 5s fits 0 round(s) ...; give at least ...` once suggested `2m29s`, which
    --budget does not read; the suggestion is now seconds, and given back it plans two
    rounds (the launch counted too)."""
    env, data, _root = lustre
    args = ["tune", "plan", data, "-o", "t.toml", "--param", "osc.*.checksums=1,0",
            "--results", str(tmp_path / "results"), "--run", "size=1MiB", "--budget"]
    out = cli(args + ["5s"], cwd=tmp_path, env=env)
    assert out.returncode == 2, out.stderr
    least = re.search(r"give at least (\d+)s, or", out.stderr)
    assert least, out.stderr
    out = cli(args + [least.group(1) + "s"], cwd=tmp_path, env=env)
    assert out.returncode == 0 and " x 2 repetitions " in out.stdout, out.stdout + out.stderr
