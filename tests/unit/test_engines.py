"""Every registered engine keeps the engine contract (engines/base.py): run over ENGINES, so a
new engine is checked by being registered.  Real files in tmp_path, no MPI."""

import os

import pytest

from mpiwrite.engines import base

pytestmark = pytest.mark.timeout(60)
BS = 64 * 1024


@pytest.fixture(params=sorted(base.ENGINES))
def engine(request):
    return base.get(request.param)


def test_the_registry_resolves_each_name_to_its_own_engine(engine):
    assert engine.name in base.ENGINES and base.get(engine.name) is engine
    assert engine.flags <= {base.FILES, base.VERIFY, base.DROP_CACHE, base.SPACE_CHECK,
                            base.COLLECTIVE}, engine.flags
    assert engine.summary


def test_an_unknown_engine_is_not_registered():
    with pytest.raises(KeyError):
        base.get("nonesuch")


def test_a_sized_stream_reports_what_it_was_asked_and_ends_with_one_fsync(engine, tmp_path):
    path = tmp_path / "f"
    plan = base.StreamPlan(path=str(path), create=True, offset=0, nbytes=10 * BS + 100,
                           block_size=BS)
    res = engine.write(plan, bytearray(BS), None)
    assert not res.failed, res.error_text
    assert res.bytes == 10 * BS + 100 and res.blocks == 11 and res.fsyncs == 1
    assert res.t_write_start <= res.t_write_end <= res.t_fsync_end <= res.t_close_end
    assert res.samples and res.samples[-1][1] == res.bytes
    if engine.has(base.FILES):
        assert res.created and path.stat().st_size == res.bytes
    else:
        assert not path.exists(), "an engine without FILES made a file"


def test_a_timed_stream_stops_on_time(engine, tmp_path):
    plan = base.StreamPlan(path=str(tmp_path / "f"), create=True, offset=0, nbytes=None,
                           block_size=BS, time_limit=0.3)
    res = engine.write(plan, bytearray(BS), None)
    assert not res.failed and res.stopped_by == "time" and res.bytes > 0


def test_a_poll_that_says_stop_stops_the_stream(engine, tmp_path):
    plan = base.StreamPlan(path=str(tmp_path / "f"), create=True, offset=0, nbytes=None,
                           block_size=BS, time_limit=30)
    res = engine.write(plan, bytearray(BS), lambda now, done: done > 0)
    assert res.stopped_by == "abort" and res.fsyncs == 0


def test_what_it_writes_reads_back_as_much(engine, tmp_path):
    path = tmp_path / "f"
    plan = base.StreamPlan(path=str(path), create=True, offset=0, nbytes=4 * BS, block_size=BS)
    res = engine.write(plan, bytearray(BS), None)
    rplan = base.ReadPlan(path=str(path), offset=0, nbytes=res.bytes, block_size=BS,
                          expect_ino=res.ino)
    got = engine.read(rplan, bytearray(BS), None)
    assert not got.failed and got.bytes == res.bytes


def test_capabilities_come_with_what_they_need(engine):
    assert bool(engine.verify) == engine.has(base.VERIFY)
    assert bool(engine.create_shared) == engine.has(base.FILES)
    from mpiwrite.run.options import flag_for

    if not engine.has(base.VERIFY):
        assert engine.problem({"verify": True}, flag_for)[0] == "--verify"
    assert engine.problem({}, flag_for) is None


def test_the_shared_file_is_made_once_and_never_through_a_planted_link(tmp_path):
    posix = base.get("posix")
    dev, ino = posix.create_shared(str(tmp_path / "s"), None)
    assert os.stat(tmp_path / "s").st_ino == ino
    with pytest.raises(FileExistsError):
        posix.create_shared(str(tmp_path / "s"), None)
    os.symlink(tmp_path / "elsewhere", tmp_path / "l")
    with pytest.raises(OSError):
        posix.create_shared(str(tmp_path / "l"), None)
    assert not (tmp_path / "elsewhere").exists()
