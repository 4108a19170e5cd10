"""clients/targets.py: the storage targets a client names for a file, parsed and bounded."""

import pytest
from common import read_record

from mpiwrite.clients import targets

pytestmark = pytest.mark.timeout(30)


def test_gluster_pathinfo_names_each_brick_once():
    text = ("(<DISTRIBUTE:vol-dht> (<REPLICATE:vol-replicate-0> "
            "<POSIX(/b/brick1):srv1:/b/brick1/d/f> <POSIX(/b/brick2):srv2:/b/brick2/d/f>))")
    assert targets.parse_pathinfo(text) == ["srv1:/b/brick1", "srv2:/b/brick2"]
    one = "(<DISTRIBUTE:vol-dht> <POSIX(/tmp/g/brick0):vm:/tmp/g/brick0/run/f>)"
    assert targets.parse_pathinfo(one) == ["vm:/tmp/g/brick0"]
    assert targets.parse_pathinfo(one + one) == ["vm:/tmp/g/brick0"]


@pytest.mark.parametrize("text", ["", "garbage", "<POSIX(:x:", "<POSIX(" + "a" * 300 + "):h:/f>"])
def test_pathinfo_that_names_no_brick_gives_none(text):
    assert targets.parse_pathinfo(text) == []


def test_a_hostile_pathinfo_is_bounded():
    many = "".join(f"<POSIX(/b{i}):h:/b{i}/f>" for i in range(1000))
    got = targets.parse_pathinfo(many)
    assert len(got) == targets.MAX_TARGETS and got[0] == "h:/b0"


def test_lustre_layout_targets_are_ost_names():
    assert targets.lustre_targets({"ost_indices": [3, 10, 0]}) == ["OST0003", "OST000a",
                                                                   "OST0000"]
    assert targets.lustre_targets({"ost_indices": [-1, "x", True, 1 << 20]}) == []
    assert targets.targets_of({"layout": "glusterfs", "targets": ["h:/b"]}) == ["h:/b"]
    assert targets.targets_of(None) == [] and targets.targets_of("x") == []


def test_a_local_file_has_no_targets(tmp_path):
    f = tmp_path / "f"
    f.write_bytes(b"x")
    assert targets.of_file(str(f)) is None


def test_show_by_target_uses_every_iterations_files(tmp_path):
    """A rank's file lands on another brick in another iteration: each (iteration, rank)
    file is its brick's sample; `--iteration N` takes that iteration's only."""
    import synth
    from common import cli

    from mpiwrite.answers.targets import by_target

    path = tmp_path / "b.h5"
    where, rates = synth.bricks_run(str(path))
    rec = read_record(str(path))
    rows, notes = by_target(rec)
    got = {r["target"]: r for r in rows}
    on1 = [(it, r) for it in range(3) for r in range(12) if where[it][r]]
    assert got[synth.BRICKS[1]]["files"] == len(on1) and notes == []
    assert got[synth.BRICKS[1]]["ranks"] == sorted({r for _it, r in on1})
    assert got[synth.BRICKS[1]]["max_MB_per_s"] == pytest.approx(
        max(rates[it][r] for it, r in on1))
    assert got[synth.BRICKS[1]]["verdict"] == "slow"
    out = cli(["show", str(path), "--by", "target", "--iteration", "1"], cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    section = out.stdout.split("per storage target, iteration 1 ")[1]
    line = next(ln for ln in section.splitlines() if ln.startswith(f"  {synth.BRICKS[1]} "))
    assert line.split()[2] == str(sum(where[1])), line  # files of iteration 1 only
    assert f"  slow: {synth.BRICKS[1]}" in section.splitlines()


def test_a_record_with_iteration_0s_targets_only_says_so(tmp_path):
    """Records made before targets were read every iteration: the others are left out, and
    the note says which."""
    import synth

    from mpiwrite.answers.targets import by_target

    path = tmp_path / "b.h5"
    synth.bricks_run(str(path))
    rec = read_record(str(path))
    rec.layouts = [lay for lay in rec.layouts if lay["iteration"] == 0]
    rows, notes = by_target(rec)
    assert sum(r["files"] for r in rows) == 12
    assert notes == ["no targets recorded for iterations 1-2 (a record made before mpiwrite "
                     "read them for every iteration): left out"]


def test_targets_are_gathered_every_iteration_except_on_local_filesystems():
    """The run's client (clients/registry.for_run): the GlusterFS FUSE client and CephFS may
    tell targets (every iteration), Lustre has layouts, a local filesystem has none
    (iteration 0's gather only); nodes on different filesystems are read as Lustre."""
    from mpiwrite.clients import registry

    def run(fstype):
        return registry.for_run(fstype, {"fstype": fstype})

    assert [run(t).name for t in ("fuse.glusterfs", "ceph", "fuse.ceph-fuse", "nfs4")] == \
        ["glusterfs", "cephfs", "ceph-fuse", "nfs"]
    assert not any(run(t).local or run(t).lov_layouts
                   for t in ("fuse.glusterfs", "ceph", "fuse.ceph-fuse", "nfs4"))
    assert run("lustre").lov_layouts and run("mixed").lov_layouts
    assert not run("mixed").striping and run("lustre").striping
    assert run("ext4").local and run("tmpfs").local and run("xfs").local
    assert run("tmpfs").in_memory and not run("ext4").in_memory
