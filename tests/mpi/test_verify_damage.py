"""`mpiwrite verify` against every kind of damage, on files written by real runs.

The runs are made once per module (2 ranks, 2 iterations, file per rank; and a shared file
with a block size that does not divide the size); each test damages a copy."""

import os
import shutil
import subprocess

import pytest
from common import MPIWRITE, clean_env, cli, is_root, mpirun

pytestmark = pytest.mark.timeout(120)
BS = 65536


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("verify-runs")
    fpp = mpirun(2, ["run", "d", "-s", "512k", "-b", "64k", "-i", "2", "--keep", "--results",
                     "results"], cwd=str(base), timeout=90)
    assert fpp.returncode == 0, fpp.stderr
    shared = base / "shared"
    shared.mkdir()
    out = mpirun(2, ["run", "d", "--layout", "shared", "-b", "64k", "-s", "100k", "--keep",
                     "--verify", "--results", "results"], cwd=str(shared), timeout=90)
    assert out.returncode == 0, out.stderr
    return base


@pytest.fixture
def work(runs, tmp_path):
    """A copy of the file-per-rank run: (folder, {(iteration, rank): path})."""
    w = tmp_path / "w"
    shutil.copytree(runs, w, ignore=shutil.ignore_patterns("shared"))
    files = {}
    for name in os.listdir(w / "d"):
        it = int(name.split("-i")[1].split("-")[0])
        rank = int(name.split("-r")[-1].split(".")[0])
        files[(it, rank)] = w / "d" / name
    assert len(files) == 4
    return w, files


def _verify(cwd, *extra):
    return cli(["verify", "d", *extra], cwd=cwd, timeout=60)


def _copy_block(src, src_block, dst, dst_block):
    data = src.read_bytes()[src_block * BS:(src_block + 1) * BS]
    with open(dst, "r+b") as fh:
        fh.seek(dst_block * BS)
        fh.write(data)


def _problems(out, path):
    return [ln for ln in out.stdout.splitlines() if path.name in ln and "ok (" not in ln]


def test_clean_files_verify_with_and_without_the_record(work):
    w, files = work
    out = _verify(w)
    assert out.returncode == 0 and out.stdout.count(f"ok (8 blocks of {BS} bytes)\n") == 4
    out = _verify(w, "--record", "nowhere")
    assert out.returncode == 0 and out.stdout.count("length not checked") == 4


@pytest.mark.parametrize("record", [True, False], ids=["record", "no-record"])
@pytest.mark.parametrize("damage", ["other-rank", "other-iteration", "other-offset",
                                    "header-byte", "body-byte", "first-header-zeroed"])
def test_damaged_block_is_found_at_its_place(work, damage, record):
    w, files = work
    victim = files[(1, 0)]
    block = {"other-rank": 3, "other-iteration": 5, "other-offset": 4, "header-byte": 1,
             "body-byte": 6, "first-header-zeroed": 0}[damage]
    if damage == "other-rank":
        _copy_block(files[(1, 1)], 3, victim, 3)
    elif damage == "other-iteration":
        _copy_block(files[(0, 0)], 5, victim, 5)
    elif damage == "other-offset":
        _copy_block(victim, 2, victim, 4)
    else:
        at = {"header-byte": BS + 18, "body-byte": 6 * BS + 999}.get(damage)
        with open(victim, "r+b") as fh:
            if at is None:
                fh.write(b"\0" * 32)
                at = 0
            else:
                fh.seek(at)
                b = fh.read(1)
                fh.seek(at)
                fh.write(bytes([b[0] ^ 0x5A]))
    out = _verify(w, *([] if record else ["--record", "nowhere"]))
    assert out.returncode == 1, out.stdout
    bad = _problems(out, victim)
    assert len(bad) == 1, out.stdout
    assert f"(block {block})" in bad[0], bad
    assert f"ok (8 blocks of {BS} bytes)" in out.stdout  # the others still read right


@pytest.mark.parametrize("keep", [2 * BS + 1000, 4 * BS, 8 * BS - 1, 8 * BS + 10])
def test_wrong_length_is_a_failure(work, keep):
    w, files = work
    victim = files[(0, 1)]
    if keep > victim.stat().st_size:
        with open(victim, "ab") as fh:
            fh.write(b"x" * (keep - victim.stat().st_size))
    else:
        os.truncate(victim, keep)
    out = _verify(w)
    assert out.returncode == 1
    bad = _problems(out, victim)
    assert bad and f"expected {8 * BS} bytes, found {keep} bytes (file length)" in bad[0], \
        out.stdout


def test_shared_file_with_uneven_blocks_verifies_clean(runs):
    for extra in ([], ["--record", "nowhere"]):
        out = cli(["verify", "d", *extra], cwd=runs / "shared", timeout=60)
        assert out.returncode == 0, out.stdout
        assert f"ok (4 blocks of {BS} bytes)" in out.stdout


def test_shared_file_block_of_the_other_rank_is_found(runs, tmp_path):
    w = tmp_path / "s"
    shutil.copytree(runs / "shared", w)
    (path,) = (w / "d").iterdir()
    data = bytearray(path.read_bytes())
    seg = 100 * 1024
    data[seg + BS:seg + BS + 4096] = data[BS:BS + 4096]  # rank 0's 2nd block into rank 1's
    path.write_bytes(bytes(data))
    out = cli(["verify", "d"], cwd=w, timeout=60)
    # the first wrong byte is the header's rank field (offset 4 in the block)
    assert out.returncode == 1, out.stdout
    assert f"mismatch at offset {seg + BS + 4} (rank 1 block 1)" in out.stdout, out.stdout


def test_missing_path_is_exit_2(tmp_path):
    out = cli(["verify", "nope"], cwd=tmp_path)
    assert out.returncode == 2 and "nope" in out.stderr and "does not exist" in out.stderr


def test_fifo_named_like_a_data_file_is_refused_at_once(tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    os.mkfifo(d / "mpiwrite-20260101T000000Z-abcdef-i0-r000000.dat")
    out = cli(["verify", "d"], cwd=tmp_path, timeout=20)
    assert out.returncode == 1 and "FIFO" in out.stdout, out


def test_file_not_named_like_data_is_an_error(tmp_path):
    (tmp_path / "x.dat").write_bytes(b"MPIW" + b"\0" * 100)
    out = cli(["verify", "x.dat"], cwd=tmp_path)
    assert out.returncode == 1 and "not named like" in out.stdout


@pytest.mark.root
@pytest.mark.skipif(not is_root(), reason="needs root for setpriv")
def test_permission_denied_is_said_as_such(tmp_path):
    """A 0700 folder of another user (nobody), read by root without its DAC override."""
    d = tmp_path / "d"
    d.mkdir(mode=0o700)
    (d / "mpiwrite-20260101T000000Z-abcdef-i0-r000000.dat").write_bytes(b"x")
    os.chown(d, 65534, 65534)
    out = without_dac_override(["verify", "d"], tmp_path)
    assert out.returncode == 2 and "'d': permission denied" in out.stderr, out.stderr


def without_dac_override(args, cwd):
    """mpiwrite ARGS as root without CAP_DAC_OVERRIDE/READ_SEARCH: permissions apply to it as
    to any user (user nobody cannot run this venv's Python, which lives under /root)."""
    return subprocess.run(["setpriv", "--bounding-set=-dac_override,-dac_read_search", "--",
                           MPIWRITE, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=60, env=clean_env())


@pytest.mark.mpi
@pytest.mark.parametrize("edit", [{"size": 2**40}, {"ranks": 10**7}, {"block_size": 2**31},
                                  {"block_size": 2**40}, {"size": 2**40, "ranks": 10**7}],
                         ids=["size", "ranks", "block-2^31", "block-2^40", "size-and-ranks"])
def test_a_record_edited_to_huge_sizes_is_bounded(runs, tmp_path, edit):
    """A kept shared file's record edited to size 2^40 and 10^7 ranks made verify
    grow to 14 GB; block size 2^31 took 4.2 GB and 2^40 a MemoryError traceback."""
    import json
    import resource

    import h5py

    w = tmp_path / "s"
    shutil.copytree(runs / "shared", w)
    rec = next((w / "results").glob("*.h5"))
    with h5py.File(rec, "a") as h5:
        params = json.loads(h5.attrs["params"])
        params.update({k: v for k, v in edit.items() if k != "ranks"})
        h5.attrs["params"] = json.dumps(params)
        if "ranks" in edit:
            h5.attrs["ranks"] = edit["ranks"]

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (2 * 2**30, 2 * 2**30))

    out = subprocess.run([MPIWRITE, "verify", "d", "--record", "results"], cwd=w,
                         capture_output=True, text=True, timeout=60, env=clean_env(),
                         preexec_fn=limit)
    assert "Traceback" not in out.stderr and "MemoryError" not in out.stderr, out.stderr
    assert out.returncode in (1, 2), (out.stdout, out.stderr)
