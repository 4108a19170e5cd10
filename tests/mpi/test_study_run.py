"""`mpiwrite study run`: every point of a study inside one MPI launch, on sub-communicators,
with client settings applied per node and restored, resumable (docs/study.md)."""

import collections
import glob
import os
import shutil
import signal
import subprocess
import time

import pytest
from common import (
    FIXTURES,
    MPIEXEC,
    MPIWRITE,
    bounded,
    clean_env,
    cli,
    kill_group,
    mpirun,
    read_record,
    records_in,
)

pytestmark = pytest.mark.mpi

# Stands in for lctl: reads and sets osc.*.checksums in the sysroot mpiwrite reads its node
# facts from (one line per OST, as `lctl get_param -n` prints); refuses the value 9.
FAKE_LCTL = """#!/bin/bash
root=${MPIWRITE_SYSROOT:?}
if [ "$1" = get_param ]; then cat "$root"/proc/fs/lustre/osc/*/checksums; exit 0; fi
[ "$1" = set_param ] || exit 2
value=${2##*=}
if [ "$value" = 9 ]; then \
echo "error: set_param: osc.*.checksums=9: Invalid argument" >&2; exit 22; fi
for f in "$root"/proc/fs/lustre/osc/*/checksums; do echo "$value" > "$f"; done
echo "$value" >> "$root/lctl.log"
"""


def study_file(tmp_path, body, name="s.toml"):
    path = tmp_path / name
    path.write_text(body.format(data=tmp_path / "data", results=tmp_path / "results"))
    return str(path)


def complete(folder):
    recs = [read_record(p) for p in records_in(folder)]
    return [r for r in recs if r.status == "complete"]


TWO_AXES = """
[study]
name = "grid"
target = "{data}"
results = "{results}"
repeat = 2

[run]
size = "1MiB"
progress_interval = 0

[axes]
block_size = ["64KiB", "128KiB", "256KiB", "1MiB"]
ranks_per_node = [1, 2]
"""


@pytest.mark.timeout(240)
def test_eight_points_twice_in_one_launch(tmp_path):
    """4 block sizes x 2 ranks-per-node = 8 points, 2 repetitions, one mpiexec: 16 complete
    records, each with its point's keys, the ranks its point asked for, and nothing left."""
    path = study_file(tmp_path, TWO_AXES)
    out = mpirun(2, ["study", "run", path], cwd=tmp_path, timeout=200)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr
    recs = complete(tmp_path / "results")
    assert len(recs) == 16
    seen = collections.Counter()
    sizes = {"64KiB": 65536, "128KiB": 131072, "256KiB": 262144, "1MiB": 1 << 20}
    for rec in recs:
        tags = rec.tags()
        assert tags["study"] == "grid"
        point, rep = int(tags["study_point"]), int(tags["study_repeat"])
        seen[(point, rep)] += 1
        block = ["64KiB", "128KiB", "256KiB", "1MiB"][point // 2]
        assert rec.params()["block_size"] == sizes[block]
        assert rec.attrs["ranks"] == [1, 2][point % 2]
        assert "block_size" not in tags  # a built-in key already: not shadowed by a tag
    assert sorted(seen) == [(p, r) for p in range(8) for r in range(2)]
    assert set(seen.values()) == {1}
    assert out.stdout.count("== study grid: run") == 16
    assert glob.glob(str(tmp_path / "data" / "*")) == []
    # balanced: each repetition a permutation of the points, in the plan's order, and each
    # record names its place and the point run before it (none for the launch's first)
    order = [ln.split("point ")[1].split(" ")[0] for ln in out.stdout.splitlines()
             if ln.startswith("== study grid")]
    from mpiwrite.study.plan import load

    st = load(path)
    assert order == [str(p) for p, _ in st.runs()]
    assert sorted(order[:8]) == sorted(order[8:]) == sorted(str(p) for p in range(8))
    by_seq = {int(r.tags()["study_seq"]): r.tags() for r in recs}
    assert sorted(by_seq) == list(range(16))
    assert by_seq[0]["study_prev_key"] == "none"
    for seq in range(1, 16):
        assert by_seq[seq]["study_prev_key"] == by_seq[seq - 1]["study_key"]
        assert by_seq[seq]["study_order"] == "balanced"
        assert by_seq[seq]["study_seed"] == str(st.order_seed())
    rep = cli(["report", str(tmp_path / "results"), "--by", "block_size,ranks_per_node"],
              cwd=tmp_path)
    assert rep.returncode == 0, rep.stderr
    assert len([ln for ln in rep.stdout.splitlines() if "KiB" in ln or "MiB" in ln]) == 8
    # study report: the same rows as report --by the axes, and a verdict per level
    got = cli(["study", "report", path], cwd=tmp_path)
    assert got.returncode == 0, got.stderr
    table, verdicts = got.stdout.split("each axis's levels against its first")
    assert table.splitlines()[1:-1] == rep.stdout.splitlines()[1:-1]
    lines = [ln.strip() for ln in verdicts.splitlines()[1:]]
    # block_size: 3 levels against 64KiB at 2 ranks_per_node values; ranks_per_node: 1 level
    # against 1 at 4 block sizes
    assert len([ln for ln in lines if ln.startswith("block_size ")]) == 6
    assert len([ln for ln in lines if ln.startswith("ranks_per_node 2 vs 1 at ")]) == 4
    lines = [ln for ln in lines if not ln.startswith(("repeat = ", "carry-over of "))]
    # a verdict per line; on a loaded machine the run before may move a tiny run's rate as
    # much as its block size (carry-over: no verdict, said on a line of its own)
    assert all(("a real difference" in ln or "within noise" in ln or "no verdict: the run "
                "before" in ln) for ln in lines), lines
    pytest.importorskip("matplotlib")
    drawn = cli(["study", "report", path, "--plot-dir", str(tmp_path)], cwd=tmp_path)
    assert drawn.returncode == 0, drawn.stderr
    png = tmp_path / "grid-ranks_per_node.png"  # the one numeric allocation axis
    assert drawn.stdout.strip().endswith(str(png))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not (tmp_path / "grid-nodes.png").exists()


SETTING = """
[study]
name = "checksums"
target = "{data}"
results = "{results}"
repeat = 1

[run]
size = "1MiB"
progress_interval = 0
sysroot = "{root}"

[[setting]]
name = "checksums"
values = [{values}]
set = "{lctl} set_param osc.*.checksums={{value}}"
get = "{lctl} get_param -n osc.*.checksums"
"""


def setting_study(tmp_path, values):
    import sysroots

    root = sysroots.make(tmp_path / "root", sysroots.lustre_165(1))
    lctl = tmp_path / "lctl"
    lctl.write_text(FAKE_LCTL)
    lctl.chmod(0o755)
    body = SETTING.replace("{root}", str(root)).replace("{lctl}", str(lctl)).replace(
        "{values}", values)
    return study_file(tmp_path, body), root


def checksums_now(root):
    found = set()
    for f in glob.glob(os.path.join(root, "proc/fs/lustre/osc/*/checksums")):
        with open(f) as fh:
            found.add(fh.read().strip())
    return found


@pytest.mark.timeout(180)
def test_a_setting_axis_changes_the_node_fact_and_is_restored(tmp_path):
    """checksums 0 then 1 set by one rank per node before each point: each record's node
    fact is the point's value, the command and its exit are in the record's notes, and the
    value `get` read (1) is back at the end."""
    path, root = setting_study(tmp_path, '"0", "1"')
    out = mpirun(2, ["study", "run", path], cwd=tmp_path, timeout=150,
                 env={"MPIWRITE_SYSROOT": root})
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr
    recs = sorted(complete(tmp_path / "results"), key=lambda r: int(r.tags()["study_point"]))
    assert [r.tags()["setting.checksums"] for r in recs] == ["0", "1"]
    assert [r.keys()["checksums"] for r in recs] == ["off", "on"]
    notes = " ".join(recs[0].attrs["notes"]) if isinstance(recs[0].attrs["notes"], list) \
        else str(recs[0].attrs["notes"])
    assert "setting checksums=0 on" in notes and "exit 0" in notes
    assert checksums_now(root) == {"1"}
    # one node: set 0, set 1 (unchanged by the restore, which has nothing to do)
    with open(os.path.join(root, "lctl.log")) as fh:
        assert fh.read().split() == ["0", "1"]
    rep = cli(["report", str(tmp_path / "results"), "--by", "setting.checksums"], cwd=tmp_path)
    assert rep.returncode == 0 and "setting.checksums" in rep.stdout, rep.stderr


@pytest.mark.timeout(180)
def test_a_failed_set_ends_the_study_and_restores(tmp_path):
    """The second point's `set` fails: one line names the node, the command and its output,
    exit 1, no record of that point, and the original value is restored."""
    path, root = setting_study(tmp_path, '"0", "9"')
    out = mpirun(2, ["study", "run", path], cwd=tmp_path, timeout=150,
                 env={"MPIWRITE_SYSROOT": root})
    assert out.returncode == 1, out.stdout[-2000:] + out.stderr
    lines = [ln for ln in out.stderr.splitlines() if "error" in ln]
    assert len(lines) == 1, out.stderr
    assert "set_param 'osc.*.checksums=9'" in lines[0] and "exit 22" in lines[0]
    assert "Invalid argument" in lines[0] and "point 1" in lines[0]
    assert [r.tags()["setting.checksums"] for r in complete(tmp_path / "results")] == ["0"]
    assert checksums_now(root) == {"1"}


@pytest.mark.timeout(240)
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_then_resume_runs_only_what_is_missing(tmp_path, sig):
    """A study of 6 half-second runs (the null engine) cut by SIGTERM (a batch system) or
    SIGINT (Ctrl-C) after two records: run again, it says how many were complete, runs only
    the others, and no point is recorded complete twice."""
    path = study_file(tmp_path, """
[study]
name = "cut"
target = "{data}"
results = "{results}"
repeat = 3

[run]
time = "0.5s"
engine = "null"  # no I/O: what is tested is the resume, not the writing
progress_interval = 0

[axes]
block_size = ["64KiB", "1MiB"]
""")
    if MPIEXEC is None:
        pytest.skip("no mpiexec")
    proc = subprocess.Popen([MPIEXEC, "-n", "2", MPIWRITE, "study", "run", path],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=clean_env(), start_new_session=True)
    try:
        end = time.monotonic() + 90
        while len(complete(tmp_path / "results")) < 2:
            assert proc.poll() is None and time.monotonic() < end, proc.communicate()
            time.sleep(0.1)
        os.kill(proc.pid, sig)  # to mpiexec, which forwards it to the ranks
        out, err = proc.communicate(timeout=60)
    finally:
        kill_group(proc)
    assert proc.returncode in (128 + sig, sig, -sig), err
    first = {(r.tags()["study_point"], r.tags()["study_repeat"])
             for r in complete(tmp_path / "results")}
    assert 2 <= len(first) < 6
    assert not [r for r in (read_record(p) for p in records_in(tmp_path / "results"))
                if r.status == "running"]
    again = mpirun(2, ["study", "run", path], cwd=tmp_path, timeout=150)
    assert again.returncode == 0, again.stderr
    assert f"{len(first)} of 6 runs already complete" in again.stdout
    assert again.stdout.count("== study cut: run") == 6 - len(first)
    done = collections.Counter((r.tags()["study_point"], r.tags()["study_repeat"])
                               for r in complete(tmp_path / "results"))
    assert len(done) == 6 and set(done.values()) == {1}


@pytest.mark.timeout(120)
def test_a_changed_file_is_refused_unless_new(tmp_path):
    path = study_file(tmp_path, TWO_AXES.replace("repeat = 2", "repeat = 1")
                      .replace('"64KiB", "128KiB", "256KiB", "1MiB"', '"64KiB"'))
    assert mpirun(2, ["study", "run", path], cwd=tmp_path).returncode == 0
    with open(path) as fh:
        changed = fh.read().replace('size = "1MiB"', 'size = "2MiB"')
    with open(path, "w") as fh:
        fh.write(changed)
    out = mpirun(2, ["study", "run", path], cwd=tmp_path)
    assert out.returncode == 2
    assert "from a different file" in out.stderr and "--new" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    assert mpirun(2, ["study", "run", path, "--new"], cwd=tmp_path).returncode == 0
    again = mpirun(2, ["study", "run", path], cwd=tmp_path)  # resumes the new file's records
    assert again.returncode == 0 and "2 of 2 runs already complete" in again.stdout
    assert len(complete(tmp_path / "results")) == 4


@pytest.mark.timeout(120)
def test_a_point_larger_than_the_launch_is_refused_before_data(tmp_path):
    path = study_file(tmp_path, TWO_AXES.replace("ranks_per_node = [1, 2]",
                                                 "ranks_per_node = [1, 4]"))
    out = mpirun(2, ["study", "run", path], cwd=tmp_path)
    assert out.returncode == 2, out.stderr
    assert "needs 1 node(s) x 4 rank(s) per node" in out.stderr
    assert not records_in(tmp_path / "results") and not glob.glob(str(tmp_path / "data/*"))


@pytest.mark.timeout(60)
def test_a_bad_file_is_one_line_per_problem_under_a_launcher_too(tmp_path):
    path = study_file(tmp_path, TWO_AXES.replace('size = "1MiB"', 'size = "lots"'))
    alone = cli(["study", "run", path], cwd=tmp_path)
    assert alone.returncode == 2 and "[run] size" in alone.stderr
    out = mpirun(2, ["study", "run", path], cwd=tmp_path)
    assert out.returncode == 2 and "[run] size" in out.stderr
    assert len([ln for ln in out.stderr.splitlines() if ln.strip()]) == 1, out.stderr
    assert not records_in(tmp_path / "results")


@pytest.mark.timeout(120)
def test_a_study_lock_that_is_a_folder_ends_the_job_in_seconds_with_one_line(tmp_path):
    """Rank 0 meets a folder where it locks the study, outside any point's guard.  Once
    rank 1 waited in MPI for good, then the guard ended the job with exit 1; now the lock is
    checked like every other input: one line naming it, exit 2, every rank gone in seconds."""
    path = study_file(tmp_path, TWO_AXES.replace("repeat = 2", "repeat = 1"))
    (tmp_path / "results" / ".mpiwrite-study-grid.lock").mkdir(parents=True)
    began = time.monotonic()
    out = mpirun(2, ["study", "run", path], cwd=tmp_path, timeout=60)
    assert time.monotonic() - began < 30
    assert out.returncode == 2, out.stderr
    lines = [ln for ln in out.stderr.splitlines() if ln.startswith("mpiwrite:")]
    assert len(lines) == 1 and ".mpiwrite-study-grid.lock cannot be opened" in lines[0], \
        out.stderr
    assert "Traceback" not in out.stderr
    assert not glob.glob(str(tmp_path / "data/*"))


# -- resume by values, records read only in workers, one run at a time ---------

CRAFTED = str(FIXTURES / "crafted")
ONE_POINT = """
[study]
name = "one"
target = "{data}"
results = "{results}"

[run]
size = "1MiB"
progress_interval = 0
"""


@pytest.mark.timeout(120)
@pytest.mark.parametrize("fixture", ["segfaults-runlevel.h5", "crashes-whole-read.h5"])
def test_a_damaged_record_in_the_results_is_named_and_the_study_runs(tmp_path, fixture):
    """done_in once read every record with libhdf5 in rank 0 of the job: a bit-flipped one
    killed it (SIGSEGV, or glibc's heap checks after the data was written).  Now a worker
    reads them: the damaged one is named in a warning and the point runs."""
    path = study_file(tmp_path, ONE_POINT)
    (tmp_path / "results").mkdir()
    bad = tmp_path / "results" / "mpiwrite-damaged.h5"
    shutil.copy(os.path.join(CRAFTED, fixture), bad)
    out = mpirun(2, ["study", "run", path], cwd=tmp_path, timeout=100)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr
    if fixture.startswith("segfaults"):  # the other's run-level part reads (not this study's)
        assert f"warning: skipped {bad}: the HDF5 library crashed reading it" in out.stderr
    bad.unlink()  # not read here either: it would take pytest down
    assert len(complete(tmp_path / "results")) == 1
    assert "Traceback" not in out.stderr


def test_a_record_libhdf5_never_finishes_is_skipped_when_resuming(tmp_path, monkeypatch):
    """The records are read in workers that are ended after HANG_SECONDS (60 s; 3 here)."""
    import synth

    from mpiwrite.records import sandbox as isolated
    from mpiwrite.study import resume

    monkeypatch.setattr(isolated, "HANG_SECONDS", 3.0)
    r = tmp_path / "r"
    r.mkdir()
    synth.make(r / "mpiwrite-good.h5", [800.0], "good0")
    shutil.copy(os.path.join(CRAFTED, "hangs-libhdf5.h5"), r / "mpiwrite-a-hangs.h5")
    said = []
    began = time.monotonic()
    got = resume.read_records(str(r), said.append)
    assert time.monotonic() - began < 30
    assert [g.run_id for g in got] == ["good0"]
    assert said == [f"skipped {r / 'mpiwrite-a-hangs.h5'}: the HDF5 library did not finish "
                    "reading it in 3 s; not read (not counted as a run of the study)"]


SWAP = """
[study]
name = "swap"
target = "{data}"
results = "{results}"

[run]
size = "1MiB"
progress_interval = 0

[axes]
"""
SWAP_AXES = ['block_size = ["64KiB", "1MiB"]', "fsync = [false, true]"]


def by_values(folder):
    return collections.Counter((r.params()["block_size"], r.params()["fsync"])
                               for r in complete(folder))


@pytest.mark.timeout(240)
def test_resuming_a_file_with_its_axes_swapped_runs_each_point_once(tmp_path):
    """The fingerprint ignores the axes' order, so the points are the same: a point is known
    by its values (the `study_key` tag), not by its place in the file."""
    a = study_file(tmp_path, SWAP + "\n".join(SWAP_AXES) + "\n", "a.toml")
    out = mpirun(2, ["study", "run", a], cwd=tmp_path, timeout=150)
    assert out.returncode == 0, out.stderr
    for rec_path in records_in(tmp_path / "results"):  # two of the four points are lost
        rec = read_record(rec_path)
        if rec.params()["block_size"] == 65536:  # points 0 and 1 of a, 0 and 2 of b
            os.unlink(rec_path)
    b = study_file(tmp_path, SWAP + "\n".join(reversed(SWAP_AXES)) + "\n", "b.toml")
    again = mpirun(2, ["study", "run", b], cwd=tmp_path, timeout=150)
    assert again.returncode == 0, again.stderr
    assert "2 of 4 runs already complete" in again.stdout
    assert by_values(tmp_path / "results") == {(65536, False): 1, (65536, True): 1,
                                               (1 << 20, False): 1, (1 << 20, True): 1}
    got = cli(["study", "report", b], cwd=tmp_path)
    assert got.returncode == 0, got.stderr
    verdicts = got.stdout.split("each axis's levels against its first")[1]
    lines = [ln.strip() for ln in verdicts.splitlines()[1:] if " vs " in ln]  # not the advice
    assert len(lines) == 4 and not [ln for ln in lines if "+0.0%" in ln or "no complete" in ln]


@pytest.mark.timeout(180)
def test_only_mpiwrites_own_matching_records_count_as_done(tmp_path):
    """Records with the study's tags forged on them: an lmdd import, and a run record whose
    parameters are not the point's.  Neither counts: the point runs."""
    import synth

    from mpiwrite.run.config import RunConfig
    from mpiwrite.study import execute, resume
    from mpiwrite.study.plan import load

    path = study_file(tmp_path, ONE_POINT)
    st = load(path)
    fp = execute.fingerprint(st)
    forged = {"study": "one", "study_hash": fp, "study_point": "0", "study_repeat": "0",
              "study_generation": "1", "study_key": "{}"}
    results = tmp_path / "results"
    imp = cli(["import", os.path.join(FIXTURES, "import",
                                      "lmdd-tmpfs.txt"), "--results", str(results)]
              + [w for k, v in forged.items() for w in ("--tag", f"{k}={v}")], cwd=tmp_path)
    assert imp.returncode == 0, imp.stderr
    synth.make(results / "mpiwrite-forged.h5", [900.0], "forged0", tags=forged)
    assert resume.point_keys(st, [RunConfig(size=1 << 20)]) == ["{}"]  # no axes
    out = mpirun(2, ["study", "run", path], cwd=tmp_path, timeout=150)
    assert out.returncode == 0, out.stderr
    assert "already complete" not in out.stdout and "run 1 of 1" in out.stdout


@pytest.mark.timeout(120)
def test_two_runs_of_one_study_at_once_the_second_refuses(tmp_path):
    """Both once ran every run, each recorded twice: now the first holds a lock on the study
    in its results folder for the whole launch, the second says so in one line (exit 2)."""
    if MPIEXEC is None:
        pytest.skip("no mpiexec")
    path = study_file(tmp_path, ONE_POINT.replace('size = "1MiB"', 'time = "4s"'))
    first = subprocess.Popen([MPIEXEC, "-n", "1", MPIWRITE, "study", "run", path], cwd=tmp_path,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=clean_env(), start_new_session=True)
    try:
        end = time.monotonic() + 60
        while not glob.glob(str(tmp_path / "data" / "*")):  # the first is writing
            assert first.poll() is None and time.monotonic() < end, first.communicate()
            time.sleep(0.1)
        second = mpirun(1, ["study", "run", path], cwd=tmp_path, timeout=60)
        out, err = first.communicate(timeout=60)
    finally:
        kill_group(first)
    assert first.returncode == 0, err
    assert second.returncode == 2, second.stderr
    lines = second.stderr.strip().splitlines()
    assert len(lines) == 1 and "running already" in lines[0] and "one" in lines[0]
    assert len(complete(tmp_path / "results")) == 1
    again = mpirun(1, ["study", "run", path], cwd=tmp_path)  # the lock went with the first
    assert again.returncode == 0 and "1 of 1 runs already complete" in again.stdout


@pytest.mark.timeout(180)
def test_new_starts_a_generation_and_report_shows_the_newest(tmp_path):
    """--new once ran beside the old records under the same hash, and report pooled them."""
    path = study_file(tmp_path, TWO_AXES.replace("repeat = 2", "repeat = 2").replace(
        '"64KiB", "128KiB", "256KiB", "1MiB"', '"64KiB", "1MiB"').replace(
        "ranks_per_node = [1, 2]", ""))
    assert mpirun(2, ["study", "run", path], cwd=tmp_path).returncode == 0
    out = mpirun(2, ["study", "run", path, "--new"], cwd=tmp_path)
    assert out.returncode == 0 and out.stdout.count("== study grid: run") == 4, out.stderr
    gens = collections.Counter(r.tags()["study_generation"] for r in complete(tmp_path / "results"))
    assert gens == {"1": 4, "2": 4}
    again = mpirun(2, ["study", "run", path], cwd=tmp_path)  # resumes the newest
    assert again.returncode == 0 and "4 of 4 runs already complete" in again.stdout
    rep = cli(["study", "report", path], cwd=tmp_path)
    assert rep.returncode == 0, rep.stderr
    assert "generation 2 of 1, 2" in rep.stdout
    rows = [ln.split() for ln in rep.stdout.splitlines() if ln.split()[:1] in (["64KiB"],
                                                                                ["1MiB"])]
    assert len(rows) == 2 and all(r[1] == "2" for r in rows), rep.stdout  # 2 runs a point
    old = cli(["study", "report", path, "--generation", "1"], cwd=tmp_path)
    assert old.returncode == 0 and "generation 1 of 1, 2" in old.stdout


@pytest.mark.timeout(120)
def test_a_target_like_keep_is_a_folder_and_nothing_is_kept(tmp_path):
    """target = "--keep" once ran into ./mpiwrite-data and kept the data."""
    path = study_file(tmp_path, ONE_POINT.replace('target = "{data}"', 'target = "--keep"'))
    out = mpirun(2, ["study", "run", path], cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert not (tmp_path / "mpiwrite-data").exists()
    assert not glob.glob(str(tmp_path / "--keep" / "*"))  # nothing left (nor the folder)
    recs = complete(tmp_path / "results")
    assert len(recs) == 1 and recs[0].params()["target"].endswith("--keep")
    assert recs[0].params()["keep"] is False
    assert out.stdout.count("Usage") == 0


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", ["file", "fifo"])
def test_results_that_is_not_a_folder_is_exit_2(tmp_path, kind):
    path = study_file(tmp_path, ONE_POINT)
    where = tmp_path / "notafolder"
    where.write_text("x\n") if kind == "file" else os.mkfifo(where)
    for out in (cli(["study", "run", path, "--results", str(where)], cwd=tmp_path),
                mpirun(2, ["study", "run", path, "--results", str(where)], cwd=tmp_path)):
        assert out.returncode == 2, out.stderr
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 1 and "--results: not a folder" in lines[0], out.stderr


@pytest.mark.timeout(180)
def test_study_report_by_any_run_key_skip_bad_and_no_nan(tmp_path):
    """An axis fsync_every (no run key of that name: report folds it into `fsync`) once
    broke the table; a damaged record had no --skip-bad; n = 1 printed nan."""
    path = study_file(tmp_path, ONE_POINT + '\n[axes]\nfsync_every = [1, 4]\n')
    out = mpirun(2, ["study", "run", path], cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    (tmp_path / "results" / "mpiwrite-truncated.h5").write_bytes(b"\x89HDF\r\n\x1a\n" + b"0" * 9)
    got = cli(["study", "report", path], cwd=tmp_path)
    assert got.returncode == 1 and "mpiwrite-truncated.h5" in got.stderr, got.stderr
    got = cli(["study", "report", path, "--skip-bad"], cwd=tmp_path)
    assert got.returncode == 0, got.stderr
    assert "fsync_every" in got.stdout.splitlines()[0]
    verdict = [ln.strip() for ln in got.stdout.splitlines() if ln.strip().startswith(
        "fsync_every 4 vs 1")]
    assert len(verdict) == 1 and verdict[0].endswith(
        "(n 1 vs 1): cannot tell: each side needs at least 2 samples; about 1 more repetition "
        "per side"), got.stdout
    assert "nan" not in got.stdout


@pytest.mark.timeout(60)
def test_a_link_planted_at_the_study_lock_is_one_line_and_exit_2(tmp_path):
    """A symlink at results/.mpiwrite-study-NAME.lock was exit 1, an OSError's words and
    MPI_Abort; a FIFO or another user's file there was already exit 2."""
    path = study_file(tmp_path, ONE_POINT)
    (tmp_path / "results").mkdir()
    from mpiwrite.study.plan import load

    name = f".mpiwrite-study-{load(path).name}.lock"
    os.symlink(tmp_path / "elsewhere", tmp_path / "results" / name)
    out = cli(["study", "run", path], cwd=tmp_path, timeout=50)
    assert out.returncode == 2, out.stderr
    said = [ln for ln in out.stderr.splitlines() if ln.startswith("mpiwrite:")]
    assert len(said) == 1 and "symbolic link" in said[0], out.stderr
    assert not (tmp_path / "elsewhere").exists()


BUFFERED = """
[study]
name = "settled"
target = "{data}"
results = "{results}"
repeat = 2
{settle}

[run]
size = "4MiB"
fsync = {fsync}
progress_interval = 0

[axes]
block_size = ["64KiB", "1MiB"]
"""


def _settle_tags(folder):
    out = []
    for rec in complete(folder):
        tags = rec.tags()
        import json

        raw = rec.attrs.get("notes", "[]")
        notes = [n for n in json.loads(raw.decode() if isinstance(raw, bytes) else raw)
                 if n.startswith("settle ")]
        out.append((tags.get("settle"), float(tags.get("settle_seconds", "nan")),
                    tags.get("settle_dirty_bytes"), notes))
    return out


@pytest.mark.timeout(240)
def test_each_run_is_settled_and_the_record_says_how(tmp_path):
    """Buffered runs settle by default (writeback: the target's filesystem flushed, the
    node's dirty pages waited for), a sleep settle sleeps before every run, fsync'd runs do
    not settle; each record carries the settle, its seconds and the dirty bytes left."""
    path = study_file(tmp_path, BUFFERED.replace("{settle}", "").replace("{fsync}", "false"))
    plan = cli(["study", "plan", path], cwd=tmp_path)
    assert "settle before each run: writeback (the default: buffered runs" in plan.stdout
    out = mpirun(2, ["study", "run", path], cwd=tmp_path, timeout=200)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr
    got = _settle_tags(tmp_path / "results")
    assert len(got) == 4 and {g[0] for g in got} == {"writeback"}
    assert all(g[1] >= 0 and g[2].isdigit() for g in got), got
    # a note a node: how long it took and what it left
    assert all(len(g[3]) == 1 and " s, " in g[3][0] and "left" in g[3][0] for g in got), got
    slept = tmp_path / "slept"
    slept.mkdir()
    path = study_file(slept, BUFFERED.replace("{settle}", 'settle = "sleep:300ms"')
                      .replace("{fsync}", "false"))
    out = mpirun(2, ["study", "run", path], cwd=slept, timeout=200)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr
    got = _settle_tags(slept / "results")
    assert len(got) == 4 and {g[0] for g in got} == {"sleep:0.3s"}
    assert all(g[1] >= 0.3 for g in got), got
    synced = tmp_path / "synced"
    synced.mkdir()
    path = study_file(synced, BUFFERED.replace("{settle}", "").replace("{fsync}", "true"))
    assert "settle before each run: none (the default: fsync'd runs" in cli(
        ["study", "plan", path], cwd=synced).stdout


@pytest.mark.timeout(120)
def test_drop_caches_as_a_user_is_refused_before_any_run(tmp_path):
    """settle = "drop-caches" writes /proc/sys/vm/drop_caches: a user's study is refused by
    `study plan` and `study run` (exit 2, before MPI) with the reason and the settle that
    works."""
    import shutil

    setpriv = shutil.which("setpriv")
    if os.geteuid() != 0 or not setpriv:
        pytest.skip("needs root to become another user (setpriv)")
    import tempfile

    # a folder the user can reach (pytest's own are root's alone)
    tmp_path = type(tmp_path)(tempfile.mkdtemp(prefix="mpiwrite-user-", dir="/tmp"))
    os.chown(tmp_path, 65534, 65534)
    path = study_file(tmp_path, BUFFERED.replace("{settle}", 'settle = "drop-caches"')
                      .replace("{fsync}", "false"))
    os.chown(path, 65534, 65534)
    user = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]
    env = clean_env({"HOME": str(tmp_path), "MPIWRITE_STATE": "", "MPIWRITE_CACHE": ""})
    env = {k: v for k, v in env.items() if v}
    plan = bounded(user + [MPIWRITE, "study", "plan", path], 60, cwd=str(tmp_path), env=env)
    assert plan.returncode == 2 and "drop-caches" in plan.stderr and "needs root" in \
        plan.stderr and "writeback" in plan.stderr, plan.stderr
    run = bounded(user + [MPIWRITE, "study", "run", path], 90, cwd=str(tmp_path), env=env)
    assert run.returncode == 2 and "needs root" in run.stderr, run.stdout + run.stderr
    assert not (tmp_path / "results").exists() or not os.listdir(tmp_path / "results")
    shutil.rmtree(tmp_path)
