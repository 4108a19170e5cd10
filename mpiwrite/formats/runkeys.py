"""The keys a run can be grouped and filtered by: built-in keys, every node fact, then tags.

Derived from a record's run-level part, where it is read: in a worker of records/sandbox.py
for a record read cold (its answer carries them), in the command for a whole record.
"""

from __future__ import annotations

from typing import Any, Dict

from mpiwrite.formats.nodekeys import common_value, fact_keys, summary_value
from mpiwrite.vocab import keys as keytable

# Keys an imported record states itself (what params cannot say: "unknown"); its importer
# (importers/) writes them into the record's `keys` attribute.
IMPORT_DECIDED = keytable.STATED


def run_keys(rec: Any) -> Dict[str, Any]:
    # rec: a records.model.RunRecord (not imported: formats/ does not import records/)
    """The keys a run can be grouped and filtered by (built-in keys, then user tags)."""
    p = rec.params()
    stored = rec.keys()  # `client` derived there for old records
    keys: Dict[str, Any] = dict(stored)
    ranks, nodes = int(rec.attrs.get("ranks", 0)), int(rec.attrs.get("nodes", 0))
    imported = rec.imported()
    keys.update(
        run_id=rec.run_id, status=rec.status, nodes=nodes, ranks=ranks,
        ranks_per_node=ranks // nodes if nodes else 0, host=rec.attrs.get("host"),
        start_time=rec.attrs.get("start_time"), iterations=len(rec.iterations),
        mpi=str(rec.attrs.get("mpi_library", "")).split(",")[0],
        lustre_kernel=common_value([summary_value(n, "lustre_kernel") for n in rec.nodes]))
    for entry in keytable.FROM_PARAMS:  # the run's options, by their entries (vocab/keys.py)
        value = entry.value(p, bool(imported))
        if value is not keytable.ABSENT:
            keys[entry.name] = value
    for k in keytable.WHEN_USED:
        if p.get(k):
            keys[k] = p[k]
    if imported:  # what the importer read (or stated as unknown), not derived from params
        for k in IMPORT_DECIDED + ("lustre_kernel",):
            if k in stored:
                keys[k] = stored[k]
        keys["mpi"] = str(stored.get("mpi", "unknown"))  # only as stated (--fact mpi=)
    keys["tool"] = str(imported.get("tool", "mpiwrite"))
    keys["tool_version"] = str(imported.get("tool_version")
                               or rec.attrs.get("mpiwrite_version") or "unknown")
    for k, v in fact_keys(rec.nodes).items():  # every node fact, below the built-in keys
        keys.setdefault(k, v)
    for k, v in rec.tags().items():  # a tag never shadows what was measured: tag.NAME then
        keys[k if k not in keys else f"tag.{k}"] = v
    for k, v in rec.tags().items():  # and tag.NAME always names it, whatever a record's other
        keys.setdefault(f"tag.{k}", v)  # keys (an imported record has no node facts to shadow)
    return keys
