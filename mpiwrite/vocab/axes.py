"""The kinds of a study's axis, as one table: what a key of [axes] (or a [[setting]]) is, how
its values are checked, whether `run` takes it as an option, how a record says its value
and whether a record holds it, and how its levels read best.

- an option of `mpiwrite run` (block_size, direct, ...): checked by `run`'s own parser,
  given to each point's `run`, recorded in the record's parameters;
- the allocation's `nodes` and `ranks_per_node`: whole numbers of at least 1, a subset of
  the job's ranks, recorded as the record's nodes and ranks;
- a setting (`setting.NAME`, declared as a [[setting]]): set on the nodes before the point's
  runs, recorded as a tag of that name.

A new kind of axis is one more entry here (and its parse in plan.py); the plan, `study
run`'s resume, its checks and `study report` ask the entry, never the key's spelling.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Optional, Sequence, Tuple


class AxisKind:
    def __init__(self, name: str, owns: Callable[[str], bool], run_option: bool,
                 by_value: bool, check: Callable[[Sequence[Any]], Optional[str]],
                 point_value: Callable[[Any, Dict[str, Any], str], Any],
                 held: Callable[[Any, str, Any], bool], in_run_table: Optional[str] = None,
                 in_axes_table: Optional[str] = None):
        self.name = name
        self.owns = owns
        self.run_option = run_option  # an option of `mpiwrite run`, checked by its parser
        self.by_value = by_value  # levels read best in order of value (sizes, counts)
        self.check = check  # values -> a problem, or None
        self.point_value = point_value  # (value, the run's parameters, field) -> recorded
        self.held = held  # (record, key, value) -> whether the record is of that value
        self.in_run_table = in_run_table  # why [run] may not fix it, or None
        self.in_axes_table = in_axes_table  # why [axes] may not list it, or None


def _whole(values: Sequence[Any]) -> Optional[str]:
    if all(type(v) is int and v >= 1 for v in values):
        return None
    return "must be whole numbers of at least 1"


def _allocation_held(rec: Any, key: str, value: Any) -> bool:
    try:
        nodes, ranks = int(rec.attrs.get("nodes", 0)), int(rec.attrs.get("ranks", 0))
    except (TypeError, ValueError):
        return False
    if key == "nodes":
        return nodes == int(value)
    return bool(nodes) and ranks == nodes * int(value)


ALLOCATION_KEYS = ("nodes", "ranks_per_node")  # not `run` options: parts of the allocation

ALLOCATION = AxisKind(
    "allocation", lambda key: key in ALLOCATION_KEYS, run_option=False, by_value=True,
    check=_whole, point_value=lambda value, params, field: int(value),
    held=_allocation_held, in_run_table="is part of the allocation: give it under [axes]")

SETTING = AxisKind(
    "setting", lambda key: key.startswith("setting."), run_option=False, by_value=False,
    check=lambda values: None, point_value=lambda value, params, field: str(value),
    held=lambda rec, key, value: rec.tags().get(key) == str(value),
    in_axes_table="names a setting: declare it as a [[setting]] (name, values, set)")

RUN_OPTION = AxisKind(
    "run option", lambda key: True, run_option=True, by_value=True,
    check=lambda values: None,
    point_value=lambda value, params, field: params.get(field, str(value)),
    held=lambda rec, key, value: True)  # the record's parameters: resume.expected

KINDS: Tuple[AxisKind, ...] = (ALLOCATION, SETTING, RUN_OPTION)  # the first that owns a key


def kind_of(key: str) -> AxisKind:
    return next(k for k in KINDS if k.owns(key))


def run_option(key: str) -> bool:
    """A key of [run] or [axes] that is an option of `mpiwrite run` (not the allocation, not
    a setting)."""
    return kind_of(key).run_option
