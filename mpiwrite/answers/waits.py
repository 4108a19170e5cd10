"""Where each rank's write stream spent its time, from the wait channels its own thread
sampled (run/waits.py; docs/measurement.md, "Where the time went"): running, dirty
throttling, writeback, the client's network or FUSE requests, other.

The kernel's channels are vocab/waits.py's; a client's are its module's (`waits`, and
`waits_are`: a FUSE daemon's requests or a server's over the network).  Records are
untrusted: entries of the wrong shape are left out.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from mpiwrite.clients import registry
from mpiwrite.vocab import waits as kinds


def _client_prefixes() -> Dict[str, tuple]:
    out: Dict[str, tuple] = {kinds.NETWORK: (), kinds.FUSE: ()}
    for client in registry.every():
        if isinstance(getattr(type(client), "waits", None), property):
            continue  # the catch-all client: every other client's channels
        own = tuple(w for w in client.waits if isinstance(w, str))
        cls = kinds.FUSE if getattr(client, "waits_are", "network") == "fuse" else kinds.NETWORK
        out[cls] = out[cls] + own
    return out


def class_of(channel: str, clients: Optional[Dict[str, tuple]] = None) -> str:
    """What a sampled channel means: 'R' running, else by the kernel's and the clients'
    prefixes; anything else (a lock, a channel the kernel did not name) is other."""
    if channel == "R":
        return kinds.RUNNING
    for cls, prefixes in kinds.KERNEL.items():
        if channel.startswith(prefixes):
            return cls
    for cls, prefixes in (clients if clients is not None else _client_prefixes()).items():
        if prefixes and channel.startswith(prefixes):
            return cls
    return kinds.OTHER


MOST = 10**9  # samples a rank may have had (about three years at 10 a second)


def _entry(got: Any) -> Optional[Dict[str, Any]]:
    """A rank's counts, checked: {"n": 0 < int <= MOST, "counts": {str: int}} whose counts
    add up to n (what the sampler writes: run/waits.Sampler.text); None otherwise."""
    if not isinstance(got, dict) or type(got.get("n")) is not int or not 0 < got["n"] <= MOST:
        return None
    counts = got.get("counts")
    if not isinstance(counts, dict) or not counts or len(counts) > 32 or not all(
            isinstance(k, str) and 0 < len(k) <= 128 and type(v) is int and 0 <= v <= MOST
            for k, v in counts.items()) or sum(counts.values()) != got["n"]:
        return None
    return {"n": got["n"], "counts": dict(counts)}


def entries(rec, iteration: int) -> List[Optional[Dict[str, Any]]]:
    """The iteration's counts per rank, checked (_entry; None for a rank without), from the
    record's `waits`; [] where it has none for that iteration."""
    got = rec._json("waits", None)
    for item in got if isinstance(got, list) else []:
        if isinstance(item, dict) and item.get("iteration") == iteration \
                and isinstance(item.get("ranks"), list):
            return [_entry(e) for e in item["ranks"][:1 << 20]]
    return []


def per_rank(rec, iteration: int) -> List[Optional[Dict[str, float]]]:
    """Per rank of the iteration, the share of its samples in each class (None: none)."""
    clients = _client_prefixes()
    out: List[Optional[Dict[str, float]]] = []
    for entry in entries(rec, iteration):
        if entry is None:
            out.append(None)
            continue
        shares = {c: 0.0 for c in kinds.CLASSES}
        for channel, n in entry["counts"].items():
            shares[class_of(channel, clients)] += n / entry["n"]
        out.append(shares)
    return out


def channels(rec, iteration: int, cls: str, top: int = 3) -> List[str]:
    """The most sampled channels of one class over the iteration's ranks."""
    clients = _client_prefixes()
    total: Dict[str, int] = {}
    for entry in entries(rec, iteration):
        for channel, n in (entry or {}).get("counts", {}).items():
            if class_of(channel, clients) == cls and channel != "R":
                total[channel] = total.get(channel, 0) + n
    return [k for k, _v in sorted(total.items(), key=lambda kv: -kv[1])[:top]]


def lines(rec, iteration: int) -> List[str]:
    """What `show` says: the ranks' mean share in each class (the main channels named), and
    the ranks whose largest class is not the others'."""
    shares = per_rank(rec, iteration)
    known = [s for s in shares if s is not None]
    if not known:
        return []
    mean = {c: sum(s[c] for s in known) / len(known) for c in kinds.CLASSES}
    parts = []
    for c in sorted(kinds.CLASSES, key=lambda c: -mean[c]):
        if mean[c] < 0.005:
            continue
        named = channels(rec, iteration, c) if c not in (kinds.RUNNING,) else []
        parts.append(f"{c} {mean[c] * 100:.0f}%" + (f" ({', '.join(named)})" if named else ""))
    n = sum(e["n"] for e in entries(rec, iteration) if e is not None)
    out = [f"iteration {iteration}: where the write streams' time went ({n} samples of "
           f"{len(known)} rank(s)' writers): " + ", ".join(parts)]
    main = max(kinds.CLASSES, key=lambda c: mean[c])
    odd = [r for r, s in enumerate(shares) if s is not None
           and max(kinds.CLASSES, key=lambda c: s[c]) != main]
    if odd and len(known) > 1:
        shown = ", ".join(str(r) for r in odd[:5]) + (" ..." if len(odd) > 5 else "")
        out.append(f"  rank(s) {shown} spent most of it elsewhere than in {main}: "
                   + "; ".join(f"rank {r}: " + ", ".join(
                       f"{c} {shares[r][c] * 100:.0f}%" for c in kinds.CLASSES
                       if shares[r][c] >= 0.05 or c == max(shares[r], key=shares[r].get))
                       for r in odd[:3]))
    return out
