"""Planted FIFOs and links, swapped folders: root runs mpiwrite, user `nobody` attacks.

Hangs, and planted links and other people's folders: each test
is one finding of docs/security.md's list.  `shared` is a 0777 folder without the sticky bit
(as /shared was), `victim` a root-only file or folder that must stay untouched.  The attacker
acts through setpriv as nobody; every run is bounded, a hang fails the test.
"""

import json
import os
import pathlib
import shutil
import stat
import subprocess
import tempfile
import time

import pytest
import synth
from common import (
    MPIEXEC,
    MPIWRITE,
    bounded,
    clean_env,
    is_root,
    kill_group,
    needs_matplotlib,
    read_record,
    records_in,
    tool,
)
from common import wait as finish  # bounded; kills the group on a hang

pytestmark = [pytest.mark.root, pytest.mark.timeout(180),
              pytest.mark.skipif(not is_root(), reason="needs root: nobody attacks root's run")]

NOBODY = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--"]
QUIET = ["--progress-interval", "0"]
SECRET = b"API_KEY=sk-live-0123456789\nDB_PASSWORD=hunter2-secret\n"
# rank 1 under strace, its fsync delayed 3 s: its data file exists, written and still open, for
# 3 s before anyone reads it back (time for the attacker, whatever the disk's speed)
SLOW_FSYNC = ["strace", "-f", "-qq", "-o", "/dev/null", "-e", "trace=fsync",
              "-e", "inject=fsync:delay_enter=3000000"]


def as_nobody(*argv):
    out = subprocess.run(NOBODY + [str(a) for a in argv], capture_output=True, text=True,
                         timeout=30, env=clean_env())
    assert out.returncode == 0, f"nobody could not {argv}: {out.stderr}"


@pytest.fixture
def shared():
    """A 0777 folder without the sticky bit that nobody can reach (tmp_path is 0700)."""
    d = tempfile.mkdtemp(prefix="mpiwrite-shared-", dir="/tmp")
    os.chmod(d, 0o777)
    yield pathlib.Path(d)
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def victim(tmp_path):
    """A root-only 0600 file of odd size and a root-only folder, out of nobody's reach."""
    f = tmp_path / "victim"
    f.write_bytes(SECRET + b"x" * (12345 - len(SECRET)))
    os.chmod(f, 0o600)
    d = tmp_path / "victimdir"
    d.mkdir(mode=0o700)
    return f, d


def untouched(f) -> bool:
    st = os.stat(f)
    return (f.read_bytes().startswith(SECRET) and st.st_size == 12345
            and stat.S_IMODE(st.st_mode) == 0o600)


def nobodys(path) -> pathlib.Path:
    path = pathlib.Path(path)
    path.mkdir()
    os.chown(path, 65534, 65534)
    return path


def start(cmd, cwd):
    return subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, stdin=subprocess.DEVNULL, env=clean_env(),
                            start_new_session=True)


def wait_for(find, proc, what, timeout=30.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        found = find()
        if found:
            return found
        if proc.poll() is not None:
            break
        time.sleep(0.02)
    kill_group(proc)
    out, err = proc.communicate()
    raise AssertionError(f"no {what}: rc {proc.returncode}\n{out}\n{err}")


def glob1(folder, pattern):
    found = sorted(pathlib.Path(folder).rglob(pattern))
    return found[0] if found else None


def mpmd_slow_rank1(args):
    """Two ranks; rank 1's fsync takes 3 s."""
    if MPIEXEC is None or not tool("strace"):
        pytest.skip("needs mpiexec and strace")
    return ([MPIEXEC, "-n", "1", MPIWRITE] + args + [":", "-n", "1"] + SLOW_FSYNC
            + [MPIWRITE] + args)


def failure_lines(err):
    return [ln for ln in err.splitlines() if ln.startswith("mpiwrite: ")
            and "warning" not in ln]


# ------------------------------------------------------------------------------------- hangs
@pytest.mark.mpi
@pytest.mark.parametrize("planted", ["fifo", "symlink"])
@pytest.mark.parametrize("mode", ["verify", "read"])
def test_data_file_replaced_before_it_is_read_back_is_refused(tmp_path, shared, victim, mode,
                                                              planted):
    """--verify (rank 1 checks its own file) and --read --read-shift 1 --drop-cache (rank 1
    drops its file's pages, rank 0 reads it): nobody, owner of TARGET, puts a FIFO (once a
    hang in open()) or a symlink to a root-only file (once followed: its size landed in the
    record) where rank 1's file was.  Refused at once: exit 1 naming rank, host and path."""
    target = nobodys(shared / "T")
    extra = ["--verify"] if mode == "verify" else ["--read", "--read-shift", "1", "--drop-cache"]
    args = ["run", str(target), "-s", "1M", "-b", "64k", "--results", "r"] + extra + QUIET
    proc = start(mpmd_slow_rank1(args), tmp_path)
    data = wait_for(lambda: glob1(target, "*-r000001.dat"), proc, "data file of rank 1")
    as_nobody("rm", "-f", data)
    if planted == "fifo":
        as_nobody("mkfifo", data)
    else:
        as_nobody("ln", "-s", victim[0], data)
    rc, out, err = finish(proc)
    assert rc == 1, err
    said = failure_lines(err)
    assert len(said) == 1, err
    reader = 1 if mode == "verify" else 0
    assert f"rank {reader} on " in said[0] and str(data) in said[0], said
    assert ("FIFO" if planted == "fifo" else "symbolic link") in said[0], said
    assert "Traceback" not in err
    assert untouched(victim[0])

    (path,) = records_in(tmp_path / "r")
    rec = read_record(path)
    said = json.dumps([rec.errors, rec.attrs["error"], rec.attrs["warnings"]])
    assert "12345" not in said and "API_KEY" not in said, said  # nothing of the victim's


@pytest.mark.mpi
@pytest.mark.parametrize("planted", ["fifo", "symlink"])
def test_json_file_planted_during_the_run_is_refused(tmp_path, shared, victim, planted):
    """nobody creates a FIFO (once: rank 0 hung opening it, the record complete) or a symlink
    to a root-only file (once: truncated and overwritten) at --json 1.5 s into the run."""
    dest = shared / "s.json"
    proc = start([MPIEXEC, "-n", "2", MPIWRITE, "run", str(tmp_path / "T"), "--engine", "null",
                  "-t", "3", "--results", "r", "--json", str(dest)] + QUIET, tmp_path)
    wait_for(lambda: records_in(tmp_path / "r"), proc, "record")
    time.sleep(1.5)
    if planted == "fifo":
        as_nobody("mkfifo", dest)
    else:
        as_nobody("ln", "-s", victim[0], dest)
    rc, out, err = finish(proc)
    assert rc == 1, err
    said = failure_lines(err)
    assert len(said) == 1 and "--json" in said[0] and str(dest) in said[0], err
    assert "rank 0 on " in said[0]
    assert ("FIFO" if planted == "fifo" else "symbolic link") in said[0], said
    assert untouched(victim[0])
    assert os.path.islink(dest) or stat.S_ISFIFO(os.lstat(dest).st_mode)


@pytest.mark.mpi
@pytest.mark.parametrize("how", ["all-ranks", "bad-value-on-rank-1"])
def test_a_fault_before_the_guard_ends_the_job_with_one_line(tmp_path, how):
    """MPIWRITE_INJECT=1:start-up raises in Run.__init__, and a bad value ('²:set-up') on one
    rank only fails there too: once a traceback on that rank and a hang on the other."""
    args = ["run", "d", "-s", "1M", "--results", "r"] + QUIET
    if how == "all-ranks":
        cmd = [MPIEXEC, "-n", "2", "-env", "MPIWRITE_INJECT", "1:start-up", MPIWRITE] + args
    else:
        cmd = ([MPIEXEC, "-n", "1", MPIWRITE] + args + [":", "-n", "1", "-env",
               "MPIWRITE_INJECT", "²:set-up", MPIWRITE] + args)
    t0 = time.monotonic()
    out = bounded(cmd, 40, cwd=tmp_path, env=clean_env())
    assert time.monotonic() - t0 < 20
    assert out.returncode == 1, out.stderr
    said = [ln for ln in out.stderr.splitlines() if "run failed:" in ln]
    assert len(said) == 1 and "rank 1 on " in said[0] and "in start-up" in said[0], out.stderr
    assert ("MPIWRITE_INJECT" in said[0]) if how != "all-ranks" else "fault injected" in said[0]
    assert "Traceback" not in out.stderr
    assert not (tmp_path / "d").exists()


# ------------------------------------------------------------------------- planted links
def test_json_symlink_planted_before_the_run_is_exit_2(tmp_path, shared, victim):
    dest = shared / "s.json"
    as_nobody("ln", "-s", victim[0], dest)
    out = bounded([MPIWRITE, "run", str(tmp_path / "T"), "-s", "64k", "-b", "64k", "--results", "r",
                   "--json", str(dest)] + QUIET, 60, cwd=tmp_path, env=clean_env())
    assert out.returncode == 2, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and "--json" in out.stderr
    assert "symbolic link" in out.stderr
    assert untouched(victim[0])
    assert not (tmp_path / "T").exists() and not (tmp_path / "r").exists()


def _output_cmd(cmd, dest, tmp_path):
    if cmd == "jobscript":
        return [MPIWRITE, "jobscript", "-o", str(dest), "--", "/scratch/x"]
    if cmd == "plot":
        (tmp_path / "rec").mkdir(exist_ok=True)
        synth.make(tmp_path / "rec" / "a.h5", [500.0, 510.0], "a")
        return [MPIWRITE, "plot", "scaling", str(tmp_path / "rec"), "-o", str(dest)]
    return [tool("mpiwrite-man"), str(dest.parent)]


NAMES = {"jobscript": "j.sh", "plot": "p.png", "man": "mpiwrite-run.1"}


@pytest.mark.parametrize("planted", ["symlink", "fifo", "nobodys-file"])
@pytest.mark.parametrize("cmd", ["jobscript", "plot", "man"])
def test_output_file_planted_by_another_user_is_refused(tmp_path, shared, victim, cmd,
                                                        planted):
    """jobscript -o, plot -o, mpiwrite-man DIR: a symlink to a root-only file at the name
    (once: overwritten, and chmod'ed 0755 by jobscript), a FIFO (once: a hang in open) or a
    file of nobody's: refused with exit 2 and one line, nothing written."""
    dest = shared / NAMES[cmd]
    if planted == "symlink":
        as_nobody("ln", "-s", victim[0], dest)
    elif planted == "fifo":
        as_nobody("mkfifo", dest)
    else:
        as_nobody("sh", "-c", f"echo mine > {dest}")
    out = bounded(_output_cmd(cmd, dest, tmp_path), 60, cwd=tmp_path, env=clean_env())
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and str(dest) in lines[0], out.stderr
    assert {"symlink": "symbolic link", "fifo": "FIFO",
            "nobodys-file": "another user"}[planted] in lines[0]
    assert untouched(victim[0])
    if planted == "nobodys-file":
        assert dest.read_text() == "mine\n"
    assert sorted(os.listdir(shared)) == [dest.name]  # no page, no temporary file


@pytest.mark.parametrize("cmd", ["jobscript", pytest.param("plot", marks=needs_matplotlib),
                                 "man"])
def test_own_output_file_is_replaced(tmp_path, cmd):
    """The user's own earlier output is replaced (a new file renamed over it)."""
    dest = tmp_path / "out" / NAMES[cmd]
    dest.parent.mkdir()
    dest.write_text("old\n")
    out = bounded(_output_cmd(cmd, dest, tmp_path), 60, cwd=tmp_path, env=clean_env())
    assert out.returncode == 0, out.stderr
    assert dest.read_bytes() != b"old\n" and not dest.is_symlink()
    if cmd == "jobscript":
        assert os.stat(dest).st_mode & 0o111
    assert not [n for n in os.listdir(dest.parent) if n.startswith(".")]


@pytest.mark.parametrize("kind", ["symlink-to-secret", "directory", "symlink-to-fifo"])
def test_tag_file_that_is_a_link_or_not_a_file_is_exit_2(tmp_path, shared, victim, kind):
    """--tag-file must be a regular file, not followed: once a symlink to a root-only file
    gave its KEY=VALUE lines as tags of a 0644 record that nobody could `show`."""
    tags = shared / "tags.txt"
    if kind == "symlink-to-secret":
        as_nobody("ln", "-s", victim[0], tags)
    elif kind == "directory":
        as_nobody("mkdir", tags)
    else:
        as_nobody("mkfifo", shared / "fifo")
        as_nobody("ln", "-s", shared / "fifo", tags)
    out = bounded([MPIWRITE, "run", "d", "-s", "64k", "--results", "r", "--tag-file",
                   str(tags)], 30, cwd=tmp_path, env=clean_env())
    assert out.returncode == 2, out.stderr
    assert out.stderr.startswith("mpiwrite: error: --tag-file") and str(tags) in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    assert "symbolic link" in out.stderr or kind == "directory"
    assert "API_KEY" not in out.stderr and "hunter2" not in out.stderr
    assert not (tmp_path / "d").exists() and not (tmp_path / "r").exists()


@pytest.mark.parametrize("line", ["DB_PASSWORD hunter2-secret", "1DB=hunter2-secret",
                                  "ok=hunter2-secret", "DB=hunter2-secret\x07",
                                  "DB=" + "hunter2-secret" * 80])
def test_a_bad_tag_file_line_is_named_not_echoed(tmp_path, line):
    """The line may hold a secret: the message names the file and the line number only."""
    tags = tmp_path / "tags.txt"
    tags.write_text(f"# tags\nok=1\n{line}\n")
    out = bounded([MPIWRITE, "run", "d", "-s", "64k", "--results", "r", "--tag-file",
                   str(tags)], 30, cwd=tmp_path, env=clean_env())
    assert out.returncode == 2, out.stderr
    assert "hunter2" not in out.stderr, out.stderr
    assert str(tags) in out.stderr and "line 3" in out.stderr, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("which", ["TARGET", "--results", "--json"])
def test_a_folder_symlink_of_another_user_is_not_followed(tmp_path, shared, victim, which):
    """TARGET, --results (and --json's folder) may be symlinks of the user's own or root's
    (/scratch -> /lustre/...), not one that nobody planted before the run: exit 2, and
    nothing is written in the folder it points to."""
    link = shared / "link"
    as_nobody("ln", "-s", victim[1], link)
    target, results, json_path = tmp_path / "T", tmp_path / "r", tmp_path / "s.json"
    if which == "TARGET":
        target = link
    elif which == "--results":
        results = link
    else:
        json_path = link / "s.json"
    out = bounded([MPIWRITE, "run", str(target), "-s", "64k", "-b", "64k", "--results",
                   str(results), "--json", str(json_path)] + QUIET, 60, cwd=tmp_path,
                  env=clean_env())
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"mpiwrite: error: {which}"), out.stderr
    assert "another user" in lines[0]
    assert os.listdir(victim[1]) == []


def test_own_folder_symlink_is_followed(tmp_path):
    (tmp_path / "real").mkdir()
    os.symlink(tmp_path / "real", tmp_path / "T")
    out = bounded([MPIWRITE, "run", str(tmp_path / "T"), "-s", "64k", "-b", "64k", "--keep",
                   "--results", "r"] + QUIET, 60, cwd=tmp_path, env=clean_env())
    assert out.returncode == 0, out.stderr
    assert len(list((tmp_path / "real").glob("*.dat"))) == 1


# ------------------------------------------------------------- folders swapped mid-run
SLOW_ITERATIONS = ["-s", "1M", "-b", "64k", "-i", "3", "--delay", "3"] + QUIET


def test_results_folder_swapped_between_iterations_gets_no_record(tmp_path, shared, victim):
    """nobody renames --results r (in a 0777 folder) and puts a symlink to a root-only
    folder there: the records go on into the folder opened at the start, by descriptor,
    and the run says where that folder is now."""

    results = shared / "r"
    proc = start([MPIWRITE, "run", str(tmp_path / "T"), "--results", str(results)]
                 + SLOW_ITERATIONS, tmp_path)

    def one_iteration():
        found = records_in(results)
        try:
            return found and len(read_record(found[0]).iterations) >= 1
        except Exception:  # being replaced
            return False

    wait_for(one_iteration, proc, "record of iteration 0")
    as_nobody("mv", results, shared / "r.old")
    as_nobody("ln", "-s", victim[1], results)
    rc, out, err = finish(proc)
    assert os.listdir(victim[1]) == []
    assert rc == 0, err
    (rec,) = records_in(shared / "r.old")
    assert read_record(rec).status == "complete" and len(read_record(rec).iterations) == 3
    warned = [ln for ln in err.splitlines() if "--results" in ln]
    assert len(warned) == 1 and str(shared / "r.old") in warned[0], err
    assert f"record {rec}" in out


def test_target_swapped_between_iterations_is_refused(tmp_path, shared, victim):
    """nobody swaps TARGET (made by the run in a 0777 folder) for a symlink to a root-only
    folder after iteration 0: no data there; one clear line; with --keep the warning says
    where the kept files are, not that they "were removed"."""
    target = shared / "T"
    proc = start([MPIWRITE, "run", str(target), "--keep", "--results", str(tmp_path / "r")]
                 + SLOW_ITERATIONS, tmp_path)
    wait_for(lambda: glob1(target, "*-i0-*.dat"), proc, "data file of iteration 0")
    time.sleep(0.5)
    as_nobody("mv", target, shared / "T.old")
    as_nobody("ln", "-s", victim[1], target)
    rc, out, err = finish(proc)
    assert os.listdir(victim[1]) == []
    assert rc == 1, err
    said = failure_lines(err)
    assert len(said) == 1 and str(target) in said[0] and "rank 0 on " in said[0], err
    assert "no longer" in said[0]
    assert "were removed" not in err
    assert [p.name for p in (shared / "T.old").glob("*.dat")] != []  # --keep: still there


@pytest.mark.mpi
def test_run_subdirectory_swapped_in_a_folder_of_nobodys_is_refused(tmp_path, shared, victim):
    """TARGET belongs to nobody, who swaps run subdirectory d00001 (--files-per-dir 1) for a
    symlink to a root-only folder after iteration 0: rank 1 writes nothing there."""
    target = nobodys(shared / "T")
    proc = start([MPIEXEC, "-n", "2", MPIWRITE, "run", str(target), "--files-per-dir", "1",
                  "--keep", "--results", str(tmp_path / "r")] + SLOW_ITERATIONS, tmp_path)
    first = wait_for(lambda: glob1(target, "*-i0-r000001.dat"), proc, "rank 1's file")
    time.sleep(0.5)
    sub = first.parent
    as_nobody("mv", sub, target / "moved")
    as_nobody("ln", "-s", victim[1], sub)
    rc, out, err = finish(proc)
    assert os.listdir(victim[1]) == []
    assert rc == 1, err
    said = failure_lines(err)
    assert len(said) == 1 and "rank 1 on " in said[0] and str(sub) in said[0], err
    assert "no longer" in said[0]


# ------------------------------------------------------------- the index folder (--cache)
def _records(folder):
    folder.mkdir()
    for i in range(2):
        path = synth.make(folder / f"a{i}.h5", [800.0 + i, 805.0], f"a{i}")
        t = time.time_ns() - 60 * 10**9  # settled: the index keeps it
        os.utime(path, ns=(t, t))
    return folder


def _report(tmp_path, site, *extra, env=None):
    return bounded([MPIWRITE, "report", str(site), *extra], 60, cwd=tmp_path,
                   env=clean_env(env))


def test_an_index_folder_planted_as_a_link_is_not_followed(tmp_path, shared, victim):
    """nobody links /shared/cache (1777) to root's own private index folder: root's report
    with --cache /shared/cache once followed it, called root's index damaged, removed it and
    wrote a new one there.  --cache: exit 2 naming the link; MPIWRITE_CACHE: a warning and
    no index; root's folder untouched either way."""
    site = _records(tmp_path / "r")
    os.chmod(shared, 0o1777)
    assert _report(tmp_path, site, "--cache", str(victim[1])).returncode == 0
    (victim[1] / "index-2.sqlite").write_bytes(b"root's own file, not an index")
    before = {p.name: (p.read_bytes(), p.stat().st_ino) for p in victim[1].iterdir()}
    link = shared / "cache"
    as_nobody("ln", "-s", victim[1], link)
    out = _report(tmp_path, site, "--cache", str(link))
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mpiwrite: error: --cache:"), out.stderr
    assert str(link) in lines[0] and "another user" in lines[0]
    out = _report(tmp_path, site, env={"MPIWRITE_CACHE": str(link)})
    assert out.returncode == 0 and "a0" not in out.stderr, out.stderr
    warned = [ln for ln in out.stderr.splitlines() if "warning" in ln]
    assert len(warned) == 1 and str(link) in warned[0] and "another user" in warned[0]
    assert {p.name: (p.read_bytes(), p.stat().st_ino) for p in victim[1].iterdir()} == before


def test_an_index_folder_of_another_user_is_refused(tmp_path, shared):
    site = _records(tmp_path / "r")
    theirs = nobodys(shared / "cache")
    out = _report(tmp_path, site, "--cache", str(theirs))
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and str(theirs) in lines[0] and "another user" in lines[0], lines
    assert os.listdir(theirs) == []
