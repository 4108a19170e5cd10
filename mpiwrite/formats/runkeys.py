"""The keys a run can be grouped and filtered by: built-in keys, every node fact, then tags.

Derived from a record's run-level part, where it is read: in a worker of records/sandbox.py
for a record read cold (its answer carries them), in the command for a whole record.
"""

from __future__ import annotations

from typing import Any, Dict

from mpiwrite.formats.nodekeys import common_value, fact_keys, summary_value
from mpiwrite.units import format_size
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
    keys.update(
        run_id=rec.run_id, status=rec.status, nodes=nodes, ranks=ranks,
        ranks_per_node=ranks // nodes if nodes else 0,
        block_size=format_size(p.get("block_size", 0)),
        # a time-limited run's bytes are its outcome (vocab/keys.py), not a size it was given
        size=format_size(p["size"]) if p.get("size") and not p.get("time_limit")
        and not p.get("stonewall") else
        ("time" if p.get("time_limit") or p.get("stonewall") or not rec.imported()
         else "unknown"),
        time_limit=p.get("time_limit"), layout=p.get("layout"),
        fsync=f"every {p['fsync_every']}" if p.get("fsync_every") else
        ("on" if p.get("fsync") else "off"),
        direct="on" if p.get("direct") else "off", engine=p.get("engine", "posix"),
        host=rec.attrs.get("host"),
        start_time=rec.attrs.get("start_time"), iterations=len(rec.iterations),
        mpi=str(rec.attrs.get("mpi_library", "")).split(",")[0],
        lustre_kernel=common_value([summary_value(n, "lustre_kernel") for n in rec.nodes]),
        # where the blocks went (records before patterns: sequential)
        pattern=str(p.get("pattern") or "sequential"),
    )
    # the rest only where a run used them (no column of dashes for every other run)
    if p.get("collective") is not None:  # an MPI-IO run
        keys["collective"] = "on" if p["collective"] else "off"
        keys["mpiio_hints"] = ",".join(
            f"{k}={v}" for k, v in sorted((p.get("mpiio_hints") or {}).items())) or "none"
    if keys["pattern"] == "random":
        keys["seed"] = p.get("seed", 0)
    for k in keytable.WHEN_USED:
        if p.get(k):
            keys[k] = p[k]
    imported = rec.imported()
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
