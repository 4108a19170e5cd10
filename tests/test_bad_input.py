"""Bad input: exit 2, one line naming the option, no traceback, nothing created on disk."""

import os
import subprocess

import pytest
from common import MPIWRITE, clean_env, cli, mpirun

CASES = [
    (["-s", "1Q"], "--size"),
    (["-s", "-5M"], "--size"),
    (["-s", "0"], "--size"),
    (["-s", "1.5.3G"], "--size"),
    (["-s", ""], "--size"),
    (["-b", "1X"], "--block-size"),
    (["-b", "16"], "--block-size"),
    (["-b", "2M", "-s", "1M"], "--block-size"),
    (["--direct", "-b", "1000", "-s", "1M"], "--block-size"),
    (["--direct", "-b", "512", "-s", "1000"], "--size"),
    (["-t", "0"], "--time"),
    (["-t", "-5"], "--time"),
    (["-t", "5x"], "--time"),
    (["-i", "0"], "--iterations"),
    (["-i", "-1"], "--iterations"),
    (["--layout", "weird"], "--layout"),
    (["--layout", "shared", "-t", "5"], "--layout"),
    (["--count", "0"], "--count"),
    (["--count", "4", "-s", "1M"], "--count"),
    (["--tag", "novalue"], "--tag"),
    (["--tag", "a=1", "--tag", "a=2"], "--tag"),
    (["--tag", "a=x\ny"], "--tag"),
    (["--tag", "1bad=x"], "--tag"),
    (["--tag", "kernel=x"], "--tag"),
    (["--tag-file", "no-such-file"], "--tag-file"),
    (["--no-fsync", "--fsync-every", "2"], "--fsync-every"),
    (["--fsync-every", "-1"], "--fsync-every"),
    (["--delay", "-1"], "--delay"),
    (["--sample-interval", "0"], "--sample-interval"),
    (["--progress-interval", "-1"], "--progress-interval"),
    (["--timeout", "-5"], "--timeout"),
    (["--timeout", "5", "-t", "10"], "--timeout"),
    (["--files-per-dir", "0"], "--files-per-dir"),
    (["--verify-shift", "-1"], "--verify-shift"),
    (["--results", ""], "--results"),
    (["--results", os.fsdecode(b"rr\xfe")], "--results"),  # a record keeps it as text
    (["--json", os.fsdecode(b"j\xfe.json")], "--json"),
    (["--bogus"], "--bogus"),
    (["/"], "TARGET"),
    (["a-file"], "TARGET"),
    (["missing-parent/target"], "TARGET"),
]


@pytest.mark.parametrize("args,option", CASES, ids=[" ".join(a).encode("ascii", "backslashreplace")
                                                    .decode() for a, _ in CASES])
def test_bad_input_exits_2_with_one_line(tmp_path, args, option):
    (tmp_path / "a-file").write_text("not a directory")
    before = sorted(os.listdir(tmp_path))
    out = cli(["run"] + args, cwd=tmp_path)
    assert out.returncode == 2, (out.stdout, out.stderr)
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert option in lines[0] and lines[0].startswith("mpiwrite: error:")
    assert "Traceback" not in out.stderr and out.stdout == ""
    assert sorted(os.listdir(tmp_path)) == before  # nothing created


def test_non_utf8_tag_value(tmp_path):
    out = subprocess.run([MPIWRITE.encode(), b"run", b"--tag", b"k=\xff\xfe"], cwd=tmp_path,
                         capture_output=True, timeout=60, env=clean_env())
    assert out.returncode == 2
    assert b"--tag" in out.stderr and b"UTF-8" in out.stderr
    assert os.listdir(tmp_path) == []


@pytest.mark.mpi
@pytest.mark.timeout(120)
def test_a_results_name_that_is_not_utf8_is_refused_before_any_data(tmp_path):
    """It once ran, then said "record not saved: ... 'utf-8' codec can't encode ..."."""
    out = mpirun(2, ["run", "d", "-s", "1M", "--results", os.fsdecode(b"rr\xfe")], tmp_path)
    assert out.returncode == 2, out.stderr
    lines = [ln for ln in out.stderr.splitlines() if ln.startswith("mpiwrite:")]
    assert lines == ["mpiwrite: error: --results: the name is not UTF-8"], out.stderr
    assert os.listdir(tmp_path) == []


def test_debug_shows_the_traceback(tmp_path):
    out = cli(["--debug", "run", "-s", "1Q"], cwd=tmp_path)
    assert out.returncode == 2 and "Traceback" in out.stderr


def test_help_and_version_need_no_mpi(tmp_path):
    out = cli(["--help"], cwd=tmp_path)
    assert out.returncode == 0 and "run" in out.stdout
    out = cli(["run", "--help"], cwd=tmp_path)
    assert out.returncode == 0 and "--block-size" in out.stdout
    assert cli(["--version"], cwd=tmp_path).returncode == 0


@pytest.mark.parametrize("typed,said", [
    ("--bs", "Did you mean '--block-size'?"),  # fio's and dd's name
    ("--transfer-size", "Did you mean '--block-size'?"),  # IOR's
    ("--runtime", "Did you mean '--time'?"),
    ("--numjobs", "the number of writers is the launch's: mpiexec -n N")])
def test_other_tools_option_names_are_answered_with_mpiwrites(tmp_path, typed, said):
    out = cli(["run", typed, "4M"], cwd=tmp_path)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.count("\n") == 1 and said in out.stderr, out.stderr
    assert "--json" not in out.stderr  # click's own guess for --bs was --json or --size
    assert os.listdir(tmp_path) == []


def test_a_known_other_name_is_not_offered_where_the_command_lacks_the_option(tmp_path):
    out = cli(["report", "--runtime", "5"], cwd=tmp_path)
    assert out.returncode == 2 and "--time" not in out.stderr, out.stderr
