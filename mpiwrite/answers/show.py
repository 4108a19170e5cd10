"""One run as text (`show`): its settings, iterations, nodes and ranks, from its record."""

from __future__ import annotations

import math
from typing import Any, Dict, List, Optional

import numpy as np

from mpiwrite.answers import clientcpu, limits, netcheck, waits
from mpiwrite.answers.state import ABANDONED, verdict
from mpiwrite.clients import registry
from mpiwrite.errors import ConfigError
from mpiwrite.formats import steady
from mpiwrite.formats.summary import node_totals
from mpiwrite.text import printable
from mpiwrite.units import format_number as _num
from mpiwrite.units import format_seconds, format_size
from mpiwrite.units import plural as _count
from mpiwrite.vocab import keys as keytable
from mpiwrite.vocab.status import Status


def _ms(seconds) -> str:
    v = float(seconds)
    return f"{v * 1e3:.3g} ms" if v == v else "-"


def _bucket_ms(seconds, unit: str = "") -> str:
    """A percentile of a latency histogram (engines/latency.py: 4 buckets an octave, each
    19% wide) in ms to the 2 significant digits it resolves; '-' when none was kept."""
    v = float(seconds) * 1e3
    if not v == v or v <= 0:
        return "-"
    return f"{v:.{max(0, 1 - math.floor(math.log10(v)))}f}{unit}"


def _offset(seconds) -> str:
    v = float(seconds)
    return f"{v:+.6f}" if v == v else "-"


def cpu_text(cpu: clientcpu.CpuPerGB) -> str:
    """The client CPU line of an iteration: the total and the ranks' share apart."""
    if not cpu.processes:
        return (f"client CPU {cpu.total:.3g} s/GB (the ranks'; no client process outside "
                "them measured)")
    return (f"client CPU {cpu.total:.3g} s/GB: ranks {cpu.ranks:.3g} + the client's own "
            f"processes {cpu.own:.3g} ({', '.join(cpu.processes[:8])}"
            f"{', ...' if len(cpu.processes) > 8 else ''})")


def unique_options(text: str) -> str:
    """Mount options with repeats left out, first spelling kept: 'rw,relatime,rw' -> 'rw,relatime'
    (the mount's and the superblock's options are joined in the record)."""
    seen: List[str] = []
    for opt in str(text).split(","):
        if opt and opt not in seen:
            seen.append(opt)
    return ",".join(seen)


def _verified(rec, params, iteration: int) -> str:
    """'N blocks (SIZE) ' checked by --verify in an iteration ('' where unknown)."""
    try:
        ranks = rec.ranks
        done = ranks["verify_bytes"][ranks["iteration"] == iteration]
        block = int(params.get("block_size") or 0)
    except (KeyError, TypeError, ValueError):
        return ""
    if block <= 0 or not len(done):
        return ""
    blocks = int(np.sum(-(-done // block)))
    return f"{_count(blocks, 'block')} ({format_size(int(done.sum()))}) "


def _options(text) -> str:
    return f" ({unique_options(text)})" if text else ""


def validity_line(rec) -> str:
    """Whether the figures can be taken (derived from the record again), IO500's verdict of
    a preset's run, the hashes, and a word when the record's own verdict differs."""
    from mpiwrite.formats import validity

    now, held = validity.assess(rec), validity.stored(rec)
    text = "validity: " + validity.describe(now)
    if rec.attrs.get("config_hash"):
        text += f"; config {rec.attrs['config_hash'][:15]}, result " \
                f"{str(rec.attrs.get('result_hash'))[:15]}"
    if held and (held["valid"], held["reasons"], held.get("io500")) != (
            now["valid"], now["reasons"], now.get("io500")):
        text += f" (the record says {validity.describe(held)}: `mpiwrite verify` names what " \
                "changed)"
    return printable(text)


def show_text(rec, store_keys: Dict[str, Any], iteration: Optional[int] = None) -> str:
    p = rec.params()
    hosts = [printable(n.get("host")) for n in rec.nodes]
    known = verdict(rec)
    state = known.state
    lines = [f"run {rec.run_id}  status {state}  started {rec.attrs.get('start_time')}",
             f"command: {rec.attrs.get('command_line')}",
             *([f"ended: {printable(str(rec.attrs['error']))}"]
               if rec.attrs.get("error") and str(state) != "complete" else []),
             f"{_count(int(rec.attrs.get('ranks') or 0), 'rank')} on "
             f"{_count(int(rec.attrs.get('nodes') or 0), 'node')}; block "
             f"{format_size(p['block_size']) if p.get('block_size') else 'unknown'}, size "
             f"{format_size(p['size']) if p.get('size') else '-'}, time "
             f"{p.get('time_limit') or '-'}"
             f"{', ramp ' + format(p['ramp'], 'g') + 's' if p.get('ramp') else ''}"
             f", fsync {store_keys.get('fsync')}, direct "
             f"{store_keys.get('direct')}, layout {store_keys.get('layout')}, target "
             f"{p.get('target') or '-'}",
             ]
    served = registry.for_run(str(store_keys.get("fstype")),
                              (rec.nodes[0].get("fs") if len(rec.nodes) == 1 else None))
    lines.append(f"served by the {served.name} client; keys: " + ", ".join(
        f"{k}={printable(store_keys.get(k))}" for k in
        keytable.SHOWN + served.own_keys if k in store_keys))
    lines.append(validity_line(rec))
    if state == ABANDONED:
        proof = "" if known.proven else " (not proven: `clean` needs --force)"
        lines.append(f"abandoned: the record says running, but its processes are gone (killed "
                     f"for good: SIGKILL, out of memory, a crashed node or launcher): "
                     f"{printable(known.why)}{proof}; `mpiwrite clean "
                     f"{printable(p.get('target'))} --results DIR` removes the data files it "
                     "left")
    elif state == "running" and known.proven:
        lines.append(f"running: {printable(known.why)} (the run lives)")
    if rec.tags():
        lines.append("tags: " + ", ".join(f"{k}={v}" for k, v in rec.tags().items()))
    lines += imported_lines(rec)
    lines.append("nodes:" if rec.nodes or not rec.imported() else
                 "nodes: none observed (imported; facts only as stated)")
    for i, n in enumerate(rec.nodes):
        off = rec.node_clock[i] if rec.node_clock is not None else (math.nan, math.nan)
        # the client that served the target on this node, in its own terms
        own = printable(registry.node_text(n))
        lines.append(f"  {i:>3} {hosts[i]:<16} kernel {n.get('kernel')}, {own}, fs "
                     f"{(n.get('fs') or {}).get('fstype')}"
                     f"{_options((n.get('fs') or {}).get('mount_options'))}, "
                     + (f"clock offset {off[0]:+.6f}s ±{off[1]:.6f}" if off[0] == off[0]
                        else "clock offset - (not measured: no iteration's clock check ran)"))
    lines += [printable(x) for x in netcheck.lines(rec)]
    lines += [printable(x) for x in limits.lines(rec)]
    for it in rec.iterations:
        lines.append(f"iteration {it['iteration']}: {Status.label_of(it['status'])}"
                     f", aggregate {_num(it['aggregate_MB_per_s'])} MB/s, first done "
                     f"{_num(it['first_done_MB_per_s'])} MB/s, tail "
                     f"{format_seconds(float(it['tail_seconds']))}")
        for found in steady.stored(rec, int(it["iteration"])):
            lines.append("  " + printable(steady.text(found)))
        if p.get("ramp") and it["ramp_bytes"] > 0:
            lines.append(f"  the rates count after each rank's {p['ramp']:g}s ramp (--ramp): "
                         f"{format_size(int(it['ramp_bytes']))} written in it left out; the "
                         f"whole run {_num(it['whole_MB_per_s'])} MB/s")
        elif p.get("ramp"):
            lines.append(f"  no rank ended its {p['ramp']:g}s ramp: the rates are the whole "
                         "run's (give more --size)")
        note = rec.attrs.get("first_done_note") or ""
        if note and not np.isfinite(it["first_done_MB_per_s"]):
            why = note.replace("first-done unavailable: ", "", 1)
            lines.append(f"  first done unavailable: {printable(why)}")
        extra = []
        if np.isfinite(it["aggregate_with_open_MB_per_s"]):
            extra.append(f"open included (IOR) {_num(it['aggregate_with_open_MB_per_s'])} MB/s")
        if np.isfinite(it["read_aggregate_MB_per_s"]):
            extra.append(f"read {_num(it['read_aggregate_MB_per_s'])} MB/s")
        if np.isfinite(it["verify_MB_per_s"]):
            bad = int(it["verify_mismatches"])
            extra.append(f"verified {_verified(rec, p, int(it['iteration']))}at "
                         f"{_num(it['verify_MB_per_s'])} MB/s, "
                         + (f"{bad} mismatched" if bad else "none mismatched"))
        if np.isfinite(it["write_latency_p50_seconds"]):
            extra.append("write() p50/p99/max "
                         + "/".join(_bucket_ms(it[f"write_latency_{q}_seconds"])
                                    for q in ("p50", "p99")) + "/"
                         + _ms(it["write_latency_max_seconds"]))
        if np.isfinite(it["fsync_latency_max_seconds"]):
            extra.append(f"fsync() max {_ms(it['fsync_latency_max_seconds'])}")
        if np.isfinite(it["node_cpu_busy_max"]):
            extra.append(f"client CPU up to {it['node_cpu_busy_max']:.0%} busy")
        if extra:
            lines.append("  " + "; ".join(extra))
        cpu = clientcpu.of_record(rec, int(it["iteration"])) if len(rec.ranks) else None
        if cpu is not None and math.isfinite(cpu.total):
            lines.append("  " + cpu_text(cpu))
    if len(rec.iterations) and not len(rec.ranks) and rec.imported():
        said = rec.imported().get("per_rank")
        lines.append(f"per rank: {said}" if isinstance(said, str) and said.startswith("none")
                     else "per rank: none (imported: the tool reports no per-rank figures on "
                     "a common timeline)")
    elif len(rec.iterations):
        it = int(rec.iterations["iteration"][-1]) if iteration is None else iteration
        rows = rec.ranks[rec.ranks["iteration"] == it]
        if not len(rows) and iteration is None:  # the record's own tables disagree
            raise ValueError(f"its last iteration, {it}, has no per-rank rows")
        if not len(rows):
            raise ConfigError(f"--iteration: the run has no iteration {it}")
        timed = bool(np.isfinite(rows["t_close_end"]).any())
        lines += _spread_lines(rows, it, timed)
        if not timed and rec.imported():
            lines += _untimed_rank_lines(rec, rows, it)
        else:
            lines += _timed_rank_lines(rec, rows, it, hosts)
    for w in rec.warnings():
        lines.append(f"warning: {w}")
    for e in rec.errors:
        lines.append(f"error: iteration {e.get('iteration')} rank {e.get('rank')} on "
                     f"{e.get('host')}: {e.get('phase')} {e.get('path')}: {e.get('message')}")
    return "\n".join(printable(ln) for ln in lines)


def _spread_lines(rows, it: int, timed: bool) -> List[str]:
    """The ranks' spread in one line: imbalance, variation and (on a timeline) the tail."""
    rates = rows["MB_per_s"][np.isfinite(rows["MB_per_s"])]
    if not rates.size or rates.max() <= 0:
        return []
    cv = rates.std(ddof=1) / rates.mean() * 100 if rates.size > 1 else 0.0
    line = (f"iteration {it}: imbalance slowest/fastest {rates.min() / rates.max():.3f}, "
            f"coefficient of variation {cv:.1f}%")
    if timed:
        tail = float(np.nanmax(rows["t_close_end"]) - np.nanmin(rows["t_close_end"]))
        line += f", straggler tail {format_seconds(tail)}"
    return [line]


def _timed_rank_lines(rec, rows, it: int, hosts) -> List[str]:
    """A run's rank rows on its common timeline: waits, per node, counters, per rank."""
    lines: List[str] = []
    lines += [printable(x) for x in waits.lines(rec, it)]
    lines.append(f"per node, iteration {it}:")
    for n in node_totals(rows):
        busy = rows["node_cpu_busy"][rows["node"] == n["node"]]
        cpu = f", CPU {busy[0]:.0%} busy" if len(busy) and np.isfinite(busy[0]) else ""
        lines.append(f"  {hosts[int(n['node'])]:<16} {_count(int(n['ranks']), 'rank'):>10} "
                     f"{format_size(int(n['bytes'])):>9} {_num(float(n['MB_per_s']))} MB/s"
                     f"{cpu}")
    counted = [c for c in rec.client_counters if c.get("iteration") == it]
    if counted:
        lines.append(f"client counters, iteration {it} (what each node's client did in "
                     "the timed phase):")
        for c in sorted(counted, key=lambda c: c.get("node", 0)):
            node = c.get("node")
            host = hosts[node] if isinstance(node, int) and 0 <= node < len(hosts) else "?"
            lines.append(f"  {host:<16} {counter_text(c.get('delta') or {})}")
    lines.append(f"per rank, slowest first, iteration {it}:")
    lines.append(f"  {'rank':>5} {'host':<16} {'MB/s':>9} {'bytes':>9} {'open s':>8} "
                 f"{'write s':>8} {'fsync s':>8} {'close s':>8} {'cpu s':>6} "
                 f"{'p99 ms':>7} {'offset s':>10} status")
    order = np.argsort(np.where(np.isfinite(rows["MB_per_s"]), rows["MB_per_s"], -1))
    for r in rows[order]:
        lines.append(f"  {r['rank']:>5} {hosts[int(r['node'])]:<16} "
                     f"{_num(float(r['MB_per_s'])):>9} {format_size(int(r['bytes'])):>9} "
                     f"{_num(float(r['open_seconds']), 4):>8} "
                     f"{_num(float(r['write_seconds']), 3):>8} "
                     f"{_num(float(r['fsync_seconds']), 3):>8} "
                     f"{_num(float(r['close_seconds']), 4):>8} "
                     f"{_num(float(r['cpu_user_seconds'] + r['cpu_system_seconds']), 2):>6} "
                     f"{_bucket_ms(r['write_latency_p99_seconds']):>7} "
                     f"{_offset(r['clock_offset_seconds']):>10} "
                     f"{Status.label_of(r['status'])}")
    return lines


def _untimed_rank_lines(rec, rows, it: int) -> List[str]:
    """An imported record's rank rows: the tool's own figures, each rank timed on its own
    clock (IOR's per-rank CSV): no node, no time on a common clock, so no per-node lines."""
    reads = bool(np.isfinite(rows["read_MB_per_s"]).any())
    lines = [f"per rank, slowest first, iteration {it} ({rec.imported().get('tool')}'s own "
             "figures: each rank's time on its own clock; no node, no timeline):",
             f"  {'rank':>5} {'MB/s':>9} {'bytes':>9} {'seconds':>9}"
             + (f" {'read MB/s':>9}" if reads else "")]
    order = np.argsort(np.where(np.isfinite(rows["MB_per_s"]), rows["MB_per_s"], -1))
    for r in rows[order]:
        read = f" {_num(float(r['read_MB_per_s'])):>9}" if reads else ""
        lines.append(f"  {r['rank']:>5} {_num(float(r['MB_per_s'])):>9} "
                     f"{format_size(int(r['bytes'])):>9} "
                     f"{_num(float(r['elapsed_seconds']), 4):>9}{read}")
    return lines


def imported_lines(rec) -> List[str]:
    """Where an imported record came from and how far its figures go (docs/import.md)."""
    imp = rec.imported()
    if not imp:
        return []
    lines = [f"imported from {imp.get('tool')} {imp.get('tool_version')} ({imp.get('format')}), "
             f"{imp.get('test')} of {imp.get('file')} (sha256 {imp.get('sha256')}), on "
             f"{imp.get('imported_at')} by {imp.get('imported_by')}; command: "
             f"{imp.get('command_source')}"]
    if imp.get("exact"):
        lines.append("  exact: " + ", ".join(map(str, imp["exact"])))
    for k, v in (imp.get("derived") or {}).items():
        lines.append(f"  derived: {k}: {v}")
    if imp.get("unknown"):
        lines.append("  unknown: " + ", ".join(map(str, imp["unknown"])))
    if imp.get("stated_facts"):
        lines.append("  stated by the user, not measured: " + ", ".join(
            f"{k}={v}" for k, v in imp["stated_facts"].items()))
    nf = imp.get("node_facts")
    if isinstance(nf, dict):
        lines.append(f"  node facts: {nf.get('file')} (host {nf.get('host')}, sha256 "
                     f"{nf.get('sha256')}): {nf.get('note')}")
    for note in imp.get("notes") or []:
        lines.append(f"  note: {note}")
    if imp.get("rank_csv"):
        lines.append(f"  rank rows from {imp['rank_csv']['file']} (sha256 "
                     f"{imp['rank_csv']['sha256']})")
    rows = imp.get("per_service") or []
    if rows:
        lines.append(f"per service ({imp.get('tool')}'s services' own figures, each timed on "
                     "its own clock from the phase's start):")
        lines.append(f"  {'phase':<5} {'threads':>7} {'bytes':>9} {'first-done MB/s':>15} "
                     f"{'last-done MB/s':>14} {'last done':>9}  service")
        for r in rows:
            first = r["first_done_MB_per_s"]
            first = "-" if first is None else _num(float(first))
            lines.append(f"  {r['phase']:<5} {r['threads']:>7} "
                         f"{format_size(int(r['bytes'])):>9} {first:>15} "
                         f"{_num(float(r['last_done_MB_per_s'])):>14} "
                         f"{format_seconds(float(r['last_done_seconds'])):>9}  {r['service']}")
    return lines


def counter_text(d: Dict[str, Any]) -> str:
    """One node's client counter delta in words, as its client says it (Client.counter_text:
    what it sent, in how many write RPCs or OSD write ops, ...)."""
    return registry.for_kind(d.get("kind")).counter_text(d)
