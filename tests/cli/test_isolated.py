"""Crafted records cannot crash a command: libhdf5 reads a record that is not
served from the index only in a worker process first (records/sandbox.py).

The fixtures are bit-flipped copies of an 18 KB synthetic record (tests/synth.py), found by
fuzzing with a fixed seed: one that makes libhdf5 segfault while the run-level part is read
(the root attributes), one that crashes it while the whole record is read (a table's data;
its types are sound, so no check refuses it before the read), and one on which libhdf5
never returns.  The whole-read one was found again once the
readers checked the tables' types first: the earlier one was refused by that check."""

import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
import synth
from common import FIXTURES, cli

from mpiwrite.records import sandbox as isolated

pytestmark = pytest.mark.timeout(180)
CRAFTED = str(FIXTURES / "crafted")
SEGFAULTS = os.path.join(CRAFTED, "segfaults-runlevel.h5")
WHOLE = os.path.join(CRAFTED, "crashes-whole-read.h5")
HANGS = os.path.join(CRAFTED, "hangs-libhdf5.h5")
READ = ("import sys\nfrom mpiwrite.records import h5 as records, runlevel\n"
        "try:\n    {}(sys.argv[1])\nexcept Exception:\n    pass\n")


def folder_with(tmp_path, bad):
    """3 good records and a crafted one, read first (named so): the workers must go on."""
    r = tmp_path / "r"
    r.mkdir()
    for i in range(3):
        synth.make(r / f"good{i}.h5", [800.0 + i, 810.0, 790.0], f"good{i}",
                   tags={"config": "A"})
    shutil.copy(bad, r / "a-bad.h5")
    return r


@pytest.mark.parametrize("fixture, reader", [(SEGFAULTS, "runlevel._read"),
                                             (WHOLE, "records._read")])
def test_the_fixtures_really_crash_libhdf5_in_the_reading_process(tmp_path, fixture, reader):
    out = subprocess.run([sys.executable, "-c", READ.format(reader), fixture], cwd=tmp_path,
                         capture_output=True, timeout=60)
    assert out.returncode < 0, (out.returncode, out.stderr[-300:])


def test_report_names_a_record_that_crashes_libhdf5_and_reports_the_good_ones(tmp_path):
    r = folder_with(tmp_path, SEGFAULTS)
    bad = str(r / "a-bad.h5")
    for cache in ("--no-cache", "--cache=" + str(tmp_path / "cache")):
        out = cli(["report", str(r), "--by", "config", "--skip-bad", cache], cwd=tmp_path)
        assert out.returncode == 0, out.stderr
        assert out.stdout.splitlines()[1].split()[:3] == ["A", "3", "3"], out.stdout
        assert f"skipped {bad}: the HDF5 library crashed reading it" in out.stderr
        assert "Traceback" not in out.stderr
        out = cli(["report", str(r), "--by", "config", cache], cwd=tmp_path)
        assert out.returncode == 1  # a bad record: named, skipped, exit 1 (docs/security.md)
        assert out.stdout.splitlines()[1].split()[:3] == ["A", "3", "3"], out.stdout
        assert out.stderr.splitlines() == [f"mpiwrite: skipped {bad}: the HDF5 library "
                                           "crashed reading it (SIGSEGV); not read"]
    assert not [f for f in os.listdir(tmp_path) if f.startswith("core")]


def test_whole_record_reads_are_isolated_too(tmp_path):
    r = folder_with(tmp_path, WHOLE)
    bad = str(r / "a-bad.h5")
    out = cli(["show", bad], cwd=tmp_path)
    assert out.returncode == 1 and "Traceback" not in out.stderr
    lines = out.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"mpiwrite: error: {bad}: the HDF5 library "
                                                   "crashed reading it ("), lines
    out = cli(["report", str(r), "--metric", "per-node", "--by", "config", "--skip-bad"],
              cwd=tmp_path)  # a per-rank metric: whole records
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[1].split()[:3] == ["A", "3", "3"], out.stdout
    assert f"skipped {bad}: the HDF5 library crashed reading it" in out.stderr
    good = cli(["show", str(r / "good1.h5")], cwd=tmp_path)
    assert good.returncode == 0 and "good1" in good.stdout, good.stderr


def test_a_record_libhdf5_never_finishes_is_named_and_the_others_are_read(tmp_path,
                                                                          monkeypatch):
    monkeypatch.setenv(isolated.HANG_ENV, "3")
    r = folder_with(tmp_path, HANGS)
    jobs = [("runlevel", str(r / "a-bad.h5"))] + \
        [("runlevel", str(r / f"good{i}.h5")) for i in range(3)]
    t0 = time.monotonic()
    pool = isolated.Pool(1)
    try:
        got = pool.run(jobs)
    finally:
        pool.close()
    assert time.monotonic() - t0 < 60
    assert got[0] == {"ok": False, "error": f"{r / 'a-bad.h5'}: the HDF5 library did not "
                      "finish reading it in 3 s; not read"}
    assert [g["ok"] for g in got[1:]] == [True, True, True]


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "1e400", "x", "9" * 100])
def test_a_bad_hang_limit_is_one_line_and_exit_2(tmp_path, value):
    r = folder_with(tmp_path, HANGS)
    out = cli(["report", str(r), "--no-cache", "--skip-bad"], cwd=tmp_path,
              env={isolated.HANG_ENV: value})
    assert out.returncode == 2, out.stderr
    assert out.stderr.count("\n") == 1 and isolated.HANG_ENV in out.stderr, out.stderr


FORKED = """
import sys, threading
from mpiwrite.records import sandbox
if sys.argv[1] == "thread":
    stop = threading.Event()
    threading.Thread(target=stop.wait, daemon=True).start()
if sys.argv[1] == "no-fork":  # the kernel refuses a process (EAGAIN): as if at a limit
    import errno, os
    def refused():
        raise OSError(errno.EAGAIN, "Resource temporarily unavailable")
    os.fork = refused
print("said once", end="")  # buffered in the command (stdout is a pipe), not yet written
pool = sandbox.Pool(1)
got = pool.run([("runlevel", p) for p in sys.argv[2:]])
print("", type(pool.workers[0].proc).__name__ if pool.workers else "-", file=sys.stderr)
print("", [g["ok"] for g in got], [g.get("error", "")[-30:] for g in got], file=sys.stderr)
"""


@pytest.mark.parametrize("how, kind", [("alone", "_Forked"), ("thread", "Popen"),
                                       ("no-fork", "Popen")])
def test_a_forked_worker_crashes_alone_and_the_command_says_its_words_once(tmp_path, how,
                                                                           kind):
    """A command of one thread forks its workers (no interpreter to start for each); one with
    threads, or whose fork is refused, starts a fresh interpreter.  Either way a record that
    kills libhdf5 kills only the worker, the next one reads on, and nothing the command had
    buffered is written twice (the forked worker never flushes the command's streams)."""
    r = folder_with(tmp_path, SEGFAULTS)
    paths = [str(r / "a-bad.h5")] + [str(r / f"good{i}.h5") for i in range(3)]
    out = subprocess.run([sys.executable, "-c", FORKED, how] + paths, capture_output=True,
                         text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "said once", out.stdout
    lines = out.stderr.split("\n")
    assert lines[0].split() == [kind], out.stderr
    assert lines[1].startswith(" [False, True, True, True]") and "(SIGSEGV); not read" in \
        lines[1], out.stderr
    assert not [f for f in os.listdir(tmp_path) if f.startswith("core")]


def _children(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as fh:
            return [int(x) for x in fh.read().split()]
    except OSError:
        return []


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(") ")[1][0] != "Z"
    except OSError:
        return False


def test_a_worker_stuck_in_libhdf5_ends_with_its_command(tmp_path):
    """`show` of a record on which libhdf5 never returns: the command killed for good
    (SIGKILL, no handler runs) takes its worker along; a report stuck the same way ends at
    once on SIGINT, its worker with it, not 10 s later."""
    from common import MPIWRITE

    proc = subprocess.Popen([MPIWRITE, "show", HANGS], cwd=tmp_path, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while not _children(proc.pid):
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.05)
        (worker,) = _children(proc.pid)
        time.sleep(0.5)  # inside libhdf5 by now
        proc.kill()  # our own child, by its pid
        proc.wait(timeout=10)
        deadline = time.monotonic() + 5
        while _alive(worker):
            assert time.monotonic() < deadline, f"worker {worker} outlived its command"
            time.sleep(0.05)
    finally:
        if proc.poll() is None:
            proc.kill()
    r = folder_with(tmp_path, HANGS)
    proc = subprocess.Popen([MPIWRITE, "report", str(r), "--no-cache"], cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while not _children(proc.pid):
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.05)
        workers = _children(proc.pid)
        time.sleep(1.0)
        t0 = time.monotonic()
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=10) == 130 and time.monotonic() - t0 < 3
        time.sleep(0.5)
        assert not [w for w in workers if _alive(w)]
    finally:
        if proc.poll() is None:
            proc.kill()
