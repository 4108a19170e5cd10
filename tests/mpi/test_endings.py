"""Every way a run can end: a signal to a rank, a launcher that dies (a hang-up or a closed
pipe kills it, and with it every rank), a filesystem too small for what is planned, a quota.

A run answers every catchable signal in order (no data left, record `interrupted`).  What kills
the ranks for good leaves files and a `running` record behind: `show` and `report` then call
the run abandoned, and `mpiwrite clean` removes exactly its files and nothing else.
"""

import errno
import os
import signal
import stat
import subprocess
import time

import pytest
from common import (
    CRASH,
    MPIEXEC,
    MPIWRITE,
    clean_env,
    cli,
    ext4_disk,
    is_root,
    kill_group,
    kill_started,
    mounted,
    mpirun,
    needs_root,
    only_record,
    rank_pids,
    read_record,
    records_in,
    start,
    tool,
    wait,
    wait_for_bytes,
)

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
    assert read_record(records_in(tmp_path / "r")[0]).status == "interrupted"


def _kill_for_good(tmp_path):
    """A run killed for good mid-write (SIGKILL of every rank, then of mpiexec: the OOM
    killer, a node crash, whose keeper goes with it: CRASH): nothing can clean up."""
    proc = start(2, ["run", "d", "-s", "2G", "-b", "64k", "--results", "r"] + QUIET, tmp_path,
                 CRASH)
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
    rec = read_record(path)
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
    rec = read_record(rec_path)
    if out.returncode == 0:  # the run finished before its output was cut: nothing to show
        assert rec.status == "complete"
        return
    assert out.returncode == 141, out.stderr  # mpiexec dies of SIGPIPE, its ranks with it
    _left_nothing(tmp_path, rec_path)


def _left_nothing(tmp_path, rec_path, within=15.0):
    """A launcher's end: within `within` s no data or lock file is left (the node's keeper
    removed them, or the ranks ended in order) and the record says how the run ended."""
    end = time.monotonic() + within
    while (data_files(tmp_path / "d") or _locks(tmp_path / "d")) and time.monotonic() < end:
        time.sleep(0.2)
    assert data_files(tmp_path / "d") == [] and _locks(tmp_path / "d") == []
    while read_record(rec_path).status == "running" and time.monotonic() < end:
        time.sleep(0.2)
    rec = read_record(rec_path)
    assert rec.status in ("interrupted", "failed"), rec.status
    shown = cli(["show", rec_path], cwd=tmp_path)
    assert f"status {rec.status}" in shown.stdout, shown.stdout


@pytest.mark.mpi
@pytest.mark.timeout(120)
@pytest.mark.parametrize("how", ["SIGHUP"])  # SIGKILL of the job: the same EOF (sigkilled)
def test_a_launcher_ended_by_a_hangup_or_a_kill_leaves_nothing_and_says_so(tmp_path, how):
    """SIGHUP (a closed terminal) to mpiexec, or SIGKILL of mpiexec and its ranks: the ranks
    die without a word; the node's keeper removes their data and lock files and rewrites the
    `running` record as interrupted, naming the launcher (once 3.8 GB and a lock were left,
    and the record said running)."""
    if how == "SIGHUP":
        proc = _live(tmp_path, 30)
        try:
            # while it lives, its lock file declares a heartbeat and its times advance
            (lock,) = _locks(tmp_path / "d")
            path = tmp_path / "d" / lock
            first = os.stat(path).st_mtime
            assert stat.S_IMODE(os.stat(path).st_mode) == 0o604 and path.read_bytes() == b""
            time.sleep(2.5)
            assert os.stat(path).st_mtime > first
            os.kill(proc.pid, signal.SIGHUP)
            wait(proc, 60)
        finally:
            kill_group(proc)
    else:
        _sigkill_group(tmp_path, env=None)
    rec_path = records_in(tmp_path / "r")[0]
    _left_nothing(tmp_path, rec_path)
    rec = read_record(rec_path)
    if rec.status == "interrupted" and "keeper" in str(rec.attrs.get("error")):
        assert "launcher ended" in rec.attrs["error"]


@pytest.mark.mpi
@pytest.mark.timeout(120)
def test_a_keep_run_ended_by_its_launcher_keeps_its_data_and_drops_its_lock(tmp_path):
    """run --keep keeps its data files whatever ends it: the keeper removes only the lock
    file and says in the record how the run ended."""
    proc = _live(tmp_path, 30, extra=["--keep"])
    try:
        os.kill(proc.pid, signal.SIGHUP)
        wait(proc, 60)
    finally:
        kill_group(proc)
    rec_path = records_in(tmp_path / "r")[0]
    end = time.monotonic() + 15
    while (_locks(tmp_path / "d") or read_record(rec_path).status == "running") \
            and time.monotonic() < end:
        time.sleep(0.2)
    assert _locks(tmp_path / "d") == [] and len(data_files(tmp_path / "d")) == 2
    assert read_record(rec_path).status in ("interrupted", "failed")


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
            assert read_record(records_in(tmp_path / "r")[0]).status == "complete"


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
def _live(tmp_path, seconds=10, pre=(), env=None, extra=()):
    """A run of `seconds` writing into d, launched in a session of its own (under `pre`, e.g.
    unshare), returned once both ranks have written and its `running` record exists."""
    proc = subprocess.Popen(list(pre) + [MPIEXEC, "-n", "2", MPIWRITE, "run", "d", "-t",
                                         str(seconds), "-b", "64k", "--results", "r",
                                         *extra] + QUIET,
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=clean_env(env), stdin=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        wait_for_bytes(tmp_path / "d", 2**20)
        end = time.monotonic() + 20
        # both ranks' files, each written to (1 MiB in all can be one rank's alone)
        while len([f for f in data_files(tmp_path / "d")
                   if os.path.getsize(os.path.join(tmp_path / "d", f))]) < 2:
            assert time.monotonic() < end, "not both ranks wrote"
            time.sleep(0.05)
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
    assert read_record(records_in(tmp_path / "r")[0]).status == "complete"
    assert not (tmp_path / "d").exists()  # the run made it and removed it: nothing is left


def _sigkill_group(tmp_path, env=CRASH):
    """A live run whose whole process group (mpiexec and every rank) gets SIGKILL mid-write;
    returns its record once every rank is gone.  By default as a node crash (no keeper)."""
    proc = _live(tmp_path, 30, env=env)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
        wait(proc, 60)
    finally:
        kill_group(proc)
    end = time.monotonic() + 20
    while _ranks_in(tmp_path):
        assert time.monotonic() < end, "the ranks outlived their launcher"
        time.sleep(0.1)
    return read_record(records_in(tmp_path / "r")[0])


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
        run_id = read_record(real).run_id
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
    assert read_record(records_in(tmp_path / "r")[0]).status == "failed"


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


# A record save that fails on the way, the record rewritten at every iteration, --timeout with
# a stopped rank in a TARGET the run made, SIGINT twice to mpiexec, a signal while the final
# record is renamed.

# Loaded by every mpiwrite process of a test through PYTHONPATH: counts record saves in
# SAVES_LOG and makes the saves whose numbers FAIL_SAVES lists fail with EIO.
HOOK = '''
import errno, os
from mpiwrite.records import h5 as records
_write, _n = records.write, [0]
def write(*a, **k):
    _n[0] += 1
    with open(os.environ["SAVES_LOG"], "a") as fh:
        fh.write(f"{_n[0]}\\n")
    if str(_n[0]) in os.environ.get("FAIL_SAVES", "").split(","):
        raise OSError(errno.EIO, "injected by the test")
    return _write(*a, **k)
records.write = write
'''


def _hooked(tmp_path, fail=""):
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(HOOK)
    return {"PYTHONPATH": str(hook), "SAVES_LOG": str(tmp_path / "saves.log"),
            "FAIL_SAVES": fail}


def _saves(tmp_path):
    return len((tmp_path / "saves.log").read_text().split())


@pytest.mark.timeout(120)
def test_a_failed_intermediate_save_does_not_fail_a_complete_run(tmp_path):
    # save 1 is the set-up's; then the first iteration's, which fails, so the next iteration
    # saves again (1.2 s later anyway), and the final one works
    out = cli(["run", "d", "-s", "64k", "-b", "64k", "-i", "3", "--delay", "1.2", "--results",
               "r"] + QUIET, cwd=tmp_path, env=_hooked(tmp_path, fail="2"))
    assert _saves(tmp_path) >= 3
    assert out.returncode == 0, out.stderr
    assert "record not saved" not in out.stderr.replace("an earlier save", "")
    assert "an earlier save of the record" in out.stderr and "a later one worked" in out.stderr
    rec = only_record(str(tmp_path / "r"))
    assert rec.status == "complete" and len(rec.iterations) == 3


@pytest.mark.timeout(120)
def test_a_failed_final_save_still_says_record_not_saved(tmp_path):
    # one iteration of 64 KiB: the set-up's save, the first iteration's, the final one
    out = cli(["run", "d", "-s", "64k", "-b", "64k", "--results", "r"] + QUIET,
              cwd=tmp_path, env=_hooked(tmp_path, fail="3"))
    assert _saves(tmp_path) == 3
    assert out.returncode == 1 and "record not saved" in out.stderr, out.stderr


@pytest.mark.timeout(120)
def test_the_record_is_not_rewritten_at_every_iteration(tmp_path):
    out = cli(["run", "d", "-s", "32", "-b", "32", "-i", "300", "--results", "r"] + QUIET,
              cwd=tmp_path, env=_hooked(tmp_path), timeout=110)
    assert out.returncode == 0, out.stderr
    rec = only_record(str(tmp_path / "r"))
    assert len(rec.iterations) == 300 and rec.status == "complete"
    assert _saves(tmp_path) < 60  # was 302: set-up, one per iteration, final


@pytest.mark.mpi
@pytest.mark.timeout(120)
def test_timeout_with_a_stopped_rank_leaves_no_target_it_made(tmp_path):
    if MPIEXEC is None:
        pytest.skip("no mpiexec")
    proc = start(2, ["run", "d", "-t", "2", "--timeout", "3", "--no-fsync", "--results", "r"]
                 + QUIET, tmp_path)
    pids = {}
    try:
        pids = rank_pids(tmp_path, 2)
        wait_for_bytes(tmp_path / "d", 1)
        os.kill(pids[1], signal.SIGSTOP)
        rc, _out, err = wait(proc, 60)
    finally:
        kill_started(pids, proc)
    assert rc != 0 and "did not finish within 3s (--timeout)" in err, err
    assert only_record(str(tmp_path / "r")).status == "timeout"
    assert not (tmp_path / "d").exists(), os.listdir(tmp_path / "d")


@pytest.mark.mpi
@pytest.mark.timeout(180)
@pytest.mark.parametrize("attempt", range(2))
def test_sigint_twice_to_mpiexec_leaves_no_data_and_no_running_run(tmp_path, attempt):
    """MPICH's hydra forces the end on a second Ctrl-C (5.0.2's proxy even fails an assert,
    exit 255) and SIGKILLs the ranks, which by 0.1 s have often not yet removed their files
    nor written the `interrupted` record: within 15 s the node's keeper has removed what
    they left, the lock file too, and the record says how the run ended."""
    if MPIEXEC is None:
        pytest.skip("no mpiexec")
    proc = start(2, ["run", "d", "-s", "2G", "-b", "64k", "--fsync-every", "16", "--results",
                     "r"] + QUIET, tmp_path)
    try:
        rank_pids(tmp_path, 2)
        wait_for_bytes(tmp_path / "d", 2**20)
        proc.send_signal(signal.SIGINT)
        time.sleep(0.1)
        proc.send_signal(signal.SIGINT)
        rc, _out, err = wait(proc, 60)
    finally:
        kill_group(proc)
    # hydra's own status when it forces the end: 130 or 255, or 1 when its proxy's assert
    # fails first (seen on a loaded machine); never a traceback of ours
    assert rc in (0, 1, 130, 255) and "Traceback" not in err, (rc, err)
    _left_nothing(tmp_path, records_in(tmp_path / "r")[0])


def _tmp_records(folder):
    return sorted(f for f in os.listdir(folder) if ".tmp-" in f) if os.path.isdir(folder) else []


@pytest.mark.mpi
@pytest.mark.timeout(120)
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT],
                         ids=lambda s: signal.Signals(s).name)
def test_a_signal_while_the_final_record_is_renamed_leaves_a_consistent_record(tmp_path, sig):
    """Rank 0's third rename (the set-up's save, the first iteration's, the final one) stalls
    8 s under strace, as on a slow metadata server; the job gets the signal 1 s into it.  The
    peers once gave rank 0 the 5 s grace and ended the job mid-rename: a finished run stayed
    `running` beside a complete .tmp.  Now the record is final and no .tmp is left."""
    if MPIEXEC is None or not tool("strace"):
        pytest.skip("needs mpiexec and strace")
    args = ["run", "d", "-s", "1M", "-b", "64k", "--results", "r"] + QUIET
    stall = ["strace", "-f", "-qq", "-o", "/dev/null", "-e", "trace=rename,renameat,renameat2",
             "-e", "inject=rename,renameat,renameat2:delay_enter=8000000:when=3"]
    proc = subprocess.Popen([MPIEXEC, "-n", "1"] + stall + [MPIWRITE] + args
                            + [":", "-n", "1", MPIWRITE] + args, cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=clean_env(), stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        end = time.monotonic() + 60
        while (tmp_path / "d").exists() or not _tmp_records(tmp_path / "r"):
            assert time.monotonic() < end and proc.poll() is None, proc.communicate()
            time.sleep(0.05)
        time.sleep(1)
        assert _tmp_records(tmp_path / "r"), "the final save is not stalled"
        proc.send_signal(sig)
        rc, _out, err = wait(proc, 60)
    finally:
        kill_group(proc)
    assert _tmp_records(tmp_path / "r") == [], err
    rec = only_record(str(tmp_path / "r"))
    assert rec.status == "complete", (rc, rec.status, err)
    assert rc == 0, (rc, err)  # the run had ended: its status, not the signal's
    assert f"signal {int(sig)} arrived after the run had ended" in err, err
    assert "Traceback" not in err


def _fsync_delayed(nth, seconds):
    return ["strace", "-f", "-qq", "-o", "/dev/null", "-e", "trace=fsync", "-e",
            f"inject=fsync:delay_enter={int(seconds * 1e6)}:when={nth}"]


@pytest.mark.timeout(120)
def test_a_failing_run_does_not_remove_a_results_folder_another_run_uses(tmp_path):
    """`run /nonexistent/x --results r & run good --results r`, r missing: the bad run makes r,
    fails on its TARGET and removes the (empty) r it made, while the good run already holds r
    open; its records then went into a removed folder ("record not saved", 3 in 30 tries).
    Made certain here: the bad run's first fsync (its probe in r) and the good run's second
    (its TARGET probe, after it opened r) are delayed under strace."""
    if not tool("strace"):
        pytest.skip("needs strace")

    def launch(pre, args):
        return subprocess.Popen(pre + [MPIWRITE, "run"] + args + ["--results", "r"] + QUIET,
                                cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env=clean_env(), stdin=subprocess.DEVNULL,
                                start_new_session=True)

    bad = launch(_fsync_delayed(1, 3), ["/nonexistent/x"])
    good = None
    try:
        end = time.monotonic() + 30
        while not (tmp_path / "r").exists():
            assert time.monotonic() < end and bad.poll() is None, bad.communicate()
            time.sleep(0.02)
        good = launch(_fsync_delayed(2, 5), ["d", "-s", "64k", "-b", "64k"])
        rc_bad, _o, err_bad = wait(bad, 60)
        rc_good, _o, err_good = wait(good, 60)
    finally:
        kill_group(bad)
        if good is not None:
            kill_group(good)
    assert rc_bad == 2 and "/nonexistent" in err_bad, err_bad
    assert rc_good == 0 and "record not saved" not in err_good, err_good
    assert only_record(str(tmp_path / "r")).status == "complete"


@pytest.mark.mpi
@pytest.mark.timeout(120)
def test_sigterm_to_a_rank_while_rank_0_is_stopped_ends_with_a_line_and_no_data(tmp_path):
    """Rank 0 stopped (SIGSTOP), then SIGTERM to rank 1: once only MPICH's Abort line came
    after 10 s, and rank 0's file and a `running` record were left.  Now 143 with a line of
    ours, no data file (rank 1 removes rank 0's too), and the record, which rank 0 cannot
    write, is called abandoned once the job is gone."""
    if MPIEXEC is None:
        pytest.skip("no mpiexec")
    proc = start(2, ["run", "d", "-s", "2G", "-b", "64k", "--fsync-every", "16", "--results",
                     "r"] + QUIET, tmp_path)
    pids = {}
    try:
        pids = rank_pids(tmp_path, 2)
        wait_for_bytes(tmp_path / "d", 2**20)
        os.kill(pids[0], signal.SIGSTOP)
        os.kill(pids[1], signal.SIGTERM)
        rc, _out, err = wait(proc, 60)
    finally:
        kill_started(pids, proc)
    assert rc == 143, (rc, err)
    assert [ln for ln in err.splitlines() if ln.startswith("mpiwrite:")], err
    left = [f for f in os.listdir(tmp_path / "d") if f.endswith(".dat")] \
        if (tmp_path / "d").exists() else []
    assert left == [], left
    time.sleep(1)
    shown = cli(["show", "r"], cwd=tmp_path)
    assert "status running" not in shown.stdout, shown.stdout


@pytest.mark.mpi
@pytest.mark.timeout(120)
def test_target_moved_mid_run_with_subdirectories_leaves_nothing(tmp_path):
    """`mv` of TARGET mid-run with --files-per-dir 1: once two empty run subdirectories were
    left in the moved folder."""
    if MPIEXEC is None:
        pytest.skip("no mpiexec")
    proc = start(2, ["run", "d", "-s", "256M", "-b", "64k", "--files-per-dir", "1",
                     "--results", "r"] + QUIET, tmp_path)
    try:
        rank_pids(tmp_path, 2)
        end = time.monotonic() + 30
        while not any(f.endswith(".dat") for _, _, fs in os.walk(tmp_path / "d") for f in fs):
            assert time.monotonic() < end and proc.poll() is None, proc.communicate()
            time.sleep(0.02)
        os.rename(tmp_path / "d", tmp_path / "moved")
        rc, _out, err = wait(proc, 90)
    finally:
        kill_group(proc)
    assert rc == 0, err
    assert "renamed or removed" in err
    assert os.listdir(tmp_path / "moved") == [], list(os.walk(tmp_path / "moved"))


# Endings that need a real block filesystem of our own (an ext4 on a loop device; root only):
# the results folder made append-only mid-run (`chattr +a`), and ranks stuck inside write() at
# --timeout because the filesystem is frozen (`fsfreeze`).

ON_A_DISK = [pytest.mark.mpi, pytest.mark.root,
             pytest.mark.skipif(not is_root(), reason="needs root (loop mounts)")]


def _until(what, proc, timeout=30.0):
    end = time.monotonic() + timeout
    while not what():
        assert time.monotonic() < end and proc.poll() is None, proc.communicate()
        time.sleep(0.02)


@pytest.mark.timeout(120)
@ON_A_DISK[0]
@ON_A_DISK[1]
@ON_A_DISK[2]
def test_an_append_only_results_folder_gets_no_tmp_files(tmp_path):
    """`chattr +a` after the set-up's save: a record can no longer be renamed (nor a temporary
    file removed) there.  Once three .tmp files were left; now none, and the end says why the
    record was not saved."""
    with ext4_disk(tmp_path) as disk:
        results = os.path.join(disk, "r")
        proc = start(2, ["run", "d", "-s", "64k", "-b", "64k", "-i", "4", "--delay", "1.2",
                         "--results", results] + QUIET, tmp_path)
        try:
            _until(lambda: records_in(results), proc)
            subprocess.run(["chattr", "+a", results], check=True)
            rc, _out, err = wait(proc, 60)
            left = os.listdir(results)
        finally:
            kill_group(proc)
            subprocess.run(["chattr", "-a", results], capture_output=True)
        assert not [f for f in left if ".tmp-" in f], (left, err)
        assert rc == 1 and "record not saved" in err and "append-only" in err, err
        (path,) = records_in(results)
        assert read_record(path).status == "running"  # the set-up's, all it could keep
        shown = cli(["show", path], cwd=tmp_path)
        assert "status abandoned" in shown.stdout, shown.stdout


@pytest.mark.timeout(60)
@ON_A_DISK[0]
@ON_A_DISK[1]
@ON_A_DISK[2]
def test_a_temporary_file_that_cannot_be_removed_is_named(tmp_path):
    """The folder turns append-only between the temporary file and its rename (the check
    just before the rename makes it so): neither rename nor removal works, and the error
    names the temporary file left, rather than leaving it without a word."""
    from mpiwrite import files

    with ext4_disk(tmp_path) as disk:
        folder = os.path.join(disk, "out")
        os.mkdir(folder)

        def lock(_name):
            subprocess.run(["chattr", "+a", folder], check=True)
            raise OSError(errno.EPERM, "locked by the test")

        try:
            with pytest.raises(OSError) as raised:
                files.write_replacing(os.path.join(folder, "x.json"), b"{}", check=lock)
            left = os.listdir(folder)
        finally:
            subprocess.run(["chattr", "-a", folder], capture_output=True)
        assert len(left) == 1 and ".tmp-" in left[0], left
        assert f"the temporary file {os.path.join(folder, left[0])} is left" \
            in raised.value.strerror, raised.value.strerror
        # and the next write is refused before it makes a temporary file
        subprocess.run(["chattr", "+a", folder], check=True)
        try:
            with pytest.raises(OSError, match="append-only"):
                files.write_replacing(os.path.join(folder, "y.json"), b"{}")
            assert os.listdir(folder) == left
        finally:
            subprocess.run(["chattr", "-a", folder], capture_output=True)


@pytest.mark.timeout(150)
@ON_A_DISK[0]
@ON_A_DISK[1]
@ON_A_DISK[2]
def test_ranks_stuck_in_write_at_the_timeout_leave_a_timeout_record(tmp_path):
    """The filesystem is frozen (fsfreeze) under both ranks' writes: rank 0 cannot end the
    write phase itself, so the watchdogs must.  Once the job ended naming each rank, the record
    stayed `running` and 163-178 MB were left.  Now the record says `timeout`, and the data
    files are removed once the filesystem thaws, or named in one line."""
    with ext4_disk(tmp_path, 256) as disk:
        target = os.path.join(disk, "d")
        proc = start(2, ["run", target, "-s", "64M", "-b", "4k", "--fsync-every", "1",
                         "--timeout", "3", "--results", "r"] + QUIET, tmp_path)
        try:
            wait_for_bytes(target, 2**20)
            subprocess.run(["fsfreeze", "-f", disk], check=True)
            try:
                # the watchdogs fire at --timeout plus the grace (5 s); the ranks stay inside
                # write() until the filesystem thaws, and the launcher waits for them
                end = time.monotonic() + 40
                while proc.poll() is None and time.monotonic() < end and read_record(
                        records_in(tmp_path / "r")[0]).status == "running":
                    time.sleep(0.1)
            finally:
                subprocess.run(["fsfreeze", "-u", disk], check=True)
            rc, _out, err = wait(proc, 60)
        finally:
            kill_group(proc)
        left = [f for f in os.listdir(target) if f.endswith(".dat")] \
            if os.path.isdir(target) else []
    assert rc != 0 and "Traceback" not in err, err
    assert read_record(records_in(tmp_path / "r")[0]).status == "timeout", err
    said = [ln for ln in err.splitlines() if "timed out" in ln]
    assert said and "rank" in said[0], err
    if left:  # not removed: then named, in one line
        named = [ln for ln in err.splitlines() if "could not remove" in ln]
        assert len(named) == 1 and all(f in named[0] for f in left), (left, err)
