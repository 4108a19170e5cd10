"""facts/targets.py: the storage targets a client names for a file, parsed and bounded."""

import pytest

from mpiwrite.facts import targets

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
