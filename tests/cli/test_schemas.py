"""The shipped JSON Schemas against the table of metrics (vocab/metrics.py): their
table-decided parts are what formats/schemagen.py writes from the table, every metric enum is
the table's, and every command with a JSON output writes, for every metric of the table, a
document its own schema accepts (study report --metric stonewall once did not)."""

import json
import subprocess
import sys

import pytest
import synth
from common import cli

from mpiwrite.formats import contract, schemagen
from mpiwrite.vocab import metrics

jsonschema = pytest.importorskip("jsonschema")


@pytest.mark.timeout(60)
def test_the_schema_files_are_what_the_tables_generate():
    out = subprocess.run([sys.executable, "-m", "mpiwrite.formats.schemagen", "--check"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    for output in contract.SCHEMAS:
        jsonschema.Draft202012Validator.check_schema(contract.schema(output))


def _enums(node, path=""):
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "enum" and "metric" in path.rsplit("/", 2)[-1:]:
                yield path, v
            yield from _enums(v, f"{path}/{k}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _enums(v, f"{path}[{i}]")


@pytest.mark.timeout(60)
def test_every_metric_enum_is_the_tables():
    """The output's metric is every metric; a branch that ties metrics to a stat block names
    the rates (MB/s or MiB/s) or exactly one metric of another unit."""
    seen = 0
    for output in schemagen.METRIC_OUTPUTS:
        doc = contract.schema(output)
        assert doc["properties"]["metric"]["enum"] == list(metrics.NAMES), output
        for path, enum in _enums(doc.get("allOf", []), "/allOf"):
            seen += 1
            assert (enum == list(metrics.RATES)
                    or (len(enum) == 1 and enum[0] in metrics.NAMES
                        and enum[0] not in metrics.RATES)), (output, path, enum)
        unit_branches = [b for b in doc["allOf"] if "metric" in b["if"]["properties"]]
        named = {m for b in unit_branches for m in b["if"]["properties"]["metric"]["enum"]}
        assert named == set(metrics.NAMES), output
    assert seen >= 4 * len(metrics.NAMES) - 4 * len(metrics.RATES)


def test_a_new_metric_in_the_table_reaches_every_schema(monkeypatch):
    """One entry in the table: every output's enum names it and its unit has a stat block
    and a branch (generated, not written by hand)."""
    extra = metrics.Metric("watts", "power", source=metrics.CPU, unit="W", suffix="watts",
                           header="W", higher_is_better=False, unit_words="watts")
    table = metrics.TABLE + (extra,)
    monkeypatch.setattr(metrics, "TABLE", table)
    monkeypatch.setattr(metrics, "NAMES", tuple(m.name for m in table))
    for output in schemagen.METRIC_OUTPUTS:
        doc = schemagen.generate(output, contract.schema(output))
        assert "watts" in doc["properties"]["metric"]["enum"]
        assert doc["$defs"]["stat_watts"]["required"] == list(contract.stat_keys("watts"))
        (branch,) = [b for b in doc["allOf"]
                     if b["if"]["properties"].get("metric") == {"enum": ["watts"]}]
        assert "stat_watts" in json.dumps(branch["then"])


def _records(folder):
    """Two configurations, three runs each, with a stonewall figure per iteration."""
    for i in range(6):
        cfg = "ab"[i % 2]
        rates = [500.0 + 30 * (cfg == "b") + 3 * i, 505.0 + 30 * (cfg == "b") - 2 * i]
        wall = json.dumps([{"iteration": it, "stonewall_MB_per_s": r * 0.98}
                           for it, r in enumerate(rates)])
        synth.make(folder / f"r{i}.h5", rates, f"20260101T00000{i}Z-r{i}", tags={"cfg": cfg},
                   attrs={"stonewall": wall}, start_time=f"2026-01-01T00:0{i}:00Z")


STUDY = """
[study]
name = "m"
target = "{data}"
results = "{results}"
repeat = 3

[run]
size = "8MiB"

[axes]
block_size = ["64KiB", "1MiB"]
"""


# every metric through report; every output through one metric of each way of finding values
# (a column, the stonewall figures, client CPU) and per-node
ALL_OUTPUTS = ("aggregate", "stonewall", "cpu-per-GB", "per-node")


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """The records and the study every metric's outputs read (made once: only read)."""
    top = tmp_path_factory.mktemp("schemas")
    folder = top / "r"
    folder.mkdir()
    _records(folder)
    study = top / "m.toml"
    study.write_text(STUDY.format(data=top / "data", results=top / "sr"))
    synth.study_records(str(study), lambda p: 400.0 if p["block_size"] == "64KiB" else 500.0)
    return folder, study


@pytest.mark.timeout(240)
@pytest.mark.parametrize("metric", metrics.NAMES)
def test_every_json_output_is_valid_for_every_metric(tmp_path, metric, made):
    folder, study = made
    commands = {
        "report": ["report", str(folder), "--by", "tag.cfg", "--format", "json", "--limits"],
        "compare": ["compare", str(folder / "r0.h5"), str(folder / "r1.h5"), "--json"],
        "explain": ["explain", str(folder), "--format", "json"],
        "study-report": ["study", "report", str(study), "--format", "json"],
    }
    written = 0
    for output, args in commands.items():
        if output != "report" and metric not in ALL_OUTPUTS:
            continue
        out = cli(args + ["--metric", metric], cwd=tmp_path)
        assert out.returncode in (0, 2), (output, out.stdout + out.stderr)
        if out.returncode == 2:
            # a metric these records have no figure of: said in one line, no document
            assert metric in ("read", "client-cpu", "cpu-per-GB"), (output, out.stderr)
            assert out.stderr.strip().count("\n") == 0 and not out.stdout.strip(), out.stderr
            continue
        doc = json.loads(out.stdout)
        assert doc["metric"] == metric
        if output == "report":  # --limits: each run's verdict, in the schema
            assert all(len(r["limits"]) == r["runs"] for r in doc["rows"]), doc["rows"]
        jsonschema.validate(doc, contract.schema(output))
        written += 1
    assert written or metric in ("read", "client-cpu", "cpu-per-GB")
