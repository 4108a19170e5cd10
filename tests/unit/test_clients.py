"""Every registered filesystem client (clients/registry.CLIENTS) through the same checklist,
on a sysroot fixture of its own mount in the real formats (tests/sysroots.py): it recognises
its mount (and no other client does, but the fallbacks after it), collects its facts without
error, says itself in lines without `nan`, and its counter snapshots give a delta."""

import json

import pytest
import sysroots

from mpiwrite.clients import registry
from mpiwrite.facts import nodeinfo


def _mount(mp, fstype, source, opts="rw"):
    f = sysroots.no_lustre()
    f["proc/self/mountinfo"] = sysroots.mountinfo((mp, fstype, source, opts))
    return f


def _lustre():
    return {**sysroots.lustre_215(), **sysroots.lustre_215_counters()}


# registry name -> (sysroot files, a target under its mount)
FIXTURES = {
    "memory": (lambda: _mount("/dev/shm", "tmpfs", "tmpfs"), "/dev/shm/run"),
    "local": (lambda: _mount("/scratch", "xfs", "/dev/nvme0n1p1"), "/scratch/run"),
    "lustre": (_lustre, "/mnt/bigfs/run"),
    "nfs": (sysroots.nfs, "/mnt/nfs/run"),
    "gpfs": (sysroots.gpfs, "/gpfs/fs1/run"),
    "beegfs": (sysroots.beegfs, "/mnt/beegfs/run"),
    "cephfs": (sysroots.cephfs_kernel, "/mnt/cephfs/run"),
    "glusterfs": (sysroots.glusterfs, "/mnt/gv0/run"),
    "ceph-fuse": (sysroots.ceph_fuse, "/mnt/cephfs/run"),
    "dfuse": (lambda: _mount("/mnt/dfuse", "fuse.daos", "dfuse"), "/mnt/dfuse/run"),
    "fuse": (lambda: _mount("/mnt/ssh", "fuse.sshfs", "me@host:/data"), "/mnt/ssh/run"),
    "other": (lambda: _mount("/mnt/smb", "cifs", "//server/share"), "/mnt/smb/run"),
}
FALLBACKS = {"fuse", "other"}  # match what the clients before them did not take
NOT_A_MOUNT = {"mixed"}  # a run key (nodes on different filesystems), never a node's mount


def test_every_registered_client_has_a_fixture():
    assert set(FIXTURES) | NOT_A_MOUNT == set(registry.CLIENTS)
    assert list(registry.CLIENTS)[-1] == "other"


@pytest.fixture(params=sorted(FIXTURES))
def node(request, tmp_path):
    """(registry name, its client object, the node's facts on a sysroot of its mount)."""
    name = request.param
    files, target = FIXTURES[name]
    root = sysroots.make(tmp_path / "root", files())
    return name, registry.get(name), nodeinfo.collect(target, root), root


def test_it_recognises_its_own_mount_and_no_other_client_does(node):
    name, client, facts, _ = node
    fs = facts["fs"]
    assert registry.for_fs(fs) is client and client.name == name
    takers = [c.name for c in registry.every() if c.matches(fs["fstype"], fs["mount_source"])]
    assert takers[0] == name and set(takers[1:]) <= FALLBACKS, takers


def test_it_collects_its_facts(node):
    name, client, facts, _ = node
    fact = facts["client"]
    assert isinstance(fact.get("client"), str) and fact["client"]
    assert json.loads(json.dumps(fact)) == fact
    assert not [k for k in facts["unknown"] if k.startswith("fs")], facts["unknown"]
    if client.local:
        assert fact["client"] == "none"


def test_it_describes_itself_in_lines_without_nan(node):
    _, client, facts, _ = node
    lines = client.describe(facts["client"])
    assert lines and lines[0].startswith("client ")
    assert all(isinstance(x, str) and "nan" not in x.lower() for x in lines), lines
    env = nodeinfo.describe(facts)  # `env` says it among the node's lines
    assert all(x in env for x in lines)


def test_its_snapshots_give_a_delta(node):
    _, client, facts, root = node
    before = client.snapshot(root, facts["fs"], facts["client"])
    after = client.snapshot(root, facts["fs"], facts["client"])
    assert before["kind"] == client.kind
    d = client.delta(before, after)
    assert d["kind"] == client.kind and "write_bytes" in d
    assert json.loads(json.dumps(d)) == d
    assert registry.delta(before, after) == d  # the record's kind finds its client again
    if client.kind is not None:
        assert registry.for_kind(client.kind) is client
        assert d["write_bytes"] == 0 or d["write_bytes"] is None
    text = client.counter_text(d)
    assert isinstance(text, str) and "nan" not in text.lower()
    assert registry.delta({"kind": None}, after)["write_bytes"] is None


def test_its_flags_magics_and_names(node):
    name, client, _, _ = node
    for tname, t in client.tunables.items():  # the catalogue (clients/tunables.py)
        assert t.name == tname and t.scope in ("node", "once") and t.candidates
    assert all(isinstance(v, str) for v in client.volatile)
    for magic, fs_name in client.magics.items():
        assert registry.magic_name(magic, client) == fs_name == registry.magic_name(magic)
    assert client.targets("/nonexistent/file") is None
    assert isinstance(client.differences([], []), dict)


def test_a_magic_stands_for_one_filesystem():
    """FUSE clients share FUSE's magic; no two clients name one magic differently."""
    seen = {}
    for c in registry.every():
        for magic, fs_name in c.magics.items():
            assert seen.setdefault(magic, fs_name) == fs_name, (c.name, hex(magic))


def test_a_run_on_mixed_filesystems_is_its_own_client():
    mixed = registry.for_run("mixed", {"fstype": "ext4"})
    assert mixed.name == "mixed" and not mixed.striping and mixed.lov_layouts
    assert registry.for_mount("mixed") is mixed
    assert mixed.delta({"kind": None}, mixed.snapshot("/", {}))["write_bytes"] is None


def test_each_client_names_the_wait_channels_it_holds_a_writer_in():
    """A time-out's "the filesystem client is hung" (run/watch.held_text) asks the run's
    client: state D anywhere, or a wait channel the client owns (a FUSE writer waits in
    request_wait_answer in state S until a signal comes)."""
    fuse, lustre, local = (registry.get(n) for n in ("glusterfs", "lustre", "local"))
    assert fuse.holds("S", "request_wait_answer") and not fuse.holds("S", "ptlrpc_queue_wait")
    assert lustre.holds("S", "ptlrpc_queue_wait") and not lustre.holds("S", "fuse_wait")
    assert local.holds("D", "folio_wait_bit") and not local.holds("S", "request_wait_answer")
    assert not local.holds("R", "")
    mixed = registry.get("mixed")
    assert mixed.holds("S", "request_wait_answer") and mixed.holds("S", "rpc_wait_bit_killable")
    for c in registry.every():  # prefixes, never the empty string (which would hold all)
        assert all(isinstance(w, str) and w for w in c.waits), c.name
