"""Scale-related behaviour: typed reductions, start-up imports, files spread over directories."""

import os
import subprocess
import sys

import pytest
from common import MPIEXEC, MPIWRITE, TESTS, clean_env, mpirun, only_record

HERE = str(TESTS)


def _mpmd(groups, script, timeout=120):
    """mpiexec with one group of ranks per (count, hostname)."""
    if MPIEXEC is None:
        pytest.skip("no mpiexec")
    cmd = [MPIEXEC]
    for i, (n, host) in enumerate(groups):
        if i:
            cmd.append(":")
        cmd += ["-n", str(n), "-env", "MPIWRITE_HOSTNAME", host, sys.executable, script]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                          env=clean_env({"PYTHONPATH": os.path.dirname(HERE)}))


@pytest.mark.mpi
@pytest.mark.parametrize("groups", [
    [(1, "a")], [(2, "a")], [(3, "a"), (1, "b")], [(1, "a"), (4, "b"), (2, "c")],
    [(5, "a"), (5, "b"), (6, "c")],
], ids=["1", "2", "3+1", "1+4+2", "5+5+6"])
def test_typed_reductions_match_pickled_reference(groups):
    out = _mpmd(groups, os.path.join(HERE, "mpi_reductions.py"))
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.strip().endswith("ok")


@pytest.mark.mpi
def test_uneven_nodes_in_a_run(tmp_path):
    cmd = [MPIEXEC, "-n", "3", "-env", "MPIWRITE_HOSTNAME", "left", MPIWRITE, "run", "d", "-s",
           "1M", "--results", "r", ":", "-n", "1", "-env", "MPIWRITE_HOSTNAME", "right",
           MPIWRITE, "run", "d", "-s", "1M", "--results", "r"]
    out = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=120,
                         env=clean_env())
    assert out.returncode == 0, out.stderr
    rec = only_record(tmp_path / "r")
    assert [n["host"] for n in rec.nodes] == ["left", "right"]
    assert list(rec.ranks["node"]) == [0, 0, 0, 1]
    assert "ranks 4 on 2 nodes (left, right)" in out.stdout


# A finished rank leaves through exit() without Python's atexit hooks (cli/ranks.leave_run):
# the probe dumps the modules on the way out.  It starts as the console script does
# (cli/entry.main), so that ranks other than 0 take their own way (no click).
MODULES_PROBE = (
    "import os, sys\n"
    "import mpiwrite.cli.ranks as ranks\n"
    "from mpiwrite.cli import entry\n"
    "leave = ranks.leave_run\n"
    "def dump(code):\n"
    "    r = os.environ.get('PMI_RANK', '0')\n"
    "    open(f'mods.{r}', 'w').write('\\n'.join(sorted(sys.modules)))\n"
    "    leave(code)\n"
    "ranks.leave_run = dump\n"
    "sys.argv = ['mpiwrite'] + sys.argv[1:]\n"
    "entry.main()\n")
# What ranks other than 0 never load: the record (h5py), rank 0's plots and tables; since
# they take rank 0's parsed options, click, what it brings and the command line's modules;
# the stuck-rank clean-up, loaded when a watchdog fires (docs/scaling.md: start-up's load).
NOT_ON_RANKS = ("h5py", "matplotlib", "pandas", "click", "gettext", "difflib",
                "mpiwrite.cli.main", "mpiwrite.cli.runcmd", "mpiwrite.cli.options",
                "mpiwrite.run.stuck")


@pytest.mark.mpi
def test_only_rank_zero_imports_h5py(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text(MODULES_PROBE)
    out = subprocess.run([MPIEXEC, "-n", "3", sys.executable, str(probe), "run", "d", "-s",
                          "1M", "--results", "r"], cwd=tmp_path, capture_output=True,
                         text=True, timeout=120, env=clean_env())
    assert out.returncode == 0, out.stderr
    mods = {r: (tmp_path / f"mods.{r}").read_text().split() for r in range(3)}
    assert "h5py" in mods[0] and "click" in mods[0]
    for r in (1, 2):
        assert not set(NOT_ON_RANKS) & set(mods[r]), (r, set(NOT_ON_RANKS) & set(mods[r]))


@pytest.mark.mpi
def test_only_node_leaders_import_numpy_and_the_data_verifies(tmp_path):
    """Two nodes of two ranks, 1 MiB blocks, --verify with a shift that crosses nodes: the
    leaders (ranks 0 and 2) make the pattern (numpy) and send ranks 1 and 3 theirs and the
    one each verifies; ranks 1 and 3 never load numpy (nor hashlib), and every byte of every
    file is the pattern (`mpiwrite verify`)."""
    if MPIEXEC is None:
        pytest.skip("no mpiexec")
    probe = tmp_path / "probe.py"
    probe.write_text(MODULES_PROBE)
    args = [sys.executable, str(probe), "run", "d", "-s", "3M", "-b", "1M", "--verify",
            "--verify-shift", "1", "--keep", "--results", "r"]
    cmd = [MPIEXEC, "-n", "2", "-env", "MPIWRITE_HOSTNAME", "left", *args, ":",
           "-n", "2", "-env", "MPIWRITE_HOSTNAME", "right", *args]
    out = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=120,
                         env=clean_env())
    assert out.returncode == 0, out.stderr
    assert "none mismatched" in out.stdout
    mods = {r: (tmp_path / f"mods.{r}").read_text().split() for r in range(4)}
    for r in (0, 2):
        assert "numpy" in mods[r]
    for r in (1, 3):
        assert "numpy" not in mods[r] and "hashlib" not in mods[r], r
    check = subprocess.run([MPIWRITE, "verify", "d"], cwd=tmp_path, capture_output=True,
                           text=True, timeout=120, env=clean_env())
    assert check.returncode == 0, check.stdout + check.stderr
    assert check.stdout.count(": ok (3 blocks of 1048576 bytes)") == 4, check.stdout


@pytest.mark.mpi
def test_files_per_dir_spreads_and_cleans_up(tmp_path):
    out = mpirun(5, ["run", "d", "-s", "1M", "--files-per-dir", "2", "--keep", "--results", "r",
                     "--json", "s.json"], cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    rec = only_record(tmp_path / "r")
    subdirs = sorted(os.listdir(tmp_path / "d"))
    assert len(subdirs) == 3 and all(rec.run_id in d for d in subdirs)
    counts = [len(os.listdir(tmp_path / "d" / s)) for s in subdirs]
    assert counts == [2, 2, 1]
    assert rec.attrs["mkdir_seconds"] >= 0 and rec.attrs["startup_seconds"] > 0
    out = mpirun(5, ["run", "d", "-s", "1M", "--files-per-dir", "2", "--no-record"],
                 cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert sorted(os.listdir(tmp_path / "d")) == subdirs  # only the kept run's dirs remain


@pytest.mark.mpi
@pytest.mark.parametrize("case", ["tag-file", "sysroot"])
def test_a_rank_on_rank_0s_options_still_reads_its_own_node(tmp_path, case):
    """Rank 1's command line is rank 0's, so it takes rank 0's parsed options and never loads
    click (cli/ranks.py); what is node-local is still its own: the --tag-file in its working
    folder, MPIWRITE_SYSROOT in its environment.  Bad there only, rank 1 is named (exit 2, one
    line, nothing created)."""
    if MPIEXEC is None:
        pytest.skip("no mpiexec")
    probe = tmp_path / "probe.py"
    probe.write_text(MODULES_PROBE)
    a, b = tmp_path / "a", tmp_path / "b"
    for folder in (a, b):
        folder.mkdir()
        (folder / "node.tags").write_text("site=x\n")
    extra = []
    if case == "tag-file":
        (b / "node.tags").unlink()
    else:
        extra = ["-env", "MPIWRITE_SYSROOT", str(tmp_path / "no-such-sysroot")]
    args = [sys.executable, str(probe), "run", "d", "-s", "1M", "--tag-file", "node.tags",
            "--results", "r", "--progress-interval", "0"]
    cmd = [MPIEXEC, "-n", "1", "-wdir", str(a), *args, ":",
           "-n", "1", "-wdir", str(b), *extra, *args]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=clean_env())
    assert out.returncode == 2, out.stderr
    said = out.stderr.strip().splitlines()
    assert len(said) == 1 and "rank 1 on" in said[0] and f"--{case}" in said[0], out.stderr
    assert "click" in (a / "mods.0").read_text().split()
    assert "click" not in (b / "mods.1").read_text().split()
    for folder in (a, b):
        assert not (folder / "d").exists() and not (folder / "r").exists()
