"""Write patterns (vocab/offsets.py), the stonewall's wear-out in one stream, and the checks
of the new run options: real files in tmp_path, no MPI launcher."""

import os

import pytest
from common import cli

from mpiwrite.engines import base
from mpiwrite.engines.posix import verify_segment, write_stream
from mpiwrite.run import config
from mpiwrite.vocab import offsets, pattern

pytestmark = pytest.mark.timeout(120)
BS = 4096


@pytest.mark.parametrize("name", offsets.PATTERNS)
@pytest.mark.parametrize("nranks", [1, 3, 4])
def test_every_block_of_the_file_is_written_exactly_once(name, nranks):
    nblocks, size = 37, 37 * BS
    seen = []
    for r in range(nranks):
        offs = offsets.offsets(name, r, nranks, r * size, nblocks, BS, seed=7)
        assert len(offs) == nblocks
        seen += list(offs)
        assert all(offsets.owner(name, o, BS, nranks, size) == r for o in offs)
    assert sorted(seen) == list(range(0, nranks * size, BS))


def test_random_order_is_seeded_and_differs_by_seed_and_rank():
    a = list(offsets.offsets("random", 0, 2, 0, 500, BS, seed=1))
    assert a == list(offsets.offsets("random", 0, 2, 0, 500, BS, seed=1))
    assert a != list(offsets.offsets("random", 0, 2, 0, 500, BS, seed=2))
    assert a != list(offsets.offsets("random", 1, 2, 0, 500, BS, seed=1))
    assert a != sorted(a) and sorted(a) == list(range(0, 500 * BS, BS))


def test_strided_blocks_interleave_the_ranks():
    assert list(offsets.offsets("strided", 1, 3, 0, 3, 47008)) == [47008, 4 * 47008, 7 * 47008]


def test_a_random_stream_puts_each_block_where_its_header_says(tmp_path):
    path = tmp_path / "f"
    offs = offsets.offsets("random", 0, 1, 0, 64, BS, seed=3)
    plan = base.StreamPlan(path=str(path), create=True, offset=0, nbytes=64 * BS,
                           block_size=BS, offsets=offs)
    buf = pattern.make_buffer(BS, 11, 0, 0)
    res = write_stream(plan, buf)
    assert not res.failed and res.bytes == 64 * BS == path.stat().st_size and res.fsyncs == 1
    with open(path, "rb") as fh:
        data = fh.read()
    for off in range(0, 64 * BS, BS):
        assert pattern.read_header(data[off:off + 32]) == (0, 11, off, 0)
    body = pattern.body_bytes(BS, 11, 0)
    ok = verify_segment(str(path), 0, res.bytes, BS, 11, 0, 0, expect=body, offsets=offs)
    assert ok.mismatches == 0 and ok.bytes == res.bytes and not ok.error_text


def test_a_partial_random_stream_is_checked_at_the_offsets_it_wrote(tmp_path):
    path = tmp_path / "f"
    offs = offsets.offsets("random", 0, 1, 0, 64, BS, seed=3)
    plan = base.StreamPlan(path=str(path), create=True, offset=0, nbytes=64 * BS,
                           block_size=BS, offsets=offs[:10])
    res = write_stream(plan, pattern.make_buffer(BS, 11, 0, 0))
    body = pattern.body_bytes(BS, 11, 0)
    ok = verify_segment(str(path), 0, res.bytes, BS, 11, 0, 0, expect=body, offsets=offs)
    assert res.bytes == 10 * BS and ok.mismatches == 0 and ok.bytes == 10 * BS
    whole = verify_segment(str(path), 0, res.bytes, BS, 11, 0, 0, expect=body)
    assert whole.mismatches > 0, "read in order, a partial random write cannot pass"


def test_the_wear_out_goes_on_to_the_agreed_block_count(tmp_path):
    asked = []

    def agree(blocks, ok):
        asked.append((blocks, ok))
        return blocks + 25

    plan = base.StreamPlan(path=str(tmp_path / "f"), create=True, offset=0, nbytes=None,
                           block_size=BS, time_limit=0.2, wear_out=agree, fsync_every=4)
    res = write_stream(plan, pattern.make_buffer(BS, 1, 0, 0))
    assert len(asked) == 1 and asked[0][1] is True
    done = asked[0][0]
    assert res.stonewall_bytes == done * BS and res.stonewall_seconds >= 0.2
    assert res.bytes == (done + 25) * BS == (tmp_path / "f").stat().st_size
    assert res.stopped_by == "" and res.fsyncs == (done + 25) // 4 + bool((done + 25) % 4)


def test_a_stream_that_cannot_open_still_takes_part_in_the_agreement(tmp_path):
    asked = []
    plan = base.StreamPlan(path=str(tmp_path / "missing" / "deeper" / "f"), create=False,
                           offset=0, nbytes=None, block_size=BS, time_limit=0.2,
                           wear_out=lambda b, ok: asked.append((b, ok)) or b)
    res = write_stream(plan, bytearray(BS))
    assert res.failed and asked == [(0, False)]


@pytest.mark.parametrize("args,option", [
    (["--pattern", "strided"], "--pattern"),                      # strided with a file per rank
    (["--collective"], "--collective"),                           # collective with posix
    (["--independent"], "--independent"),
    (["--mpiio-hint", "cb_nodes=2"], "--mpiio-hint"),             # a hint without MPI-IO
    (["--engine", "mpiio", "--mpiio-hint", "cb_nodes"], "--mpiio-hint"),
    (["--engine", "mpiio", "--mpiio-hint", "x=\x01"], "--mpiio-hint"),
    (["--engine", "mpiio", "--direct"], "--direct"),
    # values ROMIO parses itself and aborts on inside MPI_File_open (no line, files left)
    (["--engine", "mpiio", "--mpiio-hint", "cb_buffer_size=-1"], "--mpiio-hint"),
    (["--engine", "mpiio", "--mpiio-hint", "cb_nodes=0"], "--mpiio-hint"),
    (["--engine", "mpiio", "--mpiio-hint", "romio_cb_write=maybe"], "--mpiio-hint"),
    (["-t", "2s", "--stonewall", "3s"], "--stonewall"),           # a stonewall beyond --time
    (["--stonewall", "0"], "--stonewall"),
    (["--pattern", "random", "-t", "1s"], "--pattern"),           # random needs --size
    (["--pattern", "random", "-s", "100k", "-b", "64k"], "--size"),
    (["--layout", "shared", "-s", "1M", "--engine", "mpiio", "--fsync-every", "2", "-t", "1s"],
     "--fsync-every"),
    (["--pattern", "zigzag"], "--pattern"),
    # 10^12 blocks: the shuffled order would need 8 TB a rank (it grew to the memory limit)
    (["--pattern", "random", "--count", "1000000000000", "-b", "4k", "--allow-fill"],
     "--pattern"),
])
def test_bad_combinations_are_one_line_and_exit_2_before_any_data(tmp_path, args, option):
    out = cli(["run", "d", "--no-record"] + args, cwd=tmp_path)
    assert out.returncode == 2, (out.stdout, out.stderr)
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and option in lines[-1], out.stderr
    assert "\x01" not in out.stderr
    assert not os.path.exists(tmp_path / "d")


def test_mpiio_writes_independently_unless_told():
    assert config.build(target="d", engine="mpiio").collective is False
    assert config.build(target="d", engine="mpiio", collective=True).collective is True
    assert config.build(target="d").collective is None
    hints = config.parse_hints(["romio_cb_write=enable", " cb_nodes = 2 "])
    assert hints == {"romio_cb_write": "enable", "cb_nodes": "2"}


def test_a_stonewall_alone_runs_until_it_and_records_no_size():
    cfg = config.build(target="d", stonewall=5.0)
    assert cfg.size is None and cfg.watchdog_seconds() == 60.0


def _strided_file(tmp_path, nranks=3, nblocks=5):
    """A shared file as `--pattern strided` leaves it, written by one POSIX stream a rank."""
    from mpiwrite.engines.posix import create_shared
    from mpiwrite.vocab import names

    run_id = "20261203T000000Z-abcdef"
    key = pattern.run_key(run_id)
    path = tmp_path / names.data_file(run_id, 0, None)
    ident = create_shared(str(path), None)
    for r in range(nranks):
        plan = base.StreamPlan(path=str(path), create=False, offset=r * nblocks * BS,
                               nbytes=nblocks * BS, block_size=BS, expect_inode=ident,
                               offsets=offsets.offsets("strided", r, nranks, 0, nblocks, BS))
        assert not write_stream(plan, pattern.make_buffer(BS, key, r, 0)).failed
    return path


def test_verify_finds_a_strided_file_whole_without_its_record_and_names_damage(tmp_path):
    from mpiwrite.answers.verify import verify_file

    path = _strided_file(tmp_path)
    report = verify_file(str(path))
    assert report.error == "" and report.mismatches == [] and report.blocks == 15
    with open(path, "r+b") as fh:  # one byte of rank 1's second block (offset 4 x BS)
        fh.seek(4 * BS + 100)
        was = fh.read(1)
        fh.seek(4 * BS + 100)
        fh.write(b"\xff" if was != b"\xff" else b"\x00")
    damaged = verify_file(str(path))
    assert [m.offset for m in damaged.mismatches] == [4 * BS + 100]


def test_another_nodes_open_of_the_shared_file_compares_the_inode_alone(tmp_path):
    """A FUSE or NFS mount on another node gives the same file a device number of its own:
    there the inode alone says it is rank 0's file (st_dev -1); on rank 0's node both."""
    from mpiwrite.engines.posix import create_shared

    path = tmp_path / "s"
    dev, ino = create_shared(str(path), None)

    def write(expect):
        plan = base.StreamPlan(path=str(path), create=False, offset=0, nbytes=BS,
                               block_size=BS, expect_inode=expect)
        return write_stream(plan, bytearray(BS))

    assert not write((dev, ino)).failed and not write((-1, ino)).failed
    for wrong in ((dev + 1, ino), (-1, ino + 1)):
        res = write(wrong)
        assert res.failed and res.error_phase == "open" and "rank 0 created" in res.error_text
