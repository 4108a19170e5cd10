"""What rank 0 shows: the header, a line per iteration, progress, the final summary.

Results go to stdout (or stderr when stdout carries the JSON summary); diagnostics to stderr.
Every line goes through printable(): target names, tags, hosts, run ids and error strings come
from outside and must not move the cursor, retitle the window or forge a line.
"""

from __future__ import annotations

import os
import shutil
import stat
import sys
import threading
from typing import Any, Dict, List, Optional, TextIO

import numpy as np

from mpiwrite.formats import summary as figures
from mpiwrite.run.config import RunConfig
from mpiwrite.text import printable
from mpiwrite.units import MB, RATE_UNITS, MiB, format_seconds, format_size
from mpiwrite.vocab.status import Status

# Screen options of `run` that are not part of the measurement (--units, --ior-summary);
# set by runcmd on every rank before the run starts.
# --live: None follows the terminal.
OUTPUT = {"units": "MB", "ior_summary": False, "live": None}
# The live view is redrawn in place with two ECMA-48 controls every terminal emulator has
# (cursor to the start of a line N up, erase to the end of the screen): no library for that
# (curses would take the screen and need a terminfo entry on every node; docs/measurement.md).
UP_AND_ERASE = "\x1b[{n}F\x1b[J"
TTY_MAJORS = (4, 5, *range(136, 144))  # virtual consoles, /dev/tty, pseudo-terminals
LAUNCHERS = ("hydra_pmi_proxy", "mpiexec", "mpiexec.hydra", "mpirun", "orterun", "prterun",
             "prted", "orted")  # process names (15 characters at most, as /proc says)


def terminal_behind(out: TextIO, levels: int = 4) -> bool:
    """Whether `out`, a pipe, leads to a terminal through the launcher: MPICH's hydra and
    Open MPI's mpirun relay rank 0's output through pipes, so rank 0's isatty() is false
    even when the person runs `mpiexec` on a terminal.  Followed only through parents that
    are launchers (LAUNCHERS): `mpiexec ... | tee log` or a test's pipe says no."""
    try:
        st = os.fstat(out.fileno())
        pid = os.getppid()
        for _ in range(levels):
            if not (stat.S_ISFIFO(st.st_mode) or stat.S_ISSOCK(st.st_mode)):
                return stat.S_ISCHR(st.st_mode) and os.major(st.st_rdev) in TTY_MAJORS
            with open(f"/proc/{pid}/stat") as fh:
                name, rest = fh.read(4096).split("(", 1)[1].rsplit(")", 1)
            if name not in LAUNCHERS:
                return False
            st = os.stat(f"/proc/{pid}/fd/{out.fileno()}")
            pid = int(rest.split()[1])
    except (OSError, ValueError, IndexError):
        return False
    return False


def configure(units: str = "MB", ior_summary: bool = False, live=None) -> None:
    OUTPUT.update(units=units, ior_summary=ior_summary, live=live)


def _scale() -> float:
    """Factor from MB/s (the record's unit) to the unit shown on screen."""
    return MB / RATE_UNITS[OUTPUT["units"]]


def _f(x: float, width: int = 9, digits: int = 1, rate: bool = True) -> str:
    if rate and x == x:
        x = x * _scale()
    return f"{x:{width}.{digits}f}" if x == x else f"{'-':>{width}}"


def ior_line(best_MB_per_s: float) -> str:
    """IOR's summary line (its format: MiB/sec first, then MB/sec, two decimals)."""
    return (f"Max Write: {best_MB_per_s * MB / MiB:.2f} MiB/sec "
            f"({best_MB_per_s:.2f} MB/sec)")


class Console:
    def __init__(self, cfg: RunConfig, out: Optional[TextIO] = None):
        self.cfg = cfg
        self.out = out or (sys.stderr if "-" in (cfg.json_path, cfg.live_jsonl) else sys.stdout)
        self.tty = self.out.isatty() or terminal_behind(self.out)
        self.live_view = self.tty if OUTPUT["live"] is None else bool(OUTPUT["live"])
        self._drawn = 0  # lines of the live view on the terminal now
        self._lock = threading.Lock()  # rank 0's progress thread prints too (progress.py)

    def _put(self, text: str, flush: bool = True) -> None:
        """Write to the output; a stream that cannot be written (`> /dev/full`, a full disk
        under a redirect) is an OSError that says which stream, not only ENOSPC."""
        try:
            with self._lock:
                self.out.write(text)
                if flush:
                    self.out.flush()
        except OSError as exc:
            name = "standard error" if self.out is sys.stderr else "standard output"
            raise OSError(exc.errno, f"{name} could not be written: "
                                     f"{exc.strerror or exc}") from None

    def line(self, text: str = "") -> None:
        self._end_progress()
        self._put(printable(text) + "\n")

    def warn(self, text: str) -> None:
        self._end_progress()
        with self._lock:
            sys.stderr.write(f"mpiwrite: warning: {printable(text)}\n")
            sys.stderr.flush()

    def header(self, run_id: str, nranks: int, hosts: List[str], keys: Dict[str, str],
               fs: Dict[str, Any]) -> None:
        c = self.cfg
        limit = []
        if c.size is not None:
            limit.append(f"{format_size(c.size)} per rank")
        if c.time_limit:
            limit.append(f"at most {format_seconds(c.time_limit)}")
        if c.stonewall is not None:
            limit.append(f"stonewall {format_seconds(c.stonewall)} with wear-out")
        sync = f"fsync every {c.fsync_every} blocks" if c.fsync_every else (
            "fsync at end" if c.fsync else "no fsync")
        host_text = ", ".join(hosts[:4]) + (f" and {len(hosts) - 4} more" if len(hosts) > 4
                                            else "")
        self.line(f"mpiwrite run {run_id}")
        self.line(f"  ranks {nranks} on {len(hosts)} node{'s' * (len(hosts) != 1)} "
                  f"({host_text})")
        self.line(f"  target {fs.get('path')} ({keys['fstype']} from {fs.get('mount_source')})")
        self.line(f"  block {format_size(c.block_size)}, {' and '.join(limit)}, {sync}"
                  f"{', O_DIRECT' if c.direct else ''}, layout {c.layout}, "
                  f"{c.iterations} iteration{'s' * (c.iterations != 1)}")
        if c.pattern != "sequential" or c.collective is not None:
            mode = "" if c.collective is None else \
                f", MPI-IO {'collective' if c.collective else 'independent'}"
            hints = ", hints " + ", ".join(f"{k}={v}" for k, v in c.mpiio_hints.items()) \
                if c.mpiio_hints else ""
            self.line(f"  pattern {c.pattern}{f' (seed {c.seed})' if c.pattern == 'random' else ''}"
                      f"{mode}{hints}")
        from mpiwrite.clients import registry

        served = registry.for_run(str(keys.get("fstype")), fs)  # in its own terms
        from mpiwrite.vocab import keys as keytable

        shown = keytable.SHOWN + tuple(served.own_keys)
        # a client's facts where the nodes have that client, whatever serves the target
        # (they are the record's keys: a node with Lustre that writes to NFS still says so)
        shown += tuple(k for owner in keytable.owners() for k in keytable.owned(owner)
                       if k not in shown and str(keys.get(k)) not in ("none", "n/a", "None"))
        self.line("  " + "  ".join(f"{k} {keys[k]}" for k in shown if k in keys))
        if c.tags:
            self.line("  tags " + ", ".join(f"{k}={v}" for k, v in c.tags.items()))
        self.line(f"{'iter':>4} {'aggregate':>10} {'first-done':>10} {'rank min':>9} "
                  f"{'rank mean':>9} {'rank max':>9} {'tail s':>7} {'bytes':>9} status")
        u = f"{OUTPUT['units']}/s"
        self.line(f"{'':>4} {u:>10} {u:>10} {u:>9} {u:>9} {u:>9}")

    def iteration(self, row: np.void, status: str, first_done_note: str = "") -> None:
        """One iteration's line; a '-' for first-done says why on the same line."""
        why = ""
        if first_done_note and not np.isfinite(row["first_done_MB_per_s"]):
            why = f"  (first-done -: {figures.first_done_short(first_done_note)})"
        self.line(f"{int(row['iteration']):>4} {_f(row['aggregate_MB_per_s'], 10)} "
                  f"{_f(row['first_done_MB_per_s'], 10)} {_f(row['rank_min_MB_per_s'])} "
                  f"{_f(row['rank_mean_MB_per_s'])} {_f(row['rank_max_MB_per_s'])} "
                  f"{_f(row['tail_seconds'], 7, 2, rate=False)} "
                  f"{format_size(int(row['bytes'])):>9} {status}{why}")

    @staticmethod
    def units() -> str:
        return OUTPUT["units"]

    @staticmethod
    def screen_size():
        size = shutil.get_terminal_size((100, 40))
        return size.columns, size.lines

    def live(self, lines: List[str]) -> None:
        """The live view (run/live.py), redrawn in place on a terminal; in a pipe or a log
        the lines as they are."""
        text = "".join(printable(ln) + "\n" for ln in lines)
        if self.tty and self.live_view:
            self._put((UP_AND_ERASE.format(n=self._drawn) if self._drawn else "") + text)
            self._drawn = len(lines)
        else:
            self._put(text)

    def _end_progress(self) -> None:
        """Before any other line: the live view goes (it is redrawn below at the next
        interval)."""
        if self._drawn:
            n, self._drawn = self._drawn, 0
            self._put(UP_AND_ERASE.format(n=n), flush=False)

    def summary(self, stats: Dict[str, Any], nodes_iteration: Optional[int] = None,
                first_done_note: str = "") -> None:
        agg, first, per = stats["aggregate"], stats["first_done"], stats["rank_mean"]
        n = agg["n"]
        if n == 0:
            for node in stats.get("nodes", []):
                self.line(f"  node {node['host']:<16} {node['ranks']:>4} ranks wrote "
                          f"{format_size(node['bytes']):>9} before the run stopped")
            return
        self.line(f"summary over {n} iteration{'s' * (n != 1)}:")
        u = f"{OUTPUT['units']}/s"
        self.line(f"  aggregate (last done)  mean {_f(agg['mean'], 0)} {u}  min "
                  f"{_f(agg['min'], 0)}  max {_f(agg['max'], 0)}  stddev {_f(agg['std'], 0)}")
        if "whole" in stats:
            self.line(f"  (counted after each rank's ramp; the whole run, ramp included: mean "
                      f"{_f(stats['whole']['mean'], 0)} {u})")
        if np.isfinite(first["mean"]) or not first_done_note:
            self.line(f"  aggregate (first done) mean {_f(first['mean'], 0)} {u}")
        else:
            why = first_done_note.replace("first-done unavailable: ", "", 1)
            self.line(f"  aggregate (first done) unavailable: {why}")
        self.line(f"  per rank               min {_f(stats['rank_min'], 0)}  mean "
                  f"{_f(per['mean'], 0)}  max {_f(stats['rank_max'], 0)}  stddev "
                  f"{_f(stats['rank_std'], 0)} {u}")
        if stats.get("slowest"):
            s = stats["slowest"]
            self.line(f"  slowest rank           {s['rank']} on {s['host']} "
                      f"({s['MB_per_s'] * _scale():.1f} {u}, iteration {s['iteration']})")
        if stats.get("nodes") and nodes_iteration is not None:
            self.line(f"  per node, iteration {nodes_iteration}:")
        for node in stats.get("nodes", []):
            ranks = f"{node['ranks']} rank{'s' * (node['ranks'] != 1)}"
            self.line(f"  node {node['host']:<16} {ranks:>10} "
                      f"{format_size(node['bytes']):>9} {_f(node['MB_per_s'], 0)} {u}")

    def ior_summary(self, iterations: np.ndarray) -> None:
        """--ior-summary: IOR's 'Max Write' line over the good iterations (open included, as
        IOR measures; the last-done aggregate for records without that column)."""
        if not OUTPUT["ior_summary"] or not len(iterations):
            return
        good = iterations[iterations["status"] == Status.OK]
        names = iterations.dtype.names or ()
        col = ("aggregate_with_open_MB_per_s" if "aggregate_with_open_MB_per_s" in names
               else "aggregate_MB_per_s")
        vals = good[col][np.isfinite(good[col])] if len(good) else np.zeros(0)
        if vals.size:
            self.line(ior_line(float(vals.max())))
