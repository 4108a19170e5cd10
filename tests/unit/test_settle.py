"""Settling between a study's runs (study/settle.py): what the file may say, the default for
buffered runs and cache settings, and the node's dirty bytes as /proc/meminfo gives them."""

import pytest

from mpiwrite.study import settle


@pytest.mark.parametrize("text,mode,seconds", [
    ("writeback", "writeback", settle.BOUND), ("writeback:30s", "writeback", 30.0),
    ("sleep:2s", "sleep", 2.0), ("sleep:500ms", "sleep", 0.5), ("none", "none", settle.BOUND),
    ("sleep:0.01s", "sleep", 0.01), ("writeback:1.25s", "writeback", 1.25),
    ("drop-caches", "drop-caches", settle.BOUND),
])
def test_a_settle_is_read_as_written(text, mode, seconds):
    got = settle.parse(text)
    assert (got.mode, got.seconds) == (mode, seconds)
    assert settle.parse(got.text()) == got  # what the record says reads back the same


@pytest.mark.parametrize("text,why", [
    ("flush", "must be one of"), ("sleep", "needs a duration"), ("none:3s", "takes no"),
    ("sleep:0s", "10 ms to 1 hour"), ("writeback:2h", "10 ms to 1 hour"),
    ("sleep:0.00001s", "10 ms to 1 hour"), ("sleep:abc", "sleep:abc"),
    ("", "must be one of"), (3, "must be one of"),
])
def test_a_bad_settle_says_why(text, why):
    with pytest.raises(ValueError, match=why):
        settle.parse(text)


def test_buffered_runs_and_cache_settings_settle_by_default():
    assert settle.default([], buffered=True).mode == "writeback"
    assert settle.default(["vm.dirty_ratio"], buffered=False).mode == "writeback"
    assert settle.default(["client_oc_max_dirty"], buffered=False).mode == "writeback"
    assert settle.default(["performance.write-behind"], buffered=False).mode == "writeback"
    assert settle.default(["checksums"], buffered=False).mode == "none"


def test_dirty_and_writeback_are_summed_in_bytes(tmp_path):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       24000000 kB\nDirty:              1024 kB\n"
                       "Writeback:           512 kB\nWritebackTmp:        999 kB\n")
    assert settle.dirty_bytes(str(meminfo)) == 1536 * 1024
    meminfo.write_text("MemTotal: 1 kB\n")
    assert settle.dirty_bytes(str(meminfo)) is None
    assert settle.dirty_bytes(str(tmp_path / "absent")) is None


def test_a_sleep_settle_waits_and_says_what_is_left(tmp_path):
    got = settle.settle(settle.parse("sleep:200ms"), str(tmp_path))
    assert got["mode"] == "sleep:0.2s" and got["seconds"] >= 0.2 and not got["note"]
    assert got["dirty_bytes"] is None or got["dirty_bytes"] >= 0


def test_a_writeback_settle_flushes_the_nearest_folder_that_exists(tmp_path):
    got = settle.settle(settle.parse("writeback:20s"), str(tmp_path / "not" / "yet"))
    assert got["mode"] == "writeback:20s" and got["note"] in ("", "the 20 s bound reached")
