"""`mpiexec -n N mpiwrite run` with the MPI-IO engine, the write patterns and the stonewall:
real MPI (oversubscribed on this machine), real files, every block read back where it was
written, MPI_File_sync counted with strace, the hints read back from MPI_File_get_info."""

import json
import os
import re
import shutil
import signal

import pytest
from common import cli, mpirun, only_record

from mpiwrite.vocab import pattern
from mpiwrite.vocab.status import Status

pytestmark = [pytest.mark.mpi, pytest.mark.timeout(300)]
BS = 64 * 1024


def _json(value):
    return value if isinstance(value, (dict, list)) else json.loads(value)


def _blocks_on_disk(folder, rec):
    """(rank, offset) of every block header found in the kept files, and the total bytes."""
    key = pattern.run_key(rec.run_id)
    found, total = [], 0
    for name in sorted(os.listdir(folder)):
        with open(os.path.join(folder, name), "rb") as fh:
            data = fh.read()
        total += len(data)
        for off in range(0, len(data), BS):
            hdr = pattern.read_header(data[off:off + 32])
            assert hdr is not None and hdr[1] == key and hdr[2] == off, (name, off, hdr)
            found.append((hdr[0], off, "shared" in name))
    return found, total


@pytest.mark.parametrize("n,layout,pat,mode", [
    (1, "fpp", "sequential", "--independent"),
    (2, "shared", "strided", "--collective"),
    (2, "shared", "sequential", "--independent"),
    (4, "shared", "random", "--independent"),
    (4, "fpp", "random", "--collective"),
    (4, "shared", "strided", "--independent"),
])
def test_mpiio_writes_exactly_the_blocks_and_offsets_it_claims(tmp_path, n, layout, pat, mode):
    out = mpirun(n, ["run", "d", "--engine", "mpiio", mode, "--layout", layout, "--pattern", pat,
                     "--count", "12", "-b", "64k", "--keep", "--verify", "--results", "r",
                     "--progress-interval", "0"], cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    rec = only_record(tmp_path / "r")
    assert rec.status == "complete"
    assert (rec.ranks["bytes"] == 12 * BS).all() and (rec.ranks["fsyncs"] == 1).all()
    found, total = _blocks_on_disk(tmp_path / "d", rec)
    assert total == n * 12 * BS and len(found) == n * 12
    for rank, off, shared in found:
        if pat == "strided":
            assert (off // BS) % n == rank
        elif shared:
            assert off // (12 * BS) == rank
    assert sorted(r for r, _, _ in found) == sorted(list(range(n)) * 12)
    p = rec.params()
    assert p["pattern"] == pat and p["collective"] is (mode == "--collective")
    assert "none mismatched" in out.stdout
    kept = cli(["verify", "d", "--record", "r"], cwd=tmp_path)  # long after, from the record
    assert kept.returncode == 0 and "mismatch" not in kept.stdout.replace("0 mismatch", ""), \
        kept.stdout + kept.stderr


def test_hints_reach_the_file_and_are_recorded_as_in_force(tmp_path):
    out = mpirun(2, ["run", "d", "--engine", "mpiio", "--layout", "shared", "-s", "1M",
                     "--mpiio-hint", "cb_buffer_size=1048576", "--mpiio-hint",
                     "romio_cb_write=enable", "--collective", "--results", "r",
                     "--progress-interval", "0"], cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    rec = only_record(tmp_path / "r")
    keys = rec.keys()
    assert keys["mpiio.cb_buffer_size"] == "1048576"
    assert keys["mpiio.romio_cb_write"] == "enable"
    # the implementation is a fact of the record: MPICH's ROMIO, and the driver it chose
    assert keys["mpiio"].startswith("ROMIO (MPICH") and "; driver UFS)" in keys["mpiio"]
    assert rec.params()["mpiio_hints"] == {"cb_buffer_size": "1048576",
                                           "romio_cb_write": "enable"}


@pytest.mark.parametrize("extra,per_file", [([], 1), (["--fsync-every", "3"], 3),
                                            (["--no-fsync"], 0)])
def test_mpi_file_sync_is_one_fsync_per_file_inside_the_run(tmp_path, extra, per_file):
    if not shutil.which("strace"):
        pytest.skip("strace not installed")
    out = mpirun(2, ["run", "d", "--engine", "mpiio", "-s", "512k", "-b", "64k", "--no-record",
                     "--progress-interval", "0"] + extra, cwd=tmp_path,
                 pre=["strace", "-f", "-y", "-e", "trace=fsync,fdatasync", "-o",
                      str(tmp_path / "trace")])
    assert out.returncode == 0, out.stderr
    calls = re.findall(r"f(?:data)?sync\(\d+<([^>]*\.dat)>", (tmp_path / "trace").read_text())
    per = {}
    for path in calls:
        per[path] = per.get(path, 0) + 1
    assert sorted(per.values()) == ([per_file] * 2 if per_file else [])


@pytest.mark.parametrize("args", [
    ["--engine", "posix"],
    ["--engine", "mpiio", "--independent", "--layout", "shared", "--pattern", "strided",
     "--count", "400000", "--allow-fill"],
    ["--engine", "mpiio", "--collective", "--layout", "shared", "--count", "400000",
     "--allow-fill"],
])
def test_the_wear_out_brings_every_rank_to_the_same_byte_count(tmp_path, args):
    out = mpirun(4, ["run", "d", "--stonewall", "1s", "-b", "64k", "--results", "r",
                     "--verify", "--progress-interval", "0"] + args, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    rec = only_record(tmp_path / "r")
    assert rec.status == "complete"
    # every iteration counts: a rank's collective close may end after rank 0 has heard every
    # rank say 'done', and the clock check once called that a clock outside the window
    assert list(rec.iterations["status"]) == [int(Status.OK)], out.stderr
    written = rec.ranks["bytes"]
    assert (written == written[0]).all() and written[0] > 0
    wall = _json(rec.attrs["stonewall"])[0]
    assert len(wall["bytes_at_stonewall"]) == 4
    assert wall["max_bytes_at_stonewall"] == written[0]
    assert wall["min_bytes_at_stonewall"] <= wall["max_bytes_at_stonewall"]
    # collective writes stop together, when the first rank's stonewall falls
    assert max(wall["seconds_at_stonewall"]) >= 1.0
    assert wall["stonewall_MB_per_s"] > 0 and wall["wear_out_seconds"] >= 0
    assert "stonewall at" in out.stdout and "none mismatched" in out.stdout
    shown = cli(["report", "r", "--metric", "stonewall", "--format", "json"], cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    row = json.loads(shown.stdout)["rows"][0]
    assert row["mean_MB_per_s"] == pytest.approx(wall["stonewall_MB_per_s"])


def test_a_preset_stands_for_options_that_can_be_given_one_by_one(tmp_path):
    out = mpirun(2, ["run", "d", "--preset", "ior-hard-write", "--stonewall", "1s",
                     "--count", "2000", "--results", "r", "--progress-interval", "0"],
                 cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "--preset ior-hard-write: --layout shared --pattern strided --block-size 47008" \
        in out.stderr
    assert "--stonewall" not in out.stderr.split("--preset ior-hard-write:")[1].splitlines()[0]
    rec = only_record(tmp_path / "r")
    p = rec.params()
    assert (p["preset"], p["pattern"], p["layout"], p["block_size"], p["stonewall"],
            p["size"]) == ("ior-hard-write", "strided", "shared", 47008, 1.0, 2000 * 47008)


@pytest.mark.parametrize("mode", ["--collective", "--independent"])
def test_open_mpi_writes_the_same_pattern_through_its_own_mpi_io(tmp_path, mode):
    from testbed import ompi

    if ompi.why_not():
        pytest.skip(f"Open MPI: {ompi.why_not()}")
    out = ompi.mpirun(2, ["run", "d", "--engine", "mpiio", mode, "--layout", "shared",
                          "--pattern", "strided", "--count", "12", "-b", "64k", "--keep",
                          "--verify", "--mpiio-hint", "cb_buffer_size=1048576",
                          "--results", "r", "--progress-interval", "0"], cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    rec = only_record(tmp_path / "r")
    assert rec.attrs["mpi_library"].startswith("Open MPI v") and rec.status == "complete"
    found, total = _blocks_on_disk(tmp_path / "d", rec)
    assert total == 2 * 12 * BS and len(found) == 24
    assert all((off // BS) % 2 == r for r, off, _ in found)
    assert (rec.ranks["fsyncs"] == 1).all() and "none mismatched" in out.stdout
    assert any(k.startswith("mpiio.") for k in rec.keys())


@pytest.mark.parametrize("engine,pat,layout", [("posix", "strided", "shared"),
                                               ("mpiio", "random", "fpp")])
def test_the_read_phase_reads_and_checks_another_ranks_blocks_where_its_pattern_put_them(
        tmp_path, engine, pat, layout):
    out = mpirun(2, ["run", "d", "--engine", engine, "--layout", layout, "--pattern", pat,
                     "--count", "16", "-b", "64k", "--read", "--verify", "--results", "r",
                     "--progress-interval", "0"], cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    rec = only_record(tmp_path / "r")
    assert rec.status == "complete"
    assert (rec.ranks["read_bytes"] == 16 * BS).all(), rec.ranks.dtype.names
    assert (rec.ranks["verify_mismatches"] == 0).all() and (rec.ranks["read_status"] == 0).all()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("n,mode,stopped", [(2, "--independent", 1), (3, "--collective", 2)])
def test_a_stopped_rank_is_named_under_mpi_io_not_the_one_that_waits(tmp_path, n, mode,
                                                                     stopped):
    """SIGSTOP one rank while a shared file is written through MPI-IO: the others wait for it
    inside MPI (the closing agreement, or every collective write), where no progress of
    theirs is seen.  Once rank 0's watchdog named rank 0 ("still writing ... state R") and the
    lock file was left; now the stopped rank is named, in the line and in the record, and
    nothing of the run is left in TARGET."""
    from common import MPIEXEC, kill_started, rank_pids, start, wait, wait_for_bytes

    if MPIEXEC is None:
        pytest.skip("no mpiexec")
    proc = start(n, ["run", "d", "--count", "200000", "-b", "64k", "-t", "3", "--timeout",
                     "4", "--engine", "mpiio", mode, "--layout", "shared", "--allow-fill",
                     "--results", "r"], tmp_path)
    pids = {}
    try:
        pids = rank_pids(tmp_path, n)
        wait_for_bytes(tmp_path / "d", 2**20)
        os.kill(pids[stopped], signal.SIGSTOP)
        rc, _out, err = wait(proc, 60)
    finally:
        kill_started(pids, proc)
    said = [ln for ln in err.splitlines() if ln.startswith("mpiwrite:")]
    assert rc == 1 and len(said) == 1, err
    assert f"never came: rank {stopped} on" in said[0] and "T (stopped)" in said[0], said
    rec = only_record(str(tmp_path / "r"))
    assert rec.status == "timeout"
    assert f"rank {stopped} did not finish" in rec.attrs["error"], rec.attrs["error"]
    left = os.listdir(tmp_path / "d") if (tmp_path / "d").exists() else []
    assert left == [], left
