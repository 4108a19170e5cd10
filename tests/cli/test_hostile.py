"""Names and files from someone else: terminal escapes, copies of runs, odd paths and options."""

import json
import os
import shutil
import subprocess

import h5py
import pytest
import synth
from common import MPIWRITE, clean_env, cli, is_root

pytestmark = pytest.mark.timeout(60)
EVIL = "\x1b]0;owned\x07\x1b[2J\nfake line"
SHOWN = "\\x1b]0;owned\\x07\\x1b[2J\\nfake line"


def _main(args, capsys):
    from mpiwrite.cli import main as cli_mod

    with pytest.raises(SystemExit) as info:
        cli_mod.main(list(args))
    out = capsys.readouterr()
    return info.value.code, out.out, out.err


def _raw_controls(text):
    text = text.replace("\r\n", "\n")  # CSV line ends
    return [c for c in text if (ord(c) < 32 and c != "\n") or 0x7F <= ord(c) <= 0x9F]


# -- terminal escapes ---------------------------------------------------------------------------

def test_run_header_and_summary_escape_the_target_name(tmp_path):
    out = cli(["run", "tgt" + EVIL, "-s", "64k", "-b", "64k", "--results", "r"], cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert not _raw_controls(out.stdout + out.stderr)
    assert "tgt" + SHOWN in out.stdout
    assert not any(ln.startswith("fake line") for ln in out.stdout.splitlines())


@pytest.fixture
def evil_records(tmp_path):
    """Two records whose run id, host, tags, command line and errors hold escapes."""
    d = tmp_path / "evil"
    d.mkdir()
    for i, v in enumerate((500.0, 520.0)):
        path = d / f"r{i}.h5"
        synth.make(path, [v, v + 2], f"id{i}", tags={"cfg": "x"})
        with h5py.File(path, "a") as h5:
            h5.attrs["run_id"] = f"id{i}{EVIL}"
            h5.attrs["command_line"] = f"mpiwrite run {EVIL}"
            h5.attrs["tags"] = json.dumps({"cfg": "x", "evil": EVIL})
            h5.attrs["warnings"] = json.dumps([EVIL])
            dt = h5["nodes"].dtype
            tbl = h5["nodes"][()]
            facts = json.loads(tbl["facts_json"][0])
            facts["host"] = "n1" + EVIL
            facts["kernel"] = EVIL
            tbl["facts_json"][0] = json.dumps(facts)
            del h5["nodes"]
            h5.create_dataset("nodes", data=tbl, dtype=dt)
            del h5["errors"]
            h5.create_dataset("errors", data=[json.dumps(
                {"iteration": 0, "rank": 1, "host": EVIL, "phase": "write", "path": EVIL,
                 "message": EVIL})], dtype=h5py.string_dtype())
    return d


@pytest.mark.parametrize("args", [
    ["show", "{d}/r0.h5"], ["show", "id0", "--in", "{d}"],
    ["report", "{d}", "--by", "evil,run_id"],
    ["report", "{d}", "--by", "evil", "--format", "markdown"],
    ["report", "{d}", "--by", "evil", "--format", "csv"],
    ["report", "{d}", "--by", "evil", "--format", "json"],
    ["compare", "{d}/r0.h5", "{d}/r1.h5"],
    ["compare", "cfg=x", "cfg=x", "--in", "{d}"],
    ["report", "{d}", "--by", "evil", "--baseline", "evil=" + EVIL],
], ids=["show-file", "show-id", "report", "markdown", "csv", "json", "compare", "compare-filter",
        "bad-baseline"])
def test_crafted_strings_are_escaped_everywhere(evil_records, capsys, args):
    code, out, err = _main([a.format(d=evil_records) for a in args], capsys)
    assert not _raw_controls(out + err), (out, err)
    assert "Traceback" not in err
    if args[0] == "show":
        assert code == 0 and SHOWN in out and "fake line" not in out.replace(SHOWN, "")


def test_markdown_escapes_the_column_separator(tmp_path, capsys):
    d = tmp_path / "rec"
    d.mkdir()
    synth.make(d / "a.h5", [500.0, 510.0], "a", tags={"q": "a|b"})
    synth.make(d / "b.h5", [400.0, 410.0], "b", tags={"q": "c"})
    code, out, err = _main(["report", str(d), "--by", "q", "--format", "markdown"], capsys)
    assert code == 0, err
    rows = [r for r in out.splitlines() if r.startswith("|")]  # the notes follow the table
    assert "| a\\|b |" in out
    assert len({r.replace("\\|", "").count("|") for r in rows}) == 1


def test_compare_json_has_null_not_nan(tmp_path, capsys):
    d = tmp_path / "rec"
    d.mkdir()
    synth.make(d / "a.h5", [500.0], "a", tags={"c": "a"})  # one sample: no interval
    synth.make(d / "b.h5", [400.0], "b", tags={"c": "b"})
    code, out, err = _main(["compare", "c=a", "c=b", "--in", str(d), "--json"], capsys)
    assert code == 0, err
    doc = json.loads(out, parse_constant=lambda c: pytest.fail(f"bare {c} in JSON"))
    assert doc["a"]["ci_lo_MB_per_s"] is None and "NaN" not in out


# -- the same run counted once ----------------------------------------------------------------

@pytest.fixture
def three_runs(tmp_path):
    d = tmp_path / "rec"
    d.mkdir()
    for i, (a, b) in enumerate(((500, 520), (505, 495), (490, 530))):
        synth.make(d / f"a{i}.h5", [a, a + 3], f"a{i}", tags={"cfg": "a"})
        synth.make(d / f"b{i}.h5", [b, b - 4], f"b{i}", tags={"cfg": "b"})
    shutil.copytree(d, tmp_path / "copy")
    return d


@pytest.mark.parametrize("spellings", [["rec", "./rec", "rec/", "{abs}"], ["rec", "copy"],
                                       ["rec/*.h5", "copy/a0.h5", "rec"]])
def test_runs_named_twice_or_copied_count_once(three_runs, tmp_path, spellings):
    names = [s.format(abs=str(three_runs)) for s in spellings]
    out = cli(["report", *names, "--by", "cfg", "--format", "json", "--unit", "iteration"],
              cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    rows = {r["keys"]["cfg"]: r for r in json.loads(out.stdout)["rows"]}
    assert rows["a"]["runs"] == 3 and rows["a"]["n"] == 6
    assert rows["b"]["runs"] == 3 and rows["b"]["n"] == 6


def test_records_that_claim_one_run_id_and_differ_are_a_conflict_not_counted_once(tmp_path):
    """A second record with a run's id (planted, or a copy taken while the run
    wrote) was "counted once", and the one kept was whichever said complete."""
    (tmp_path / "r").mkdir()
    synth.make(tmp_path / "r" / "real.h5", [500, 503], "a0", tags={"cfg": "a"})
    synth.make(tmp_path / "r" / "planted.h5", [900, 903], "a0", tags={"cfg": "a"})
    synth.make(tmp_path / "r" / "other.h5", [510, 512], "a1", tags={"cfg": "a"})
    out = cli(["report", "r", "--by", "cfg", "--format", "json", "--unit", "iteration"],
              cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    said = [ln for ln in out.stderr.splitlines() if "conflict" in ln]
    assert len(said) == 1 and "real.h5" in said[0] and "planted.h5" in said[0], out.stderr
    doc = json.loads(out.stdout)
    assert doc["rows"][0]["runs"] == 1 and doc["duplicate_records"] == 0  # a1 alone
    shown = cli(["show", "a0", "--in", "r"], cwd=tmp_path)
    assert shown.returncode == 2 and "conflict" in shown.stderr, shown.stderr


def test_compare_verdict_does_not_change_with_copies(three_runs, tmp_path, capsys):
    once = _main(["compare", "cfg=a", "cfg=b", "--in", str(three_runs), "--json", "--unit",
                  "iteration"], capsys)
    many = _main(["compare", "cfg=b", "cfg=a", "--in", str(three_runs), "--in",
                  str(tmp_path / "copy"), "--in", str(three_runs) + "/", "--json", "--unit",
                  "iteration"], capsys)
    a, b = json.loads(once[1]), json.loads(many[1])
    assert a["a"]["n"] == b["b"]["n"] == 6 and a["real"] == b["real"]
    assert a["p_value"] == pytest.approx(b["p_value"])


# -- selecting, options and paths ----------------------------------------------------------------

def test_tag_values_with_comma_and_equals_can_be_selected(tmp_path, capsys):
    d = tmp_path / "rec"
    d.mkdir()
    for i in range(2):
        synth.make(d / f"x{i}.h5", [500.0 + i, 505.0], f"x{i}", tags={"q": 'x,"y"=1'})
        synth.make(d / f"z{i}.h5", [300.0 + i, 305.0], f"z{i}", tags={"q": "z"})
    code, out, err = _main(["compare", 'q="x,\\"y\\"=1"', "q=z", "--in", str(d), "--json"],
                           capsys)
    assert code == 0, err
    assert json.loads(out)["a"]["mean_MB_per_s"] == pytest.approx(502.75, abs=0.1)
    code, out, err = _main(["report", str(d), "--by", "q", "--baseline", 'q=x\\,\\"y\\"=1',
                            "--format", "json"], capsys)
    assert code == 0, err
    assert {r["keys"]["q"]: r["verdict"] for r in json.loads(out)["rows"]}['x,"y"=1'] == "base"


@pytest.mark.parametrize("baseline,needle", [("kernel", "--baseline"), ("a=1", "--baseline"),
                                             ('q="x', "--baseline")])
def test_baseline_errors_name_the_option(three_runs, capsys, baseline, needle):
    code, out, err = _main(["report", str(three_runs), "--by", "cfg", "--baseline", baseline],
                           capsys)
    assert code == 2 and err.startswith(f"mpiwrite: error: {needle}"), err


def test_folder_with_glob_characters_is_taken_literally(tmp_path, capsys):
    d = tmp_path / "res[1]"
    d.mkdir()
    synth.make(d / "a.h5", [500.0, 510.0], "a")
    code, out, err = _main(["report", str(d), "--by", "ranks"], capsys)
    assert code == 0, err


@pytest.mark.root
@pytest.mark.skipif(not is_root(), reason="needs root to drop capabilities")
def test_permission_denied_is_said_as_such(tmp_path):
    d = tmp_path / "r"
    d.mkdir(mode=0o700)
    synth.make(d / "a.h5", [500.0, 510.0], "a")
    os.chown(d, 65534, 65534)
    out = subprocess.run(["setpriv", "--bounding-set=-dac_override,-dac_read_search", "--",
                          MPIWRITE, "report", "r"], cwd=tmp_path, capture_output=True,
                         text=True, timeout=60, env=clean_env())
    assert out.returncode == 2 and "permission denied" in out.stderr, out.stderr


@pytest.mark.parametrize("args,needle", [
    (["show", "2026"], "--in"),
    (["show", "rec"], "is a folder"),
    (["compare", "cfg=a", "cfg=b"], "--in"),
    (["compare", "nothing", "cfg=b"], "A: 'nothing' is neither"),
    (["report", "nope"], "'nope' does not exist"),
])
def test_clear_messages_without_in(tmp_path, capsys, monkeypatch, args, needle):
    (tmp_path / "rec").mkdir()
    monkeypatch.chdir(tmp_path)
    code, out, err = _main(args, capsys)
    assert code == 2 and needle in err and len(err.splitlines()) == 1, err


@pytest.mark.parametrize("where", ["nodir/x.{ext}", "adir.{ext}", "/proc/x.{ext}"])
@pytest.mark.parametrize("cmd", ["plot", "jobscript"])
def test_output_file_in_a_bad_place_is_exit_2(tmp_path, capsys, monkeypatch, where, cmd):
    (tmp_path / "rec").mkdir()
    synth.make(tmp_path / "rec" / "a.h5", [500.0, 510.0], "a")
    monkeypatch.chdir(tmp_path)
    out = where.format(ext="png" if cmd == "plot" else "sh")
    if out.startswith("adir"):
        os.mkdir(out)
    args = (["plot", "scaling", "rec", "-o", out] if cmd == "plot"
            else ["jobscript", "-o", out, "--", "/scratch/x"])
    code, stdout, err = _main(args, capsys)
    assert code == 2 and err.startswith("mpiwrite: error: -o:"), err
    assert len(err.splitlines()) == 1


@pytest.mark.parametrize("kind", ["fifo", "/dev/urandom", "/dev/zero", "missing", "binary"])
def test_tag_file_that_is_not_a_text_file_is_exit_2_at_once(tmp_path, kind):
    path = {"fifo": str(tmp_path / "fifo"), "missing": "missing.tags",
            "binary": str(tmp_path / "bin")}.get(kind, kind)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "binary":
        (tmp_path / "bin").write_bytes(b"a=\xff\xfe")
    out = cli(["run", "d", "-s", "64k", "--tag-file", path], cwd=tmp_path, timeout=30)
    assert out.returncode == 2 and out.stderr.startswith("mpiwrite: error: --tag-file"), out
    assert not (tmp_path / "d").exists()
