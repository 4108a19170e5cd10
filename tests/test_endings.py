"""Every way a run can end: a signal to a rank, a launcher that dies (a hang-up or a closed
pipe kills it, and with it every rank), a filesystem too small for what is planned, a quota.

A run answers every catchable signal in order (no data left, record `interrupted`).  What kills
the ranks for good leaves files and a `running` record behind: `show` and `report` then call
the run abandoned, and `mpiwrite clean` removes exactly its files and nothing else.
"""

import errno
import os
import signal
import subprocess
import time

import pytest
from common import (
    MPIEXEC,
    MPIWRITE,
    clean_env,
    cli,
    kill_group,
    mounted,
    mpirun,
    needs_root,
    records_in,
)
from test_faults import rank_pids, start, wait, wait_for_bytes

from mpiwrite.records import h5 as records

QUIET = ["--progress-interval", "0"]


def data_files(folder):
    return sorted(f for f in os.listdir(folder) if f.endswith(".dat")) \
        if os.path.isdir(folder) else []


@pytest.mark.mpi
@pytest.mark.timeout(120)
@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGQUIT, signal.SIGALRM, signal.SIGUSR1,
                                 signal.SIGXCPU, signal.SIGXFSZ, signal.SIGPWR, signal.SIGVTALRM,
                                 signal.SIGPROF],
                         ids=lambda s: signal.Signals(s).name)
def test_a_catchable_signal_to_a_rank_ends_the_run_in_order(tmp_path, sig):
    """Also the signals whose default action ends a process: a batch system's CPU-time limit
    (SIGXCPU), a file-size limit (SIGXFSZ), a UPS's SIGPWR, the timers' SIGVTALRM and
    SIGPROF; they once killed the ranks, leaving data files and a `running` record."""
    proc = start(2, ["run", "d", "-s", "2G", "-b", "64k", "--fsync-every", "16", "--results",
                     "r"] + QUIET, tmp_path)
    try:
        pids = rank_pids(tmp_path, 2)
        wait_for_bytes(tmp_path / "d", 2**20)
        os.kill(pids[1], sig)
        rc, _out, err = wait(proc, 60)
    finally:
        kill_group(proc)
    assert rc == 128 + sig, err
    said = [ln for ln in err.splitlines() if "interrupted" in ln]
    assert "Traceback" not in err and len(said) == 1, err
    assert signal.Signals(sig).name in said[0], err
    assert data_files(tmp_path / "d") == []
    assert records._read(records_in(tmp_path / "r")[0]).status == "interrupted"


def _kill_for_good(tmp_path):
    """A run killed for good mid-write (SIGKILL of every rank, then of mpiexec: the OOM
    killer, a node crash; a closed terminal's SIGHUP to hydra mostly ends alike, its proxies
    SIGKILL the ranks, but under load the ranks sometimes get to end in order first, which
    made this test fail once in CI): nothing can clean up."""
    proc = start(2, ["run", "d", "-s", "2G", "-b", "64k", "--results", "r"] + QUIET, tmp_path)
    try:
        pids = rank_pids(tmp_path, 2)
        end = time.monotonic() + 30
        while len([f for f in data_files(tmp_path / "d")
                   if os.path.getsize(tmp_path / "d" / f)]) < 2:
            assert time.monotonic() < end, "the ranks wrote nothing"
            time.sleep(0.05)
        for pid in pids.values():  # the ranks this test started, by pid
            os.kill(pid, signal.SIGKILL)
        os.kill(proc.pid, signal.SIGKILL)
        wait(proc, 60)
    finally:
        kill_group(proc)
    end = time.monotonic() + 20
    while time.monotonic() < end:  # until every rank is gone
        if not _ranks_in(tmp_path):
            return
        time.sleep(0.1)
    raise AssertionError("the ranks outlived their launcher")


def _ranks_in(cwd):
    cwd = os.path.realpath(str(cwd))
    alive = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.path.realpath(f"/proc/{pid}/cwd") == cwd:
                with open(f"/proc/{pid}/stat") as fh:
                    if fh.read().rsplit(")", 1)[1].split()[0] != "Z":
                        alive.append(int(pid))
        except OSError:
            continue
    return alive


@pytest.mark.mpi
@pytest.mark.timeout(180)
def test_a_run_killed_for_good_is_abandoned_and_clean_removes_only_its_files(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    _kill_for_good(tmp_path)
    left = data_files(tmp_path / "d")
    assert len(left) == 2, left  # nothing could remove them
    path = records_in(tmp_path / "r")[0]
    rec = records._read(path)
    assert rec.status == "running"
    assert [p["host"] for p in rec.processes()] and all(p["pid"] > 0 for p in rec.processes())
    shown = cli(["show", path], cwd=tmp_path)
    assert shown.returncode == 0 and "status abandoned" in shown.stdout, shown.stdout
    assert "mpiwrite clean" in shown.stdout
    # another run's file, a file of no recorded run and a link named like this run's file
    run_id = rec.run_id
    d = tmp_path / "d"
    (d / "mpiwrite-20990101T000000Z-abcdef-i0-r000000.dat").write_text("not ours")
    (d / "notes.txt").write_text("the user's")
    (d / f"mpiwrite-{run_id}-i7-r000000.dat").symlink_to(victim)
    dry = cli(["clean", "d", "--results", "r"], cwd=tmp_path)
    assert dry.returncode == 0, dry.stderr
    assert f"run {run_id} (abandoned): 2 files" in dry.stdout and "dry run" in dry.stdout
    assert len(data_files(d)) == 4  # nothing removed yet
    done = cli(["clean", "d", "--results", "r", "--yes"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "removed" in done.stdout and "runs without a record" in done.stdout
    assert sorted(os.listdir(d)) == sorted(["mpiwrite-20990101T000000Z-abcdef-i0-r000000.dat",
                                            "notes.txt", f"mpiwrite-{run_id}-i7-r000000.dat"])
    assert victim.read_text() == "keep me"
    rep = cli(["report", "r"], cwd=tmp_path)
    assert "abandoned" in rep.stdout + rep.stderr


@pytest.mark.mpi
@pytest.mark.timeout(120)
@pytest.mark.parametrize("reader", ["head -2", "head -1", "true"])
def test_a_closed_output_pipe_leaves_an_abandoned_record_not_a_running_one(tmp_path, reader):
    cmd = [MPIEXEC, "-n", "2", MPIWRITE, "run", "d", "-s", "64M", "-b", "64k", "-i", "3",
           "--results", "r", "--progress-interval", "0.2"]
    out = subprocess.run(["bash", "-c", f'"$@" | {reader}; exit "${{PIPESTATUS[0]}}"', "x"]
                         + cmd,
                         cwd=tmp_path, capture_output=True, text=True, env=clean_env(),
                         timeout=90)
    rec_path = records_in(tmp_path / "r")[0]
    rec = records._read(rec_path)
    if out.returncode == 0:  # the run finished before its output was cut: nothing to show
        assert rec.status == "complete"
        return
    assert out.returncode == 141, out.stderr  # mpiexec dies of SIGPIPE, its ranks with it
    time.sleep(1)
    shown = cli(["show", rec_path], cwd=tmp_path)
    assert "status abandoned" in shown.stdout or "status interrupted" in shown.stdout, \
        shown.stdout
    if os.path.isdir(tmp_path / "d"):
        assert cli(["clean", "d", "--results", "r", "--yes"], cwd=tmp_path).returncode == 0
        assert data_files(tmp_path / "d") == []


def test_clean_refuses_a_target_that_is_a_link_or_missing(tmp_path):
    (tmp_path / "r").mkdir()
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    for target in ("link", "missing"):
        out = cli(["clean", target, "--results", "r"], cwd=tmp_path)
        assert out.returncode == 2 and "TARGET" in out.stderr, out.stderr
    out = cli(["clean", "real", "--results", "nope"], cwd=tmp_path)
    assert out.returncode == 2 and "--results" in out.stderr


@needs_root
@pytest.mark.mpi
@pytest.mark.timeout(120)
@pytest.mark.parametrize("ranks,size,refused", [(1, "1TB", True), (2, "40M", True),
                                                (2, "16M", False)])
def test_a_run_that_does_not_fit_its_filesystem_is_refused_before_data(tmp_path, ranks, size,
                                                                       refused):
    """64 MiB of tmpfs: 1 TB is refused, so are two ranks of 40 MiB (each fits, both do not);
    two of 16 MiB run."""
    with mounted(tmp_path / "small", "tmpfs", "size=64m") as mnt:
        out = subprocess.run([MPIEXEC, "-n", str(ranks), MPIWRITE, "run", f"{mnt}/d", "-s", size,
                              "--results", "r"] + QUIET, cwd=tmp_path, capture_output=True,
                             text=True, timeout=90, env=clean_env())
        if refused:
            assert out.returncode == 2, out.stderr
            said = [ln for ln in out.stderr.splitlines() if "error" in ln]
            assert len(said) == 1 and "free" in said[0] and "--allow-fill" in said[0]
            assert not os.path.exists(f"{mnt}/d") and not (tmp_path / "r").exists()
        else:
            assert out.returncode == 0, out.stderr
            assert records._read(records_in(tmp_path / "r")[0]).status == "complete"


@needs_root
@pytest.mark.mpi
@pytest.mark.timeout(120)
def test_allow_fill_writes_anyway_and_a_full_disk_is_then_named(tmp_path):
    with mounted(tmp_path / "small", "tmpfs", "size=16m") as mnt:
        out = subprocess.run([MPIEXEC, "-n", "1", MPIWRITE, "run", f"{mnt}/d", "-s", "64M",
                              "--allow-fill", "--results", "r"] + QUIET, cwd=tmp_path,
                             capture_output=True, text=True, timeout=90, env=clean_env())
        assert out.returncode == 1 and "No space left" in out.stderr, out.stderr
        assert data_files(f"{mnt}/d") == []


def test_a_quota_is_named_as_a_quota():
    from mpiwrite.engines.posix import StreamResult
    from mpiwrite.errors import why

    assert "quota" in why(OSError(errno.EDQUOT, os.strerror(errno.EDQUOT)))
    res = StreamResult(path="x")
    res.fail("write", OSError(errno.EDQUOT, os.strerror(errno.EDQUOT)))
    assert "quota" in res.error_text and res.error_errno == errno.EDQUOT


def test_a_time_limited_run_is_not_refused_for_space():
    from mpiwrite.run import layout
    from mpiwrite.run.config import build

    cfg = build(target="x", time_limit=5.0)
    layout.check_space(cfg, [0, 0], [{"free": 1, "fs": [1, 2, 3]}])  # no size: no check
    sized = build(target="x", size=2**20)
    with pytest.raises(Exception, match="allow-fill"):
        layout.check_space(sized, [0, 1], [{"free": 2**20, "fs": [1, 2, 3]},
                                           {"free": 2**20, "fs": [1, 2, 3]}])  # one shared fs
    layout.check_space(sized, [0, 1], [{"free": 2**20, "fs": [1, 2, 3]},
                                       {"free": 2**20, "fs": [9, 2, 3]}])  # a disk each


# ---------------------------------------------------------------- liveness is proven, never guessed
def _live(tmp_path, seconds=10, pre=()):
    """A run of `seconds` writing into d, launched in a session of its own (under `pre`, e.g.
    unshare), returned once both ranks have written and its `running` record exists."""
    proc = subprocess.Popen(list(pre) + [MPIEXEC, "-n", "2", MPIWRITE, "run", "d", "-t",
                                         str(seconds), "-b", "64k", "--results", "r"] + QUIET,
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=clean_env(), stdin=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        wait_for_bytes(tmp_path / "d", 2**20)
        end = time.monotonic() + 20
        while not records_in(tmp_path / "r"):
            assert time.monotonic() < end, "no record"
            time.sleep(0.05)
    except BaseException:
        kill_group(proc)
        raise
    return proc


def _locks(folder):
    return sorted(f for f in os.listdir(folder) if f.endswith(".lock")) \
        if os.path.isdir(folder) else []


@needs_root
@pytest.mark.mpi
@pytest.mark.timeout(120)
def test_a_live_run_in_another_pid_namespace_is_never_cleaned(tmp_path):
    """The run's pids are another namespace's, so the pid evidence called it
    abandoned and clean removed 4 GB of data while it wrote.  Its lock is held: it lives."""
    import shutil

    if not shutil.which("unshare") or MPIEXEC is None:
        pytest.skip("needs unshare(1) and mpiexec")
    proc = _live(tmp_path, 10, ["unshare", "--pid", "--fork", "--mount-proc"])
    try:
        shown = cli(["show", "r"], cwd=tmp_path)
        assert "status running" in shown.stdout and "lock is held" in shown.stdout, shown.stdout
        out = cli(["clean", "d", "--results", "r", "--yes", "--force"], cwd=tmp_path)
        assert out.returncode == 0, out.stderr
        assert "is live" in out.stdout and "removed" not in out.stdout, out.stdout
        assert len(data_files(tmp_path / "d")) == 2 and len(_locks(tmp_path / "d")) == 1
        rc, _out, err = wait(proc, 60)
    finally:
        kill_group(proc)
    assert rc == 0, err
    assert records._read(records_in(tmp_path / "r")[0]).status == "complete"
    assert not (tmp_path / "d").exists()  # the run made it and removed it: nothing is left


def _sigkill_group(tmp_path):
    """A live run whose whole process group (mpiexec and every rank) gets SIGKILL mid-write;
    returns its record once every rank is gone."""
    proc = _live(tmp_path, 30)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
        wait(proc, 60)
    finally:
        kill_group(proc)
    end = time.monotonic() + 20
    while _ranks_in(tmp_path):
        assert time.monotonic() < end, "the ranks outlived their launcher"
        time.sleep(0.1)
    return records._read(records_in(tmp_path / "r")[0])


@pytest.mark.mpi
@pytest.mark.timeout(120)
def test_a_sigkilled_run_is_proven_over_by_its_free_lock(tmp_path):
    rec = _sigkill_group(tmp_path)
    assert rec.status == "running" and len(data_files(tmp_path / "d")) == 2
    assert _locks(tmp_path / "d") == [f".mpiwrite-{rec.run_id}-n00000.lock"]
    shown = cli(["show", "r"], cwd=tmp_path)
    assert "status abandoned" in shown.stdout and "every node's lock is free" in shown.stdout
    done = cli(["clean", "d", "--results", "r", "--yes"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"run {rec.run_id} (abandoned): 2 files" in done.stdout, done.stdout
    assert "1 lock file removed" in done.stdout, done.stdout
    assert os.listdir(tmp_path / "d") == []


@pytest.mark.mpi
@pytest.mark.timeout(120)
def test_a_run_whose_end_cannot_be_proven_is_cleaned_only_with_force(tmp_path):
    """No lock file (a record from before the locks, or a filesystem that refused them): the
    pid says gone, but that proves nothing (another PID namespace): --force decides."""
    rec = _sigkill_group(tmp_path)
    os.unlink(tmp_path / "d" / f".mpiwrite-{rec.run_id}-n00000.lock")
    out = cli(["clean", "d", "--results", "r", "--yes"], cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    said = [ln for ln in out.stdout.splitlines() if rec.run_id in ln]
    assert len(said) == 1 and "cannot prove" in said[0] and "no lock file" in said[0] \
        and "--force" in said[0], out.stdout
    assert len(data_files(tmp_path / "d")) == 2
    forced = cli(["clean", "d", "--results", "r", "--yes", "--force"], cwd=tmp_path)
    assert forced.returncode == 0, forced.stderr
    assert "not proven" in forced.stdout and "2 files" in forced.stdout, forced.stdout
    assert data_files(tmp_path / "d") == []


@pytest.mark.mpi
@pytest.mark.timeout(120)
def test_a_planted_record_of_a_live_runs_id_is_a_conflict_not_a_licence(tmp_path):
    """A second record with the live run's id saying `complete` (a copy, or planted
    in a shared folder) made clean remove the live run's data, and report counted it."""
    import shutil

    import h5py

    made = cli(["run", "d0", "-s", "1M", "--results", "src"] + QUIET, cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    proc = _live(tmp_path, 10)
    try:
        real = records_in(tmp_path / "r")[0]
        run_id = records._read(real).run_id
        planted = tmp_path / "r" / "mpiwrite-0.h5"
        shutil.copyfile(records_in(tmp_path / "src")[0], planted)
        with h5py.File(planted, "r+") as f:
            f.attrs["run_id"] = run_id
        out = cli(["clean", "d", "--results", "r", "--yes"], cwd=tmp_path)
        assert out.returncode == 0, out.stderr
        said = [ln for ln in out.stdout.splitlines() if run_id in ln]
        assert len(said) == 1 and "conflict" in said[0] and "mpiwrite-0.h5" in said[0] \
            and os.path.basename(real) in said[0], out.stdout
        assert len(data_files(tmp_path / "d")) == 2
        rep = cli(["report", "r"], cwd=tmp_path)
        named = [ln for ln in rep.stderr.splitlines() if "conflict" in ln]
        assert len(named) == 1 and "mpiwrite-0.h5" in named[0] \
            and os.path.basename(real) in named[0], rep.stderr
        assert "counted once" not in rep.stdout + rep.stderr
        assert rep.returncode == 2  # neither record counts: no complete run
        shown = cli(["show", run_id, "--in", "r"], cwd=tmp_path)
        assert shown.returncode == 2 and "conflict" in shown.stderr, shown.stderr
        rc, _out, err = wait(proc, 60)
    finally:
        kill_group(proc)
    assert rc == 0, err


@pytest.mark.mpi
@pytest.mark.timeout(120)
def test_a_file_size_limit_fails_the_run_naming_it_and_leaves_no_data(tmp_path):
    """RLIMIT_FSIZE (`ulimit -f`, a batch system's file-size limit): the write that crosses it
    gets SIGXFSZ, which a run answers, and fails with EFBIG; the run fails naming that, its
    files removed.  (Python ignores SIGXFSZ, so this held before; the handler must not add a
    second line saying the signal "arrived after the run had ended".)"""
    out = mpirun(2, ["run", "d", "-s", "512M", "--results", "r"] + QUIET, tmp_path,
                 pre=["bash", "-c", 'ulimit -f 65536 && exec "$@"', "limit"])  # 64 MiB
    assert out.returncode == 1, out.stderr
    said = [ln for ln in out.stderr.splitlines() if "run failed" in ln]
    assert len(said) == 1 and "File too large" in said[0], out.stderr
    assert "Traceback" not in out.stderr and "BAD TERMINATION" not in out.stdout
    assert "signal" not in out.stderr  # it came with the write, not after the run ended
    assert data_files(tmp_path / "d") == []
    assert records._read(records_in(tmp_path / "r")[0]).status == "failed"


@pytest.mark.mpi
@pytest.mark.timeout(120)
def test_the_next_run_into_a_target_names_what_a_killed_run_left(tmp_path):
    """What the ranks of a killed launch could not remove, the next start says: the next
    run into that TARGET names the run proven over (its lock is free) and `clean`."""
    rec = _sigkill_group(tmp_path)
    assert len(data_files(tmp_path / "d")) == 2
    out = mpirun(2, ["run", "d", "-s", "1M", "--results", "r"] + QUIET, tmp_path)
    assert out.returncode == 0, out.stderr
    said = [ln for ln in (out.stdout + out.stderr).splitlines() if rec.run_id in ln]
    assert len(said) == 1 and "mpiwrite clean d" in said[0], out.stdout + out.stderr
    assert len(data_files(tmp_path / "d")) == 2  # named, never touched: clean's to remove
