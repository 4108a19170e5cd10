"""Every record carries a validity verdict and two hashes that `mpiwrite verify RECORD` derives
again (formats/validity.py): real runs on 2 ranks, records edited afterwards with h5py as a
hand or another tool would, and the commands a user types."""

import json
import shutil

import h5py
import pytest
from common import cli, mpirun, read_record, records_in

pytestmark = [pytest.mark.timeout(300), pytest.mark.mpi]

BASE = ["-s", "4M", "-b", "1M", "--progress-interval", "0", "--results", "r"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Three runs in one folder: two alike (valid), one whose ranks ran out of data long before
    their stonewall (not valid), and an IO500 preset's run with a short stonewall."""
    where = tmp_path_factory.mktemp("validity")
    made = {}
    for name, extra in (("a", []), ("b", []),
                        ("short", ["--stonewall", "5", "-t", "20", "--count", "4"]),
                        ("preset", ["--preset", "ior-easy-write", "--stonewall", "0.3",
                                    "-t", "5", "-s", "16G"])):
        got = mpirun(2, ["run", "d"] + BASE + ["--tag", f"which={name}"] + extra, cwd=where)
        assert got.returncode == 0, got.stderr
    for path in records_in(where / "r"):
        made[read_record(path).tags()["which"]] = path
    return where, made


def test_a_run_is_valid_and_verify_derives_both_hashes_again(runs):
    where, made = runs
    rec = read_record(made["a"])
    assert rec.attrs["validity"] == {"valid": True, "reasons": []}
    for name in ("config_hash", "result_hash"):
        assert str(rec.attrs[name]).startswith("v2:") and len(rec.attrs[name]) == 3 + 64
    got = cli(["verify", made["a"]], cwd=where)
    assert got.returncode == 0, got.stderr
    assert "ok: as mpiwrite wrote it" in got.stdout and rec.attrs["result_hash"] in got.stdout


def test_the_same_settings_have_the_same_config_hash_and_their_own_result_hash(runs):
    _where, made = runs
    a, b = read_record(made["a"]), read_record(made["b"])
    # the tags differ (which=a, which=b): tags are settings a user declares, so the config
    # hash covers them; the same run with the same tag has the same hash
    from mpiwrite.formats.validity import config_hash, decided_keys

    assert decided_keys(a).keys() == decided_keys(b).keys()
    assert {k: v for k, v in decided_keys(a).items() if "which" not in k} == \
        {k: v for k, v in decided_keys(b).items() if "which" not in k}
    assert a.attrs["config_hash"] != b.attrs["config_hash"]
    assert a.attrs["result_hash"] != b.attrs["result_hash"]
    assert config_hash(a) == a.attrs["config_hash"]


@pytest.mark.parametrize("edit, named", [
    ("figures", "result hash differs"),
    ("tag", "config hash differs"),
    ("verdict", "validity differs"),
    ("params", "result hash differs"),  # an option that is no key (--read)
    ("label", "result hash differs"),  # a tag that is a label (job=)
    ("waits", "result hash differs"),  # a figure kept as an attribute
    ("io500", "validity differs"),  # IO500's verdict forged
    ("covers", "hash_covers is missing or damaged"),
])
def test_a_record_edited_with_h5py_is_named_by_verify(runs, tmp_path, edit, named):
    where, made = runs
    copy = tmp_path / "edited.h5"
    shutil.copy(made["a"], copy)
    with h5py.File(copy, "r+") as f:
        if edit == "figures":  # a rate doubled, as a hand would
            it = f["iterations"][...]
            it["aggregate_MB_per_s"] *= 2
            f["iterations"][...] = it
        elif edit == "tag":
            f.attrs["tags"] = json.dumps({"which": "other"})
        elif edit == "params":
            f.attrs["params"] = json.dumps({**json.loads(f.attrs["params"]), "read": True})
        elif edit == "label":
            f.attrs["tags"] = json.dumps({**json.loads(f.attrs["tags"]), "job": "8"})
        elif edit == "waits":
            waits = json.loads(f.attrs["waits"])
            waits[0]["ranks"][0] = {"n": 1, "interval": 0.1, "seconds": 0.1,
                                     "counts": {"R": 1}}
            f.attrs["waits"] = json.dumps(waits)
        elif edit == "io500":
            f.attrs["validity"] = json.dumps({"valid": True, "reasons": [],
                                              "io500": {"valid": True, "reasons": []}})
        elif edit == "covers":
            del f.attrs["hash_covers"]
        else:
            f.attrs["validity"] = json.dumps({"valid": False, "reasons": ["planted"]})
    got = cli(["verify", str(copy)], cwd=where)
    assert got.returncode == 1, got.stdout + got.stderr
    assert named in got.stdout and "ok:" not in got.stdout
    if edit in ("figures", "verdict", "io500"):  # only what was changed is named
        assert not any(n in got.stdout for n in ("result hash differs", "config hash differs",
                                                 "validity differs") if n != named)
    # the original is untouched and still verifies
    assert cli(["verify", made["a"]], cwd=where).returncode == 0


def test_a_record_without_hashes_cannot_be_verified(runs, tmp_path):
    where, made = runs
    copy = tmp_path / "old.h5"
    shutil.copy(made["a"], copy)
    with h5py.File(copy, "r+") as f:
        del f.attrs["config_hash"], f.attrs["result_hash"]
    got = cli(["verify", str(copy)], cwd=where)
    assert got.returncode == 1 and "cannot be verified" in got.stdout


def test_a_stonewall_the_ranks_never_reached_is_not_valid_and_reports_leave_it_out(runs):
    where, made = runs
    verdict = read_record(made["short"]).attrs["validity"]
    assert verdict["valid"] is False
    assert any(r.startswith("stonewall shorter than asked") for r in verdict["reasons"])
    assert any(r.startswith("phase shorter than the stonewall") for r in verdict["reasons"])
    show = cli(["show", made["short"]], cwd=where)
    assert show.returncode == 0 and "validity: not valid: stonewall shorter" in show.stdout
    assert "validity: valid;" in cli(["show", made["a"]], cwd=where).stdout

    rep = cli(["report", "r", "--by", "which", "--format", "json"], cwd=where)
    assert rep.returncode == 0, rep.stderr
    shown = {row["keys"]["which"] for row in json.loads(rep.stdout)["rows"]}
    assert "short" not in shown and {"a", "b"} <= shown
    assert "1 not valid" in rep.stderr and "--include-invalid" in rep.stderr
    rep = cli(["report", "r", "--by", "which", "--format", "json", "--include-invalid"],
              cwd=where)
    assert "short" in {row["keys"]["which"] for row in json.loads(rep.stdout)["rows"]}

    # compare never pools it with valid runs unasked: B holds a valid and the invalid run
    cmp = cli(["compare", "which=a", "which=short,stonewall=5", "--in", "r"], cwd=where)
    assert cmp.returncode == 2 and "B: 1 run(s) not valid were left out" in cmp.stderr
    cmp = cli(["compare", "which=a", "which=short", "--in", "r", "--include-invalid"],
              cwd=where)
    assert cmp.returncode == 0, cmp.stderr


def test_the_page_says_which_runs_it_left_out_as_not_valid_and_why(runs):
    """The page's table counts what report counts: the run that never reached its stonewall
    is left out, named under the table with its reasons, and counted with
    --include-invalid (the page shows a window and validity where report does)."""
    where, made = runs
    short = read_record(made["short"])
    got = cli(["page", "r", "--by", "which", "-o", "p.html"], cwd=where)
    assert got.returncode == 0, got.stderr
    page = (where / "p.html").read_text()
    table = page.split('id="table"')[1].split("</section>")[0]
    assert "left out: " in table and "not valid" in table, table[-2000:]
    assert f"not valid: {short.run_id}: stonewall shorter than asked" in table
    assert "<td>short</td>" not in table and "<td>a</td>" in table
    got = cli(["page", "r", "--by", "which", "-o", "q.html", "--include-invalid"], cwd=where)
    assert got.returncode == 0, got.stderr
    table = (where / "q.html").read_text().split('id="table"')[1].split("</section>")[0]
    assert "<td>short</td>" in table and "left out" not in table


def test_an_io500_preset_is_valid_for_io500_only_with_its_300_s_stonewall(runs):
    where, made = runs
    verdict = read_record(made["preset"]).attrs["validity"]
    assert verdict["io500"]["valid"] is False
    assert "300s stonewall of ior-easy-write; this run's was 0.3s" in \
        verdict["io500"]["reasons"][-1]
    show = cli(["show", made["preset"]], cwd=where)
    assert "IO500: not valid" in show.stdout
    for name in ("a", "short"):  # no preset, no IO500 verdict
        assert "io500" not in read_record(made[name]).attrs["validity"]


def test_a_results_folder_verifies_each_record_and_a_missing_one_is_bad_input(runs):
    where, made = runs
    got = cli(["verify", "r"], cwd=where)
    assert got.returncode == 0, got.stdout + got.stderr
    assert got.stdout.count(": ok: as mpiwrite wrote it") == len(made)
    assert "IO500: not valid" in got.stdout  # the preset's verdict in its ok line
    got = cli(["verify", "nothing-here.h5"], cwd=where)
    assert got.returncode == 2 and "does not exist" in got.stderr


def test_hostile_figures_in_a_record_are_left_out_not_a_crash(runs, tmp_path):
    """Attributes that hold figures (steady, waits, stonewall, netcheck) are untrusted: nested
    past any limit, numbers of 400 digits, the wrong types.  show and report go on without
    them; verify names the record as changed."""
    where, made = runs
    (tmp_path / "h").mkdir()
    copy = tmp_path / "h" / "hostile.h5"
    shutil.copy(made["short"], copy)
    huge = int("9" * 400)
    with h5py.File(copy, "r+") as f:
        f.attrs["steady"] = "[" * 100000
        f.attrs["waits"] = json.dumps([{"iteration": 0, "ranks": [
            {"n": huge, "counts": {"R": huge}}, {"n": 1, "counts": {"R": 1000}}]}])
        f.attrs["stonewall"] = json.dumps([{"iteration": 0, "stonewall_MB_per_s": huge}])
        f.attrs["netcheck"] = json.dumps({"seconds": huge, "nodes": [{"in": {"1": huge}}]})
    for args in (["show", str(copy)], ["report", str(tmp_path / "h"), "--include-invalid"],
                 ["report", str(tmp_path / "h"), "--include-invalid", "--metric",
                  "stonewall"]):
        got = cli(args, cwd=where)
        assert "Traceback" not in got.stderr and got.returncode in (0, 2), (args, got.stderr)
    show = cli(["show", str(copy)], cwd=where).stdout
    assert "where the write streams' time went" not in show and "9999999999" not in show
    assert cli(["verify", str(copy)], cwd=where).returncode == 1


def test_a_verdict_of_many_reasons_keeps_twenty_and_verifies(tmp_path):
    """Every one of 22 iterations ends before its ramp: 22 reasons, kept as 19 and 'and 3
    more reasons' alike in the record and when derived again."""
    got = mpirun(2, ["run", "d", "-s", "256k", "-b", "64k", "-i", "22", "--ramp", "30",
                     "--progress-interval", "0", "--results", "r"], cwd=tmp_path)
    assert got.returncode == 0, got.stderr
    path = records_in(tmp_path / "r")[0]
    reasons = read_record(path).attrs["validity"]["reasons"]
    assert len(reasons) == 20 and reasons[-1] == "and 3 more reasons", reasons
    assert cli(["verify", path], cwd=tmp_path).returncode == 0
