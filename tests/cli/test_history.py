"""A site's history: the run-level reading, the index of records already read
(records/index.py) and its invalidation, --units for report/compare/plot, tag files."""

import importlib.util
import json
import os
import shutil
import sqlite3
import subprocess
import time

import pytest
import synth
from common import MPIWRITE, clean_env, cli, read_record

from mpiwrite.answers.results import Store, run_keys
from mpiwrite.errors import RecordError
from mpiwrite.records import h5 as records
from mpiwrite.records import h5read, runlevel
from mpiwrite.records.index import KEY_NAME, NAME, Index

pytestmark = pytest.mark.timeout(120)


def aged(path, seconds=60.0):
    """Set a file's times into the past: the index keeps only records that have settled."""
    t = time.time_ns() - int(seconds * 1e9)
    os.utime(path, ns=(t, t))


def make(folder, name, values, **kw):
    path = synth.make(folder / f"{name}.h5", values, name, **kw)
    aged(path)
    return path


@pytest.fixture
def site(tmp_path):
    r = tmp_path / "r"
    r.mkdir()
    for i in range(4):
        make(r, f"a{i}", [800.0 + i, 805.0, 795.0], tags={"config": "A"}, nodes=2,
             ranks_per_node=4)
        make(r, f"b{i}", [600.0 + i, 602.0, 598.0], tags={"config": "B"}, nodes=2,
             ranks_per_node=4)
    return r


def store(folder, cache_dir, **kw):
    idx = Index(str(cache_dir))
    st = Store([str(folder)], warn=False, level="run", cache=idx, **kw)
    return st, idx


def report(folder, tmp_path, *extra, env=None):
    out = cli(["report", str(folder), "--by", "config", "--format", "json", *extra],
              cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stderr
    return out


def test_run_level_record_is_the_record_for_reports(site):
    path = str(site / "a0.h5")
    rec, material, _ident = runlevel._read(path)
    whole = read_record(path)
    assert rec.attrs == whole.attrs and run_keys(rec) == run_keys(whole)
    assert rec.iterations.tobytes() == whole.iterations.tobytes()
    n, mean, sd = runlevel.pooled([runlevel.stats_of(rec)])
    assert n == len(whole.ranks) and mean == pytest.approx(whole.ranks["MB_per_s"].mean())
    assert sd == pytest.approx(whole.ranks["MB_per_s"].std(ddof=1))
    assert len(rec.ranks) == len(whole.ranks)  # the rest of the record, read when used
    assert material is not None


def test_a_run_level_record_refuses_the_rest_of_a_changed_file(site):
    path = site / "a0.h5"
    rec, _m, _i = runlevel._read(str(path))
    make(site, "a0", [1.0, 2.0, 3.0], tags={"config": "A"})
    with pytest.raises(RecordError, match="changed since it was read"):
        len(rec.ranks)


def test_hits_after_the_first_read_and_the_same_answers(site, tmp_path):
    cache = tmp_path / "cache"
    first, idx = store(site, cache)
    assert (idx.hits, idx.misses) == (0, 8)
    assert os.stat(cache / NAME).st_mode & 0o777 == 0o600
    second, idx = store(site, cache)
    assert (idx.hits, idx.misses, idx.invalid) == (8, 0, 0)
    assert [run_keys(r) for r in first.runs] == [run_keys(r) for r in second.runs]
    env = {"MPIWRITE_CACHE": str(cache)}
    with_cache = report(site, tmp_path, env=env).stdout
    assert with_cache == report(site, tmp_path, "--no-cache").stdout
    assert with_cache == report(site, tmp_path, env={"MPIWRITE_CACHE": "off"}).stdout
    assert with_cache == report(site, tmp_path, "--cache", str(tmp_path / "other")).stdout
    whole = cli(["report", str(site), "--by", "config", "--format", "json", "--metric",
                 "per-node"], cwd=tmp_path, env=env)  # a per-rank metric reads whole records
    assert whole.returncode == 0, whole.stderr


def test_rows_parsed_when_used_give_what_the_records_give(site, tmp_path):
    """A warm row's attributes, node facts and counters are parsed only when used: compare
    (its "also different") and the run-level tables of results.load give what the records
    give, and so does each record's run id, status, start time and keys."""
    cache = tmp_path / "cache"
    cold, _idx = store(site, cache)
    warm, idx = store(site, cache)
    assert idx.hits == 8
    for a, b in zip(cold.runs, warm.runs):
        assert (a.run_id, a.status, a.attrs, a.nodes, a.client_counters) == \
            (b.run_id, b.status, b.attrs, b.nodes, b.client_counters)
        assert run_keys(a) == warm.keys(b)
    args = ["compare", "config=A", "config=B", "--in", str(site)]
    env = {"MPIWRITE_CACHE": str(cache)}
    with_rows = cli(args, cwd=tmp_path, env=env)
    assert with_rows.returncode == 0, with_rows.stderr
    assert with_rows.stdout == cli(args + ["--no-cache"], cwd=tmp_path).stdout
    pytest.importorskip("pandas")
    from mpiwrite.answers.results import load

    tables = ("runs", "iterations", "nodes")
    a, b = load(str(site), tables=tables, cache=False), load(str(site), tables=tables,
                                                              cache=str(cache))
    for name in tables:
        assert a[name].to_json() == b[name].to_json(), name


def test_a_changed_replaced_or_removed_record_is_never_served(site, tmp_path):
    cache = tmp_path / "cache"
    store(site, cache)
    aged(site / "a0.h5", 120)  # touched: other mtime and ctime
    t = time.time_ns() - 90 * 10**9
    copy = site / "a1.copy"  # the same bytes and times under a new inode
    shutil.copy2(site / "a1.h5", copy)
    os.utime(copy, ns=(t, t))
    os.replace(copy, site / "a1.h5")
    fresh = synth.make(tmp_path / "new.h5", [100.0, 100.0, 100.0], "a2",
                       tags={"config": "A"}, nodes=2, ranks_per_node=4)
    aged(fresh)
    os.replace(fresh, site / "a2.h5")  # replaced by another record
    os.unlink(site / "b0.h5")
    st, idx = store(site, cache)
    assert idx.misses == 3 and idx.hits == 4
    ids = sorted(r.run_id for r in st.runs)
    assert ids == ["a0", "a1", "a2", "a3", "b1", "b2", "b3"]
    a2 = next(r for r in st.runs if r.run_id == "a2")
    assert a2.iterations["aggregate_MB_per_s"][0] == pytest.approx(100.0)
    assert report(site, tmp_path, env={"MPIWRITE_CACHE": str(cache)}).stdout == \
        report(site, tmp_path, "--no-cache").stdout


def test_running_and_just_written_records_are_not_kept(tmp_path):
    r = tmp_path / "r"
    r.mkdir()
    make(r, "run", [500.0], status="running")
    synth.make(r / "new.h5", [500.0], "new")  # modified now: its mtime tick may repeat
    cache = tmp_path / "cache"
    store(r, cache)
    _st, idx = store(r, cache)
    assert idx.hits == 0 and idx.misses == 2


@pytest.mark.parametrize("damage", ["truncate", "garbage", "empty-table"])
def test_a_damaged_index_is_made_anew_with_a_warning(site, tmp_path, damage):
    cache = tmp_path / "cache"
    store(site, cache)
    path = cache / NAME
    if damage == "truncate":
        with open(path, "r+b") as fh:
            fh.truncate(os.path.getsize(path) // 3)
    elif damage == "garbage":
        path.write_bytes(b"not a database at all" * 200)
    else:
        db = sqlite3.connect(path)
        db.execute("DROP TABLE runs")
        db.execute("CREATE TABLE runs (path TEXT)")
        db.commit()
        db.close()
    env = {"MPIWRITE_CACHE": str(cache)}
    out = report(site, tmp_path, env=env)
    assert out.stdout == report(site, tmp_path, "--no-cache").stdout
    if damage != "truncate":  # a truncated file may still read as a smaller database
        assert "is damaged" in out.stderr and "made anew" in out.stderr
    _st, idx = store(site, cache)
    assert idx.hits == 8


def test_rows_that_fail_the_checks_of_a_record_are_not_used(site, tmp_path):
    cache = tmp_path / "cache"
    store(site, cache)
    db = sqlite3.connect(cache / NAME)
    for (path, doc) in db.execute("SELECT path, doc FROM runs").fetchall():
        d = json.loads(doc)
        if path.endswith("a0.h5"):
            d["attrs"]["ranks"] = -5  # what a record may not say
        elif path.endswith("a1.h5"):
            d["nodes"] = ["[not an object]"]
        else:
            continue
        db.execute("UPDATE runs SET doc = ? WHERE path = ?", (json.dumps(d), path))
    db.execute("UPDATE runs SET iterations = x'00' WHERE path LIKE '%b0.h5'")
    db.commit()
    db.close()
    st, idx = store(site, cache)
    assert idx.invalid == 3 and idx.hits == 5 and len(st.runs) == 8
    out = report(site, tmp_path, env={"MPIWRITE_CACHE": str(cache)})
    assert out.stdout == report(site, tmp_path, "--no-cache").stdout


def test_a_row_sealed_for_another_file_or_key_is_not_used(site, tmp_path):
    """Rows are sealed (HMAC) with the path and identity of their file under the index's
    own key: a row copied onto another record's path and identity, or rows under a key
    made anew, are read again, never served; the answers stay those of the records."""
    cache = tmp_path / "cache"
    store(site, cache)
    assert os.stat(cache / KEY_NAME).st_mode & 0o777 == 0o600
    db = sqlite3.connect(cache / NAME)
    a0 = db.execute("SELECT doc, iterations, rank_stats, mac FROM runs WHERE path LIKE "
                    "'%/a0.h5'").fetchone()
    db.execute("UPDATE runs SET doc = ?, iterations = ?, rank_stats = ?, mac = ? WHERE "
               "path LIKE '%/b0.h5'", a0)  # b0's row now says what a0's does
    db.commit()
    db.close()
    st, idx = store(site, cache)
    assert (idx.invalid, idx.hits) == (1, 7)
    assert sorted(r.run_id for r in st.runs)[4] == "b0"
    os.unlink(cache / KEY_NAME)
    _st, idx = store(site, cache)
    assert (idx.invalid, idx.hits) == (8, 0)
    _st, idx = store(site, cache)
    assert (idx.invalid, idx.hits) == (0, 8)


def test_the_index_file_is_never_a_link_and_the_folder_must_be_private(site, tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    os.symlink(victim, cache / NAME)
    out = report(site, tmp_path, env={"MPIWRITE_CACHE": str(cache)})
    assert "cannot use the index" in out.stderr
    assert victim.read_bytes() == b"precious"
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    out = report(site, tmp_path, env={"MPIWRITE_CACHE": str(shared)})
    assert "writable by others" in out.stderr and not (shared / NAME).exists()


def test_read_only_records_and_the_default_cache_folder(site, tmp_path):
    for p in site.iterdir():
        os.chmod(p, 0o444)
    os.chmod(site, 0o555)
    try:
        env = clean_env({"XDG_CACHE_HOME": str(tmp_path / "xdg")})
        del env["MPIWRITE_CACHE"]
        out = subprocess.run([MPIWRITE, "report", str(site), "--by", "config"], cwd=tmp_path,
                             env=env, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        db = sqlite3.connect(tmp_path / "xdg" / "mpiwrite" / NAME)
        assert db.execute("SELECT count(*) FROM runs").fetchone()[0] == 8
        env["MPIWRITE_CACHE"] = "off"
        env["XDG_CACHE_HOME"] = str(tmp_path / "xdg2")
        out = subprocess.run([MPIWRITE, "report", str(site), "--by", "config"], cwd=tmp_path,
                             env=env, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0 and not (tmp_path / "xdg2").exists()
    finally:
        os.chmod(site, 0o755)
    out = cli(["report", str(site), "--cache", "x", "--no-cache"], cwd=tmp_path)
    assert out.returncode == 2 and "--no-cache" in out.stderr


def test_concurrent_readers_share_one_index(site, tmp_path):
    cache = tmp_path / "cache"
    env = clean_env({"MPIWRITE_CACHE": str(cache)})
    cmd = [MPIWRITE, "report", str(site), "--by", "config", "--format", "json"]
    for _round in range(2):  # the first round writes the index, the second reads it
        procs = [subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for _ in range(4)]
        outs = [p.communicate(timeout=90) for p in procs]
        assert all(p.returncode == 0 for p in procs), outs
        assert len({o for o, _e in outs}) == 1 and not any(e for _o, e in outs), outs
    _st, idx = store(site, cache)
    assert idx.hits == 8


def test_units_mib_changes_figures_and_labels(site, tmp_path):
    mb = json.loads(report(site, tmp_path).stdout)
    mib = json.loads(report(site, tmp_path, "--units", "MiB").stdout)
    assert mb["metric_unit"] == "MB/s" and mib["metric_unit"] == "MiB/s"
    assert mib["units"] == "MiB"
    for a, b in zip(mb["rows"], mib["rows"]):
        assert b["mean_MiB_per_s"] == pytest.approx(a["mean_MB_per_s"] * 1e6 / 2**20)
        assert b["rank_mean_MiB_per_s"] == pytest.approx(a["rank_mean_MB_per_s"] * 1e6 / 2**20)
        assert "mean_MB_per_s" not in b
    table = cli(["report", str(site), "--by", "config", "--units", "MiB"], cwd=tmp_path)
    shown = f"{mb['rows'][0]['mean_MB_per_s'] * 1e6 / 2**20:.1f}"
    assert "MiB/s mean ±95%" in table.stdout and shown in table.stdout, table.stdout
    out = cli(["compare", "config=A", "config=B", "--in", str(site), "--units", "MiB",
               "--json"], cwd=tmp_path)
    doc = json.loads(out.stdout)
    assert doc["metric_unit"] == "MiB/s" and "diff_MiB_per_s" in doc
    assert doc["a"]["mean_MiB_per_s"] == pytest.approx(mb["rows"][0]["mean_MB_per_s"]
                                                       * 1e6 / 2**20)
    text = cli(["compare", "config=A", "config=B", "--in", str(site), "--units", "MiB"],
               cwd=tmp_path).stdout
    assert "MiB/s" in text and "MB/s" not in text
    cpu = cli(["report", str(site), "--metric", "client-cpu", "--units", "MiB"], cwd=tmp_path)
    assert "MiB" not in cpu.stdout or "rank mean±sd and first-done: write MiB/s" in cpu.stdout


def test_plot_scaling_takes_units(site, tmp_path):
    pytest.importorskip("matplotlib")
    out = cli(["plot", "scaling", str(site), "-o", "p.png", "--by", "config", "--units",
               "MiB"], cwd=tmp_path)
    assert out.returncode == 0, out.stderr


def test_tag_file_strips_spaces_and_names_a_bad_line(tmp_path):
    from mpiwrite.errors import ConfigError
    from mpiwrite.run import config

    tags = tmp_path / "site.tags"
    tags.write_text("# site\nfs = scratch\n\tcampaign=\t2026 \n")
    assert config.parse_tags([], str(tags)) == {"fs": "scratch", "campaign": "2026"}
    tags.write_text("fs = scratch\n\nno equals sign here\n")
    with pytest.raises(ConfigError, match=r"site\.tags' line 3: not KEY=VALUE"):
        config.parse_tags([], str(tags))


def test_a_record_with_every_optional_table_is_read_cold_whole_and_checked(tmp_path):
    """Client counters, rank layouts and latency histograms in one record (a network
    client's run): the cold read checks the whole record from one image and counts it (a
    checked reader that closed the image before the counters refused every such record)."""
    import numpy as np

    r = tmp_path / "r"
    r.mkdir()
    path = synth.make(r / "a.h5", [800.0, 810.0], "20260101T000000Z-opt",
                      layouts=[{"iteration": 0, "rank": 0, "layout": {"stripe_count": 1}}])
    rec = read_record(path)
    rec.client_counters = [{"iteration": 0, "node": 0, "delta": {"write_bytes": 1,
                                                                 "seconds": 1.0}}]
    rec.latency = [{"iteration": 0, "node": 0, "histograms": {"write": {"10": 3}}}]
    rec.layouts = [{"iteration": 0, "rank": 0, "layout": {"stripe_count": 1}}]
    for key in records.ATTR_JSON:  # read back parsed: written as JSON, as the ledger does
        if key in rec.attrs and not isinstance(rec.attrs[key], str):
            rec.attrs[key] = json.dumps(rec.attrs[key])
    os.remove(path)
    records.write(rec, str(r / "b.h5"))
    assert np.asarray(read_record(r / "b.h5").iterations).size == 2
    out = subprocess.run([MPIWRITE, "report", str(r), "--cache", str(tmp_path / "c"),
                          "--format", "json"], capture_output=True, text=True, timeout=60,
                         env=clean_env())
    assert out.returncode == 0 and "skipped" not in out.stderr, out.stderr
    assert json.loads(out.stdout)["rows"][0]["runs"] == 1


def test_the_python_api_reads_run_level_tables_through_the_index(site, tmp_path):
    pytest.importorskip("pandas")
    from mpiwrite.answers.results import load

    whole = load(str(site))
    cache = tmp_path / "cache"
    light = load(str(site), tables=("runs", "iterations", "nodes"), cache=str(cache))
    assert set(light) == {"runs", "iterations", "nodes"}
    assert light["iterations"].equals(whole["iterations"])
    assert (cache / NAME).exists()
    again = load(str(site), tables=("runs", "iterations"), cache=str(cache))
    assert again["runs"]["run_id"].tolist() == whole["runs"]["run_id"].tolist()
    import mpiwrite

    for path in (site, [site], os.fsencode(str(site))):  # any path-like object, or a list
        got = mpiwrite.load(path, tables=("runs", "nodes"), cache=False)
        assert got["runs"]["run_id"].tolist() == whole["runs"]["run_id"].tolist()
    # the nodes table: the record's node columns, each node's value as the record has it
    from mpiwrite.vocab import keys

    assert list(whole["nodes"].columns) == ["run_id", "node", *keys.NODE_COLUMNS,
                                            "mem_total_bytes"]


# -- the cold path's parts, each against the plain way of doing it -----------------------------
def test_root_attributes_read_fast_are_what_h5py_gives(tmp_path):
    """h5read.root_attrs (memory types made once, no object that is not needed) gives what
    h5py's own reading gives for every kind of attribute, scalar or not."""
    import h5py
    import numpy as np

    path = tmp_path / "a.h5"
    with h5py.File(path, "w") as h5:
        a = h5.attrs
        a["text"], a["fixed"], a["bad"] = "x é", np.bytes_(b"fixed"), b"\xff\xfe"
        a["i4"], a["u8"], a["u2"] = np.int32(-3), np.uint64(2**63 + 5), np.uint16(7)
        a["f4"], a["b"], a["arr"] = np.float32(1.5), np.bool_(True), np.arange(3)
        a["one"] = np.array(["x"], dtype=h5py.string_dtype())
        a["cpd"] = np.array((1, 2.0), dtype=[("a", "i4"), ("b", "f8")])
    with h5py.File(path, "r") as h5:
        want = records.raw_attrs(h5.attrs.items())
    fid = h5py.h5f.open(str(path).encode(), h5py.h5f.ACC_RDONLY)
    got = h5read.root_attrs(h5py.h5g.open(fid, b"/"))
    assert got.keys() == want.keys()
    for k, v in want.items():  # arrays and compounds as JSON lists, text as h5py gives it
        if isinstance(v, (np.ndarray, tuple)):
            assert got[k] == (v.tolist() if isinstance(v, np.ndarray) else list(v)), k
        else:
            assert type(got[k]) is type(v) and got[k] == v, k
    assert got["u8"] == 2**63 + 5 and got["bad"] == "\udcff\udcfe" and got["f4"] == 1.5
    assert got["arr"] == [0, 1, 2] and got["one"] == ["x"] and got["cpd"] == [1, 2.0]


def test_a_record_a_site_annotated_with_h5py_is_reported_as_show_reads_it(site, tmp_path):
    """A site adds attributes of its own with h5py (a list of ticket numbers, a table of
    text, a compound): `show` reads such a record, so `report` and `compare` use it too,
    read cold, warm and without the index (they once refused it: "a value is neither text
    nor a number"), and the run-level attributes give the site's values as lists."""
    import h5py
    import numpy as np

    path = site / "a2.h5"
    with h5py.File(path, "a") as h5:
        h5.attrs["tickets"] = [101, 102]
        h5.attrs["notes"] = np.array([["a", "b"], ["c", "d"]], dtype=h5py.string_dtype())
        h5.attrs["pair"] = np.array((1, 2.5), dtype=[("x", "<i4"), ("y", "<f8")])
    aged(path)
    assert cli(["show", str(path)], cwd=tmp_path).returncode == 0
    plain = report(site, tmp_path, "--no-cache").stdout
    cache = ["--cache", str(tmp_path / "cache")]
    assert report(site, tmp_path, *cache).stdout == plain  # cold
    assert report(site, tmp_path, *cache).stdout == plain  # warm: the row was kept
    assert sum(g["runs"] for g in json.loads(plain)["rows"]) == 8
    rec, _m, _i = runlevel._read(str(path))
    assert (rec.attrs["tickets"], rec.attrs["notes"], rec.attrs["pair"]) == \
        ([101, 102], [["a", "b"], ["c", "d"]], [1, 2.5])
    idx = Index(str(tmp_path / "cache"))
    assert idx.get(os.path.abspath(path), str(path), runlevel.identity(os.stat(path)))
    out = cli(["compare", "config=A", "config=B", "--in", str(site)], cwd=tmp_path)
    assert out.returncode == 0 and "verdict" in out.stdout, out.stderr


def test_rank_figures_grouped_at_once_are_the_per_iteration_figures():
    """rank_stats (one pass grouped by iteration) against the figures taken one iteration
    at a time: ranks of no listed iteration left out, an iteration listed twice given twice,
    NaN and infinite rates left out, a table without read rates."""
    import numpy as np

    rng = np.random.default_rng(7)
    dt = np.dtype([("iteration", "<i4"), ("MB_per_s", "<f8"), ("read_MB_per_s", "<f8")])
    for trial in range(300):
        ranks = np.zeros(int(rng.integers(0, 30)), dt)
        ranks["iteration"] = rng.integers(-1, 5, len(ranks))
        ranks["MB_per_s"] = rng.normal(100, 30, len(ranks)) * rng.choice(
            [1.0, 1.0, np.nan, np.inf], len(ranks))
        ranks["read_MB_per_s"] = rng.normal(50, 5, len(ranks))
        if trial % 3 == 0:
            ranks = ranks[["iteration", "MB_per_s"]]
        its = np.zeros(int(rng.integers(0, 5)), [("iteration", "<i4")])
        its["iteration"] = rng.integers(0, 4, len(its))
        got = runlevel.rank_stats(ranks, its)
        for row, it in zip(got, its["iteration"]):
            for col, pre in (("MB_per_s", ""), ("read_MB_per_s", "read_")):
                v = ranks[col][ranks["iteration"] == it] if col in ranks.dtype.names else []
                v = np.asarray(v)[np.isfinite(v)] if len(v) else np.zeros(0)
                assert row[pre + "n"] == len(v)
                if len(v):
                    assert row[pre + "mean"] == pytest.approx(v.mean(), rel=1e-12)
                    assert row[pre + "m2"] == pytest.approx(((v - v.mean()) ** 2).sum(),
                                                            rel=1e-9, abs=1e-9)


def test_json_text_keeps_only_what_reads_back_as_it_was():
    from mpiwrite.records.sandbox import json_text

    for value in ({}, [], {"a": [1, 2.5, None, True, "x"]}, {"s": "\ud800\x00é"},
                  [float("inf"), -0.0, 10**30], {"n": float("nan")}):
        text = json_text(value)
        assert text is not None and text == json.dumps(value)
    deep = cyclic = []
    for _ in range(5000):
        deep = [deep]
    cyclic.append(cyclic)
    for value in ({"a": (1, 2)}, {1: "x"}, [{"k": {2: 3}}], {"x": set()}, deep, cyclic):
        assert json_text(value) is None


def test_a_workers_run_keys_are_the_records_keys_and_are_checked(site):
    """A cold record's keys come from the worker that read it (runkeys.run_keys there);
    they are the keys of the record read whole, and an answer whose keys are not keys is an
    unusable record, not keys."""
    from mpiwrite.records import runrows
    from mpiwrite.records import sandbox as isolated
    from mpiwrite.records.worker import _serve_one

    path = str(site / "a1.h5")
    got = _serve_one("runlevel", path)
    rec = runrows.answered(path, json.loads(json.dumps(got)))
    assert runrows.keys_of(rec) == run_keys(read_record(path))
    for bad in ('["config"]', '"config"', '3', 'null', '{"config": '):
        with pytest.raises(ValueError):
            runrows.keys_of(runrows.answered(path, dict(got, keys=bad)))
    rec = runrows.answered(path, dict(got, keys=None))  # none sent: derived by the reader
    assert runrows.keys_of(rec) is None
    assert isolated.json_text(run_keys(rec)) == got["keys"]
    d = site.parent / "one"
    d.mkdir()
    shutil.copy(site / "a1.h5", d / "a1.h5")
    bad = Store([str(d)], warn=False, level="run", cache=False)
    assert len(bad.runs) == 1 and bad.keys(bad.runs[0]) == run_keys(read_record(path))


def _default_env(**where):
    """The environment of a command whose index is in the default place (no MPIWRITE_CACHE)."""
    env = clean_env({k: str(v) for k, v in where.items()})
    del env["MPIWRITE_CACHE"]
    if "XDG_CACHE_HOME" not in where:
        env.pop("XDG_CACHE_HOME", None)
    return env


def test_an_index_folder_that_is_a_file_is_not_a_folder(site, tmp_path):
    """--cache FILE once said "cannot use the index folder FILE (File exists)" and went on:
    now exit 2, one line; MPIWRITE_CACHE=FILE a warning, and the report."""
    f = tmp_path / "file"
    f.write_text("mine")
    out = cli(["report", str(site), "--cache", str(f)], cwd=tmp_path)
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mpiwrite: error: --cache:"), lines
    assert "not a folder" in lines[0] and str(f) in lines[0]
    out = report(site, tmp_path, env={"MPIWRITE_CACHE": str(f)})
    assert "not a folder" in out.stderr and f.read_text() == "mine"
    out = cli(["report", str(site), "--cache", str(tmp_path / "no" / "cache")], cwd=tmp_path)
    assert out.returncode == 2 and "does not exist" in out.stderr, out.stderr
    assert not (tmp_path / "no").exists()


def test_the_default_index_folder_makes_no_home(site, tmp_path):
    """HOME=/tmp/nohome/deeper once made the whole HOME path: no folder above the cache
    folder's own parent is made (no index, a warning, the report)."""
    home = tmp_path / "nohome" / "deeper"
    for env in (_default_env(HOME=home), _default_env(HOME=tmp_path, XDG_CACHE_HOME=home / "c")):
        out = subprocess.run([MPIWRITE, "report", str(site), "--by", "config"], cwd=tmp_path,
                             env=env, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0 and "config" in out.stdout, out.stderr
        warned = [ln for ln in out.stderr.splitlines() if "warning" in ln]
        assert len(warned) == 1 and "does not exist" in warned[0], out.stderr
        assert not (tmp_path / "nohome").exists()
    (tmp_path / "home").mkdir()
    out = subprocess.run([MPIWRITE, "report", str(site)], cwd=tmp_path, capture_output=True,
                         env=_default_env(HOME=tmp_path / "home"), text=True, timeout=60)
    assert out.returncode == 0 and not out.stderr, out.stderr
    made = tmp_path / "home" / ".cache" / "mpiwrite"
    assert (made / NAME).exists() and os.stat(made).st_mode & 0o777 == 0o700


def test_names_that_are_not_utf8(tmp_path):
    """A results folder named res\\xff (report, compare, plot scaling) once died of a
    UnicodeEncodeError in the index; a record named mpiwrite-\\xfe.h5 beside good ones made
    every later report die at the end.  Such names are read, not indexed."""
    res = tmp_path / os.fsdecode(b"res\xff")
    res.mkdir()
    for i in range(2):
        make(res, f"a{i}", [800.0 + i, 805.0], tags={"config": "A"}, nodes=2)
        make(res, f"b{i}", [600.0 + i, 602.0], tags={"config": "B"}, nodes=2)
    odd = synth.make(res / os.fsdecode(b"mpiwrite-\xfe.h5"), [700.0, 701.0], "odd",
                     tags={"config": "B"})
    aged(odd)
    cache = tmp_path / "cache"
    env = {"MPIWRITE_CACHE": str(cache)}
    for _twice in range(2):
        out = report(res, tmp_path, env=env)
        assert not out.stderr and len(json.loads(out.stdout)["rows"]) == 2, out.stderr
        plot = [["plot", "scaling", str(res), "-o", str(tmp_path / "s.png")]] \
            if importlib.util.find_spec("matplotlib") else []  # the `test-full` extra
        for args in [["compare", "config=A", "config=B", "--in", str(res)]] + plot:
            out = cli(args, cwd=tmp_path, env=env)
            assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
    good = tmp_path / "good"
    good.mkdir()
    shutil.copy(odd, good / os.path.basename(odd))
    for name in ("a0", "a1"):
        shutil.copy2(res / f"{name}.h5", good / f"{name}.h5")
    for _twice in range(2):
        out = report(good, tmp_path, env=env)
        assert not out.stderr, out.stderr
    _st, idx = store(good, cache)
    assert (idx.hits, idx.misses) == (2, 1)  # the good ones are indexed, the odd one read


def test_an_empty_cache_option_is_one_line_not_the_default(tmp_path):
    """`--cache ''` silently used MPIWRITE_CACHE (or made the default folder)."""
    out = cli(["report", str(tmp_path), "--cache", ""], cwd=tmp_path)
    assert out.returncode == 2 and out.stderr.strip().splitlines() == [
        "mpiwrite: error: --cache: empty: give a folder, or --no-cache"], out.stderr
