"""Why two tools disagree: the differences of method between two sides that move a rate.

An lmdd line beside an mpiwrite run of "the same settings", or an IOR test beside one, differ
in how each tool measures before they differ in the system: whether the open and close are in
the timed interval, whether the data is durable when the clock stops, O_DIRECT, the size of
each call, one file or one per process, where the blocks go, the MPI-IO implementation.
`compare` lists these first, each with the way it moves the figure, so that a gap between
tools is not read as a gap between systems (issue: "why this number").

Each entry of METHODS reads one aspect from a run's keys (formats/runkeys.py) and says how a
side's value moves its figure against the other side's; an aspect whose values are the same
on both sides, or unknown on both, is not listed.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, NamedTuple, Optional

from mpiwrite.units import parse_size

UNSAID = "not in the tool's output (`import --command` or `--fact` states it)"
# how each tool's figure is timed (the tool's own words where it has them)
TIMED = {
    "mpiwrite": "from the first write to the last rank's last durable byte (open excluded; "
                "--metric ior includes it)",
    "lmdd": "one process's write loop (lmdd's own clock)",
    "dd": "one process's copy (dd's own clock, from its first read)",
    "fio": "the job's runtime (fio's clock per job)",
}


class Method(NamedTuple):
    what: str
    # (a run's keys, the metric compared) -> its value; None: unknown
    value: Callable[[Dict[str, Any], str], Optional[str]]
    moves: Callable[[str, str], str]  # (this side's, the other side's) -> how it moves this one


def _known(v: Any) -> Optional[str]:
    text = str(v) if v is not None else ""
    return None if text in ("", "-", "unknown", "?", "None", "n/a") else text


OPEN_TO_CLOSE = "from the first open to the last close (open and close included)"


def _timed(k: Dict[str, Any], metric: str) -> Optional[str]:
    """How the run's figure of `metric` is timed: mpiwrite's `ior` metric is IOR's interval
    (open to close), so against IOR that is no difference."""
    tool = _known(k.get("tool"))
    if tool == "mpiwrite" and metric == "ior" or tool == "ior":
        return OPEN_TO_CLOSE
    return TIMED.get(tool or "", None) if tool else None


def _timed_moves(mine: str, other: str) -> str:
    if mine == OPEN_TO_CLOSE:
        return "lower: the open and the close are counted in its time"
    if "open excluded" in mine and other == OPEN_TO_CLOSE:
        return "higher: the open and the close are not counted (--metric ior counts them)"
    if "open excluded" in mine:
        return "the ranks' common interval: the slowest rank's tail counts"
    if "one process" in mine:
        return "one process's clock: no other rank's tail, no barrier"
    return "the tool's own clock"


def _fsync_moves(mine: str, other: str) -> str:
    if mine == "off":
        return "higher: the clock stops before the data is durable (the page cache counts)"
    if mine.startswith("every") and other == "on":
        return "lower: fsyncs during the writes wait for the storage more often"
    if mine == "on" and other == "off":
        return "lower: the clock stops when the data is durable"
    return "the data is durable at different points"


def _direct_moves(mine: str, other: str) -> str:
    return ("without the page cache: lower for small calls, steadier; no writeback overlap"
            if mine == "on" else "through the page cache: writes return before the storage "
                                 "has them")


def _size(v: str) -> Optional[int]:
    try:
        return int(parse_size(v))
    except (ValueError, TypeError):
        return None


def _block_moves(mine: str, other: str) -> str:
    a, b = _size(mine), _size(other)
    if a is None or b is None or a == b:
        return "another call size"
    return ("lower where a call's fixed cost matters: more calls for the same bytes"
            if a < b else "higher where a call's fixed cost matters: fewer calls")


def _layout_moves(mine: str, other: str) -> str:
    if mine == "shared":
        return "often lower on a parallel filesystem: the ranks share one file's locks"
    return "a file per process: no lock shared between ranks"


def _pattern_moves(mine: str, other: str) -> str:
    if mine in ("strided", "random"):
        return f"lower on most filesystems: {mine} offsets, not one stream"
    return "one stream a rank: the filesystem's best case"


def _plain(mine: str, other: str) -> str:
    return "another implementation of the same calls"


METHODS = (
    Method("tool", lambda k, m: _known(k.get("tool")), lambda a, b: "measured by another tool"),
    Method("timed interval", _timed, _timed_moves),
    Method("fsync", lambda k, m: _known(k.get("fsync")), _fsync_moves),
    Method("O_DIRECT", lambda k, m: _known(k.get("direct")), _direct_moves),
    Method("block (transfer) size", lambda k, m: _known(k.get("block_size")), _block_moves),
    Method("files", lambda k, m: _known(k.get("layout")), _layout_moves),
    Method("pattern", lambda k, m: _known(k.get("pattern")), _pattern_moves),
    Method("engine", lambda k, m: _known(k.get("engine")), _plain),
    Method("MPI-IO implementation", lambda k, m: _known(k.get("mpiio")), _plain),
)


def _side(values: List[Optional[str]]) -> Optional[str]:
    known = sorted({v for v in values if v is not None})
    return known[0] if len(known) == 1 else (", ".join(known) if known else None)


def differences(a_runs, b_runs, keys_of, metric: str = "aggregate") -> List[Dict[str, str]]:
    """The differences of method between the sides, where the two sides were measured by
    different tools: [{what, a, b, a_moves, b_moves}], in METHODS' order; [] for two sides
    of one tool (their differences are settings: compare's "also different")."""
    ka = [keys_of(r) for r in a_runs]
    kb = [keys_of(r) for r in b_runs]
    tools = {_known(k.get("tool")) for k in ka + kb}
    if len(tools) < 2:
        return []
    out = []
    for m in METHODS:
        a, b = _side([m.value(k, metric) for k in ka]), _side([m.value(k, metric) for k in kb])
        if a == b or (a is None and b is None):
            continue
        out.append({"what": m.what, "a": a or "unknown", "b": b or "unknown",
                    "a_moves": m.moves(a, b or "") if a else UNSAID,
                    "b_moves": m.moves(b, a or "") if b else UNSAID})
    # the tools alone differ (mpiwrite's --metric ior against IOR, the same settings): the
    # figures are timed alike, nothing to read before the verdict
    return out if any(f["what"] != "tool" for f in out) else []


def text(found: List[Dict[str, str]]) -> List[str]:
    """compare's lines, before the figures: what each side's method does to its figure."""
    if not found:
        return []
    lines = ["differences of method (the tools measure differently; read these before the "
             "verdict, which is on the figures as each tool timed them):"]
    for f in found:
        lines.append(f"  {f['what']}: A {f['a']} -> B {f['b']}")
        if f["what"] != "tool":
            lines.append(f"     A: {f['a_moves']}; B: {f['b_moves']}")
    return lines


def between_tools(runs, keys_of, metric: str = "aggregate") -> List[Dict[str, Any]]:
    """explain's account over runs of several tools: for each tool beside the first (mpiwrite
    where it is one), the differences of method against the first's runs, as `differences`
    gives them: [{a, b, differences}]; [] where one tool measured every run."""
    by_tool: Dict[str, list] = {}
    for r in runs:
        by_tool.setdefault(_known(keys_of(r).get("tool")) or "unknown", []).append(r)
    if len(by_tool) < 2:
        return []
    names = sorted(by_tool, key=lambda t: (t != "mpiwrite", t))
    out = []
    for other in names[1:]:
        found = differences(by_tool[names[0]], by_tool[other], keys_of, metric)
        if found:
            out.append({"a": names[0], "b": other, "differences": found})
    return out


def explain_text(pairs: List[Dict[str, Any]]) -> List[str]:
    """explain's lines, before its factors: each pair of tools' differences of method."""
    lines: List[str] = []
    for pair in pairs:
        found = text(pair["differences"])
        lines.append(found[0].replace("differences of method", f"differences of method, "
                                      f"A {pair['a']} against B {pair['b']}", 1))
        lines += found[1:]
    return lines
