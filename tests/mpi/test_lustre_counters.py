"""Lustre counter snapshots and deltas, file layouts from lustre.lov, and the stripe options."""

import json
import os
import stat
import struct

import pytest
import sysroots

from mpiwrite.clients import lustre_counters as lc
from mpiwrite.clients import lustre_layout as ll
from mpiwrite.errors import ConfigError
from mpiwrite.run import stripeopts
from mpiwrite.sysroot import Reader

MiB = 1048576


def test_stats_and_rpc_stats_parse_the_real_formats():
    s = lc.parse_stats(sysroots.osc_stats(1700000100.5, 100))
    assert s["snapshot_time"] == 1700000100.5
    assert s["write_bytes"] == {"samples": 100, "unit": "bytes", "min": MiB, "max": MiB,
                                "sum": 100 * MiB, "sumsq": 100 * MiB * MiB}
    old = lc.parse_stats("snapshot_time             1409325834.634379 secs.usecs\n"
                         "write_bytes               2 samples [bytes] 4096 4096 8192\n"
                         "open                      1 samples [regs]\n")
    assert old["write_bytes"]["sum"] == 8192 and old["open"] == {"samples": 1, "unit": "regs"}
    r = lc.parse_rpc_stats(sysroots.osc_rpc_stats(1700000100.5, 64))
    assert r["pages per rpc"]["write"]["256"] == 64 and r["pages per rpc"]["read"]["1"] == 0
    assert r["rpcs in flight"]["write"]["7"] == 8 and r["offset"]["write"]["0"] == 64
    assert r["gauges"]["write RPCs in flight"] == 0 and r["snapshot_time"] == 1700000100.5


def test_a_write_during_the_run_shows_as_that_many_bytes(tmp_path):
    root = sysroots.make(tmp_path / "root", {**sysroots.lustre_215(),
                                             **sysroots.lustre_215_counters(writes=(100, 40))})
    before = lc.counters(Reader(root))
    sysroots.make(root, sysroots.lustre_215_counters(t=1700000130.0, writes=(356, 40),
                                                     dirty=4 * MiB))
    after = lc.counters(Reader(root))
    d = lc.counter_delta(before, after)
    assert d["write_bytes"] == 256 * MiB and d["write_rpcs"] == 256
    assert d["seconds"] == pytest.approx(30.0)
    osc1 = d["osc"][sysroots.LUSTRE_215_OSC.format(1)]
    assert osc1["stats"]["write_bytes"] == {"samples": 256, "sum": 256 * MiB, "unit": "bytes"}
    assert osc1["rpc_stats"]["pages per rpc"] == {"write": {"256": 256}}
    assert osc1["gauges"]["cur_dirty_bytes"] == [0, 4 * MiB]
    assert d["osc"][sysroots.LUSTRE_215_OSC.format(2)]["stats"] == {}  # nothing moved there
    assert d["llite"][sysroots.LUSTRE_215_LLITE]["stats"]["write_bytes"]["sum"] == 256 * MiB


def test_a_counter_that_went_backwards_is_unknown_not_negative(tmp_path):
    root = sysroots.make(tmp_path / "root", {**sysroots.lustre_215(),
                                             **sysroots.lustre_215_counters(writes=(100, 40))})
    before = lc.counters(Reader(root))
    sysroots.make(root, sysroots.lustre_215_counters(writes=(5, 40)))  # cleared / remounted
    d = lc.counter_delta(before, lc.counters(Reader(root)))
    assert d["osc"][sysroots.LUSTRE_215_OSC.format(1)]["stats"]["write_bytes"]["sum"] is None
    assert d["write_bytes"] == 0


def test_no_lustre_means_empty_snapshots(tmp_path):
    root = sysroots.make(tmp_path / "root", sysroots.no_lustre())
    snap = lc.counters(Reader(root))
    assert snap == {"osc": {}, "llite": {}}
    assert lc.counter_delta(snap, snap)["write_bytes"] == 0


def lov(magic, size, osts, pool=b""):
    data = struct.pack("<II16sIHH", magic, 1, b"\0" * 16, size, len(osts), osts[0] if osts else 0)
    if magic == ll.MAGIC_V3:
        data += pool.ljust(16, b"\0")
    for o in osts:
        data += struct.pack("<16sII", b"\0" * 16, 0, o)
    return data


def test_layouts_v1_v3_and_composite():
    assert ll.parse_layout(lov(ll.MAGIC_V1, 4 * MiB, [3, 7, 1]))["ost_indices"] == [3, 7, 1]
    v3 = ll.parse_layout(lov(ll.MAGIC_V3, MiB, [5], b"flash"))
    assert v3["pool"] == "flash" and v3["stripe_count"] == 1 and v3["ost_indices"] == [5]
    a, b = lov(ll.MAGIC_V1, MiB, [2]), lov(ll.MAGIC_V1, 4 * MiB, [4, 6, 2])
    entries = 2
    off_a = 32 + 48 * entries
    off_b = off_a + len(a)
    head = struct.pack("<IIIHHH6xQ", ll.MAGIC_COMP, off_b + len(b), 1, 0, entries, 0, 0)
    e1 = struct.pack("<IIQQIIIQI", 1, ll.LCME_FL_INIT, 0, 64 * MiB, off_a, len(a), 0, 0, 0)
    e2 = struct.pack("<IIQQIIIQI", 2, ll.LCME_FL_INIT, 64 * MiB, 2**64 - 1, off_b, len(b), 0,
                     0, 0)
    pfl = ll.parse_layout(head + e1 + e2 + a + b)
    assert pfl["layout"] == "composite" and pfl["ost_indices"] == [2, 4, 6]
    assert pfl["components"][1]["end"] is None and pfl["components"][1]["stripe_count"] == 3
    assert ll.parse_layout(b"\x00" * 4) is None
    assert ll.rank_layout(__file__) is None  # no lustre.lov off Lustre


def test_default_layout_xattr_round_trips():
    md = ll.parse_layout(ll.lov_v1(4, 4 * MiB, None))
    assert md["stripe_count"] == 4 and md["stripe_size"] == 4 * MiB
    assert md["stripe_offset"] == 0xFFFF and md["ost_indices"] == []
    assert ll.parse_layout(ll.lov_v1(-1, None, 2))["stripe_count"] == 0xFFFF


def test_apply_stripe_calls_lfs_setstripe(tmp_path):
    log = tmp_path / "lfs.log"
    lfs = tmp_path / "bin" / "lfs"
    lfs.parent.mkdir()
    lfs.write_text(f"#!/bin/sh\necho \"$@\" >> {log}\n")  # the stand-in: records its arguments
    lfs.chmod(lfs.stat().st_mode | stat.S_IXUSR)
    d = tmp_path / "run"
    d.mkdir()
    old = os.environ["PATH"]
    os.environ["PATH"] = f"{lfs.parent}:{old}"
    try:
        assert ll.apply_stripe(str(d), 8, 4 * MiB, 3) == "lfs"
        assert ll.apply_stripe(str(d), count=-1) == "lfs"
    finally:
        os.environ["PATH"] = old
    assert log.read_text().splitlines() == [f"setstripe -c 8 -S 4194304 -i 3 {d}",
                                            f"setstripe -c -1 {d}"]


def test_apply_stripe_reports_lfs_failures(tmp_path):
    lfs = tmp_path / "lfs"
    lfs.write_text("#!/bin/sh\necho 'lfs setstripe: setstripe error: Invalid argument' >&2\n"
                   "exit 22\n")
    lfs.chmod(0o755)
    with pytest.raises(OSError, match="exit 22: lfs setstripe: setstripe error"):
        ll.apply_stripe(str(tmp_path), 2, None, None, lfs=str(lfs))


def test_apply_stripe_without_lfs_uses_the_xattr(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no lfs anywhere
    with pytest.raises(OSError):  # tmpfs/ext4 have no lustre.* xattrs
        ll.apply_stripe(str(tmp_path), 2, MiB, 0)


def test_stripe_options_are_checked_and_refused_off_lustre():
    assert stripeopts.check(None, None, None, "ext4") is None
    assert stripeopts.check(4, "4MiB", 2, "lustre") == {"count": 4, "size": 4 * MiB, "ost": 2}
    assert stripeopts.check(-1, None, None, "lustre") == {"count": -1, "size": None,
                                                          "ost": None}
    with pytest.raises(ConfigError, match=r"^--stripe-size: the target is on nfs4, not Lustre"):
        stripeopts.check(None, "1M", None, "nfs4")
    with pytest.raises(ConfigError, match="^--stripe-count: 5000 is outside"):
        stripeopts.check(5000, None, None, "lustre")
    with pytest.raises(ConfigError, match="^--stripe-size: 100k is not a multiple of 64KiB"):
        stripeopts.check(None, "100k", None, "lustre")
    with pytest.raises(ConfigError, match="^--stripe-size: .*not a size"):
        stripeopts.check(None, "big", None, "lustre")
    with pytest.raises(ConfigError, match="^--ost-index: 70000 is outside"):
        stripeopts.check(None, None, 70000, "lustre")


def test_stripe_option_decorator_with_click():
    import click
    from click.testing import CliRunner

    from mpiwrite.cli import runcmd
    from mpiwrite.run import options

    @click.command()
    @runcmd._click_option(options.BY_NAME["stripe_count"])  # run's own, from its table
    @runcmd._click_option(options.BY_NAME["stripe_size"])
    @runcmd._click_option(options.BY_NAME["ost_index"])
    def cmd(stripe_count, stripe_size, ost_index):
        click.echo(repr(stripeopts.check(stripe_count, stripe_size, ost_index, "lustre")))

    out = CliRunner().invoke(cmd, ["--stripe-count", "2", "--stripe-size", "1M"])
    assert out.exit_code == 0 and out.output.strip() == repr({"count": 2, "size": MiB,
                                                              "ost": None})


@pytest.mark.mpi
def test_a_record_shows_the_counters_that_grew_during_the_run(tmp_path):
    """A thread plays the Lustre client: while the run writes, OSC 1's write_bytes grows by
    one 1 MiB RPC every 5 ms; the record's delta must be exactly what grew in between."""
    import threading

    from common import mpirun, only_record

    target = tmp_path / "lus"
    target.mkdir()
    files = sysroots.lustre_215()
    files["proc/self/mountinfo"] = sysroots.mountinfo(
        (str(target), "lustre", "10.0.0.1@o2ib:/bigfs", "rw,flock,lazystatfs"))
    root = sysroots.make(tmp_path / "root", {**files, **sysroots.lustre_215_counters()})
    stats = os.path.join(root, "sys/kernel/debug/lustre/osc",
                         sysroots.LUSTRE_215_OSC.format(1), "stats")
    stop = threading.Event()

    def client():
        n = 100
        while not stop.wait(0.005):
            n += 1
            with open(stats + ".tmp", "w") as fh:
                fh.write(sysroots.osc_stats(1700000100.0 + n, n))
            os.replace(stats + ".tmp", stats)  # never half a file

    t = threading.Thread(target=client)
    t.start()
    try:
        out = mpirun(2, ["run", str(target / "d"), "-t", "1", "-b", "64k", "--results", "r",
                         "--sysroot", root], cwd=tmp_path, timeout=120)
    finally:
        stop.set()
        t.join()
    assert out.returncode == 0, out.stderr
    rec = only_record(tmp_path / "r")
    assert rec.keys()["client"] == "lustre 2.15.5"
    rows = rec.client_counters
    assert len(rows) == 1 and rows[0]["node"] == 0
    d = rows[0]["delta"]
    osc = d["osc"][sysroots.LUSTRE_215_OSC.format(1)]["stats"]["write_bytes"]
    assert osc["samples"] > 0 and osc["sum"] == osc["samples"] * MiB
    assert rows[0]["write_bytes"] == d["write_bytes"] == osc["sum"]


def _lustre_target(tmp_path):
    target = tmp_path / "lus"
    target.mkdir()
    files = sysroots.lustre_215()
    files["proc/self/mountinfo"] = sysroots.mountinfo(
        (str(target), "lustre", "10.0.0.1@o2ib:/bigfs", "rw,flock,lazystatfs"))
    return target, sysroots.make(tmp_path / "root", files)


@pytest.mark.mpi
def test_stripe_options_lay_out_a_run_directory_with_lfs(tmp_path):
    """--stripe-count/--stripe-size/--ost-index: the run's own directory (never the user's
    TARGET) gets the layout before any file is made; the request is recorded."""
    from common import mpirun, only_record

    target, root = _lustre_target(tmp_path)
    log = tmp_path / "lfs.log"
    lfs = tmp_path / "bin" / "lfs"
    lfs.parent.mkdir()
    lfs.write_text(f"#!/bin/sh\necho \"$@\" >> {log}\n")  # the stand-in: records its arguments
    lfs.chmod(lfs.stat().st_mode | stat.S_IXUSR)
    out = mpirun(2, ["run", str(target), "-s", "1M", "--results", "r", "--sysroot", root,
                     "--stripe-count", "4", "--stripe-size", "1M", "--ost-index", "2",
                     "--progress-interval", "0"], cwd=tmp_path, timeout=120,
                 env={"PATH": f"{lfs.parent}:{os.environ['PATH']}"})
    assert out.returncode == 0, out.stderr
    calls = log.read_text().splitlines()
    assert len(calls) == 1 and "setstripe" in calls[0]
    assert "-c 4" in calls[0] and "-S 1048576" in calls[0] and "-i 2" in calls[0]
    assert "mpiwrite-" in calls[0] and calls[0].rstrip().endswith("-d00000")
    rec = only_record(tmp_path / "r")
    req = rec.attrs["stripe_request"]
    req = json.loads(req) if isinstance(req, str) else req
    assert req["count"] == 4 and req["size"] == 2**20 and req["method"] == "lfs"
    assert os.listdir(target) == []  # the run directory is gone again


@pytest.mark.mpi
def test_stripe_options_off_lustre_are_bad_input_and_create_nothing(tmp_path):
    from common import mpirun

    out = mpirun(2, ["run", "d", "-s", "1M", "--results", "r", "--stripe-count", "2",
                     "--progress-interval", "0"], cwd=tmp_path, timeout=60)
    assert out.returncode == 2 and "--stripe-count" in out.stderr and "not" in out.stderr
    assert not (tmp_path / "d").exists() and not (tmp_path / "r").exists()
