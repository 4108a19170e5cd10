"""A run's set-up, in steps that each return what the next one needs (runner.Run.setup
calls them in order; every problem is one agreement there).

Each rank gets its buffers; node leaders read their node's facts and rank 0 gathers them;
rank 0 gets the run's ledger (ledger.Ledger) and every other rank a NullLedger, which takes
the same calls and keeps nothing (the null-object habit: the steps need no `rank == 0` test
around each call); rank 0 then checks the destinations and prepares TARGET.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

from mpiwrite.errors import ConfigError, why
from mpiwrite.host import address_space
from mpiwrite.run import layout
from mpiwrite.run.config import RunConfig
from mpiwrite.run.process import this_process
from mpiwrite.units import format_size
from mpiwrite.vocab import names, pattern
from mpiwrite.vocab.status import RunStatus

# numpy's address space, measured (import numpy and numpy.random after MPI_Init, MPICH wheel,
# numpy 2.4 with its OpenBLAS): 88 MiB with one OpenBLAS thread, 128 MiB with two; OpenBLAS
# reserves a buffer per thread as it loads, and exit()s the process when it cannot
NUMPY_BASE, NUMPY_PER_THREAD = 48 * 2**20, 40 * 2**20


def load_numpy(needed: bool) -> str:
    """Load numpy now, where a rank needs it (node leaders: the pattern; small blocks: the
    latency fold), so that a failure is one agreed line: '' or why not.  Under an address-space
    limit (ulimit -v) too small for it, OpenBLAS ends the process from C with a line of its
    own (no rank, host or phase): refused before, from what the limit leaves."""
    if not needed:
        return ""
    import resource

    limit = resource.getrlimit(resource.RLIMIT_AS)[0]
    if limit != resource.RLIM_INFINITY:
        threads = os.environ.get("OPENBLAS_NUM_THREADS") or os.environ.get("OMP_NUM_THREADS")
        n = int(threads) if threads and threads.isascii() and threads.isdigit() and \
            int(threads) > 0 else (os.cpu_count() or 1)
        need = NUMPY_BASE + NUMPY_PER_THREAD * n
        left = limit - address_space()
        if left < need:
            return (f"address space: the limit (ulimit -v) leaves {format_size(max(left, 0))}, "
                    f"numpy with {n} OpenBLAS thread(s) needs about {format_size(need)}: raise "
                    f"the limit, or set OPENBLAS_NUM_THREADS=1")
    try:
        import numpy.random  # noqa: F401
    except (ImportError, OSError, MemoryError) as exc:
        lines = [x.strip() for x in str(exc).splitlines() if x.strip()]
        return f"cannot load numpy: {lines[-1] if lines else type(exc).__name__}"
    return ""


def buffers(cfg: RunConfig, key: int, rank: int, fill: bool = True) -> Tuple[Any, Any, str]:
    """Every rank: (write buffer, read buffer or None, '') before anything is written
    anywhere, or (None, None, the problem). fill=False: only the header (the body comes
    from the node's leader: runner.Run._share_bodies)."""
    try:
        buf = pattern.make_buffer(cfg.block_size, key, rank, 0, fill=fill)
        rbuf = None
        if cfg.read:  # reads land in a buffer of their own: the pattern stays intact
            import mmap

            rbuf = mmap.mmap(-1, cfg.block_size)
    except (MemoryError, OSError, ValueError) as exc:
        return None, None, (f"--block-size: cannot allocate the {format_size(cfg.block_size)} "
                            f"write buffer: {getattr(exc, 'strerror', None) or 'out of memory'}")
    return buf, rbuf, ""


def node_facts(cfg: RunConfig, mpi_library: str, host: str) -> Dict[str, Any]:
    """A node leader: its node's facts."""
    from mpiwrite.facts import nodeinfo

    return nodeinfo.collect(cfg.target, cfg.sysroot, mpi_library, host=host)


def gather_nodes(team, cfg: RunConfig, facts: Optional[Dict[str, Any]], run_id: str):
    """The node leaders' facts, and each node's free space on TARGET and the process that
    identifies the node's part of the run, with the path of the lock file it will hold
    (facts/liveness.py: so that a run killed for good is later proven over): (nodes,
    spaces) on rank 0, ([], []) elsewhere."""
    if not team.is_leader:
        return [], []
    texts = team.gather_texts(json.dumps(facts), team.leaders)
    lock = os.path.abspath(os.path.join(cfg.target, names.lock(run_id, team.node)))
    spaces = team.gather_texts(json.dumps({"space": layout.free_space(cfg.target),
                                           "process": dict(this_process(), lock=lock)}),
                               team.leaders)
    return [json.loads(t) for t in texts or ()], [json.loads(t) for t in spaces or ()]


def ledger(rank: int, cfg: RunConfig, argv: List[str], run_id: str, nranks: int, nodes,
           spaces, node_rows, mpi_library: str, screen: Dict[str, Any], notes: Sequence[str]):
    """Rank 0's Ledger (and its console); every other rank's NullLedger."""
    if rank != 0:
        return NullLedger()
    import numpy as np

    from mpiwrite.formats import nodekeys
    from mpiwrite.run import console
    from mpiwrite.run.ledger import Ledger  # rank 0 only

    console.configure(**screen)
    led = Ledger(cfg, argv, run_id, nranks, nodes, node_rows[:, 0].astype(np.int64),
                 nodekeys.common_keys(nodes), mpi_library, console.Console(cfg))
    led.processes = [dict(s["process"], host=led.hosts[i]) for i, s in enumerate(spaces)]
    for text in notes:
        led.note(text)
    return led


# How long after the TARGET probe's write the first timed write may start (settle()).
PROBE_SETTLE_SECONDS = 0.1


def probe_target(cfg: RunConfig, files: layout.RankFiles, run_id: str,
                 nodes) -> Tuple[Optional[ConfigError], float]:
    """Rank 0, as soon as the nodes' facts are in: TARGET made if missing, opened and probed
    with one block (layout.preflight); (the problem, which target() says in its turn after
    --json, --results, the space and the striping, as before; when the probe ended).

    Early, so that the rest of the set-up lies between the probe's write and the timed
    phase: on a device that throttles with a token bucket, a write just before the stream
    costs it about one throttle slice (docs/measurement.md)."""
    from mpiwrite.formats import nodekeys

    existed = os.path.isdir(cfg.target)
    try:  # the fstype the ledger will name (common_keys), for the --direct message
        files.target = layout.preflight(cfg, run_id, nodekeys.common_keys(nodes)["fstype"])
    except ConfigError as exc:
        return exc, time.monotonic()
    files.created_target = not existed
    return None, time.monotonic()


def settle(probed_at: Optional[float]) -> None:
    """Rank 0, last in the set-up: wait until PROBE_SETTLE_SECONDS have passed since the
    probe's write (None: not rank 0, nothing to wait for), so that the probe is not charged
    to the first iteration (docs/measurement.md: a gap of 40-50 ms still cost 1-2%)."""
    if probed_at is not None:
        rest = probed_at + PROBE_SETTLE_SECONDS - time.monotonic()
        if rest > 0:
            time.sleep(rest)


def target(cfg: RunConfig, files: layout.RankFiles, run_id: str, led, spaces,
           probed: Optional[ConfigError] = None) -> str:
    """Rank 0: --json, --results, then TARGET (probe_target's verdict) and run folders; ''
    or why not.

    Whatever the set-up created is removed again when it fails, so exit 2 leaves nothing."""
    results_existed = cfg.results is None or os.path.isdir(cfg.results)
    try:
        led.check_destinations()
        layout.check_space(cfg, led.node_of, [s["space"] for s in spaces])
        from mpiwrite.run import stripeopts

        stripe = stripeopts.check(cfg.stripe_count, cfg.stripe_size, cfg.ost_index,
                                  led.keys["fstype"])
        if probed is not None:
            raise probed
        led.extra["mkdir_seconds"] = layout.make_subdirs(cfg, run_id, led.nranks, stripe,
                                                         files.target)
        if stripe is not None:
            led.extra["stripe_request"] = stripe
        left = files.leftovers(files.target)
        if left:
            led.warn(left)
        # rank 0 leads node 0; its lock is held before any record says `running`
        unlocked = files.take_lock(0, (led.results, led.record_file)
                                   if led.results is not None and led.record_file else None)
        if unlocked:
            led.note(f"no proof of life for this run ({unlocked}): if it is killed for good, "
                     "`mpiwrite clean` cannot prove it over and removes its files only with "
                     "--force")
        led.save(RunStatus.RUNNING)
        if led.record_error:
            raise ConfigError(f"--results: {led.record_error}")
        return ""
    except ConfigError as exc:
        message = str(exc)
    except OSError as exc:
        message = f"TARGET: cannot create run directories: {why(exc)}"
    files.release_lock()
    files.remove_subdirs()
    if files.created_target:
        layout.remove_dir_if_empty(cfg.target)
    if not results_existed:
        layout.remove_dir_if_empty(cfg.results)
    return message


class NullLedger:
    """The ledger of every rank but 0: takes every call rank 0's Ledger takes from the steps
    (runner.py, guard.py), keeps nothing."""

    keeps_record = False  # rank 0's Ledger: True

    def __init__(self) -> None:
        self.extra: Dict[str, Any] = {}  # written to, never read
        self.keys: Dict[str, str] = {}  # rank 0's answers reach the other ranks by broadcast

    def watching(self, it: int, name: str, origin: float) -> None:
        return None  # rank 0 alone shows progress (run/watch.py)

    def warn(self, text: str) -> None:
        pass

    def note(self, text: str) -> None:
        pass

    def add_waits(self, it: int, texts) -> None:
        pass

    def add_netcheck(self, got) -> None:
        pass

    def add_errors(self, entries, offsets=None, origin: float = 0.0) -> None:
        pass

    def add_iteration(self, it: int, *args, **kwargs) -> RunStatus:
        return RunStatus.COMPLETE  # rank 0's answer is broadcast (runner.Run.iteration)

    def check_read_shift(self, read_shift: int) -> None:
        pass

    def show_header(self) -> None:
        pass

    def end(self, final: RunStatus, code: int) -> int:
        return code
