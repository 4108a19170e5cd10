"""`mpiwrite study plan FILE`: the matrix a study file declares, in the order it will run, and
one line for every problem in the file, naming its key and line."""

import os

import pytest
from common import ROOT, cli

from mpiwrite.study.plan import StudyError, load

EXAMPLES = ROOT / "examples"
pytestmark = pytest.mark.timeout(60)

GOOD = """\
[study]
name = "blocks"
target = "/lustre/scratch/me/mpiwrite"
repeat = 3
order = "interleaved"

[run]
time = "200s"
fsync = true

[axes]
block_size = ["64KiB", "1MiB", "4MiB"]
ranks_per_node = [1, 4]

[[setting]]
name = "checksums"
values = ["1", "0"]
set = "lctl set_param osc.*.checksums={value}"
get = "lctl get_param -n osc.*.checksums"
"""


def write(tmp_path, text, name="s.toml"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_the_plan_lists_every_point_and_repetition_in_order(tmp_path):
    out = cli(["study", "plan", write(tmp_path, GOOD)], cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("study blocks: 12 points x 3 repetitions = 36 runs, order "
                               "interleaved")
    rows = [ln.split() for ln in lines[2:38]]
    assert [int(r[1]) for r in rows[:12]] == list(range(12))  # every point once, then again
    assert {int(r[2]) for r in rows[:12]} == {0} and {int(r[2]) for r in rows[24:]} == {2}
    assert rows[0][3:] == ["64KiB", "1", "1"] and rows[1][3:] == ["64KiB", "1", "0"]
    # one launch (1.2 s), 36 runs of 200 s, each with its final fsync (1 s) and its cost in
    # the study (0.15 s), and the setting changed before each (1.5 s): 7,297 s
    assert "estimated duration: 2h01m " in out.stdout and "time limits" in out.stdout


def test_sequential_and_random_orders(tmp_path):
    st = load(write(tmp_path, GOOD.replace('"interleaved"', '"sequential"')))
    assert st.runs()[:3] == [(0, 0), (0, 1), (0, 2)]
    a = load(write(tmp_path, GOOD.replace('"interleaved"', '"random"\nseed = 7'))).runs()
    b = load(write(tmp_path, GOOD.replace('"interleaved"', '"random"\nseed = 7'), "b.toml"))
    assert a == b.runs() and sorted(a) == sorted(st.runs()) and a != st.runs()


def test_interleaved_with_a_setting_is_warned_about(tmp_path):
    """A fixed cycle puts the same point before each point: what a run leaves behind is
    aliased with the axis that alternates fastest."""
    out = cli(["study", "plan", write(tmp_path, GOOD)], cwd=tmp_path)
    assert "warning: order interleaved" in out.stderr and "aliased" in out.stderr, out.stderr
    quiet = cli(["study", "plan", write(tmp_path, GOOD.replace('order = "interleaved"\n', ""),
                                        "b.toml")], cwd=tmp_path)
    assert quiet.returncode == 0 and "warning" not in quiet.stderr, quiet.stderr


TWO_BY_TWO = """\
[study]
name = "dirty"
target = "d"
repeat = 8

[run]
size = "1MiB"

[[setting]]
name = "ratio"
values = ["20", "1"]
set = "true {value}"

[[setting]]
name = "expire"
values = ["3000", "500"]
set = "true {value}"
"""


def test_the_default_order_is_balanced_blocks_with_a_stated_seed(tmp_path):
    """Each repetition is a permutation of the points (drift falls on all alike); over the
    study each level of each axis follows each level about equally often (the previous run's
    level is not aliased with the run's own, as it is in an interleaved cycle); the seed is
    printed, the same file gives the same order, and a file's own seed is kept."""
    from mpiwrite.study import order

    st = load(write(tmp_path, TWO_BY_TWO))
    assert st.order == "balanced"
    runs = st.runs()
    blocks = [sorted(p for p, r in runs if r == rep) for rep in range(8)]
    assert blocks == [[0, 1, 2, 3]] * 8 and [r for _, r in runs] == sorted(r for _, r in runs)
    points = st.points()
    for axis in ("setting.ratio", "setting.expire"):
        t = order.transitions(runs, points, axis)
        assert len(t) == 4 and max(t.values()) - min(t.values()) <= 2, (axis, t)
    # interleaved: the fastest axis's level after the same level never happens
    cycle = order.runs("interleaved", points, 8, 0)
    t = order.transitions(cycle, points, "setting.expire")
    assert ("500", "500") not in t and ("3000", "3000") not in t
    assert load(write(tmp_path, TWO_BY_TWO, "again.toml")).runs() == runs
    other = load(write(tmp_path, TWO_BY_TWO.replace('"dirty"', '"dirty2"'), "o.toml"))
    assert other.order_seed() != st.order_seed()
    seeded = load(write(tmp_path, TWO_BY_TWO.replace("repeat = 8", "repeat = 8\nseed = 7"),
                        "s7.toml"))
    assert seeded.order_seed() == 7
    out = cli(["study", "plan", write(tmp_path, TWO_BY_TWO, "p.toml")], cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert f"order balanced (seed {st.order_seed()}, from the file)" in out.stdout
    assert "run before: setting.ratio: 20 after 20:" in out.stdout, out.stdout


@pytest.mark.timeout(30)
def test_a_balanced_order_of_many_points_still_runs_every_point_once_a_block(tmp_path):
    """200 points x 20 repetitions: fewer candidates a block (bounded work), the same
    blocks."""
    from mpiwrite.study import order

    points = [{"x": i, "y": j} for i in range(20) for j in range(10)]
    runs = order.runs("balanced", points, 20, 3)
    for rep in range(20):
        assert sorted(p for p, r in runs[rep * 200:(rep + 1) * 200]) == list(range(200))
        assert {r for _, r in runs[rep * 200:(rep + 1) * 200]} == {rep}


def test_a_size_bound_study_is_estimated_at_a_stated_rate(tmp_path):
    text = GOOD.replace('time = "200s"', 'size = "1GB"').replace("[[setting]]", "[x]")
    text = text.split("[x]")[0]
    out = cli(["study", "plan", write(tmp_path, text), "--rate", "1000"], cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "sizes at 1000 MB/s per rank (--rate)" in out.stdout
    # one launch (1.2 s), then 18 runs of 1 GB at 1000 MB/s, each 0.15 s more in the study
    assert "estimated duration: 21.9s" in out.stdout, out.stdout


def test_without_a_rate_one_probe_write_into_the_target_decides_and_leaves_nothing(tmp_path):
    """`study plan` once assumed 100 MB/s per rank (estimates 8x the measured time here); it
    now times one fsync'd 16 MiB write into the target (or the folder it will be made in),
    removes it, and says so."""
    target = tmp_path / "data"
    target.mkdir()
    (target / "theirs").write_bytes(b"x")
    text = GOOD.replace('time = "200s"', 'size = "16MiB"').split("[[setting]]")[0] \
        .replace("/lustre/scratch/me/mpiwrite", str(target))
    out = cli(["study", "plan", write(tmp_path, text)], cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "MB/s per rank, a 16 MiB fsync'd write into the target now" in out.stdout
    assert sorted(os.listdir(target)) == ["theirs"]  # the probe's file is gone, theirs kept
    os.chmod(target, 0o500)  # a target it cannot write to: the assumed rate, said so
    try:
        if os.access(target, os.W_OK):  # root writes anyway
            return
        out = cli(["study", "plan", write(tmp_path, text)], cwd=tmp_path)
        assert "an assumed 100 MB/s per rank" in out.stdout, out.stdout
    finally:
        os.chmod(target, 0o700)


BAD = """\
[study]
name = "x y"
target = "d"
repeat = 0
colour = "red"

[run]
time = "5m"
block_size = "big"
frobnicate = 1

[axes]
size = []
fsync_every = [2, -1]

[[setting]]
name = "checksums"
values = []
set = "lctl set_param osc.*.checksums=1"

[extra]
"""


def test_every_problem_is_one_line_naming_its_key_and_line(tmp_path):
    path = write(tmp_path, BAD)
    out = cli(["study", "plan", path], cwd=tmp_path)
    assert out.returncode == 2 and out.stdout == ""
    said = out.stderr.splitlines()
    expect = {2: "[study] name", 4: "[study] repeat", 5: "[study] colour", 8: "[run] time",
              9: "[run] block_size", 10: "[run] frobnicate", 13: "[axes] size",
              14: "[axes] fsync_every", 18: "[[setting]] 1 values", 19: "[[setting]] 1 set",
              21: "[extra]"}
    assert len(said) == len(expect), out.stderr
    for line, (no, where) in zip(said, sorted(expect.items())):
        assert line.startswith(f"mpiwrite: error: {path}:{no}: {where}"), line
    assert "Traceback" not in out.stderr


def test_a_combination_that_run_refuses_is_refused_for_its_point(tmp_path):
    text = GOOD.replace("fsync = true", "fsync = false").replace(
        'ranks_per_node = [1, 4]', "fsync_every = [0, 4]")
    out = cli(["study", "plan", write(tmp_path, text)], cwd=tmp_path)
    assert out.returncode == 2
    said = out.stderr.splitlines()
    assert said and all("--fsync-every: conflicts with --no-fsync" in ln for ln in said)
    assert all("fsync_every=4" in ln for ln in said) and len(said) == 6


@pytest.mark.parametrize("text,why", [
    ("not toml [", "not valid TOML"),
    ("[run]\ntime = '1s'\n", "missing: a [study] table"),
    ("[study]\nname='a'\ntarget='d'\norder='random'\nseed=-1\n", "from 0 to 2^63 - 1"),
    ("[study]\nname='a'\ntarget='d'\norder='williams'\n", "must be one of balanced, random"),
    ("[study]\nname='a'\ntarget='d'\n[axes]\nblock_size=['1M','1M']\n", "lists a value twice"),
    ("[study]\nname='a'\ntarget='d'\n[run]\ntarget='x'\n", "set by the study itself"),
    ("[study]\nname='a'\ntarget='d'\n[run]\nnodes=2\n", "part of the allocation"),
    ("[study]\nname='a'\ntarget='d'\n[run]\ndirect='yes'\n", "true or false"),
])
def test_malformed_files_are_refused_with_a_reason(tmp_path, text, why):
    out = cli(["study", "plan", write(tmp_path, text)], cwd=tmp_path)
    assert out.returncode == 2 and why in out.stderr, out.stderr


def test_a_file_that_is_not_a_regular_file_is_refused(tmp_path):
    import os

    os.mkfifo(tmp_path / "fifo.toml")
    out = cli(["study", "plan", str(tmp_path / "fifo.toml")], cwd=tmp_path, timeout=20)
    assert out.returncode == 2 and "cannot read it" in out.stderr
    with pytest.raises(StudyError):
        load(str(tmp_path / "missing.toml"))


@pytest.mark.parametrize("name", ["checksums", "scaling", "blocks"])
def test_the_examples_plan(tmp_path, name):
    out = cli(["study", "plan", str(EXAMPLES / f"{name}.toml")], cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(f"study {name}:")


# -- values compared as `run` reads them, options never injected, trusted files --

HEAD = "[study]\nname='a'\ntarget='d'\n"


@pytest.mark.parametrize("body,where", [
    ("[axes]\nblock_size = ['1MiB', '1M', 1048576]\n", "[axes] block_size"),
    ("[axes]\ndelay = [0.5, '0.5s']\n", "[axes] delay"),
    ("[axes]\ntime = ['60s', '1min']\n", "[axes] time"),
    ("[[setting]]\nname = 'x'\nvalues = [1, '1']\nset = 'true {value}'\n",
     "[[setting]] 1 values"),
])
def test_equal_values_of_an_axis_are_given_twice(tmp_path, body, where):
    path = write(tmp_path, HEAD + body)
    out = cli(["study", "plan", path], cwd=tmp_path)
    assert out.returncode == 2 and out.stdout == "", out.stdout
    lines = out.stderr.splitlines()
    assert lines and all(ln.startswith(f"mpiwrite: error: {path}:") for ln in lines)
    assert where in lines[0] and "given twice" in lines[0], out.stderr


@pytest.mark.parametrize("body,where,why", [
    ("[axes]\n'setting.x' = ['9']\n", "[axes] setting.x", "[[setting]]"),
    ("[run]\nsize='1MiB'\n[[setting]]\nname = 'x'\nvalues = ['1']\nset = \"echo '{value}\"\n",
     "[[setting]] 1 set", "cannot be split into words"),
    ("[run]\nsize='1MiB'\n[[setting]]\nname='x'\nvalues=['1']\nset='true {value}'\n"
     "get=\"echo 'a\"\n", "[[setting]] 1 get", "cannot be split into words"),
    ("[[setting]]\nname = 'x'\nvalues = [\"a\\nb\"]\nset = 'true {value}'\n",
     "[[setting]] 1 values", "control character"),
    ("[[setting]]\nname = 'x'\nvalues = [1.5, 2.0]\nset = 'true {value}'\n",
     "[[setting]] 1 values", "strings or whole numbers"),
])
def test_settings_and_axes_the_run_would_trip_on_are_refused_at_plan(tmp_path, body, where,
                                                                     why):
    path = write(tmp_path, HEAD + body)
    out = cli(["study", "plan", path], cwd=tmp_path)
    assert out.returncode == 2, out.stdout
    assert len(out.stderr.splitlines()) == 1, out.stderr
    assert f"{path}:" in out.stderr and where in out.stderr and why in out.stderr, out.stderr


@pytest.mark.timeout(30)
def test_a_plan_too_large_is_refused_by_its_count(tmp_path):
    """10,000 points x 10,000 repetitions: once a list of 10^8 runs (MemoryError)."""
    sizes = ", ".join(f"'{k + 1}KiB'" for k in range(1000))
    totals = ", ".join(f"'{m}MiB'" for m in range(1, 11))
    body = HEAD.replace("name='a'", "name='a'\nrepeat=10000") + \
        f"[axes]\nblock_size = [{sizes}]\nsize = [{totals}]\n"
    path = write(tmp_path, body)
    out = cli(["study", "plan", path], cwd=tmp_path, env={}, timeout=25)
    assert out.returncode == 2, out.stderr[-500:]
    assert "[study] repeat" in out.stderr and "100000000 runs" in out.stderr
    assert "Traceback" not in out.stderr and "MemoryError" not in out.stderr


@pytest.mark.parametrize("target", ["--help", "--keep", "-i", "--", "--version", "-"])
def test_a_target_that_looks_like_an_option_is_a_folder_name(tmp_path, target):
    path = write(tmp_path, f"[study]\nname='a'\ntarget='{target}'\n[run]\nsize='1M'\n"
                           "[axes]\nlayout=['fpp', 'shared']\n")
    out = cli(["study", "plan", path], cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("study a: 2 points") and f"; target {target}," in out.stdout
    assert "Usage" not in out.stdout and len(out.stdout.splitlines()) == 6, out.stdout


@pytest.mark.parametrize("value", ["--help", "--version", "-i"])
def test_a_value_that_looks_like_an_option_is_a_value(tmp_path, value):
    path = write(tmp_path, HEAD + f"[run]\nsize='{value}'\n")
    out = cli(["study", "plan", path], cwd=tmp_path)
    assert out.returncode == 2 and "Usage" not in out.stdout + out.stderr
    assert f"[run] size = '{value}'" in out.stderr and "--size" in out.stderr, out.stderr


NOBODY = 65534


@pytest.mark.parametrize("how", ["owner", "file-mode", "folder-mode", "sticky-other"])
def test_a_study_file_others_can_change_is_refused(tmp_path, how):
    """Its set/get commands run as the user on every node: it is trusted like code."""
    if os.geteuid() != 0:
        pytest.skip("needs root to give files away")
    folder = tmp_path / "f"
    folder.mkdir()
    path = write(folder, GOOD)
    if how == "owner":
        os.chown(path, NOBODY, NOBODY)
    elif how == "file-mode":
        os.chmod(path, 0o666)
    elif how == "folder-mode":
        os.chmod(folder, 0o777)
    else:  # a sticky folder: fine for one's own file, not for another user's
        os.chmod(folder, 0o1777)
        os.chown(path, NOBODY, NOBODY)
    for command in (["study", "plan", path], ["study", "run", path]):
        out = cli(command, cwd=tmp_path)
        assert out.returncode == 2, out.stderr
        assert len(out.stderr.splitlines()) == 1 and "not trusted" in out.stderr, out.stderr
        assert ("nobody" in out.stderr) == (how in ("owner", "sticky-other"))
        assert "mode 0" in out.stderr


def test_a_study_file_of_ones_own_in_a_sticky_folder_is_fine(tmp_path):
    folder = tmp_path / "f"
    folder.mkdir()
    os.chmod(folder, 0o1777)
    out = cli(["study", "plan", write(folder, GOOD)], cwd=tmp_path)
    assert out.returncode == 0, out.stderr


def test_a_tag_file_others_can_change_is_refused(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs root to give files away")
    tags = tmp_path / "tags"
    tags.write_text("fs=scratch\n")
    os.chown(tags, NOBODY, NOBODY)
    out = cli(["run", str(tmp_path / "d"), "-s", "1M", "--tag-file", str(tags)], cwd=tmp_path)
    assert out.returncode == 2 and "--tag-file" in out.stderr and "nobody" in out.stderr, \
        out.stderr
    assert not (tmp_path / "d").exists()


@pytest.mark.parametrize("rate", ["1e-300", "inf", "nan", "0", "-5", "1e30"])
def test_an_assumed_rate_out_of_range_is_one_line(tmp_path, rate):
    """--rate 1e-300 printed a 300-digit duration; inf "assumed inf MB/s per rank"."""
    out = cli(["study", "plan", write(tmp_path, GOOD), "--rate", rate], cwd=tmp_path)
    assert out.returncode == 2, out.stdout[-500:]
    assert out.stderr.count("\n") == 1 and "--rate" in out.stderr, out.stderr


@pytest.mark.parametrize("name", ["blocks\\n", "a\\nb", ""])
def test_a_study_name_with_a_newline_is_refused(tmp_path, name):
    """The name check matched up to a trailing newline (`$`): "blocks\\n" was a name."""
    out = cli(["study", "plan", write(tmp_path, GOOD.replace('"blocks"', f'"{name}"'))],
              cwd=tmp_path)
    assert out.returncode == 2 and "name" in out.stderr, out.stderr
