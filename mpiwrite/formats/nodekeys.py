"""A node's recorded facts as run keys: the one flattening of node facts.

The run keys that are the nodes' common value (`kernel`, `lustre`, `client`, ...: vocab/keys.py
COMMON), a record's node columns, and every other node fact as a dotted key (`report --by
cpu_model,lustre.osc.max_rpcs_in_flight`).  Pure functions over the facts as recorded
(facts/nodeinfo.py reads them on a node): the record, the run keys, the importers and the
answers read node facts through here, never through facts/.
"""

from __future__ import annotations

from typing import Any, Dict, List

from mpiwrite.clients import registry
from mpiwrite.vocab import keys as keytable

SUMMARY_KEYS = keytable.COMMON  # the run keys that are the nodes' common value (vocab/keys.py)


def summary_value(facts: Dict[str, Any], key: str) -> str:
    """A node's value for one of the run-level grouping keys, or a node column of the record:
    the one flattening of node facts (run keys, the record's nodes table, reports), by the
    key's entry in vocab/keys.py; `client` of facts older than the fact derived here."""
    value = keytable.node_value(facts, key)
    return client_of(facts) if value is None else value


def client_of(facts: Dict[str, Any]) -> str:
    """'nfs 4.2', 'lustre 2.15.5', 'none': the node's `client` fact (derived from the Lustre
    version for facts read before the fact existed)."""
    client = facts.get("client")
    if isinstance(client, dict) and client.get("client"):
        return str(client["client"])
    return registry.legacy_client({"lustre": keytable.node_value(facts, "lustre"),
                                   "fstype": keytable.node_value(facts, "fstype")})


def common_keys(nodes: List[Dict[str, Any]]) -> Dict[str, str]:
    """kernel, lustre, checksums, checksum_type, fstype, client: the common value or 'mixed'."""
    out = {}
    for key in SUMMARY_KEYS:
        values = {summary_value(n, key) for n in nodes}
        out[key] = values.pop() if len(values) == 1 else "mixed"
    return out


MAX_FACT_DEPTH = 5
_not_facts: List[str] = []  # registry.volatile(), once: facts that name things, not settings


def _flatten(value: Any, prefix: str, out: Dict[str, str], depth: int = 0) -> None:
    """Scalars of a node's facts as dotted keys; a list of records (one per OSC, per llite
    mount, per HCA) gives one key per field with its common value or `mixed`."""
    if depth > MAX_FACT_DEPTH:
        return
    if not _not_facts:
        _not_facts.extend(registry.volatile())
    if isinstance(value, dict):
        for k, v in value.items():
            if k in _not_facts or f"{prefix}{k}" in _not_facts:
                continue
            _flatten(v, f"{prefix}{k}.", out, depth + 1)
    elif isinstance(value, list):
        if value and all(isinstance(x, dict) for x in value):
            parts: List[Dict[str, str]] = []
            for x in value[:256]:
                one: Dict[str, str] = {}
                _flatten(x, prefix, one, depth + 1)
                parts.append(one)
            for k in set().union(*parts):
                out[k] = common_value([p.get(k, "-") for p in parts])
        elif all(not isinstance(x, (dict, list)) for x in value):
            out[prefix.rstrip(".")] = ",".join(str(x) for x in value[:64])
    elif prefix:
        out[prefix.rstrip(".")] = "-" if value is None else str(value)[:200]


def fact_keys(nodes: List[Dict[str, Any]]) -> Dict[str, str]:
    """Every node fact as a run key: the common value over the nodes, or `mixed`.  So `report
    --by cpu_model,lustre.osc.max_rpcs_in_flight` groups by them, and `compare` can list
    what else differs between two groups."""
    per_node: List[Dict[str, str]] = []
    seen: List[Dict[str, Any]] = []  # nodes alike but for their name are flattened once
    for n in nodes:
        n = n if isinstance(n, dict) else {}
        alike = {k: v for k, v in n.items() if k not in ("host", "raw")}
        if alike in seen:
            continue
        seen.append(alike)
        flat: Dict[str, str] = {}
        _flatten(n, "", flat)
        per_node.append(flat)
    if not per_node:
        return {}
    return {k: common_value([p.get(k, "-") for p in per_node]) for k in set().union(*per_node)}


def common_value(values: List[str]) -> str:
    """The one value all nodes share, or 'mixed'."""
    s = set(values)
    return s.pop() if len(s) == 1 else "mixed"
