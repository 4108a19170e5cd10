"""The ordinary user on a fresh account: an account made by the suite (`useradd -m`, no
~/.local, no ~/.cache), mpiwrite as a site installs it (tests/testbed/user.py), and every
command run as that user, with the home writable and again read-only (compute nodes often
mount it so).  Nothing of the home is assumed: a study that changes no setting keeps no
journal; the journal folder is made as the XDG rules say, or falls back to a node-local one,
or the study refuses before changing anything, naming MPIWRITE_STATE."""

import os
import shutil
import stat

import pytest
from common import FIXTURES, ROOT, bounded
from testbed import user as userbed
from testbed.hosts import needs

pytestmark = [pytest.mark.mpi, pytest.mark.root]

STUDY = """
[study]
name = "{name}"
target = "{work}/data"
results = "{work}/results"
repeat = 2

[run]
size = "1MiB"
progress_interval = 0

[axes]
block_size = ["64KiB", "1MiB"]
"""

SETTING = """
[[setting]]
name = "knob"
values = ["2", "3"]
set = "sh -c 'echo {{value}} > {work}/knob'"
get = "cat {work}/knob"
"""


@pytest.fixture(scope="module")
@needs("root")
def account():
    why = userbed.why_not()
    if why:
        pytest.skip(why)
    with userbed.install(str(ROOT)) as bin_dir, userbed.fresh_user(bin_dir) as u:
        yield u


def as_user(u, args, cwd=None, timeout=120, ro=False, env=None):
    return bounded(userbed.command(u, args, read_only_home=ro, env=env), timeout,
                   cwd=cwd or u.work)


def write_as(u, path, text):
    with open(path, "w") as fh:
        fh.write(text)
    os.chown(path, u.uid, u.gid)
    os.chmod(path, 0o644)


def study(u, name, settings=False):
    folder = os.path.join(u.work, name)
    os.makedirs(folder)
    os.chown(folder, u.uid, u.gid)
    path = os.path.join(folder, "s.toml")
    write_as(u, path, STUDY.format(name=name, work=folder)
             + (SETTING.format(work=folder) if settings else ""))
    if settings:
        write_as(u, os.path.join(folder, "knob"), "1\n")
    return folder, path


def home_listing(u):
    return sorted(os.listdir(u.home))


@pytest.mark.timeout(600)
def test_the_quick_start_and_the_answers_run_as_a_fresh_user(account):
    """run (the README's main job), report, page, import, clean and tune list, as the user,
    with a writable home: each exits 0 and the home gets nothing but what the XDG rules
    allow (the record index's cache)."""
    u = account
    before = home_listing(u)
    got = as_user(u, ["mpiexec", "-n", "4", "mpiwrite", "run"], timeout=240)
    assert got.returncode == 0, got.stdout[-2000:] + got.stderr
    assert os.listdir(os.path.join(u.work, "results"))
    for args in (["report", "results"], ["page", "results", "-o", "page.html"],
                 ["tune", "list", u.work], ["clean", u.work]):
        got = as_user(u, ["mpiwrite"] + args)
        assert got.returncode == 0, (args, got.stdout[-1500:], got.stderr)
    fixture = os.path.join(u.work, "ior.json")
    shutil.copy(FIXTURES / "import" / "fpp-write-fsync-i3.json", fixture)
    os.chown(fixture, u.uid, u.gid)
    got = as_user(u, ["mpiwrite", "import", "ior.json", "--results", "imported"])
    assert got.returncode == 0, got.stderr
    if shutil.which("man"):  # the quick start's third command
        got = as_user(u, ["mpiwrite", "help", "run"], env={"PAGER": "cat", "MANPAGER": "cat"})
        assert got.returncode == 0 and "mpiwrite" in got.stdout, got.stderr
    extra = set(home_listing(u)) - set(before)
    assert extra <= {".cache"}, extra
    assert not os.path.exists(os.path.join(u.home, ".local"))


@pytest.mark.timeout(600)
def test_a_study_without_settings_keeps_no_journal_and_no_lock(account):
    """A fresh account's study that changes no setting: no state folder made, no lock file
    left anywhere (it used to fail: ~/.local/state does not exist)."""
    u = account
    folder, path = study(u, "plain")
    got = as_user(u, ["mpiexec", "-n", "2", "mpiwrite", "study", "run", path], timeout=240)
    assert got.returncode == 0, got.stdout[-2000:] + got.stderr
    assert not os.path.exists(os.path.join(u.home, ".local"))
    assert not os.path.exists(f"/tmp/mpiwrite-state-{u.uid}")
    got = as_user(u, ["mpiexec", "-n", "2", "mpiwrite", "study", "run", path], timeout=240,
                  ro=True)
    assert got.returncode == 0, got.stdout[-2000:] + got.stderr


@pytest.mark.timeout(600)
def test_a_study_with_a_setting_makes_its_state_folder_and_leaves_nothing(account):
    """~/.local/state/mpiwrite made 0700 with its missing parents; at the end the setting is
    back, and neither a journal nor a lock file is left."""
    u = account
    folder, path = study(u, "knobbed", settings=True)
    got = as_user(u, ["mpiexec", "-n", "2", "mpiwrite", "study", "run", path], timeout=240)
    assert got.returncode == 0, got.stdout[-2000:] + got.stderr
    state = os.path.join(u.home, ".local", "state", "mpiwrite")
    for p in (os.path.join(u.home, ".local"), os.path.dirname(state), state):
        st = os.lstat(p)
        assert st.st_uid == u.uid and stat.S_IMODE(st.st_mode) == 0o700, (p, oct(st.st_mode))
    assert os.listdir(state) == []  # no journal, no lock
    with open(os.path.join(folder, "knob")) as fh:
        assert fh.read().strip() == "1"
    # the restore is said, one line per node
    assert [ln for ln in got.stdout.splitlines() if "settings put back" in ln] == \
        [f"study knobbed: settings put back on {os.uname().nodename}: knob=1"], got.stdout


@pytest.mark.timeout(600)
def test_a_read_only_home_falls_back_to_a_node_local_folder(account):
    """With the home read-only (and no state folder in it), the journal goes to
    /tmp/mpiwrite-state-UID (0700, the user's); it is gone again at the end."""
    u = account
    shutil.rmtree(os.path.join(u.home, ".local"), ignore_errors=True)
    folder, path = study(u, "readonly", settings=True)
    got = as_user(u, ["mpiexec", "-n", "2", "mpiwrite", "study", "run", path], timeout=240,
                  ro=True)
    assert got.returncode == 0, got.stdout[-2000:] + got.stderr
    fallback = f"/tmp/mpiwrite-state-{u.uid}"
    st = os.lstat(fallback)
    assert st.st_uid == u.uid and stat.S_IMODE(st.st_mode) == 0o700
    assert os.listdir(fallback) == []
    assert not os.path.exists(os.path.join(u.home, ".local"))
    with open(os.path.join(folder, "knob")) as fh:
        assert fh.read().strip() == "1"
    shutil.rmtree(fallback)


@pytest.mark.timeout(600)
def test_a_squatted_fallback_is_refused_before_anything_changes(account):
    """Home read-only and /tmp/mpiwrite-state-UID made by someone else: the study refuses
    before its first `set`, in one line naming MPIWRITE_STATE; the setting never changed;
    with MPIWRITE_STATE set to a folder of the user's it runs."""
    u = account
    shutil.rmtree(os.path.join(u.home, ".local"), ignore_errors=True)
    squat = f"/tmp/mpiwrite-state-{u.uid}"
    os.mkdir(squat, 0o755)  # root's: not the user's
    try:
        folder, path = study(u, "squatted", settings=True)
        got = as_user(u, ["mpiexec", "-n", "2", "mpiwrite", "study", "run", path],
                      timeout=240, ro=True)
        assert got.returncode != 0 and "MPIWRITE_STATE" in got.stderr, got.stderr
        assert "not yours" in got.stderr
        with open(os.path.join(folder, "knob")) as fh:
            assert fh.read().strip() == "1"
        mine = os.path.join(u.work, "state")
        os.mkdir(mine, 0o700)
        os.chown(mine, u.uid, u.gid)
        got = as_user(u, ["mpiexec", "-n", "2", "mpiwrite", "study", "run", path],
                      timeout=240, ro=True, env={"MPIWRITE_STATE": mine})
        assert got.returncode == 0, got.stdout[-2000:] + got.stderr
    finally:
        shutil.rmtree(squat, ignore_errors=True)


@pytest.mark.timeout(600)
def test_another_users_live_study_holds_its_setting(account, tmp_path):
    """root's study holds the setting `knob` on this node; the user's study of another name
    that would change a setting of that name is refused before anything changes, naming
    root's process; the user's knob never changed."""
    import subprocess
    import time

    from common import MPIEXEC, MPIWRITE, clean_env, kill_group

    u = account
    rootside = tmp_path / "root.toml"
    rootside.write_text(STUDY.format(name="roots", work=tmp_path).replace(
        'size = "1MiB"', 'time = "6s"\nengine = "null"').replace("repeat = 2", "repeat = 1")
        .replace('block_size = ["64KiB", "1MiB"]', 'block_size = ["1MiB"]')
        + SETTING.format(work=tmp_path))
    (tmp_path / "knob").write_text("1\n")
    proc = subprocess.Popen([MPIEXEC, "-n", "2", MPIWRITE, "study", "run", str(rootside)],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True,
                            env=clean_env({"MPIWRITE_STATE": str(tmp_path / "state")}))
    try:
        end = time.monotonic() + 60
        while (tmp_path / "knob").read_text().strip() == "1":
            assert time.monotonic() < end and proc.poll() is None, proc.communicate()
            time.sleep(0.1)
        folder, path = study(u, "mine", settings=True)
        got = as_user(u, ["mpiexec", "-n", "2", "mpiwrite", "study", "run", path],
                      timeout=240)
        assert got.returncode == 1, got.stdout[-1500:] + got.stderr
        assert "setting knob on" in got.stderr and "held by another study" in got.stderr
        assert "of user root" in got.stderr, got.stderr
        with open(os.path.join(folder, "knob")) as fh:
            assert fh.read().strip() == "1"
        proc.communicate(timeout=120)
        assert proc.returncode == 0
    finally:
        kill_group(proc)
    assert (tmp_path / "knob").read_text().strip() == "1"


@pytest.mark.timeout(300)
def test_tune_as_a_user_says_what_needs_root_and_plans_none_of_it(account):
    """tune list marks what needs root and says so; tune plan over a root-only tunable
    refuses (exit 2, no file) and prints what an administrator would run: the plan and the
    study as root, or the exact `tune set` with its restore."""
    u = account
    got = as_user(u, ["mpiwrite", "tune", "list", u.work])
    assert got.returncode == 0, got.stderr
    assert "vm.dirty_ratio" in got.stdout and "need root to set" in got.stdout
    plan = os.path.join(u.work, "t.toml")
    got = as_user(u, ["mpiwrite", "tune", "plan", u.work, "-o", plan, "--param",
                      "vm.dirty_ratio=20,1"])
    assert got.returncode == 2 and not os.path.exists(plan), got.stdout + got.stderr
    assert len(got.stderr.strip().splitlines()) == 1
    assert "vm.dirty_ratio: setting it needs root, and you are " + u.name in got.stderr
    assert f"mpiwrite tune set vm.dirty_ratio 1 {u.work}" in got.stdout
    assert f"to restore: mpiwrite tune set vm.dirty_ratio 20 {u.work}" in got.stdout
    assert "mpiexec -n N mpiwrite study run tune.toml" in got.stdout
