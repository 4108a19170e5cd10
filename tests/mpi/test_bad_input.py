"""Bad input: exit 2, one line naming the option, no traceback, nothing created on disk."""

import os
import subprocess

import pytest
from common import MPIEXEC, MPIWRITE, bounded, clean_env, cli, mpirun, only_record

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


# Environment, launcher and number cases: one line and the right exit, never a traceback;
# numbers only in ASCII digits and within bounds.

ARABIC_12 = "\u0661\u0662"  # '١٢': int() takes it as 12
ARABIC_10 = "\u0661\u0660"


def _one_line(out):
    assert "Traceback" not in out.stderr, out.stderr
    lines = [ln for ln in out.stderr.splitlines() if ln.startswith("mpiwrite:")]
    assert len(lines) == 1, out.stderr
    return lines[0]


@pytest.mark.parametrize("args", [
    ["run", "d", "-s", "64k", "-b", "32k", "-i", ARABIC_12],
    ["run", "d", "-b", "32k", "--count", ARABIC_12],
    ["run", "d", "-s", "64k", "-b", "32k", "--fsync-every", ARABIC_12],
    ["run", "d", "-s", "64k", "-b", "32k", "--files-per-dir", ARABIC_12],
    ["run", "d", "-s", "64k", "-b", "32k", "-i", "1_0"],
    ["report", ".", "--warmup", ARABIC_12],
    ["jobscript", "--nodes", ARABIC_10],
    ["jobscript", "--nodes", "1_0"],
    ["jobscript", "--nodes", "1,99999999999999999999"],
    ["jobscript", "--ntasks-per-node", ARABIC_10],
    ["jobscript", "--repeat", ARABIC_10],
    ["jobscript", "--time-limit", ARABIC_10],
    ["jobscript", "--ntasks-per-node", "99999999999999999999"],
    ["jobscript", "--repeat", "99999999999999999999"],
    ["jobscript", "--", "d", "--"],
    ["jobscript", "--", "d", "--results=-x"],
    ["jobscript", "--results=--help"],
], ids=lambda a: " ".join(a[:1] + a[-2:]))
def test_odd_numbers_and_arguments_are_exit_2(tmp_path, args):
    out = cli(args, cwd=tmp_path)
    assert out.returncode == 2, (out.stdout, out.stderr)
    _one_line(out)
    assert not (tmp_path / "results").exists()


def test_plain_numbers_still_work(tmp_path):
    out = cli(["jobscript", "--nodes", "1,2", "--ntasks-per-node", "4", "--repeat", "3",
               "--time-limit", "1-00:30", "--", "d", "-s", "1M"], cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "#SBATCH --time=1-00:30" in out.stdout
    order = next(ln for ln in out.stdout.splitlines() if ln.startswith("ORDER=("))
    assert order.count("'") == 6  # three repetitions of the two node counts


def test_env_of_a_missing_path_is_exit_2(tmp_path):
    out = cli(["env", "/nonexistent/really"], cwd=tmp_path)
    assert out.returncode == 2 and "does not exist" in _one_line(out)


@pytest.mark.parametrize("args", [["run", "-s", "1M"], ["env"], ["jobscript", "--", "d"],
                                  ["report", "r"],
                                  pytest.param(["MX", "run", "-s", "1M"], marks=pytest.mark.mpi)])
def test_a_removed_working_folder_is_one_line(tmp_path, args):
    gone = tmp_path / "gone"
    gone.mkdir()
    launch = [MPIWRITE]
    if args[0] == "MX":  # two ranks under mpiexec, started in the removed folder
        if MPIEXEC is None:
            pytest.skip("no mpiexec")
        launch, args = [MPIEXEC, "-n", "2", MPIWRITE], args[1:]
    proc = subprocess.run(["sh", "-c", 'cd "$1" && rmdir "$1" && shift && exec "$@"', "sh",
                           str(gone)] + launch + args, capture_output=True, text=True,
                          timeout=60, env=clean_env())
    assert proc.returncode == 2, proc.stderr
    assert "current folder was removed" in _one_line(proc)


@pytest.mark.parametrize("redirect, args, code", [
    (">&-", ["run", "d", "-s", "64k", "-b", "64k", "--results", "r"], 0),
    ("2>&-", ["run", "d", "-s", "1Q"], 2),
    ("2>&-", ["report", "/x"], 2),
    (">&- 2>&-", ["run", "d", "-s", "64k", "-b", "64k", "--results", "r"], 0),
])
def test_closed_standard_streams(tmp_path, redirect, args, code):
    # the redirection closes the stream for mpiwrite only; the shell's echo still reaches us
    proc = subprocess.run(["sh", "-c", f'"$@" {redirect}; echo "rc=$?"', "sh", MPIWRITE]
                          + args, capture_output=True, text=True, timeout=60,
                          env=clean_env(), cwd=tmp_path, stdin=subprocess.DEVNULL)
    assert f"rc={code}" in proc.stdout, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr and "AttributeError" not in proc.stderr
    if code == 0:
        rec = only_record(str(tmp_path / "r"))
        assert rec is not None
    if redirect == ">&-":
        assert "standard output is closed" in _one_line(proc)


@pytest.mark.mpi
@pytest.mark.parametrize("lib", ["/nonexistent", "libz.so.1", "libc.so.6", "ulimit -v 150000"])
@pytest.mark.parametrize("ranks", [1, 2])
def test_an_unloadable_mpi_library_is_one_line(tmp_path, lib, ranks):
    if MPIEXEC is None:
        pytest.skip("no mpiexec")
    if lib.startswith("ulimit"):  # too little address space to map the library at all
        out = mpirun(ranks, ["run", "d", "-s", "1M"], cwd=str(tmp_path), timeout=60,
                     pre=["bash", "-c", f'{lib}; exec "$@"', "x"])
    else:
        out = mpirun(ranks, ["run", "d", "-s", "1M"], cwd=str(tmp_path), timeout=60,
                     env={"MPI4PY_LIBMPI": lib})
    assert out.returncode == 2, out.stderr
    # under ulimit -v the MPI library may still load, and then numpy (node leaders) cannot:
    # OpenBLAS would end the process from C, so the limit is refused before, as one line
    expect = ("cannot load the MPI library", "address space: the limit (ulimit -v)") \
        if lib.startswith("ulimit") else ("cannot load the MPI library",)
    assert any(e in _one_line(out) for e in expect), out.stderr
    assert not (tmp_path / "d").exists()


@pytest.mark.mpi
def test_hostnames_with_one_crc32_are_two_nodes(tmp_path):
    if MPIEXEC is None:
        pytest.skip("no mpiexec")
    args = [MPIWRITE, "run", "d", "-s", "64k", "-b", "64k", "--results", "r"]
    cmd = [MPIEXEC, "-n", "1", "env", "MPIWRITE_HOSTNAME=node3985819", *args, ":",
           "-n", "1", "env", "MPIWRITE_HOSTNAME=node4420602", *args]
    out = bounded(cmd, 120, cwd=str(tmp_path), env=clean_env())
    assert out.returncode == 0, out.stderr
    assert "ranks 2 on 2 nodes" in out.stdout, out.stdout


@pytest.mark.mpi
@pytest.mark.parametrize("hang_up_rank_1", [False, True], ids=["complete", "SIGHUP-rank-1"])
def test_json_on_stdout_is_not_mixed_with_what_libraries_print(tmp_path, hang_up_rank_1):
    """`run ... --json -` with the bundled UCX logging (UCX_LOG_LEVEL=debug: it logs to
    stdout): once 1,300 "UCX DEBUG" lines followed the JSON on stdout.  Now stdout is the JSON
    alone; what libraries print goes to stderr."""
    import json
    import os
    import signal

    from common import rank_pids, wait, wait_for_bytes

    if MPIEXEC is None:
        pytest.skip("no mpiexec")
    size = "2G" if hang_up_rank_1 else "1M"
    proc = subprocess.Popen(
        [MPIEXEC, "-n", "2", MPIWRITE, "run", "d", "-s", size, "-b", "64k", "--fsync-every",
         "16", "--results", "r", "--json", "-", "--progress-interval", "0"], cwd=tmp_path,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL,
        env=clean_env({"UCX_LOG_LEVEL": "debug"}), start_new_session=True)
    try:
        if hang_up_rank_1:
            pids = rank_pids(tmp_path, 2)
            wait_for_bytes(tmp_path / "d", 2**20)
            os.kill(pids[1], signal.SIGHUP)
        rc, out, err = wait(proc, 90)
    finally:
        os.killpg(proc.pid, signal.SIGKILL) if proc.poll() is None else None
    if "UCX" not in out + err:
        pytest.skip("this MPI library does not use UCX")
    assert rc == (129 if hang_up_rank_1 else 0), err[-2000:]
    doc = json.loads(out)  # the JSON and nothing else
    assert doc["status"] == ("interrupted" if hang_up_rank_1 else "complete")
    assert "UCX" in err


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
