"""Fixtures and markers of the test suite; the helpers they share are in common.py."""

from __future__ import annotations

import os
import subprocess

import pytest
from common import is_root, mounted
from testbed.hosts import needs

# What starts MPI ranks (directly, through a wrapper such as strace or timeout, or inside a
# batch job): a test that runs one of these must carry the `mpi` marker, so that
# `pytest -m "not mpi"` runs exactly the tests that start no MPI job.
LAUNCHERS = ("mpiexec", "mpirun", "srun", "sbatch", "reframe")


WRAPPERS = ("strace", "timeout", "bash", "sh", "env", "nsenter", "setsid", "unshare", "time",
            "setpriv")


def _launches(args) -> bool:
    """Whether a command starts ranks: a launcher, or a wrapper whose command is one, or
    `mpiwrite ... --submit` (sbatch from inside mpiwrite)."""
    if isinstance(args, (str, bytes, os.PathLike)):
        words = (os.fsdecode(args) if not isinstance(args, str) else args).split()
    else:
        words = [os.fsdecode(w) if isinstance(w, (bytes, os.PathLike)) else str(w) for w in args]
    if not words:
        return False
    first = os.path.basename(words[0])
    if first in LAUNCHERS or (first == "mpiwrite" and "--submit" in words):
        return True
    if first in ("bash", "sh") and "-c" in words:  # the script's own text may define srun()
        words = words[words.index("-c") + 1:][1:]
    elif first not in WRAPPERS:
        return False
    return any(os.path.basename(part) in LAUNCHERS for w in words[1:] for part in w.split())


# The two filesystem testbeds, each with servers, clients and a wire rate of its own: the tests
# compare rates on them, so they run one after the other, and never beside each other
FS_TESTBEDS = ("tests/cluster/test_gluster.py", "tests/cluster/test_ceph.py")


def _group(nodeid: str) -> str:
    """A test's share of the suite, which one worker runs whole: the filesystem testbeds'
    tests one, the other cluster files' (Slurm, Open MPI, emulated hosts) another, every
    other file's tests its own (a module's fixture is then made once, not once a worker)."""
    path = nodeid.split("::", 1)[0]
    if path in FS_TESTBEDS:
        return "cluster-fs"
    return "cluster-nodes" if path.startswith("tests/cluster/") else path


def pytest_xdist_make_scheduler(config, log):
    """`--dist loadgroup` (pyproject.toml's addopts), grouped by `_group`.  Not by
    `xdist_group` markers: xdist 3.8 marks a group by appending it to `item._nodeid`, which
    pytest 9 no longer reads (its node ids are structured), so every test went alone and
    both workers started a Ceph testbed at once."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    # the groups in collection order, where the longest come first (pytest_collection_
    # modifyitems), not xdist's by number of tests: the testbeds' 22 tests take a quarter of
    # the suite, and started last they ran on alone at the end
    config.option.loadscopereorder = False

    class ByGroup(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _group(nodeid)

    return ByGroup(config, log)


def pytest_collection_modifyitems(config, items):
    """A test using a fixture marked with `needs` (tests/testbed/hosts.py), directly or
    through another fixture, carries the fixture's markers.  The cluster groups run first
    (a stable sort: each file's tests stay together and in order), so that the longest
    share of the suite starts on one worker while the other takes the many short files."""
    first = {"cluster-fs": 0, "cluster-nodes": 1}
    items.sort(key=lambda item: first.get(_group(item.nodeid), 2))
    for item in items:
        info = getattr(item, "_fixtureinfo", None)
        if info is None:
            continue
        for name in item.fixturenames:
            for fixdef in info.name2fixturedefs.get(name, ()):
                for mark in getattr(fixdef.func, "testbed_marks", ()):
                    if item.get_closest_marker(mark) is None:
                        item.add_marker(getattr(pytest.mark, mark))


@pytest.fixture(autouse=True)
def _mpi_marker_tells_the_truth(request, monkeypatch):
    """A test without the `mpi` marker that starts an MPI job fails, naming the command."""
    if request.node.get_closest_marker("mpi") is not None:
        yield
        return
    real = subprocess.Popen.__init__

    def init(self, args, *a, **kw):
        if _launches(args):
            raise AssertionError(f"{request.node.nodeid} starts an MPI job ({args!r}) but is "
                                 "not marked `mpi`")
        real(self, args, *a, **kw)

    monkeypatch.setattr(subprocess.Popen, "__init__", init)
    yield


@pytest.fixture
@needs("root")
def tmpfs(tmp_path):
    """A small tmpfs of our own (64 MiB), unmounted afterwards."""
    if not is_root():
        pytest.skip("needs root to mount a tmpfs")
    with mounted(tmp_path / "tmpfs", "tmpfs", "size=64m") as mnt:
        yield mnt


_SHM_BEFORE = pytest.StashKey[set]()


def _shm_segments():
    try:
        return {f for f in os.listdir("/dev/shm") if f.startswith("mpich_shm_")}
    except OSError:
        return set()


def _mapped_shm():
    inuse = set()
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/maps") as fh:
                    inuse.update(ln.rsplit("/", 1)[-1].strip() for ln in fh if "/dev/shm/" in ln)
            except OSError:
                pass
    return inuse


def _slurm(tmp_path_factory, nodes: int, cpus: int):
    """A real Slurm on `nodes` emulated nodes of `cpus` CPUs each (slurm_nodes.SlurmNodes over
    persistent hosts.Hosts), stopped afterwards, asserting that nothing of it is left;
    skipped with the reason where it cannot run."""
    from testbed import hosts as hostlib
    from testbed import slurm as slurm_nodes

    reason = slurm_nodes.why_not()
    if reason:
        pytest.skip(f"Slurm: {reason}")
    folder = tmp_path_factory.mktemp(f"slurm{nodes}")
    h = hostlib.Hosts(nodes, folder, persistent=True)
    with h:
        s = slurm_nodes.SlurmNodes(h, folder, cpus=cpus)
        with s:
            yield s
        assert s.leftovers() == []
    assert h.leftovers() == []


@pytest.fixture(scope="module")
@needs("root", "slow")
def slurm(tmp_path_factory):
    """One node (h0) declaring 16 CPUs, so that 16 tasks fit on a small machine."""
    yield from _slurm(tmp_path_factory, nodes=1, cpus=16)


@pytest.fixture(scope="module")
@needs("root", "slow")
def slurm3(tmp_path_factory):
    """Three nodes (h0, h1, h2) of 2 CPUs each."""
    yield from _slurm(tmp_path_factory, nodes=3, cpus=2)


def _controller(config) -> bool:
    """The process that runs the session: pytest itself, or xdist's controller (not a
    worker, which runs only its share and would see the other worker's jobs)."""
    return not hasattr(config, "workerinput")


def pytest_configure(config):
    """An xdist worker runs with COLUMNS=80 and LINES=24 in its environment (execnet's);
    the commands the tests start would take them over their terminal's own size (the live
    view on a 120-column pseudo-terminal was cut at 80): a worker runs as pytest itself."""
    if not _controller(config):
        for name in ("COLUMNS", "LINES"):
            os.environ.pop(name, None)


def pytest_sessionstart(session):
    if _controller(session.config):
        session.config.stash[_SHM_BEFORE] = _shm_segments()


def pytest_sessionfinish(session):
    """Tests kill MPI jobs on purpose; MPICH then leaves its /dev/shm segments behind.
    Remove those that appeared during this session and no living process maps; once, when
    every worker has ended."""
    if not _controller(session.config):
        return
    stale = _shm_segments() - session.config.stash[_SHM_BEFORE] - _mapped_shm()
    for name in stale:
        try:
            os.unlink(os.path.join("/dev/shm", name))
        except OSError:
            pass
