"""The settings journal (study/journal.py): what a study changed is put back even when the
launcher killed the ranks before they could.  Real launches, a stand-in lctl on a sysroot."""

import os
import signal
import subprocess
import time

import pytest
from common import MPIEXEC, MPIWRITE, clean_env, cli, kill_group, mpirun, read_record, records_in
from test_study_run import checksums_now, setting_study

from mpiwrite.study import journal

pytestmark = pytest.mark.mpi

SLOW_RESTORE = """#!/bin/bash
# the stand-in lctl, slow to put checksums back on (a real lctl on many OSTs)
[ "$1" = set_param ] && [ "${2##*=}" = 1 ] && sleep {sleep}
exec {real} "$@"
"""


def slow_study(tmp_path, script: str, seconds: str):
    """The setting study of one point through a stand-in lctl wrapped by `script` (its
    {real}: the stand-in), each point `seconds` of the null engine: (file, sysroot)."""
    path, root = setting_study(tmp_path, '"0"')
    slow = tmp_path / "slow-lctl"
    slow.write_text(script.replace("{real}", str(tmp_path / "lctl")))
    slow.chmod(0o755)
    with open(path) as fh:
        text = fh.read().replace(str(tmp_path / "lctl"), str(slow)).replace(
            'size = "1MiB"', f'time = "{seconds}"\nengine = "null"')
    with open(path, "w") as fh:
        fh.write(text)
    return path, root


def launch(tmp_path, path, root, state):
    if MPIEXEC is None:
        pytest.skip("no mpiexec (pip install mpich)")
    return subprocess.Popen([MPIEXEC, "-n", "2", MPIWRITE, "study", "run", path],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True,
                            env=clean_env({"MPIWRITE_SYSROOT": str(root),
                                           "MPIWRITE_STATE": str(state)}))


def wait_for(what, seconds, proc=None):
    end = time.monotonic() + seconds
    while not what():
        assert time.monotonic() < end, "timed out" + (
            "" if proc is None or proc.poll() is None else f": {proc.communicate()}")
        time.sleep(0.05)


def killed_mid_point(tmp_path):
    """A study whose first point set checksums to 0, its launcher and ranks SIGKILLed while
    the point writes: nothing of the ranks could put the setting back."""
    path, root = setting_study(tmp_path, '"0"')
    with open(path) as fh:
        text = fh.read().replace('size = "1MiB"', 'time = "20s"')
    with open(path, "w") as fh:
        fh.write(text)
    state = tmp_path / "state"
    proc = launch(tmp_path, path, root, state)
    try:
        wait_for(lambda: checksums_now(root) == {"0"}, 60, proc)
        time.sleep(1.0)  # the point is writing
    finally:
        kill_group(proc)  # mpiexec, its proxies and the ranks: the launcher's own SIGKILL
        proc.communicate(timeout=30)
    return path, root, state


@pytest.mark.timeout(180)
def test_a_killed_study_leaves_a_journal_that_restore_puts_back(tmp_path):
    path, root, state = killed_mid_point(tmp_path)
    assert checksums_now(root) == {"0"}, "the kill left the setting changed (the premise)"
    env = {"MPIWRITE_SYSROOT": str(root), "MPIWRITE_STATE": str(state)}
    names = [n for n in os.listdir(state) if n.startswith(journal.PREFIX)]
    assert len(names) == 1, names
    # every command on this node says so
    other = cli(["study", "plan", path], cwd=tmp_path, env=env)
    warned = [ln for ln in other.stderr.splitlines() if "did not put them back" in ln]
    assert len(warned) == 1 and "mpiwrite study restore" in warned[0], other.stderr
    # once a command, however many ranks: a run on two ranks says it once (rank 0)
    two = mpirun(2, ["run", str(tmp_path / "w"), "-s", "1M", "--no-record",
                     "--progress-interval", "0"], cwd=tmp_path, env=env)
    assert two.returncode == 0 and (two.stdout + two.stderr).count(
        "did not put them back") == 1, two.stdout + two.stderr
    out = cli(["study", "restore", path], cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stderr
    assert "checksums=1" in out.stdout and "put back" in out.stdout, out.stdout
    assert checksums_now(root) == {"1"}
    assert not [n for n in os.listdir(state) if n.startswith(journal.PREFIX)]
    again = cli(["study", "restore", path], cwd=tmp_path, env=env)
    assert again.returncode == 0 and "nothing to put back" in again.stdout
    assert "did not put them back" not in again.stderr


@pytest.mark.timeout(240)
def test_the_next_study_run_puts_back_what_a_killed_one_left_before_it_reads(tmp_path):
    path, root, state = killed_mid_point(tmp_path)
    with open(path) as fh:
        text = fh.read().replace('time = "20s"', 'size = "1MiB"')
    with open(path, "w") as fh:
        fh.write(text)  # a changed file (--new): the journal is the study name's
    out = mpirun(2, ["study", "run", path, "--new"], cwd=tmp_path, timeout=150,
                 env={"MPIWRITE_SYSROOT": str(root), "MPIWRITE_STATE": str(state)})
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr
    assert "put back what an earlier launch of the study left changed" in out.stdout
    assert "checksums=1" in out.stdout
    assert out.stderr.count("did not put them back") == 1, out.stderr  # rank 0 alone
    # the original it then read is the true one: restored to 1 at the end, journal gone
    assert checksums_now(root) == {"1"}
    assert not [n for n in os.listdir(state) if n.startswith(journal.PREFIX)]


@pytest.mark.timeout(180)
def test_a_slow_restore_is_not_cut_by_the_end_of_the_job(tmp_path):
    """SIGTERM while the study writes, its restore then slow (7 s): the other ranks used to
    give rank 0 the grace period (5 s) and end the job mid-restore ("rank 0 did not end the
    job within 1s more"), the setting left changed.  They now wait for the restore, bounded
    by its commands' timeout: when the job has ended the setting is back, and it says so."""
    path, root = slow_study(tmp_path, SLOW_RESTORE.replace("{sleep}", "7"), "20s")
    proc = launch(tmp_path, path, root, tmp_path / "state")
    try:
        wait_for(lambda: checksums_now(root) == {"0"}, 60, proc)
        time.sleep(1.0)
        os.kill(proc.pid, signal.SIGTERM)  # to mpiexec, which forwards it to the ranks
        out, err = proc.communicate(timeout=60)
    finally:
        kill_group(proc)
    assert checksums_now(root) == {"1"}, (out[-1500:], err[-1500:])  # back when it ended
    assert "did not end the job" not in err, err
    assert "settings put back on" in out and "checksums=1" in out, out[-1500:]


def test_the_journal_folder_is_never_another_users_or_a_link(tmp_path, monkeypatch):
    monkeypatch.setenv(journal.ENV, str(tmp_path / "state"))
    entry = [{"name": "x", "set": "true {value}", "original": "1"}]
    path = journal.write("h", "s", "f", "s.toml", entry)
    assert journal.of_study("h", "s")["settings"] == entry and os.path.exists(path)
    assert oct(os.stat(tmp_path / "state").st_mode & 0o777) == "0o700"
    journal.remove("h", "s")
    assert journal.of_study("h", "s") is None and journal.warning() == ""
    os.symlink(tmp_path / "elsewhere", tmp_path / "link")
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.setenv(journal.ENV, str(tmp_path / "link"))
    with pytest.raises(journal.JournalError, match="symbolic link"):
        journal.write("h", "s", "f", "s.toml", entry)
    (tmp_path / "open").mkdir(mode=0o777)
    os.chmod(tmp_path / "open", 0o777)
    monkeypatch.setenv(journal.ENV, str(tmp_path / "open"))
    with pytest.raises(journal.JournalError, match="writable by other users"):
        journal.write("h", "s", "f", "s.toml", entry)
    if os.geteuid() == 0:
        (tmp_path / "theirs").mkdir(mode=0o700)
        os.chown(tmp_path / "theirs", 65534, 65534)
        monkeypatch.setenv(journal.ENV, str(tmp_path / "theirs"))
        with pytest.raises(journal.JournalError, match="not yours"):
            journal.write("h", "s", "f", "s.toml", entry)
    monkeypatch.setenv(journal.ENV, str(tmp_path / "no" / "such" / "home"))
    with pytest.raises(journal.JournalError, match="does not exist"):
        journal.write("h", "s", "f", "s.toml", entry)
    assert not (tmp_path / "no").exists()


@pytest.mark.parametrize("get, why", [
    ("printf '1\\000'", "control character"),
    ("printf 'x\\377y'", "not UTF-8"),
    ("python3 -c \"print('7' * 5000)\"", "characters"),
])
def test_a_value_that_cannot_be_put_back_is_refused_before_anything_changes(
        tmp_path, monkeypatch, get, why):
    """`get` printed a NUL (the restore then died of "embedded null byte" and left the
    setting changed), bytes that are not UTF-8 (put back as U+FFFD), or a value so long
    that the journal outgrew its read limit (the original was lost)."""
    from mpiwrite.study.plan import Setting
    from mpiwrite.study.settings import Settings

    monkeypatch.setenv(journal.ENV, str(tmp_path / "state"))
    s = Settings([Setting("x", ["1"], "true {value}", get)], True, ("h", "s", "f", "s.toml"))
    problem = s.read()
    assert why in problem, problem
    assert journal.of_study("h", "s") is None  # nothing journaled, nothing to change


def test_restore_is_refused_while_a_launch_of_the_study_lives(tmp_path):
    env = {journal.ENV: str(tmp_path / "state")}
    os.environ[journal.ENV] = env[journal.ENV]
    try:
        held = journal.claim("vm", "live")
        journal.write("vm", "live", "f", str(tmp_path / "s.toml"),
                      [{"name": "x", "set": "touch " + str(tmp_path / "ran") + " {value}",
                        "original": "1"}])
        out = cli(["study", "restore", "live"], cwd=tmp_path,
                  env=dict(env, MPIWRITE_HOSTNAME="vm"))
        assert out.returncode == 1 and "running on vm in another launch" in out.stderr, \
            out.stderr
        assert not (tmp_path / "ran").exists() and journal.of_study("vm", "live")
        os.close(held)  # the launch ends (killed): now it is put back, by the study's name
        out = cli(["study", "restore", "live"], cwd=tmp_path,
                  env=dict(env, MPIWRITE_HOSTNAME="vm"))
        assert out.returncode == 0 and "x=1" in out.stdout, out.stderr
        assert (tmp_path / "ran").exists() and journal.of_study("vm", "live") is None
    finally:
        del os.environ[journal.ENV]


@pytest.mark.parametrize("damage", ["unreadable", "quote", "deep"])
def test_a_damaged_journal_is_one_line_and_kept(tmp_path, damage):
    state = tmp_path / "state"
    env = {journal.ENV: str(state), "MPIWRITE_HOSTNAME": "vm"}
    os.environ[journal.ENV] = str(state)
    try:
        path = journal.write("vm", "dmg", "f", "s.toml",
                             [{"name": "x", "set": "echo '{value}", "original": "1"}])
    finally:
        del os.environ[journal.ENV]
    if damage == "unreadable":
        with open(path, "w") as fh:
            fh.write("{not json")
    if damage == "deep":  # nesting past the parser's recursion: named, never a crash
        with open(path, "w") as fh:
            fh.write("[" * 200000 + "]" * 200000)
    out = cli(["study", "restore", "dmg"], cwd=tmp_path, env=env)
    assert out.returncode == 1, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in out.stderr, out.stderr
    assert ("cannot be split" if damage == "quote" else "cannot be read") in lines[0]
    assert os.path.exists(path)  # kept: never taken for "nothing to put back"
    # every other command goes on, naming the journal in its one warning line
    other = cli(["env", str(tmp_path)], cwd=tmp_path, env=env)
    assert other.returncode == 0 and "Traceback" not in other.stderr, other.stderr


def test_the_studys_own_commands_do_not_call_its_live_journal_a_leftover(tmp_path,
                                                                         monkeypatch):
    """A study's `set` may be `mpiwrite tune set`, which starts while the study's journal is
    (rightly) there: that command names the study in MPIWRITE_STUDY_RUNNING and does not warn
    about its journal; any other command, and a journal of another study, still warn."""
    from mpiwrite.study.settings import Settings

    state = tmp_path / "state"
    monkeypatch.setenv(journal.ENV, str(state))
    monkeypatch.delenv(journal.RUNNING, raising=False)
    journal.write("h", "s", "f", "s.toml", [{"name": "x", "set": "true {value}",
                                            "original": "1"}])
    assert "study s;" in journal.warning()
    get = [MPIWRITE, "tune", "get", "vm.dirty_ratio", str(tmp_path)]
    code, text = Settings([], leader=True, owner=("h", "s", "f", "s.toml"))._run(get)
    assert code == 0 and "warning" not in text, text
    code, text = Settings([], leader=True)._run(get)
    assert code == 0 and "did not put them back (study s;" in text, text
    monkeypatch.setenv(journal.RUNNING, "s")
    assert journal.warning() == ""
    journal.write("h", "t", "f", "t.toml", [{"name": "y", "set": "true {value}",
                                            "original": "1"}])
    assert "study t;" in journal.warning() and "study s" not in journal.warning()


@pytest.mark.timeout(180)
def test_a_setting_held_by_a_live_study_is_refused_to_another(tmp_path):
    """Two studies of other names (two shells) changing the same setting on one node: the
    second is refused before it reads or changes anything, naming the holder's pid and
    command; the first puts its value back; at the end the setting is the original and no
    lock file is left in /tmp."""
    path, root = setting_study(tmp_path, '"0"')
    with open(path) as fh:
        text = fh.read().replace('size = "1MiB"', 'time = "6s"\nengine = "null"')
    with open(path, "w") as fh:
        fh.write(text)
    other = tmp_path / "other.toml"
    other.write_text(text.replace('name = "', 'name = "other-', 1))
    first = launch(tmp_path, path, root, tmp_path / "state")
    try:
        wait_for(lambda: checksums_now(root) == {"0"}, 60, first)
        second = cli(["study", "run", str(other)], cwd=tmp_path,
                     env=clean_env({"MPIWRITE_SYSROOT": str(root),
                                    "MPIWRITE_STATE": str(tmp_path / "state")}), timeout=60)
        assert second.returncode == 1, second.stdout + second.stderr
        assert "is held by another study, pid" in second.stderr, second.stderr
        assert "study run" in second.stderr  # the holder's command
        assert "did not put them back" not in second.stderr  # a live journal, not a leftover
        assert checksums_now(root) == {"0"}  # the second changed nothing
        out, err = first.communicate(timeout=90)
        assert first.returncode == 0, err
    finally:
        kill_group(first)
    assert checksums_now(root) == {"1"}
    import socket

    from mpiwrite.study import holds

    for host in {socket.gethostname(), os.uname().nodename}:
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("MPIWRITE_SYSROOT", str(root))
            assert not os.path.exists(holds.lock_path("checksums", host))


SLOW_SET = """#!/bin/bash
# the stand-in lctl, slow to turn checksums off; it says when it has begun
[ "$1" = set_param ] && [ "${2##*=}" = 0 ] && : > {began} && sleep 5
exec {real} "$@"
"""


@pytest.mark.timeout(180)
@pytest.mark.parametrize("how", ["SIGTERM", "SIGKILL"])
def test_a_slow_set_ends_with_its_job_and_changes_nothing_after_it(tmp_path, how):
    """A point's `set` that takes 5 s, its job ended 1 s into it: by SIGTERM to mpiexec
    (the ranks end the set, restore and exit 143) or by SIGKILL of the launcher and its ranks
    (the set, in a session of its own, dies with its rank).  Once the set ran on after the
    launch had ended and turned the setting off for good."""
    began = tmp_path / "began"
    path, root = slow_study(tmp_path, SLOW_SET.replace("{began}", str(began)), "2s")
    proc = launch(tmp_path, path, root, tmp_path / "state")
    try:
        wait_for(began.exists, 60, proc)
        time.sleep(1.0)
        if how == "SIGTERM":
            os.kill(proc.pid, signal.SIGTERM)  # to mpiexec, which forwards it to the ranks
            out, err = proc.communicate(timeout=30)
        else:
            kill_group(proc)
            out, err = proc.communicate(timeout=30)
    finally:
        kill_group(proc)
    if how == "SIGTERM":
        assert proc.returncode == 143, (proc.returncode, err[-1500:])
        assert "did not end the job" not in err and "rank 0 on ?" not in err, err
        assert "ended: the job it belongs to is ending; restoring" in out, out[-1500:]
    time.sleep(5)  # past the set's own end (5 s after it began), had it gone on
    assert checksums_now(root) == {"1"}, (out[-1500:], err[-1500:])


@pytest.mark.timeout(180)
def test_two_quick_interrupts_of_a_study_leave_no_data_and_the_setting_accounted_for(
        tmp_path):
    """Ctrl-C twice, 0.1 s apart, while a point writes: hydra forces the end and SIGKILLs
    the ranks (exit 255 and its 'demux engine error' are hydra's own).  Within 15 s the
    node's keeper has removed the point's data and lock files and the record says how it
    ended; the setting is either back or in the journal, which `study restore` puts back."""
    from mpiwrite.vocab import names

    path, root = setting_study(tmp_path, '"0"')
    with open(path) as fh:
        text = fh.read().replace('size = "1MiB"', 'time = "20s"\nblock_size = "64KiB"')
    with open(path, "w") as fh:
        fh.write(text)
    state = tmp_path / "state"
    data = tmp_path / "data"
    proc = launch(tmp_path, path, root, state)
    try:
        wait_for(lambda: data.is_dir() and any(names.looks_like_data_file(f)
                                               for f in os.listdir(data)), 60, proc)
        time.sleep(0.5)  # the point is writing
        proc.send_signal(signal.SIGINT)
        time.sleep(0.1)
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=60)
    finally:
        kill_group(proc)
    assert "Traceback" not in err, err

    def left():
        return [f for f in os.listdir(data) if names.looks_like_data_file(f)
                or names.parse_lock(f)] if data.is_dir() else []

    wait_for(lambda: not left(), 15)
    (rec,) = records_in(str(tmp_path / "results"))
    wait_for(lambda: read_record(rec).status != "running", 15)
    assert read_record(rec).status in ("interrupted", "failed")
    if checksums_now(root) != {"1"}:  # killed before its restore: the journal has it
        env = {"MPIWRITE_SYSROOT": str(root), "MPIWRITE_STATE": str(state)}
        out = cli(["study", "restore", path], cwd=tmp_path, env=env)
        assert out.returncode == 0, out.stderr
    assert checksums_now(root) == {"1"}
