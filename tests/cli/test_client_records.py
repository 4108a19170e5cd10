"""The optional client tables of a record: counter deltas per node and layouts per rank."""

import json

import h5py
import numpy as np
import pytest
import synth
from common import read_record

from mpiwrite.errors import RecordError
from mpiwrite.records import h5 as records

pytestmark = pytest.mark.timeout(60)
DELTA = {"osc": {"bigfs-OST0001-osc-x": {"stats": {"write_bytes": {"samples": 256,
                                                                   "sum": 268435456}}}},
         "llite": {}, "write_bytes": 268435456, "write_rpcs": 256, "seconds": 1.5}
LAYOUT = {"layout": "v1", "stripe_count": 2, "stripe_size": 1048576, "ost_indices": [3, 1]}


def _with_tables(tmp_path, name="r.h5"):
    path = synth.make(tmp_path / name, [500.0], "20260101T000000Z-00clnt", nodes=2,
                      ranks_per_node=1)
    rec = read_record(path)
    rec.client_counters = [{"iteration": 0, "node": n, "delta": DELTA} for n in (0, 1)]
    rec.layouts = [{"iteration": 0, "rank": r, "layout": LAYOUT} for r in (0, 1)]
    records.write(rec, path)
    return path


def test_counters_and_layouts_round_trip(tmp_path):
    rec = read_record(_with_tables(tmp_path))
    assert rec.client_counters[1] == {"iteration": 0, "node": 1, "write_bytes": 268435456,
                                      "write_rpcs": 256, "seconds": 1.5, "delta": DELTA}
    assert rec.layouts[0]["first_ost"] == 3 and rec.layouts[0]["stripe_count"] == 2
    assert rec.layouts[0]["layout"] == LAYOUT
    assert rec.nodes[0]["client"] == {}  # facts written before the client fact: derived
    assert rec.keys()["client"] == "lustre 1.6.5"


def test_records_without_the_tables_still_read(tmp_path):
    rec = read_record(synth.make(tmp_path / "old.h5", [500.0], "20260101T000000Z-000old"))
    assert rec.client_counters == [] and rec.layouts == []


def _edit(path, fn):
    with h5py.File(path, "a") as h5:
        fn(h5)


def _set_field(name, field, value):
    def fn(h5):
        data = h5[name][()]
        data[field][0] = value
        del h5[name]
        h5.create_dataset(name, data=data)
    return fn


def _external(h5):
    del h5["client_counters"]
    h5["client_counters"] = h5py.ExternalLink("/etc/passwd", "/x")


def _too_many(h5):
    data = h5["rank_layouts"][()]
    del h5["rank_layouts"]
    h5.create_dataset("rank_layouts", data=np.resize(data, 500))


@pytest.mark.parametrize("fn,why", [
    (_set_field("client_counters", "node", 7), "client_counters[0].node: 7 out of range"),
    (_set_field("rank_layouts", "rank", -1), "rank_layouts[0].rank: -1 out of range"),
    (_set_field("client_counters", "counters_json", "[1, 2]"), "expected a JSON object"),
    (_set_field("rank_layouts", "layout_json", "{nope"), "not valid JSON"),
    (_external, "client_counters: is a ExternalLink (refused)"),
    (_too_many, "rank_layouts: 500 rows is more than"),
])
def test_crafted_tables_are_refused(tmp_path, fn, why):
    path = _with_tables(tmp_path)
    _edit(path, fn)
    with pytest.raises(RecordError) as info:
        read_record(path)
    assert str(info.value).startswith(path + ": ") and why in str(info.value)


def test_a_client_fact_that_is_not_an_object_is_refused(tmp_path):
    path = synth.make(tmp_path / "r.h5", [500.0], "20260101T000000Z-0bfact")

    def fn(h5):
        tbl = h5["nodes"][()]
        facts = json.loads(tbl["facts_json"][0])
        facts["client"] = ["nfs"]
        tbl["facts_json"][0] = json.dumps(facts)
        dt = h5["nodes"].dtype
        del h5["nodes"]
        h5.create_dataset("nodes", data=tbl, dtype=dt)
    _edit(path, fn)
    with pytest.raises(RecordError, match=r"nodes\[0\].client: expected a JSON object"):
        read_record(path)


def _retag(path, client, drop_key=False):
    """Make a synthetic record's nodes use `client`, or look like one written before it."""
    from mpiwrite.formats.nodekeys import common_keys

    rec = read_record(path)
    for n in rec.nodes:
        n.pop("raw", None)
        if client:
            n["client"] = {"client": client}
            n["fs"] = {"fstype": "nfs4"}
            n["lustre"] = {"present": False}
    keys = common_keys(rec.nodes)
    if drop_key:
        keys.pop("client")
    rec.attrs["keys"] = json.dumps(keys)
    records.write(rec, path)


def test_report_by_client_over_new_and_old_records(tmp_path):
    from common import cli

    study = tmp_path / "study"
    study.mkdir()
    for i, (client, values) in enumerate([("nfs 4.2", [300.0, 310.0]),
                                          ("nfs 3", [200.0, 205.0]), (None, [500.0, 505.0])]):
        path = synth.make(study / f"r{i}.h5", values, f"20260101T00000{i}Z-00000{i}")
        _retag(path, client, drop_key=client is None)  # r2: schema 1 as first written
    old = read_record(str(study / "r2.h5"))
    assert "client" not in old.attrs["keys"] and old.nodes[0]["client"] == {}
    assert old.keys()["client"] == "lustre 1.6.5"  # derived from its lustre key
    out = cli(["report", str(study), "--by", "client", "--format", "json"], cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    rows = {r["keys"]["client"]: r for r in json.loads(out.stdout)["rows"]}
    assert set(rows) == {"nfs 4.2", "nfs 3", "lustre 1.6.5"}
