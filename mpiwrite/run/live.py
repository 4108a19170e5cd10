"""Rank 0's live view of a timed phase: the node leaders' reports (progress.py) kept per node,
and what a person sees of them: one row per node, the aggregate, an ETA.  No MPI, no
terminal: `render` returns lines (console.py draws them), so a 1,000-node view is a pure
function of counters (tests/mpi/test_live.py).

A node's report: {"n": node, "b": bytes written, "d": ranks done, "k": ranks, "slow": [rank,
bytes/s over the last interval] of its slowest unfinished rank, "ns": ranks stalled, "st":
[[rank, seconds, state, wait channel], ...] (the first few), "w": the ranks not done (when
few)}.  Rates count bytes that write() accepted ("written"), not bytes known durable: the
final figure of a run with fsync at the end is lower (docs/measurement.md).
"""

from __future__ import annotations

from typing import Dict, List, NamedTuple, Optional, Sequence

from mpiwrite.units import format_seconds, format_size


class NodeRow(NamedTuple):
    host: str
    ranks: int
    now: float  # bytes/s over the last interval (NaN: no second report yet)
    mean: float  # bytes/s since the phase began
    nbytes: float
    fraction: float  # of the planned size, or of --time
    slow: Optional[tuple]  # (rank, bytes/s) of the slowest unfinished rank
    stalled: int  # ranks stalled
    first_stall: Optional[list]  # [rank, seconds, state, wchan]
    silent: float  # seconds since the node's last report
    done: int


class Board:
    """Every node's last report, on rank 0; `node_of[rank]` -> node, `hosts[node]`."""

    def __init__(self, hosts: Sequence[str], node_of: Sequence[int], size: Optional[int],
                 time_limit: Optional[float], t0: float):
        self.hosts = list(hosts)
        self.members: List[List[int]] = [[] for _ in self.hosts]
        for rank, node in enumerate(node_of):
            self.members[int(node)].append(rank)
        self.size, self.time_limit, self.t0 = size, time_limit, t0
        n = len(self.hosts)
        self.reports: List[Dict] = [{} for _ in range(n)]
        self.at = [t0] * n  # when each node last reported (rank 0's clock)
        self.prev = [(t0, 0.0)] * n  # (time, bytes) of the report before
        self.rate = [float("nan")] * n
        self.announced: Dict[int, float] = {}  # rank -> seconds stalled when named
        self.quiet: set = set()  # nodes named silent (their leader stopped, or the node gone)

    @property
    def nranks(self) -> int:
        return sum(len(m) for m in self.members)

    def add(self, report: Dict, now: float) -> List[list]:
        """One node's report; returns its stalls not named before ([rank, s, state, wchan])."""
        n = int(report["n"])
        last = self.reports[n]
        if last and now > self.at[n]:
            self.prev[n] = (self.at[n], float(last.get("b", 0)))
        t_prev, b_prev = self.prev[n]
        if now - t_prev > 0 and last:
            self.rate[n] = (float(report.get("b", 0)) - b_prev) / (now - t_prev)
        self.reports[n], self.at[n] = report, now
        self.quiet.discard(n)
        new = []
        stalled = {int(s[0]) for s in report.get("st") or ()}
        for s in report.get("st") or ():
            if int(s[0]) not in self.announced:
                self.announced[int(s[0])] = float(s[1])
                new.append(s)
        for rank in [r for r in self.announced if r in self.members[n] and r not in stalled]:
            del self.announced[rank]  # it moved again: named again if it stalls again
        return new

    def newly_silent(self, now: float, after: Optional[float]) -> List[int]:
        """Nodes, not done, that sent no report for `after` seconds, not named before: their
        leader's own relay is stopped (SIGSTOP stops every thread) or the node is gone."""
        if not after:
            return []
        new = [n for n, rep in enumerate(self.reports) if n not in self.quiet
               and now - self.at[n] >= after
               and int(rep.get("d", 0)) < len(self.members[n])]
        self.quiet.update(new)
        return new

    def done(self) -> int:
        return sum(int(r.get("d", 0)) for r in self.reports)

    def all_done(self) -> bool:
        return self.done() >= self.nranks

    def nbytes(self) -> float:
        return sum(float(r.get("b", 0)) for r in self.reports)

    def missing(self) -> List[int]:
        """The ranks not known to be done: a node's listed ones, else all its ranks."""
        out: List[int] = []
        for n, rep in enumerate(self.reports):
            if int(rep.get("d", 0)) >= len(self.members[n]):
                continue
            listed = rep.get("w")
            out.extend(int(r) for r in listed) if listed is not None else \
                out.extend(self.members[n])
        return sorted(out)

    def stuck(self) -> List[list]:
        """[rank, seconds, state, wchan] of every rank the last reports call stalled."""
        return [s for rep in self.reports for s in rep.get("st") or ()]

    def fraction(self, nbytes: float, ranks: int, elapsed: float) -> float:
        frac = nbytes / (ranks * self.size) if self.size else 0.0
        if self.time_limit:
            frac = max(frac, elapsed / self.time_limit)
        return min(frac, 1.0)

    def rows(self, now: float) -> List[NodeRow]:
        elapsed = max(now - self.t0, 1e-9)
        out = []
        for n, rep in enumerate(self.reports):
            b = float(rep.get("b", 0))
            k = len(self.members[n])
            st = rep.get("st") or []
            out.append(NodeRow(self.hosts[n], k, self.rate[n], b / elapsed, b,
                               self.fraction(b, k, elapsed), tuple(rep["slow"])
                               if rep.get("slow") else None, int(rep.get("ns", 0)),
                               st[0] if st else None, now - self.at[n], int(rep.get("d", 0))))
        return out


def _num(x: float, scale: float = 1.0, digits: int = 3):
    """A JSON number, or null for NaN and infinity (JSON has neither)."""
    return round(x / scale, digits) if x == x and abs(x) != float("inf") else None


def record(board: Board, now: float, iteration: int, phase: str, origin: float) -> Dict:
    """One interval of the progress as a JSON object (--live-jsonl): `t` on the record's
    common timeline (`mpiwrite timeline` puts its intervals there too), `time` the date."""
    import time as _time

    rows = board.rows(now)
    elapsed = max(now - board.t0, 1e-9)
    have_now = any(r.now == r.now for r in rows)
    rate_now = sum(r.now for r in rows if r.now == r.now) if have_now else float("nan")
    nbytes = board.nbytes()
    return {"time": _time.strftime("%Y-%m-%dT%H:%M:%SZ", _time.gmtime()),
            "iteration": iteration, "phase": phase, "t": _num(now - origin),
            "elapsed": _num(elapsed), "bytes": int(nbytes),
            "MB_per_s_mean": _num(nbytes / elapsed, 1e6), "MB_per_s_now": _num(rate_now, 1e6),
            "ranks": board.nranks, "ranks_done": board.done(),
            "stalled": sum(r.stalled for r in rows),
            "fraction": _num(board.fraction(nbytes, board.nranks, elapsed), 1.0, 4),
            "eta_seconds": _num(eta(board, elapsed, rate_now if have_now else nbytes / elapsed)),
            "nodes": [{"host": r.host, "ranks": r.ranks, "bytes": int(r.nbytes),
                       "MB_per_s_now": _num(r.now, 1e6), "MB_per_s_mean": _num(r.mean, 1e6),
                       "done": r.done, "stalled": r.stalled,
                       "silent_seconds": _num(r.silent)} for r in rows]}


def eta(board: Board, elapsed: float, rate: float) -> float:
    """Seconds left: --time's rest, or the planned bytes left at the current rate."""
    if board.time_limit:
        return max(0.0, board.time_limit - elapsed)
    if board.size and rate > 0:
        return max(0.0, (board.nranks * board.size - board.nbytes()) / rate)
    return float("nan")


def _rate(x: float, unit: float, width: int) -> str:
    return f"{'-':>{width}}" if x != x else f"{x / unit:{width}.1f}"


def _stall_text(row: NodeRow) -> str:
    if row.first_stall is None:
        return ""
    rank, secs, state, wchan = row.first_stall
    more = f" +{row.stalled - 1}" if row.stalled > 1 else ""
    return f"STALLED rank {rank} {float(secs):.0f}s {state} {wchan}{more}"


def render(board: Board, now: float, unit_name: str = "MB", unit: float = 1e6,
           width: int = 100, height: int = 40, silent_after: float = float("inf")
           ) -> List[str]:
    """The live view as lines, at most `height` of them: a header, one row per node (the
    slowest first when they do not all fit: stalled, silent, then by mean rate), a line for
    the nodes folded away, the aggregate with its ETA."""
    rows = board.rows(now)
    elapsed = now - board.t0
    total_now = sum(r.now for r in rows if r.now == r.now)
    have_now = any(r.now == r.now for r in rows)
    agg_b = board.nbytes()
    u = f"{unit_name}/s"
    head = (f"{'node':<14} {'ranks':>5} {u + ' now':>10} {'mean':>8} {'written':>9} "
            f"{'%':>5} {'slowest rank':<14} stall")
    room = max(1, height - 4)
    key = [(0 if r.stalled else 1 if r.silent > silent_after else 2, r.mean, r.host)
           for r in rows]
    order = sorted(range(len(rows)), key=lambda i: key[i])
    shown = order if len(rows) <= room else order[:room - 1]
    lines = [head]
    for i in (shown if len(rows) > room else range(len(rows))):
        r = rows[i]
        slow = (f"{r.slow[0]} @{_rate(float(r.slow[1]), unit, 1).strip()}" if r.slow
                else ("all done" if r.done >= r.ranks else "-"))
        stall = _stall_text(r) or (f"no report for {r.silent:.0f}s"
                                   if r.silent > silent_after and r.done < r.ranks else "")
        lines.append(f"{r.host[:14]:<14} {r.ranks:>5} {_rate(r.now, unit, 10)} "
                     f"{_rate(r.mean, unit, 8)} {format_size(int(r.nbytes)):>9} "
                     f"{r.fraction * 100:5.1f} {slow:<14} {stall}")
    if len(rows) > room:
        rest = [rows[i] for i in order[room - 1:]]
        means = [r.mean for r in rest]
        lines.append(f"... {len(rest)} more nodes ({sum(r.ranks for r in rest)} ranks): mean "
                     f"{min(means) / unit:.1f} to {max(means) / unit:.1f} {u}, "
                     f"{sum(1 for r in rest if r.stalled)} with a stalled rank")
    stalled = sum(r.stalled for r in rows)
    left = eta(board, elapsed, total_now if have_now else agg_b / max(elapsed, 1e-9))
    lines.append(f"{'all ' + str(len(rows)) + ' nodes':<14} {board.nranks:>5} "
                 f"{_rate(total_now if have_now else float('nan'), unit, 10)} "
                 f"{_rate(agg_b / max(elapsed, 1e-9), unit, 8)} {format_size(int(agg_b)):>9} "
                 f"{board.fraction(agg_b, board.nranks, elapsed) * 100:5.1f} "
                 f"{board.done()}/{board.nranks} done, {stalled} stalled, "
                 f"[{format_seconds(elapsed)}] eta {eta_text(left)}")
    lines.append("(rates count bytes write() accepted, not yet synced)")
    return [ln[:width] for ln in lines]


def eta_text(seconds: float) -> str:
    return "-" if seconds != seconds else format_seconds(seconds)


def line(board: Board, now: float, unit_name: str = "MB", unit: float = 1e6) -> str:
    """One line per interval for a pipe or a log: the aggregate only."""
    rows = board.rows(now)
    elapsed = now - board.t0
    agg_b = board.nbytes()
    have_now = any(r.now == r.now for r in rows)
    rate_now = sum(r.now for r in rows if r.now == r.now)
    mean = agg_b / max(elapsed, 1e-9)
    stalled = sum(r.stalled for r in rows)
    return (f"[{format_seconds(elapsed)}] "
            f"{board.fraction(agg_b, board.nranks, elapsed) * 100:5.1f}% "
            f"{_rate(mean, unit, 0).strip()} {unit_name}/s written (mean, not yet synced), "
            f"now {_rate(rate_now if have_now else float('nan'), unit, 0).strip()}, "
            f"{board.done()}/{board.nranks} ranks done"
            f"{f', {stalled} stalled' if stalled else ''}, eta "
            f"{eta_text(eta(board, elapsed, rate_now if have_now else mean))}")
