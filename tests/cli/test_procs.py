"""procs.run_bounded: the one way mpiwrite runs an external command (real processes)."""

import os
import sys
import time

import pytest

from mpiwrite.procs import run_bounded

pytestmark = pytest.mark.timeout(60)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] != "Z"


def test_answer_and_exit_status_kept_apart():
    got = run_bounded(["sh", "-c", "echo out; echo err >&2; exit 3"], 10)
    assert (got.code, got.out, got.err, got.ok) == (3, b"out\n", b"err\n", False)
    assert got.why(10) == "exit 3"


def test_a_command_that_never_ends_is_killed_with_its_children(tmp_path):
    pidfile = tmp_path / "child"
    t0 = time.monotonic()
    got = run_bounded(["sh", "-c", f"sleep 300 & echo $! > {pidfile}; wait"], 1.0)
    assert time.monotonic() - t0 < 5
    assert got.timed_out and got.code is None and not got.ok
    assert "no answer within 1 s" == got.why(1.0)
    child = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(child), "the command's child outlived the time-out"


def test_a_command_that_never_stops_printing_is_ended_at_the_cap():
    t0 = time.monotonic()
    got = run_bounded(["yes"], 60, output_cap=4096)
    assert time.monotonic() - t0 < 5, "the cap, not the time limit, ended it"
    assert got.overflowed and len(got.out) == 4096 and not got.ok


def test_a_child_holding_the_output_open_does_not_hold_the_caller(tmp_path):
    """`get = "sh -c 'sleep 200 & cat val'"`: the value is printed, the shell exits, its
    child keeps stdout open; the answer comes at once and the child is ended."""
    (tmp_path / "val").write_text("42\n")
    t0 = time.monotonic()
    got = run_bounded(["sh", "-c", f"sleep 200 & cat {tmp_path / 'val'}"], 60)
    assert time.monotonic() - t0 < 5
    assert got.ok and got.out == b"42\n"


def test_a_command_that_closes_its_output_and_goes_on_is_still_bounded():
    t0 = time.monotonic()
    got = run_bounded(["sh", "-c", "exec >&- 2>&-; sleep 100"], 1.0)
    assert got.timed_out and time.monotonic() - t0 < 5


def test_missing_program_and_input():
    got = run_bounded(["/nonexistent/program"], 5)
    assert got.missing and got.why(5) == "command not found"
    assert run_bounded([sys.executable, "-c", "import sys; print(sys.stdin.read()[::-1])"],
                       20, input=b"abc").out == b"cba\n"


def test_stdin_is_never_the_terminal():
    got = run_bounded([sys.executable, "-c", "import sys; print(repr(sys.stdin.read()))"], 20)
    assert got.out == b"''\n"


def test_merged_streams_keep_their_order():
    got = run_bounded(["sh", "-c", "echo a; echo b >&2; echo c"], 10, merge_stderr=True)
    assert got.out == b"a\nb\nc\n" and got.err == b""


def test_a_study_get_that_never_stops_printing_is_one_bounded_answer():
    from mpiwrite.study.settings import Settings

    t0 = time.monotonic()
    code, text = Settings([], leader=True)._run(["yes"], lines=True)
    assert time.monotonic() - t0 < 5
    assert code != 0 and "printed more than" in text


def test_a_study_get_whose_child_keeps_stdout_open_answers_at_once(tmp_path):
    from mpiwrite.study.settings import Settings

    (tmp_path / "val").write_text("orig\n")
    t0 = time.monotonic()
    code, text = Settings([], leader=True)._run(
        ["sh", "-c", f"sleep 200 & cat {tmp_path / 'val'}"], lines=True)
    assert time.monotonic() - t0 < 5
    assert (code, text) == (0, "orig")
