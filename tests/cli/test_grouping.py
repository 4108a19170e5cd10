"""Grouping that never misleads: a key some runs lack, filters read as the key's
type, and what else differs between two sides of a compare."""

import json

import pytest
import synth
from common import cli

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def folder(tmp_path):
    r = tmp_path / "r"
    r.mkdir()
    for i in range(5):
        synth.make(r / f"a{i}.h5", [800 + i, 802 + i], f"a{i}", tags={"config": "A"})
        synth.make(r / f"b{i}.h5", [600 + i, 602 + i], f"b{i}", tags={"config": "B"},
                   params={"block_size": 10**6})
    synth.make(r / "plain.h5", [700, 701], "plain")  # no config tag
    return r


def test_a_run_without_a_by_key_is_grouped_under_a_dash_and_counted(folder, tmp_path):
    out = cli(["report", str(folder), "--by", "config", "--format", "json"], cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    rows = {r["keys"]["config"]: r["runs"] for r in json.loads(out.stdout)["rows"]}
    assert rows == {"A": 5, "B": 5, "-": 1}
    assert "1 run(s) without 'config'" in out.stderr
    out = cli(["report", str(folder), "--by", "nothere"], cwd=tmp_path)
    assert out.returncode == 2 and "no run has the key(s) nothere" in out.stderr


@pytest.mark.parametrize("value", ["1MB", "1000000", "976.5625KiB"])
def test_size_filters_are_read_as_sizes(folder, tmp_path, value):
    out = cli(["compare", f"block_size={value}", "block_size=1MiB", "--in", str(folder)],
              cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "A=block_size" in out.stdout and "5 runs" in out.stdout


@pytest.mark.parametrize("value", ["1M", "1MiB", "1024k", "1048576"])
def test_binary_size_filters_match_the_binary_size(folder, tmp_path, value):
    out = cli(["compare", f"block_size={value}", "config=B", "--in", str(folder)],
              cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "6 runs" in out.stdout  # the 5 A runs and the untagged one have 1 MiB blocks


def test_a_key_only_one_side_selects_on_is_shown_as_different(folder, tmp_path):
    out = cli(["compare", "config=A,block_size=1MiB", "config=B", "--in", str(folder)],
              cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    diff = out.stdout.split("also different between A and B:")[1]
    assert "block_size: 1MiB -> 976.56KiB" in diff and "config:" not in diff


def test_tags_never_shadow_measured_columns_or_built_in_keys(tmp_path):
    pytest.importorskip("pandas")
    from mpiwrite.answers.results import load

    r = tmp_path / "r"
    r.mkdir()
    crafted = {"bytes": "lots", "rank": "x", "status": "fake", "fstype": "evil",
               "checksums": "spoofed", "MB_per_s": "n/a", "iteration": "warm", "site": "a"}
    synth.make(r / "x.h5", [800, 801], "x", tags=crafted)
    frames = load(str(r))
    ranks = frames["ranks"]
    assert ranks["bytes"].dtype.kind == "i" and (ranks["bytes"] == 2**30).all()
    assert (ranks["tag.bytes"] == "lots").all() and (ranks["rank"] == [0, 1, 0, 1]).all()
    assert frames["iterations"]["iteration"].tolist() == [0, 1]
    runs = frames["runs"]
    assert runs["status"][0] == "complete" and runs["fstype"][0] != "evil"
    assert runs["tag.status"][0] == "fake" and runs["site"][0] == "a"
    assert runs["checksums"][0] != "spoofed" and runs["tag.checksums"][0] == "spoofed"
    for key, spoof in (("fstype", "evil"), ("checksums", "spoofed")):
        out = cli(["report", str(r), "--by", key, "--format", "json"], cwd=tmp_path)
        assert out.returncode == 0 and spoof not in out.stdout, out.stdout
    shown = cli(["show", str(r / "x.h5")], cwd=tmp_path)
    assert "status complete" in shown.stdout and "status fake" not in shown.stdout


def test_plot_scaling_samples_as_report_does_and_refuses_to_pool_ranks(tmp_path):
    pytest.importorskip("matplotlib")
    r = tmp_path / "r"
    r.mkdir()
    for i, (nodes, rpn) in enumerate([(1, 1), (1, 4), (2, 1), (2, 4)] * 2):
        synth.make(r / f"s{i}.h5", [100.0 * nodes * rpn, 101.0 * nodes * rpn], f"s{i}",
                   nodes=nodes, ranks_per_node=rpn)
    out = cli(["plot", "scaling", str(r), "-o", "p.png", "--x", "nodes"], cwd=tmp_path)
    assert out.returncode == 2 and "ranks_per_node" in out.stderr, out.stderr
    assert not (tmp_path / "p.png").exists()
    out = cli(["plot", "scaling", str(r), "-o", "p.png", "--x", "nodes", "--by",
               "ranks_per_node", "--warmup", "1", "--unit", "iteration"], cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "p.png").stat().st_size > 1000
    out = cli(["plot", "scaling", str(r), "-o", "q.png", "--x", "nodes", "--by",
               "ranks_per_node", "--warmup", "2"], cwd=tmp_path)
    assert out.returncode == 2 and "no complete runs" in out.stderr


def test_warmup_that_leaves_nothing_says_so(tmp_path):
    r = tmp_path / "r"
    r.mkdir()
    for i in range(3):
        synth.make(r / f"one{i}.h5", [500.0 + i], f"one{i}", tags={"k": "v"})
    synth.make(r / "two.h5", [500.0, 510.0], "two", tags={"k": "v"})
    out = cli(["report", str(r), "--by", "k", "--warmup", "1"], cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "3 complete run(s) left out: --warmup 1 leaves out every iteration" in out.stderr
    assert "without an aggregate" not in out.stderr
    out = cli(["report", str(r / "one0.h5"), "--warmup", "1"], cwd=tmp_path)
    assert out.returncode == 2 and "leaves out every iteration they have" in out.stderr
