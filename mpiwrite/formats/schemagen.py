"""The parts of the shipped JSON Schemas that the tables decide, written from them.

The schemas in formats/schemas/ are files a reader can open (docs/output.md points there), so
they are complete documents; what the table of metrics (vocab/metrics.py) and the stat block
of the contract (formats/contract.py) declare is not written by hand in them but generated:

- each output's `metric` enum: every metric of the table;
- report's `limits[].limit` enum: the limits a verdict names (vocab/limits.py);
- the stat blocks (`$defs/stat` for MB/s, `$defs/stat_<suffix>` for each other unit, and
  `$defs/stat_MiB_per_s` where the output takes --units): one definition, here;
- the `allOf` branches that tie a metric to its stat block (a rate in MB/s or MiB/s, each
  other unit its own), from the output's first branch as the template.

    python -m mpiwrite.formats.schemagen          # rewrite the files from the tables
    python -m mpiwrite.formats.schemagen --check  # exit 1 naming each file that differs

tests/cli/test_schemas.py runs the check, so a metric added to the table and not here fails.
"""

from __future__ import annotations

import copy
import json
import os
import sys
from typing import Any, Dict, List

from mpiwrite.formats.contract import GEO_NAMES, SCHEMA_DIR, SCHEMAS, stat_keys
from mpiwrite.vocab import metrics
from mpiwrite.vocab.limits import LIMITS

# the outputs whose documents carry a metric (run --json has no --metric)
METRIC_OUTPUTS = ("report", "compare", "explain", "study-report")
MIB_WORDS = "MiB/s: 2^20 bytes per second, --units MiB"
DESCRIPTIONS = {
    "n": "number of samples",
    "std": "sample standard deviation (n-1)",
    "ci_lo": "lower bound of the Student t interval of the arithmetic mean (null when n < 2)",
    "ci_hi": "upper bound",
    "gmean": "geometric mean (null unless every sample is positive); the verdicts' changes "
             "are ratios of these (added within version 2: optional)",
    "gmean_ci_lo": "lower bound of the geometric mean's Student t interval, from the logs "
                   "(null when n < 2 or a sample is not positive)",
    "gmean_ci_hi": "upper bound",
}


def stat_def(suffix: str, words: str) -> Dict[str, Any]:
    """The schema of a stat block whose figures are in the unit named by `suffix`."""
    keys = stat_keys(suffix)
    props: Dict[str, Any] = {"n": {"type": "integer", "minimum": 0,
                                   "description": DESCRIPTIONS["n"]}}
    for key in keys[1:] + tuple(f"{g}_{suffix}" for g in GEO_NAMES):
        name = key[:-len(suffix) - 1]
        props[key] = {"type": ["number", "null"]}
        if name in DESCRIPTIONS:
            props[key]["description"] = DESCRIPTIONS[name]
    return {"type": "object",
            "description": f"A stat block: the same keys in every output, the unit in their "
                           f"names ({words}); null where undefined",
            "required": list(keys), "properties": props}


def _def_name(suffix: str) -> str:
    return "stat" if suffix == metrics.RATE_SUFFIX else f"stat_{suffix}"


def _retarget(template: Any, suffix: str) -> Any:
    """The template branch's `then` for another unit: its stat references and the unit
    suffix of its keys replaced."""
    text = json.dumps(template)
    text = text.replace('"#/$defs/stat"', json.dumps(f"#/$defs/{_def_name(suffix)}"))
    text = text.replace(f"_{metrics.RATE_SUFFIX}\"", f"_{suffix}\"")
    return json.loads(text)


def _metric_branch(branch: Any) -> bool:
    return isinstance(branch, dict) and "metric" in (branch.get("if") or {}).get(
        "properties", {})


def generate(output: str, doc: Dict[str, Any]) -> Dict[str, Any]:
    """The document with its table-decided parts written from the tables."""
    doc = copy.deepcopy(doc)
    defs = doc.setdefault("$defs", {})
    if output not in METRIC_OUTPUTS:
        if "stat" in defs:
            defs["stat"] = stat_def(metrics.RATE_SUFFIX, metrics.BY_NAME["aggregate"].unit_words)
        return doc
    doc["properties"]["metric"] = {"enum": list(metrics.NAMES)}
    limit = (defs.get("row", {}).get("properties", {}).get("limits", {}).get("items", {})
             .get("properties", {}).get("limit"))
    if limit is not None:  # report --limits: the verdict's names, or null (no per-rank rows)
        limit["enum"] = list(LIMITS) + [None]
    takes_units = "units" in doc["properties"]
    for m in metrics.TABLE:
        if m.name in metrics.RATES and m.name != "aggregate":
            continue
        defs[_def_name(m.suffix)] = stat_def(m.suffix, m.unit_words)
    if takes_units:
        defs["stat_MiB_per_s"] = stat_def("MiB_per_s", MIB_WORDS)
    branches = doc.get("allOf", [])
    template = next(b["then"] for b in branches if _metric_branch(b))
    made: List[Any] = []
    rates = {"enum": list(metrics.RATES)}
    if takes_units:
        made.append({"if": {"properties": {"metric": rates, "units": {"const": "MB"}}},
                     "then": template})
        made.append({"if": {"properties": {"metric": rates, "units": {"const": "MiB"}},
                            "required": ["units"]},
                     "then": _retarget(template, "MiB_per_s")})
    else:
        made.append({"if": {"properties": {"metric": rates}}, "then": template})
    for m in metrics.TABLE:
        if m.name not in metrics.RATES:
            made.append({"if": {"properties": {"metric": {"enum": [m.name]}}},
                         "then": _retarget(template, m.suffix)})
    doc["allOf"] = made + [b for b in branches if not _metric_branch(b)]
    return doc


def text_of(doc: Dict[str, Any]) -> str:
    return json.dumps(doc, indent=1) + "\n"


def main(argv: List[str]) -> int:
    check = "--check" in argv
    differ = []
    for output, name in SCHEMAS.items():
        path = os.path.join(SCHEMA_DIR, name)
        with open(path) as fh:
            old = fh.read()
        new = text_of(generate(output, json.loads(old)))
        if new != old:
            differ.append(name)
            if not check:
                with open(path, "w") as fh:
                    fh.write(new)
    for name in differ:
        print(f"{name}: {'differs from the tables' if check else 'rewritten'}")
    return 1 if check and differ else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
