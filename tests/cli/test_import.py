"""`mpiwrite import`: IOR, fio, lmdd and dd output as records beside mpiwrite's own.

Pure (no MPI): the commands run in this process.  The IOR and lmdd outputs are real
(tests/fixtures/import/README.md); broken variants are derived from them here; fio and dd are
run for real in tmp_path.
"""

import importlib.util
import json
import os
import pathlib
import shutil
import subprocess
import sys

import jsonschema
import numpy as np
import pytest
import synth
from common import FIXTURES, ROOT, read_record

from mpiwrite.formats import contract
from mpiwrite.importers import base as imported
from mpiwrite.importers import registry as importers
from mpiwrite.records import h5 as records

FIX = FIXTURES / "import"
MIB = 2**20
MB = 1e6
TO_MB = MIB / MB  # IOR's MiB/s to MB/s


def cli(capsys, *args):
    """(exit code, stdout, stderr) of `mpiwrite ARGS` run in this process."""
    from mpiwrite.cli.main import main

    with pytest.raises(SystemExit) as exc:
        main([str(a) for a in args])
    out = capsys.readouterr()
    return exc.value.code, out.out, out.err


def recs(folder):
    return [read_record(str(p)) for p in sorted(pathlib.Path(folder).glob("*.h5"))]


def one(folder):
    found = recs(folder)
    assert len(found) == 1, [r.path for r in found]
    return found[0]


def agg(rec, col="aggregate_MB_per_s"):
    return [float(x) for x in rec.iterations[col]]


# -- IOR ---------------------------------------------------------------------------------
@pytest.mark.timeout(60)
def test_ior_json_figures_are_the_fixtures(tmp_path, capsys):
    code, out, err = cli(capsys, "import", FIX / "fpp-write-fsync-i3.json", "--results", tmp_path)
    assert code == 0, err
    rec = one(tmp_path)
    assert agg(rec) == pytest.approx([x * TO_MB for x in (3924.4663, 4429.5549, 3566.0402)])
    assert agg(rec, "aggregate_with_open_MB_per_s") == pytest.approx(agg(rec))
    assert list(rec.iterations["bytes"]) == [128 * MIB] * 3
    assert rec.attrs["ranks"] == 2 and rec.attrs["nodes"] == 1 and len(rec.ranks) == 0
    p = rec.params()
    assert (p["block_size"], p["size"], p["layout"], p["fsync"]) == (MIB, 64 * MIB, "fpp", True)
    assert rec.attrs["command_line"].startswith("/usr/local/bin/ior -a POSIX -w -F -e")
    assert rec.attrs["start_time"] == "2026-12-01T09:02:33"
    imp = rec.imported()
    assert imp["tool"] == "ior" and imp["tool_version"] == "4.1.0+dev"
    assert imp["format"] == "ior-json" and imp["file"].endswith("fpp-write-fsync-i3.json")
    import hashlib

    assert imp["sha256"] == hashlib.sha256((FIX / "fpp-write-fsync-i3.json").read_bytes()
                                           ).hexdigest()
    assert "aggregate_MB_per_s" in imp["derived"] and "ranks" in imp["exact"]
    assert "checksums" in imp["unknown"] and rec.keys()["checksums"] == "unknown"
    assert [o["bwMiB"] for o in imp["original"]] == [3924.4663, 4429.5549, 3566.0402]


@pytest.mark.timeout(60)
def test_ior_json_write_and_read_go_to_the_write_and_read_columns(tmp_path, capsys):
    code, _out, err = cli(capsys, "import", FIX / "shared-write-read.json", "--results", tmp_path)
    assert code == 0, err
    rec = one(tmp_path)
    assert agg(rec) == pytest.approx([2067.8866 * TO_MB])
    assert agg(rec, "read_aggregate_MB_per_s") == pytest.approx([4900.4693 * TO_MB])
    assert int(rec.iterations["read_bytes"][0]) == 128 * MIB
    assert rec.params()["layout"] == "shared"


@pytest.mark.timeout(60)
def test_ior_text_figures_and_fsync_flags_from_its_command_line(tmp_path, capsys):
    code, _o, err = cli(capsys, "import", FIX / "fpp-write-i2.txt",
                        FIX / "fpp-write-read-fsyncperwrite.txt",
                        FIX / "glusterfs-3hosts-6ranks.txt", "--results", tmp_path)
    assert code == 0, err
    by_file = {os.path.basename(r.imported()["file"]): r for r in recs(tmp_path)}
    two = by_file["fpp-write-i2.txt"]
    assert agg(two) == pytest.approx([4329 * TO_MB, 3411.78 * TO_MB])
    assert two.params()["fsync"] is True and two.imported()["format"] == "ior-text"
    assert "params.fsync" in two.imported()["derived"]  # the text shows no fsync flag
    y = by_file["fpp-write-read-fsyncperwrite.txt"]
    assert y.attrs["ranks"] == 3 and y.params()["fsync_every"] == 1
    assert y.params()["block_size"] == 256 * 1024 and y.params()["size"] == 16 * MIB
    assert list(y.iterations["bytes"]) == [48 * MIB]
    assert agg(y) == pytest.approx([3283.43 * TO_MB])
    assert agg(y, "read_aggregate_MB_per_s") == pytest.approx([2961.29 * TO_MB])
    g = by_file["glusterfs-3hosts-6ranks.txt"]
    assert (g.attrs["ranks"], g.attrs["nodes"], g.attrs["host"]) == (6, 3, "h1")
    assert agg(g) == pytest.approx([54.05 * TO_MB])


@pytest.mark.timeout(60)
def test_ior_csv_without_and_with_the_command(tmp_path, capsys):
    code, _o, err = cli(capsys, "import", FIX / "fpp-write-i2.csv", "--results", tmp_path / "a")
    assert code == 0, err
    rec = one(tmp_path / "a")
    assert agg(rec) == pytest.approx([2889.1366 * TO_MB, 2941.1138 * TO_MB])
    assert rec.attrs["ranks"] == 2 and list(rec.iterations["bytes"]) == [128 * MIB] * 2
    assert "params.fsync" in rec.imported()["unknown"]
    from mpiwrite.answers.results import run_keys

    assert run_keys(rec)["fsync"] == "unknown" and run_keys(rec)["layout"] == "unknown"
    command = "/usr/local/bin/ior -a POSIX -w -F -e -b 64m -t 1m -i 2 -o /scratch/ior/t " \
              "-O summaryFormat=CSV"
    code, _o, err = cli(capsys, "import", FIX / "fpp-write-i2.csv", "--results", tmp_path / "b",
                        "--command", command)
    assert code == 0, err
    rec = one(tmp_path / "b")
    assert run_keys(rec)["fsync"] == "on" and run_keys(rec)["layout"] == "fpp"
    assert rec.attrs["command_line"] == command


@pytest.mark.timeout(60)
def test_ior_access_pattern_and_collective_calls_are_keys_never_pooled_with_sequential(
        tmp_path, capsys):
    """`ior -a MPIIO -c -s 128` (a shared file of 128 segments: the tasks' blocks interleave;
    collective writes) once imported as pattern=sequential with collective unknown, so
    `compare` stated a false "strided -> sequential" and `report` pooled it with sequential
    runs.  Real IOR outputs: JSON and text alike give strided and collective on; -z gives
    random; a file per process or one segment, sequential; a CSV without its command line,
    unknown."""
    from mpiwrite.answers.results import run_keys

    want = {"mpiio-collective-s128.json": ("mpiio", "strided", "on"),
            "mpiio-collective-s128.txt": ("mpiio", "strided", "on"),
            "posix-random-z.txt": ("posix", "random", None),
            "fpp-write-fsync-i3.json": ("posix", "sequential", None),
            "shared-write-read.json": ("posix", "sequential", None),
            "fpp-write-i2.txt": ("posix", "sequential", None),
            "fpp-write-i2.csv": ("unknown", "unknown", None)}
    for name, (engine, pattern, collective) in want.items():
        out = tmp_path / name.replace(".", "-")
        code, _o, err = cli(capsys, "import", FIX / name, "--results", out)
        assert code == 0, (name, err)
        keys = run_keys(one(out))
        assert (keys["engine"], keys["pattern"], keys.get("collective")) == \
            (engine, pattern, collective), name
        if engine == "mpiio":  # IOR prints no hints: not "none"
            assert keys["mpiio_hints"] == "unknown" and "params.mpiio_hints" in \
                one(out).imported()["unknown"]
            assert any("128 segments of a shared file" in n
                       for n in one(out).imported()["notes"]), name
    # never pooled: a random and a sequential shared-file POSIX test are not one row
    code, _o, err = cli(capsys, "report", tmp_path / "posix-random-z-txt",
                        tmp_path / "shared-write-read-json", "--by", "layout")
    assert code == 2 and "would pool runs with pattern random and sequential" in err, err


# -- lmdd and dd --------------------------------------------------------------------------
@pytest.mark.timeout(60)
def test_lmdd_lines_one_record_each_with_its_figures(tmp_path, capsys):
    code, _o, err = cli(capsys, "import", FIX / "lmdd-tmpfs.txt", "--results", tmp_path)
    assert code == 0, err
    got = sorted(recs(tmp_path), key=lambda r: r.run_id)
    assert [agg(r)[0] for r in got] == pytest.approx([2553.6032, 2717.1506, 1648.9647])
    assert [int(r.iterations["bytes"][0]) for r in got] == [512_000_000, 268_435_500,
                                                            3_253_000_000]
    assert all(r.attrs["ranks"] == 1 and "bytes" in r.imported()["derived"] for r in got)


@pytest.mark.timeout(60)
def test_lmdd_with_its_command_has_exact_bytes_and_fsync(tmp_path, capsys):
    first = tmp_path / "one.txt"
    first.write_text((FIX / "lmdd-tmpfs.txt").read_text().splitlines()[0] + "\n")
    code, _o, err = cli(capsys, "import", first, "--results", tmp_path / "r", "--command",
                        "lmdd if=internal of=/tmp/x bs=1m count=256 fsync=1")
    assert code == 2 and "bs x count = 268435456" in err  # not this line's command
    code, _o, err = cli(capsys, "import", first, "--results", tmp_path / "r", "--command",
                        "lmdd if=internal of=/tmp/x bs=1M count=512 fsync=1")
    assert code == 0, err
    rec = one(tmp_path / "r")
    assert int(rec.iterations["bytes"][0]) == 512_000_000 and "bytes" in rec.imported()["exact"]
    assert rec.params()["fsync"] is True and rec.params()["block_size"] == 10**6


@pytest.mark.timeout(60)
def test_an_lmdd_line_beside_an_mpiwrite_run_lists_the_methods_before_the_verdict(
        tmp_path, capsys):
    """The question that started mpiwrite, asked across tools: an lmdd line against an
    mpiwrite run of the same settings (1 MB blocks, 512 MB, fsync'd) differ first in how each
    tool times its figure; compare says so, and how each side's method moves its figure,
    before the figures and the verdict.  Two sides of one tool list none."""
    first = tmp_path / "one.txt"
    first.write_text((FIX / "lmdd-tmpfs.txt").read_text().splitlines()[0] + "\n")
    code, _o, err = cli(capsys, "import", first, "--results", tmp_path / "r", "--command",
                        "lmdd if=internal of=/tmp/x bs=1M count=512 fsync=1")
    assert code == 0, err
    for i, v in enumerate((900.0, 910.0, 905.0)):
        synth.make(tmp_path / "r" / f"m{i}.h5", [v], f"2026-m{i}", nodes=1, ranks_per_node=1,
                   per_rank=512_000_000, params={"block_size": 10**6})
    code, text, err = cli(capsys, "compare", "tool=lmdd", "tool=mpiwrite", "--in",
                          tmp_path / "r")
    assert code == 0, err
    lines = text.splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.startswith("differences of method"))
    assert at < next(i for i, ln in enumerate(lines) if "verdict:" in ln)
    assert at < next(i for i, ln in enumerate(lines) if ln.strip().startswith("A=tool=lmdd"))
    said = "\n".join(lines[at:at + 12])
    assert "timed interval: A one process's write loop" in said, said
    assert "B: the ranks' common interval" in said and "tool: A lmdd -> B mpiwrite" in said
    for same in ("fsync:", "block (transfer) size:"):  # the same on both sides: not listed
        assert same not in said, said
    code, doc, err = cli(capsys, "compare", "tool=lmdd", "tool=mpiwrite", "--in",
                         tmp_path / "r", "--json")
    doc = json.loads(doc)
    jsonschema.validate(doc, contract.schema("compare"))
    assert [m["what"] for m in doc["method_differences"]][:2] == ["tool", "timed interval"]
    code, doc, err = cli(capsys, "compare", "run_id=2026-m0", "run_id=2026-m1", "--in",
                         tmp_path / "r", "--json")
    assert code == 0 and json.loads(doc)["method_differences"] == [], err
    # explain over both tools' runs: the same differences, first, before any factor
    code, text, err = cli(capsys, "explain", tmp_path / "r")
    assert code == 0, err
    lines = text.splitlines()
    assert lines[0].startswith("differences of method, A mpiwrite against B lmdd"), text
    assert any(ln.strip().startswith("timed interval: A from the first write")
               for ln in lines[:8]), text
    code, doc, err = cli(capsys, "explain", tmp_path / "r", "--format", "json")
    doc = json.loads(doc)
    jsonschema.validate(doc, contract.schema("explain"))
    (pair,) = doc["methods"]
    assert (pair["a"], pair["b"]) == ("mpiwrite", "lmdd")
    assert [m["what"] for m in pair["differences"]][:2] == ["tool", "timed interval"]
    code, doc, err = cli(capsys, "explain", tmp_path / "r", "--where", "tool=mpiwrite",
                         "--format", "json")
    assert code == 0 and "methods" not in json.loads(doc), err  # one tool: none


@pytest.mark.timeout(60)
def test_a_real_dd_run_imported(tmp_path, capsys):
    target = tmp_path / "ddfile"
    command = f"dd if=/dev/zero of={target} bs=64K count=16 conv=fsync"
    out = subprocess.run(["dd", "if=/dev/zero", f"of={target}", "bs=64K", "count=16",
                          "conv=fsync"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    (tmp_path / "dd.txt").write_text(out.stderr)
    code, _o, err = cli(capsys, "import", tmp_path / "dd.txt", "--results", tmp_path / "r",
                        "--command", command)
    assert code == 0, err
    rec = one(tmp_path / "r")
    secs = float(out.stderr.split("copied, ")[1].split(" s,")[0])
    assert int(rec.iterations["bytes"][0]) == 16 * 65536
    assert agg(rec) == pytest.approx([16 * 65536 / secs / MB])
    assert rec.imported()["tool"] == "dd" and rec.params()["fsync"] is True
    assert rec.params()["block_size"] == 65536


# -- fio ---------------------------------------------------------------------------------
def _fio(tmp_path, fmt, *extra, rw="write"):
    if not shutil.which("fio"):
        pytest.skip("no fio")
    out = subprocess.run(["fio", "--name=w", f"--rw={rw}", "--bs=64k", "--size=1m",
                          "--numjobs=2", f"--directory={tmp_path}", "--end_fsync=1",
                          f"--output-format={fmt}", *extra],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    path = tmp_path / f"fio-{fmt}.json"
    path.write_text(out.stdout)
    return path, json.loads(out.stdout[out.stdout.index("{"):])


@pytest.mark.timeout(90)
@pytest.mark.parametrize("fmt,extra", [("json", ()), ("json+", ()),
                                       ("json", ("--group_reporting",))])
def test_a_real_fio_run_imported(tmp_path, capsys, fmt, extra):
    path, doc = _fio(tmp_path, fmt, *extra)
    code, _o, err = cli(capsys, "import", path, "--results", tmp_path / "r")
    assert code == 0, err
    rec = one(tmp_path / "r")
    jobs = doc["jobs"]
    nbytes = sum(j["write"]["io_bytes"] for j in jobs)
    runtime = max(j["write"]["runtime"] for j in jobs) / 1e3
    assert nbytes == 2 * MIB and int(rec.iterations["bytes"][0]) == nbytes
    assert agg(rec) == pytest.approx([nbytes / runtime / MB])
    assert rec.attrs["ranks"] == 2 and rec.params()["block_size"] == 65536
    assert rec.params()["fsync"] is True and rec.imported()["tool_version"].startswith("fio-")


# -- detection and refusals --------------------------------------------------------------
@pytest.mark.timeout(60)
def test_the_tool_is_told_from_the_content():
    for name, tool in (("fpp-write-fsync-i3.json", "ior"), ("fpp-write-i2.txt", "ior"),
                       ("fpp-write-i2.csv", "ior"), ("lmdd-tmpfs.txt", "lmdd")):
        assert importers.detect((FIX / name).read_text()) == tool, name
    assert importers.detect("8+0 records in\n8+0 records out\n8388608 bytes (8.4 MB, 8.0 MiB) "
                           "copied, 0.02 s, 388 MB/s\n") == "dd"
    assert importers.detect('{\n"fio version" : "fio-3.33",\n"jobs": []}') == "fio"
    assert importers.detect("hello\n") is None


def _refused(capsys, tmp_path, path, *more):
    code, out, err = cli(capsys, "import", path, "--results", tmp_path / "r", *more)
    assert code == 2, (out, err)
    assert len(err.strip().splitlines()) == 1, err  # one line
    assert str(path) in err
    assert not list((tmp_path / "r").glob("*.h5")) if (tmp_path / "r").exists() else True
    return err


@pytest.mark.timeout(60)
def test_truncated_ior_json_is_refused(tmp_path, capsys):
    text = (FIX / "fpp-write-fsync-i3.json").read_text()
    cut = tmp_path / "cut.json"
    cut.write_text(text[: len(text) // 2])
    assert "not valid JSON" in _refused(capsys, tmp_path, cut)


@pytest.mark.timeout(60)
def test_another_tools_output_is_refused(tmp_path, capsys):
    err = _refused(capsys, tmp_path, FIX / "lmdd-tmpfs.txt", "--from", "ior")
    assert "--from ior, but the file is lmdd output" in err
    odd = tmp_path / "odd.json"
    odd.write_text('{"tests": 1}')
    assert f"not the output of {importers.known_tools()}" in _refused(capsys, tmp_path, odd)


@pytest.mark.timeout(60)
def test_ior_json_with_errors_printed_into_it_is_refused(tmp_path, capsys):
    err = _refused(capsys, tmp_path, FIX / "glusterfs-3hosts-json-broken-by-warning.json")
    assert "error(s) into its JSON" in err and "open64" in err


@pytest.mark.timeout(60)
def test_ior_json_with_a_warning_printed_into_it_is_repaired_with_a_warning(tmp_path, capsys):
    text = (FIX / "fpp-write-fsync-i3.json").read_text()
    # where IOR printed it on the GlusterFS mount: right after StartTime's value
    broken = text.replace('"StartTime": "Tue Dec  1 09:02:33 2026"',
                          '"StartTime": "Tue Dec  1 09:02:33 2026"WARNING: Backend returned '
                          'error during statfs\n', 1)
    assert broken != text
    path = tmp_path / "warned.json"
    path.write_text(broken)
    with pytest.raises(ValueError):
        json.loads(broken)
    code, _o, err = cli(capsys, "import", path, "--results", tmp_path / "r")
    assert code == 0, err
    assert "warning" in err and "Backend returned error during statfs" in err
    rec = one(tmp_path / "r")
    assert agg(rec) == pytest.approx([x * TO_MB for x in (3924.4663, 4429.5549, 3566.0402)])
    assert any("statfs" in w for w in rec.warnings())
    assert rec.imported()["repairs"]


@pytest.mark.timeout(60)
def test_cut_short_dd_and_a_failed_fio_job_are_refused(tmp_path, capsys):
    dd = tmp_path / "dd.txt"
    dd.write_text("8+0 records in\n8+0 records out\n")
    assert "cut short" in _refused(capsys, tmp_path, dd, "--from", "dd")
    full = tmp_path / "full.txt"
    full.write_text("dd: error writing '/x': No space left on device\n3+0 records in\n"
                    "2+0 records out\n2097152 bytes (2.1 MB, 2.0 MiB) copied, 0.01 s, 210 MB/s\n")
    assert "No space left" in _refused(capsys, tmp_path, full)
    fio = tmp_path / "fio.json"
    fio.write_text(json.dumps({"fio version": "fio-3.33", "jobs": [
        {"jobname": "w", "groupid": 0, "error": 28, "write": {}}]}))
    assert "error 28" in _refused(capsys, tmp_path, fio)
    noted = tmp_path / "noted.json"
    noted.write_text("fio: pid=1, err=28/file:io_u.c:1889, func=io_u error, error=No space "
                     "left on device\n" + json.dumps({"fio version": "fio-3.33", "jobs": []}))
    assert "No space left" in _refused(capsys, tmp_path, noted)


@pytest.mark.timeout(60)
def test_a_fifo_and_a_huge_file_are_refused_without_reading(tmp_path, capsys):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert "not a regular file" in _refused(capsys, tmp_path, fifo)
    big = tmp_path / "big.txt"
    with open(big, "wb") as f:
        f.truncate(imported.MAX_INPUT_BYTES + 1)
    assert "larger than 64 MiB" in _refused(capsys, tmp_path, big)


@pytest.mark.timeout(60)
def test_one_bad_file_means_no_record_at_all(tmp_path, capsys):
    bad = tmp_path / "bad.txt"
    bad.write_text("nothing here\n")
    code, _o, _e = cli(capsys, "import", FIX / "fpp-write-i2.txt", bad, "--results",
                       tmp_path / "r")
    assert code == 2 and not list((tmp_path / "r").glob("*.h5"))


@pytest.mark.timeout(60)
def test_control_characters_in_a_refused_file_name_are_escaped(tmp_path, capsys):
    bad = tmp_path / "a\x1b[2Jb.txt"
    bad.write_text("x\n")
    code, _o, err = cli(capsys, "import", bad, "--results", tmp_path / "r")
    assert code == 2 and "\x1b" not in err and "\\x1b" in err


# -- the same file twice ------------------------------------------------------------------
@pytest.mark.timeout(60)
def test_importing_the_same_file_twice_counts_it_once(tmp_path, capsys):
    copy = tmp_path / "copy.json"
    copy.write_bytes((FIX / "fpp-write-fsync-i3.json").read_bytes())
    code, out, _e = cli(capsys, "import", FIX / "fpp-write-fsync-i3.json", "--results",
                        tmp_path / "r")
    assert code == 0 and "1 record(s) made" in out
    code, out, err = cli(capsys, "import", copy, "--results", tmp_path / "r", "--tag", "x=1")
    assert code == 0 and "0 record(s) made, 1 already there" in out
    assert "already imported" in err
    rec = one(tmp_path / "r")
    assert rec.tags() == {}  # the first import's record is unchanged
    assert not [n for n in os.listdir(tmp_path / "r") if n.startswith(".")]


# -- tags and facts in report and compare --------------------------------------------------
@pytest.mark.timeout(60)
def test_tags_and_stated_facts_group_reports(tmp_path, capsys):
    lines = (FIX / "lmdd-tmpfs.txt").read_text().splitlines()
    (tmp_path / "on.txt").write_text(lines[0] + "\n")
    (tmp_path / "off.txt").write_text(lines[1] + "\n")
    res = tmp_path / "r"
    code, _o, err = cli(capsys, "import", tmp_path / "on.txt", "--results", res, "--command",
                        "lmdd of=/x bs=1M count=512 fsync=1", "--tag", "build=1.6.5",
                        "--fact", "checksums=on", "--fact", "lustre=1.6.5")
    assert code == 0, err
    code, _o, err = cli(capsys, "import", tmp_path / "off.txt", "--results", res, "--command",
                        "lmdd of=/x bs=1m count=256 fsync=1", "--tag", "build=1.6.4",
                        "--fact", "checksums=off", "--fact", "lustre=1.6.4.3")
    assert code == 0, err
    code, out, err = cli(capsys, "report", res, "--by", "checksums,lustre,build,block_size",
                         "--format", "json")
    assert code == 0, err
    rows = {r["keys"]["checksums"]: r for r in json.loads(out)["rows"]}
    assert rows["on"]["keys"]["build"] == "1.6.5" and rows["on"]["keys"]["lustre"] == "1.6.5"
    assert rows["on"]["mean_MB_per_s"] == pytest.approx(2553.6032)
    assert rows["off"]["mean_MB_per_s"] == pytest.approx(2717.1506)
    rec = [r for r in recs(res) if r.tags().get("build") == "1.6.5"][0]
    assert rec.imported()["stated_facts"] == {"checksums": "on", "lustre": "1.6.5"}
    code, _o, err = cli(capsys, "import", tmp_path / "on.txt", "--results", tmp_path / "x",
                        "--fact", "ranks=4")
    assert code == 2 and "read from the file" in err


@pytest.mark.timeout(60)
def test_report_by_tag_and_compare_across_imported_and_native_runs(tmp_path, capsys):
    res = tmp_path / "r"
    res.mkdir()
    for i, v in enumerate((3900.0, 4000.0, 4100.0)):
        synth.make(str(res / f"native{i}.h5"), [v], f"20261201T1000{i:02d}Z-aaaa{i:02d}",
                   tags={"site": "a"})
    code, _o, err = cli(capsys, "import", FIX / "fpp-write-fsync-i3.json", "--results", res,
                        "--tag", "site=a", "--fact", "lustre=2.15.5")
    assert code == 0, err
    code, out, err = cli(capsys, "report", res, "--by", "tool,site", "--format", "json")
    assert code == 0, err
    rows = {r["keys"]["tool"]: r for r in json.loads(out)["rows"]}
    assert rows["mpiwrite"]["runs"] == 3 and rows["ior"]["runs"] == 1
    assert rows["ior"]["mean_MB_per_s"] == pytest.approx(
        sum(x * TO_MB for x in (3924.4663, 4429.5549, 3566.0402)) / 3)
    code, out, err = cli(capsys, "compare", "tool=mpiwrite", "tool=ior", "--in", res, "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["a"]["runs"] == 3 and doc["b"]["runs"] == 1
    diff = doc["differing_facts"]
    assert diff["lustre"] == {"a": ["1.6.5"], "b": ["2.15.5"]}  # measured vs stated
    assert diff["tool_version"]["b"] == ["4.1.0+dev"]  # tool itself: chosen by both sides
    code, out, err = cli(capsys, "compare", "tool=mpiwrite", "tool=ior", "--in", res,
                         "--metric", "ior")
    assert code == 0 and "verdict" in out, err
    code, out, err = cli(capsys, "report", res, "--by", "tag.site,tool", "--format", "json")
    assert code == 0, err  # tag.NAME names a tag on native and imported records alike
    assert {(r["keys"]["tag.site"], r["keys"]["tool"]) for r in json.loads(out)["rows"]} == {
        ("a", "mpiwrite"), ("a", "ior")}
    code, out, err = cli(capsys, "report", res, "--by", "tool", "--metric", "rank-mean")
    assert code == 0 and "without a rank-mean figure" in err  # imported: no per-rank rows


@pytest.mark.timeout(60)
def test_show_and_the_python_api_read_imported_records(tmp_path, capsys):
    code, _o, err = cli(capsys, "import", FIX / "shared-write-read.json", "--results", tmp_path,
                        "--fact", "checksums=on")
    assert code == 0, err
    rec = one(tmp_path)
    code, out, err = cli(capsys, "show", rec.path)
    assert code == 0, err
    assert "imported from ior 4.1.0+dev" in out and "per rank: none" in out
    assert "stated by the user, not measured: checksums=on" in out
    if importlib.util.find_spec("matplotlib"):  # plot's own refusal comes after its import
        code, _o, err = cli(capsys, "plot", "ranks", rec.path, "-o", tmp_path / "r.png")
        assert code == 2 and "no per-rank figures" in err
    code, _o, err = cli(capsys, "explain", rec.path)  # one record: its ranks, and it has none
    assert code == 2 and "no per-rank figures (imported from ior)" in err
    pd = pytest.importorskip("pandas")
    from mpiwrite.answers.results import load

    frames = load(str(tmp_path))
    assert isinstance(frames["runs"], pd.DataFrame)
    assert list(frames["runs"]["tool"]) == ["ior"] and len(frames["ranks"]) == 0
    assert frames["iterations"]["read_aggregate_MB_per_s"][0] == pytest.approx(4900.4693 * TO_MB)


@pytest.mark.timeout(60)
def test_a_damaged_provenance_is_refused_by_the_record_check(tmp_path):
    src, tests = importers.read_tests(str(FIX / "fpp-write-i2.txt"))
    rec = imported.build(tests[0], src, {}, {})
    rec.attrs["imported"]["sha256"] = "not-a-digest"
    path = tmp_path / "bad.h5"
    records.write(rec, str(path))
    from mpiwrite.errors import RecordError

    with pytest.raises(RecordError, match="imported.sha256"):
        read_record(str(path))


@pytest.mark.timeout(90)
def test_a_real_fio_note_before_its_json_is_removed_with_a_warning(tmp_path, capsys):
    """fio prints `note: both iodepth >= 1 and synchronous I/O engine ...` on stdout, before
    its JSON: the note is left out with a warning, the JSON read whole."""
    path, _doc = _fio(tmp_path, "json", "--iodepth=4", "--ioengine=psync")
    assert path.read_text().startswith("note: ")
    code, _o, err = cli(capsys, "import", path, "--results", tmp_path / "r")
    assert code == 0, err
    assert "warning" in err and "before fio's JSON" in err and "note: both iodepth" in err
    rec = one(tmp_path / "r")
    assert int(rec.iterations["bytes"][0]) == 2 * MIB and rec.imported()["repairs"]


@pytest.mark.timeout(90)
def test_a_real_fio_run_that_writes_and_reads_fills_both_columns(tmp_path, capsys):
    path, doc = _fio(tmp_path, "json", rw="readwrite")
    code, _o, err = cli(capsys, "import", path, "--results", tmp_path / "r")
    assert code == 0, err
    rec = one(tmp_path / "r")
    for op, col, bcol in (("write", "aggregate_MB_per_s", "bytes"),
                          ("read", "read_aggregate_MB_per_s", "read_bytes")):
        nbytes = sum(j[op]["io_bytes"] for j in doc["jobs"])
        runtime = max(j[op]["runtime"] for j in doc["jobs"]) / 1e3
        assert nbytes > 0 and int(rec.iterations[bcol][0]) == nbytes, op
        assert agg(rec, col) == pytest.approx([nbytes / runtime / MB]), op
    code, out, err = cli(capsys, "report", tmp_path / "r", "--by", "tool", "--metric", "read")
    assert code == 0 and "fio" in out, err


@pytest.mark.timeout(60)
def test_without_hard_links_the_record_is_still_created_once(tmp_path, capsys, monkeypatch):
    import errno

    def no_link(*_a, **_k):
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_link)
    for made in ("1 record(s) made", "0 record(s) made, 1 already there"):
        code, out, err = cli(capsys, "import", FIX / "fpp-write-i2.txt", "--results",
                             tmp_path / "r")
        assert code == 0 and made in out, err
    assert one(tmp_path / "r").imported()["format"] == "ior-text"
    assert sorted(os.listdir(tmp_path / "r")) == [os.path.basename(one(tmp_path / "r").path)]


@pytest.mark.timeout(60)
def test_node_facts_from_mpiwrite_env_become_the_node_row(tmp_path, capsys):
    code, out, _e = cli(capsys, "env", "--json", tmp_path)
    assert code == 0
    env = tmp_path / "env.json"
    env.write_text(out)
    facts = json.loads(out)
    code, _o, err = cli(capsys, "import", FIX / "fpp-write-i2.txt", "--results", tmp_path / "r",
                        "--node-facts", env, "--fact", "checksums=on")
    assert code == 0, err
    rec = one(tmp_path / "r")
    assert len(rec.nodes) == 1 and rec.nodes[0]["host"] == facts["host"]
    from mpiwrite.answers.results import run_keys

    keys = run_keys(rec)
    assert keys["kernel"] == facts["kernel"] and keys["checksums"] == "on"  # --fact wins
    assert keys["fstype"] == facts["fs"]["fstype"] and keys["cpu_model"] == facts["cpu_model"]
    assert "kernel" not in rec.imported()["unknown"]
    assert rec.imported()["node_facts"]["host"] == facts["host"]
    code, out, err = cli(capsys, "show", rec.path)
    assert code == 0 and "node facts:" in out, err
    bad = tmp_path / "bad.json"
    bad.write_text('{"host": 3}')
    code, _o, err = cli(capsys, "import", FIX / "fpp-write-i2.txt", "--results", tmp_path / "x",
                        "--node-facts", bad)
    assert code == 2 and "--node-facts" in err


@pytest.mark.timeout(60)
def test_ior_json_with_two_tests_gives_two_records(tmp_path, capsys):
    doc = json.loads((FIX / "fpp-write-fsync-i3.json").read_text())
    second = json.loads(json.dumps(doc["tests"][0]))
    second["TestID"] = second["Parameters"]["testID"] = 1
    second["Parameters"]["repetitions"] = 1
    second["Results"] = second["Results"][:1]
    doc["tests"].append(second)
    summary = dict(doc["summary"][0], TestID=1, repetitions=1,
                   bwMeanMIB=second["Results"][0]["bwMiB"])
    doc["summary"].append(summary)
    path = tmp_path / "two.json"
    path.write_text(json.dumps(doc))
    code, out, err = cli(capsys, "import", path, "--results", tmp_path / "r")
    assert code == 0 and "2 record(s) made" in out, err
    got = {r.run_id[-1]: r for r in recs(tmp_path / "r")}
    assert len(got["0"].iterations) == 3 and len(got["1"].iterations) == 1
    assert got["1"].imported()["test"] == "test 1"
    second["Results"] = []  # a test that announced a repetition and has none: refused
    path.write_text(json.dumps(doc))
    assert "0 of 1 repetitions" in _refused(capsys, tmp_path / "b", path)


@pytest.mark.timeout(120)
def test_the_readme_question_on_imported_lmdd_lines(tmp_path):
    """The README's example, its shell block run as it stands (printf the lmdd lines, import
    them with stated facts and a tag, explain): checksums first (about 92%), the Lustre build
    second, the missing combination named; the lines the README shows are what explain
    prints, in order."""
    from common import BIN, TEST_CACHE, bounded
    from common import cli as mw

    readme = (ROOT / "README.md").read_text()
    head, block = readme.split("mpiwrite explain lmdd-history\n```\n```\n")
    script = head[head.rindex("```sh\n") + len("```sh\n"):] + "mpiwrite explain lmdd-history\n"
    env = dict(os.environ, PATH=f"{BIN}:{os.environ['PATH']}", MPIWRITE_CACHE=TEST_CACHE)
    out = bounded(["bash", "-euc", script], 120, cwd=str(tmp_path), env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    printed = out.stdout.splitlines()
    at = 0
    for line in block.split("```")[0].strip().splitlines():
        if line != "...":
            assert line in printed[at:], (line, out.stdout)
            at = printed.index(line, at) + 1
    assert len(list((tmp_path / "lmdd-history").glob("*.h5"))) == 9
    doc = json.loads(mw(["explain", "lmdd-history", "--format", "json"], cwd=tmp_path).stdout)
    assert doc["factors"][0]["keys"] == ["checksums"]
    assert 0.9 < doc["factors"][0]["variance_share"] < 0.93
    assert doc["outcomes"] == ["size"]  # time=200: the bytes are the rate times 200
    assert doc["factors"][1]["keys"] == ["lustre"]
    assert doc["same_everywhere"]["site"] == "b"  # the tag, on every imported record


@pytest.mark.timeout(90)
def test_a_random_mixed_fio_job_is_not_pooled_with_a_sequential_write(tmp_path, capsys):
    """fio's rw, rwmixread, iodepth and ioengine are run keys and durability keys: a
    `rw=randrw rwmixread=70` job is not a plain write, and report never pools the two."""
    res = tmp_path / "r"
    code, _o, err = cli(capsys, "import", FIX / "fio-randrw70-libaio.json", "--results", res)
    assert code == 0, err
    keys = one(res).keys()
    assert (keys["rw"], keys["rwmixread"], keys["iodepth"], keys["ioengine"]) == (
        "randrw", "70", "4", "libaio")
    # the same engine, block size, fsync and layout as fio-write-2jobs.json: only rw differs
    path, _doc = _fio(tmp_path, "json", rw="randrw")
    code, _o, err = cli(capsys, "import", FIX / "fio-write-2jobs.json", path, "--results",
                        tmp_path / "s")
    assert code == 0, err
    code, _o, err = cli(capsys, "report", tmp_path / "s")
    assert code == 2 and "rw" in err and "randrw and write" in err, err
    code, out, err = cli(capsys, "report", tmp_path / "s", "--by", "rw", "--format", "json")
    assert code == 0, err
    assert {r["keys"]["rw"] for r in json.loads(out)["rows"]} == {"randrw", "write"}


def _fio_variant(tmp_path, name, change):
    """The real two-job write with its jobs' options changed by `change(i, options)`."""
    doc = json.loads((FIX / "fio-write-2jobs.json").read_text())
    for i, job in enumerate(doc["jobs"]):
        change(i, job["job options"])
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.timeout(60)
@pytest.mark.parametrize("option, value, said", [
    ("rw", "sideways", "not one of fio's"), ("rw", "write:x", "not one of fio's"),
    ("iodepth", "0", "positive whole number"), ("iodepth", "-4", "positive whole number"),
    ("rwmixread", "140", "percentage"), ("rwmixwrite", "abc", "percentage")])
def test_fio_options_are_checked_against_fios_own_values(tmp_path, capsys, option, value,
                                                         said):
    path = _fio_variant(tmp_path, "bad", lambda i, o: o.__setitem__(option, value))
    assert said in _refused(capsys, tmp_path, path)


@pytest.mark.timeout(60)
def test_a_group_of_differing_fio_jobs_is_refused_and_a_job_without_rw_is_what_it_did(
        tmp_path, capsys):
    """Two jobs of one group with other block sizes are two measurements, not the first
    job's; a write-only job whose options name no rw is a write (fio's default is read)."""
    differ = _fio_variant(tmp_path, "differ",
                          lambda i, o: o.__setitem__("bs", "64k" if i == 0 else "1m"))
    assert "differ in bs" in _refused(capsys, tmp_path, differ)
    bare = _fio_variant(tmp_path, "bare", lambda i, o: o.pop("rw"))
    code, _o, err = cli(capsys, "import", bare, "--results", tmp_path / "r")
    assert code == 0, err
    assert one(tmp_path / "r").keys()["rw"] == "write"


@pytest.mark.timeout(60)
def test_ior_names_its_mpi_library_unknown_and_takes_it_as_a_stated_fact(tmp_path, capsys):
    """IOR prints no MPI library (its header: banner, Began, Command line, Machine; none of
    the real outputs names one): the record says so, and `--fact mpi=...` states it."""
    for name in FIXTURES_IOR:
        assert "Open MPI" not in (FIX / name).read_text() and "MPICH" not in (
            FIX / name).read_text()
    code, _o, err = cli(capsys, "import", FIX / "fpp-write-i2.txt", "--results", tmp_path / "a")
    assert code == 0, err
    rec = one(tmp_path / "a")
    assert "mpi" in rec.imported()["unknown"] and rec.keys().get("mpi", "unknown") == "unknown"
    code, _o, err = cli(capsys, "import", FIX / "fpp-write-i2.txt", "--results", tmp_path / "b",
                        "--fact", "mpi=Open MPI v4.1.4")
    assert code == 0, err
    rec = one(tmp_path / "b")
    from mpiwrite.formats.runkeys import run_keys

    assert run_keys(rec)["mpi"] == "Open MPI v4.1.4"
    assert rec.imported()["stated_facts"] == {"mpi": "Open MPI v4.1.4"}
    assert "mpi" not in rec.imported()["unknown"]


@pytest.mark.timeout(120)
def test_a_runs_own_json_imported_elsewhere_counts_once_beside_its_record(tmp_path, capsys):
    """`run --json` kept, then imported into another folder: reading both folders finds one
    run (its record kept: it has the per-rank rows), not a conflict where none counts."""
    import subprocess

    from common import MPIWRITE, clean_env

    out = subprocess.run([MPIWRITE, "run", str(tmp_path / "d"), "-s", "1M", "-i", "2",
                          "--results", str(tmp_path / "own"), "--json", str(tmp_path / "r.json"),
                          "--progress-interval", "0"], cwd=tmp_path, capture_output=True,
                         text=True, timeout=90, env=clean_env())
    assert out.returncode == 0, out.stderr
    code, _o, err = cli(capsys, "import", tmp_path / "r.json", "--results", tmp_path / "imp")
    assert code == 0, err
    code, out, err = cli(capsys, "report", tmp_path / "own", tmp_path / "imp", "--format",
                         "json")
    assert code == 0, err
    (row,) = json.loads(out)["rows"]
    assert row["runs"] == 1 and "conflict" not in err, err


FIXTURES_IOR = ("fpp-write-fsync-i3.json", "shared-write-read.json", "fpp-write-i2.txt",
                "fpp-write-i2.csv", "fpp-write-read-fsyncperwrite.txt",
                "glusterfs-3hosts-6ranks.txt", "glusterfs-3hosts-json-broken-by-warning.json")


@pytest.mark.timeout(60)
def test_mpiwrite_own_run_json_becomes_a_record_of_what_it_states(tmp_path, capsys):
    """A real `mpiwrite run --json` (a run with --no-record): told from its content, imported
    under the run's own id, with its iterations, settings, keys and tags as it states them."""
    path = FIX / "mpiwrite-run.json"
    doc = json.loads(path.read_text())
    res = tmp_path / "r"
    code, out, err = cli(capsys, "import", path, "--results", res, "--tag", "site=a")
    assert code == 0, err
    rec = one(res)
    assert rec.run_id == doc["run_id"] and rec.imported()["tool"] == "mpiwrite"
    assert rec.imported()["format"] == "mpiwrite-json"
    its = doc["iterations"]
    assert agg(rec) == pytest.approx([i["aggregate_MB_per_s"] for i in its])
    assert agg(rec, "first_done_MB_per_s") == pytest.approx(
        [i["first_done_MB_per_s"] for i in its])
    assert agg(rec, "aggregate_with_open_MB_per_s") == pytest.approx(
        [i["aggregate_with_open_MB_per_s"] for i in its])
    assert list(rec.iterations["bytes"]) == [i["bytes"] for i in its]
    assert (rec.attrs["ranks"], rec.attrs["nodes"]) == (doc["ranks"], doc["nodes"])
    assert rec.attrs["start_time"] == doc["start_time"]
    p = rec.params()
    assert (p["block_size"], p["size"], p["fsync"], p["layout"]) == (MIB, 4 * MIB, True, "fpp")
    keys = rec.keys()
    assert keys["kernel"] == doc["keys"]["kernel"] and keys["fstype"] == "ext4"
    assert keys["fsync"] == "on" and keys["block_size"] == "1MiB"
    assert rec.tags() == {"site": "a"}
    code, _o, err = cli(capsys, "import", path, "--results", res, "--from", "mpiwrite-json")
    assert code == 0 and "already imported" in err
    bad = tmp_path / "failed.json"
    bad.write_text(path.read_text().replace('"status": "complete"', '"status": "failed"'))
    assert "only a complete run" in _refused(capsys, tmp_path / "x", bad)


# -- elbencho ----------------------------------------------------------------------------
def _elbencho_rows(name):
    """The fixture's data-moving phases, read here without the importer: CSV rows or JSON
    objects, in the file's order."""
    import csv

    text = (FIX / name).read_text()
    if name.endswith(".json"):
        return [d for d in map(json.loads, text.splitlines()) if d["phase_type"] in
                ("WRITE", "READ")]
    return [r for r in csv.DictReader(text.splitlines()) if r["operation"] in ("WRITE", "READ")]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", ["elbencho-3.1.csv", "elbencho-3.1.json"])
def test_elbencho_csv_and_json_figures_are_the_files(tmp_path, capsys, name):
    """elbencho 3.1 (built here from breuner/elbencho), a folder run (2 threads x 4 files x
    64 MiB, write then read, --sync) and a shared file (2 threads, 128 MiB, --direct --rand):
    each WRITE with its READ one run, its figures the file's: the CSV's whole MiB/s x 1.048576,
    the JSON's bytes/s exactly; first done and the tail from its first and last worker."""
    code, _out, err = cli(capsys, "import", FIX / name, "--results", tmp_path)
    assert code == 0, err
    got = sorted(recs(tmp_path), key=lambda r: r.imported()["index"])
    rows = _elbencho_rows(name)
    writes = [r for r in rows if r.get("operation", r.get("phase_type")) == "WRITE"]
    assert len(got) == len(writes) == 2
    for rec, w in zip(got, writes):
        it = rec.iterations[0]
        imp = rec.imported()
        assert imp["tool"] == "elbencho" and imp["tool_version"] == "3.1-10"
        if name.endswith(".json"):
            last, first = w["last_done"], w["first_done"]
            assert agg(rec) == [int(last["bytes/s"]) / MB]
            assert float(it["first_done_MB_per_s"]) == int(first["bytes/s"]) / MB
            assert int(it["bytes"]) == int(last["bytes"])
            tail = (int(last["elapsed_time_ms"]) - int(first["elapsed_time_ms"])) / 1e3
            threads = int(w["config"]["threads"])
        else:
            assert agg(rec) == [int(w["MiB/s [last]"]) * TO_MB]
            assert float(it["first_done_MB_per_s"]) == int(w["MiB/s [first]"]) * TO_MB
            assert int(it["bytes"]) // MIB == int(w["MiB [last]"])
            tail = (int(w["time ms [last]"]) - int(w["time ms [first]"])) / 1e3
            threads = int(w["threads"])
        assert float(it["tail_seconds"]) == pytest.approx(tail)
        assert rec.attrs["ranks"] == threads and rec.attrs["nodes"] == 1
        assert "elbencho" in rec.attrs["command_line"] and imp["command_source"] == "file"
    folder, shared = got
    keys = [r.keys() for r in got]
    assert (keys[0]["layout"], keys[0]["direct"], keys[0]["pattern"]) == ("fpp", "off",
                                                                          "sequential")
    assert (keys[1]["layout"], keys[1]["direct"], keys[1]["pattern"]) == ("shared", "on",
                                                                          "random")
    assert {k["fsync"] for k in keys} == {"off"}  # --sync is a phase of its own
    assert int(folder.iterations["bytes"][0]) == 2 * 4 * 64 * MIB
    read = next(r for r in rows if r.get("operation", r.get("phase_type")) == "READ")
    want = (int(read["last_done"]["bytes/s"]) / MB if name.endswith(".json")
            else int(read["MiB/s [last]"]) * TO_MB)
    assert agg(folder, "read_aggregate_MB_per_s") == [want]
    assert not (shared.iterations["read_aggregate_MB_per_s"] == shared.iterations[
        "read_aggregate_MB_per_s"]).any()  # NaN: no read phase
    notes = " ".join(folder.imported()["notes"])
    assert "SYNC phase of" in notes and "MKDIRS" in notes and "RMFILES" in notes


@pytest.mark.timeout(60)
def test_elbencho_files_cut_short_or_inconsistent_are_refused_whole(tmp_path, capsys):
    text = (FIX / "elbencho-3.1.csv").read_text()
    lines = text.splitlines()
    cut = tmp_path / "cut.csv"
    cut.write_text("\n".join(lines[:-1] + [lines[-1][:60]]) + "\n")
    code, _o, err = cli(capsys, "import", cut, "--results", tmp_path / "r1")
    assert code == 2 and "cells for" in err and err.count("\n") == 1, err
    assert not (tmp_path / "r1").exists() or not list((tmp_path / "r1").glob("*.h5"))
    # a WRITE row whose MiB [last] is not what its settings move: not one run's row
    import csv
    import io

    rows = list(csv.reader(io.StringIO(text)))
    at = rows[0].index("MiB [last]")
    for r in rows[1:]:
        if r[rows[0].index("operation")] == "WRITE":
            r[at] = str(int(r[at]) + 7)
            break
    bad = tmp_path / "bad.csv"
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    bad.write_text(buf.getvalue())
    code, _o, err = cli(capsys, "import", bad, "--results", tmp_path / "r2")
    assert code == 2 and "not one run's row" in err, err
    jbad = tmp_path / "bad.json"
    jtext = (FIX / "elbencho-3.1.json").read_text()  # elbencho escapes the slash: bytes\/s
    assert '"bytes\\/s":"' in jtext
    jbad.write_text(jtext.replace('"bytes\\/s":"', '"bytes\\/s":"-', 1))
    code, _o, err = cli(capsys, "import", jbad, "--results", tmp_path / "r3")
    assert code == 2 and "bytes/s" in err, err


# -- IO500 -------------------------------------------------------------------------------
IO500 = FIX / "io500-isc26"


def _io500_phases():
    """{phase: (score GiB/s, IOR's bytes moved, ERROR INVALID reasons)} read from the
    fixture's own files, apart from the importer."""
    import re

    out, name = {}, None
    for line in (IO500 / "result.txt").read_text().splitlines():
        if line.startswith("["):
            name = line.strip("[] ")
            out[name] = [None, None, []]
        elif line.startswith("score"):
            out[name][0] = float(line.split("=")[1])
        elif line.startswith("; ERROR INVALID"):
            out[name][2].append(line[len("; ERROR INVALID"):].strip())
    for phase in ("ior-easy-write", "ior-hard-write"):
        log = (IO500 / f"{phase}.txt").read_text()
        out[phase][1] = int(re.search(r"actual aggregate bytes moved = (\d+)", log).group(1))
    return out


@pytest.mark.timeout(60)
def test_an_io500_result_folder_imports_its_write_phases_exactly(tmp_path, capsys):
    """A result folder of the real io500 (isc26, IOR 4.1.0+dev, 2 ranks, a 2 s stonewall, so
    invalid by IO500's rules): ior-easy-write and ior-hard-write become runs whose MB/s is
    IO500's score x 2^30 / 10^6 exactly and whose bytes are IOR's own count; easy is a
    file per process, hard a strided shared file; IO500's verdict, its config hash and its
    score hash are kept; the folder and its result.txt are the same file (imported once)."""
    code, _out, err = cli(capsys, "import", IO500, "--results", tmp_path)
    assert code == 0, err
    got = {r.params()["preset"]: r for r in recs(tmp_path)}
    want = _io500_phases()
    assert sorted(got) == ["ior-easy-write", "ior-hard-write"]
    for phase, rec in got.items():
        score, moved, invalid = want[phase]
        it = rec.iterations[0]
        assert agg(rec) == [score * 2**30 / MB]
        assert int(it["bytes"]) == moved
        assert rec.attrs["ranks"] == 2 and rec.status == "complete"
        imp = rec.imported()
        assert imp["tool"] == "io500" and imp["tool_version"].startswith("io500-isc26")
        (own,) = imp["original"]
        assert own["config_hash"] == "D7D60658" and own["score_hash"] != "unknown"
        assert own["io500_valid"] is False
        assert own["io500_invalid"] == want["run"][2] + invalid and invalid
        assert rec.params()["stonewall"] == 2
    easy, hard = got["ior-easy-write"].params(), got["ior-hard-write"].params()
    assert (easy["layout"], easy["pattern"], easy["block_size"]) == ("fpp", "sequential", MIB)
    assert (hard["layout"], hard["pattern"], hard["block_size"]) == ("shared", "strided", 47008)
    shown = subprocess.run([sys.executable, "-m", "mpiwrite", "show",
                            got["ior-hard-write"].path], capture_output=True, text=True,
                           timeout=60, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert "IO500: not valid: IO500 asks a 300s stonewall" in shown.stdout, shown.stderr
    assert "IO500 marked this phase invalid: stonewall-time 2s != 300s" in shown.stdout
    code, out, err = cli(capsys, "import", IO500 / "result.txt", "--results", tmp_path)
    assert code == 0 and "0 record(s) made, 2 already there" in out, (out, err)


@pytest.mark.timeout(60)
def test_an_io500_folder_with_a_planted_log_or_a_bad_score(tmp_path, capsys):
    """The files beside result.txt are read as regular files only: a symlink planted for
    IOR's log is not followed (the bytes come from the per-rank CSV instead, said so); a
    score that is not a number is one line and exit 2, nothing made."""
    folder = tmp_path / "res"
    shutil.copytree(IO500, folder)
    (tmp_path / "elsewhere.txt").write_text("Using actual aggregate bytes moved = 1\n")
    (folder / "ior-hard-write.txt").unlink()
    (folder / "ior-hard-write.txt").symlink_to(tmp_path / "elsewhere.txt")
    code, _out, err = cli(capsys, "import", folder, "--results", tmp_path / "r")
    assert code == 0, err
    (hard,) = [r for r in recs(tmp_path / "r") if r.params()["preset"] == "ior-hard-write"]
    rows = (IO500 / "ior-hard-write.csv").read_text().splitlines()[1:]
    want = round(sum(float(r.split(",")[4]) * float(r.split(",")[2]) for r in rows))
    assert int(hard.iterations[0]["bytes"]) == want != 1
    assert "per-rank CSV" in hard.imported()["derived"]["bytes"]
    text = (IO500 / "result.txt").read_text().replace("score           = 0.222782",
                                                      "score           = nan", 1)
    (folder / "result.txt").write_text(text)
    code, _out, err = cli(capsys, "import", folder, "--results", tmp_path / "r2")
    assert code == 2 and err.count("\n") == 1 and "phase ior-hard-write: score" in err, err
    assert not list((tmp_path / "r2").glob("*.h5")) if (tmp_path / "r2").exists() else True


# -- Darshan -----------------------------------------------------------------------------
DARSHAN_IOR = FIX / "darshan-3.2.1-ior-hdf5.darshan"
DARSHAN_WRITE = FIX / "darshan-3.2.1-write-only.darshan"


DARSHAN_OWN = """
import json, sys
import darshan
from darshan.backend.cffi_backend import accumulate_records
rep = darshan.DarshanReport(sys.argv[1], read_all=True)
nprocs = rep.metadata["job"]["nprocs"]
posix = rep.records["POSIX"].to_df()["counters"]
acc = accumulate_records(rep.records[sys.argv[2]].to_df(), sys.argv[2], nprocs)
print(json.dumps([nprocs, int(posix["POSIX_BYTES_WRITTEN"].sum()),
                  acc.derived_metrics.agg_perf_by_slowest]))
"""


def _darshan_own(path, module):
    """What the darshan package itself says of a log: (nprocs, POSIX bytes written, the
    module's aggregate performance by the slowest rank in MiB/s, all I/O, as it computes it).
    In a process of its own: the package's report, collected in a test worker, once hung in
    cffi's lock (its __del__ closing the log)."""
    pytest.importorskip("darshan", reason="the `darshan` extra (in test-full)")
    out = subprocess.run([sys.executable, "-c", DARSHAN_OWN, str(path), module],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    nprocs, written, mib = json.loads(out.stdout)
    return nprocs, written, mib


@pytest.mark.timeout(120)
def test_a_darshan_log_is_an_observed_run_with_darshans_own_figures(tmp_path, capsys):
    """Two real logs of Darshan 3.2.1 (from the darshan package's examples): a job that only
    wrote, and IOR's HDF5 run that wrote and read one shared file through MPI-IO.  The bytes
    are POSIX_BYTES_WRITTEN summed; the rate of the write-only job is exactly the package's
    own aggregate performance by the slowest rank x 1.048576; a job that also read gets the
    same figure over its writes (less than its all-I/O figure, its MPI-IO module's); the
    record says it was observed, not benchmarked."""
    nprocs, written, mib = _darshan_own(DARSHAN_WRITE, "POSIX")
    code, _out, err = cli(capsys, "import", DARSHAN_WRITE, DARSHAN_IOR, "--results", tmp_path)
    assert code == 0, err
    got = {r.imported()["file"]: r for r in recs(tmp_path)}
    alone = got[str(DARSHAN_WRITE)]
    assert agg(alone) == [mib * MIB / MB] and int(alone.iterations[0]["bytes"]) == written
    assert alone.attrs["ranks"] == nprocs == 1
    imp = alone.imported()
    assert imp["tool"] == "darshan" and imp["format"] == "darshan-log"
    assert any("observed by Darshan" in n and "not a benchmark" in n for n in imp["notes"])
    nprocs, written, mib_all = _darshan_own(DARSHAN_IOR, "MPI-IO")
    ior = got[str(DARSHAN_IOR)]
    assert int(ior.iterations[0]["bytes"]) == written and ior.attrs["ranks"] == nprocs == 4
    assert 0 < agg(ior)[0] < mib_all * MIB / MB
    assert "MPI-IO aggregate performance by the slowest rank" in \
        ior.imported()["derived"]["aggregate_MB_per_s"]
    assert ior.params()["layout"] == "shared" and "ior -a HDF5" in ior.attrs["command_line"]
    code, out, _err = cli(capsys, "import", DARSHAN_WRITE, "--results", tmp_path)
    assert code == 0 and "0 record(s) made, 1 already there" in out


@pytest.mark.timeout(120)
def test_a_damaged_darshan_log_or_no_package_is_one_line(tmp_path, capsys):
    """libdarshan-util reads a log in a process of its own: a log cut short or with its
    compressed records overwritten is refused in one line naming it (exit 2), nothing is
    made and the command lives; without the darshan package it says which to install."""
    pytest.importorskip("darshan", reason="the `darshan` extra (in test-full)")
    data = DARSHAN_IOR.read_bytes()
    cut, bent = tmp_path / "cut.darshan", tmp_path / "bent.darshan"
    cut.write_bytes(data[:len(data) // 2])
    bent.write_bytes(data[:1200] + bytes(b ^ 0x5A for b in data[1200:2400]) + data[2400:])
    for bad in (cut, bent):
        code, _out, err = cli(capsys, "import", bad, "--results", tmp_path / "r")
        assert code == 2 and err.count("\n") == 1 and str(bad) in err, err
        assert "Traceback" not in err
    assert not (tmp_path / "r").exists() or not list((tmp_path / "r").glob("*.h5"))
    shadow = tmp_path / "shadow" / "darshan"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('no darshan here')\n")
    out = subprocess.run([sys.executable, "-m", "mpiwrite", "import",
                          str(DARSHAN_WRITE), "--results", str(tmp_path / "r2")],
                         capture_output=True, text=True, timeout=60,
                         env=dict(os.environ, PYTHONPATH=os.pathsep.join(
                             [str(tmp_path / "shadow"), str(ROOT)])))
    assert out.returncode == 2 and "pip install 'mpiwrite[darshan]'" in out.stderr, out.stderr


@pytest.mark.timeout(60)
def test_an_io500_folder_with_numbers_no_run_has(tmp_path, capsys):
    """A per-rank CSV whose rate is infinite (and no IOR log beside it) leaves the bytes
    unknown, said so; an IOR command line of -5 segments is refused in one line."""
    folder = tmp_path / "res"
    shutil.copytree(IO500, folder)
    (folder / "ior-easy-write.txt").unlink()
    rows = (folder / "ior-easy-write.csv").read_text().splitlines()
    cells = rows[1].split(",")
    cells[4] = "inf"
    (folder / "ior-easy-write.csv").write_text("\n".join([rows[0], ",".join(cells)] + rows[2:]))
    code, _out, err = cli(capsys, "import", folder, "--results", tmp_path / "r")
    assert code == 0, err
    (easy,) = [r for r in recs(tmp_path / "r") if r.params()["preset"] == "ior-easy-write"]
    assert int(easy.iterations[0]["bytes"]) == 0
    assert any(u.startswith("bytes (neither IOR's log") for u in easy.imported()["unknown"])
    text = (IO500 / "result.txt").read_text().replace("-s 40000", "-s -5", 1)
    (folder / "result.txt").write_text(text)
    code, _out, err = cli(capsys, "import", folder, "--results", tmp_path / "r2")
    assert code == 2 and err.count("\n") == 1 and "-t, -b or -s is not a size" in err, err


@pytest.mark.timeout(60)
def test_an_io500_folder_that_repeats_a_phase_fails_one_or_is_no_io500_folder(tmp_path,
                                                                             capsys):
    """A second [ior-easy-write] is refused, not made a third run; a phase IO500 scored 0 (it
    failed) is left out and said so beside the other; a folder that is not an IO500 result
    is named as such; a result.txt that is a symlink inside the folder is not followed."""
    folder = tmp_path / "res"
    shutil.copytree(IO500, folder)
    text = (IO500 / "result.txt").read_text()
    (folder / "result.txt").write_text(text.replace("[mdtest-easy-write]", "[ior-easy-write]"))
    code, _out, err = cli(capsys, "import", folder, "--results", tmp_path / "r1")
    assert code == 2 and "a second [ior-easy-write]" in err and err.count("\n") == 1, err
    (folder / "result.txt").write_text(text.replace("score           = 0.222782",
                                                    "score           = 0.000000"))
    code, _out, err = cli(capsys, "import", folder, "--results", tmp_path / "r2")
    assert code == 0, err
    (easy,) = recs(tmp_path / "r2")
    assert easy.params()["preset"] == "ior-easy-write"
    assert "phase ior-hard-write left out: IO500 scored it 0 (a phase that failed)" in \
        easy.imported()["notes"]
    code, _out, err = cli(capsys, "import", FIX, "--results", tmp_path / "r3")
    assert code == 2 and "only an IO500 result folder" in err, err
    (folder / "result.txt").unlink()
    (folder / "result.txt").symlink_to(IO500 / "result.txt")
    code, _out, err = cli(capsys, "import", folder, "--results", tmp_path / "r4")
    assert code == 2 and "symbolic link" in err and err.count("\n") == 1, err


# -- IOR's per-rank CSV (-O saveRankPerformanceDetailsCSV=FILE) as rank rows -----------------
def _rank_csv(path):
    """IOR's per-rank CSV read apart from the importer: [(access, rank, runtime, rate B/s)]."""
    rows = [line.split(",") for line in pathlib.Path(path).read_text().splitlines()[1:]]
    return [(r[0], int(r[1]), float(r[3]), float(r[5])) for r in rows]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("output, reps, ranks, read", [
    ("ior-ranks-fpp-i2.json", 2, 3, True), ("ior-ranks-shared-i3.txt", 3, 2, False)])
def test_ior_per_rank_csv_beside_its_output_gives_each_rank_its_own_figures(
        tmp_path, capsys, output, reps, ranks, read):
    """The CSV IOR wrote (`-O saveRankPerformanceDetailsCSV=`, found by that name beside the
    output) becomes the record's rank rows: each rank's rate IOR's throughput / 10^6 and its
    time IOR's runtime, exactly; its bytes the test's over the ranks; no node (-1) and no time
    on a common clock; the iteration's spread (min, mean, max, slowest) from them, which
    `report --metric rank-mean` and `show` then give."""
    csv_rows = _rank_csv(FIX / output.replace(".json", ".csv").replace(".txt", ".csv"))
    assert len(csv_rows) == reps * ranks * (2 if read else 1)
    code, _out, err = cli(capsys, "import", FIX / output, "--results", tmp_path)
    assert code == 0 and "warning" not in err, err
    rec = one(tmp_path)
    assert len(rec.ranks) == reps * ranks
    per_rep = ranks * (2 if read else 1)
    for it in range(reps):
        mine = csv_rows[it * per_rep:(it + 1) * per_rep]
        rows = rec.ranks[rec.ranks["iteration"] == it]
        writes = [r for r in mine if r[0] == "write"]
        assert list(rows["rank"]) == [r[1] for r in writes] == list(range(ranks))
        assert list(rows["MB_per_s"]) == pytest.approx([r[3] / MB for r in writes], rel=1e-9)
        assert list(rows["elapsed_seconds"]) == [r[2] for r in writes]
        share = int(rec.iterations["bytes"][it]) // ranks
        assert list(rows["bytes"]) == [share] * ranks
        if read:
            reads = [r for r in mine if r[0] == "read"]
            assert list(rows["read_MB_per_s"]) == pytest.approx([r[3] / MB for r in reads],
                                                                rel=1e-9)
        assert (rows["node"] == -1).all() and np.isnan(rows["t_write_start"]).all()
        i = rec.iterations[it]
        rates = [r[3] / MB for r in writes]
        assert float(i["rank_mean_MB_per_s"]) == pytest.approx(sum(rates) / ranks)
        assert float(i["rank_min_MB_per_s"]) == pytest.approx(min(rates))
        assert int(i["slowest_rank"]) == rates.index(min(rates))
    assert rec.imported()["per_rank"] == imported.RANKS_UNTIMED
    assert "ranks table" in rec.imported()["derived"]
    import hashlib

    csv_path = FIX / output.replace(".json", ".csv").replace(".txt", ".csv")
    assert rec.imported()["rank_csv"] == {"file": str(csv_path), "sha256": hashlib.sha256(
        csv_path.read_bytes()).hexdigest()}
    assert rec.attrs["schema_version"] == 2  # rank rows without a node: a reader of 1 refuses
    code, out, err = cli(capsys, "report", tmp_path, "--metric", "rank-mean", "--format", "json")
    assert code == 0, err
    (row,) = json.loads(out)["rows"]
    want = [float(x) for x in rec.iterations["rank_mean_MB_per_s"]]
    assert row["mean_MB_per_s"] == pytest.approx(sum(want) / len(want))
    code, out, err = cli(capsys, "show", rec.path)
    assert code == 0 and "ior's own figures: each rank's time on its own clock" in out, err
    assert "per node" not in out and "straggler tail" not in out
    code, out, err = cli(capsys, "timeline", rec.path)
    assert code == 2 and "holds no throughput samples" in err
    code, out, err = cli(capsys, "explain", rec.path)  # rank to rank: a node not known
    assert code == 0 and "host=node not known" in out, (out, err)


@pytest.mark.timeout(60)
def test_ior_per_rank_csv_absent_planted_or_not_this_runs_gives_no_rank_rows(tmp_path, capsys):
    """Without the CSV beside the output, through a symlink, cut short, of another run (its
    rates not the output's bytes over its times) or with a rank left out: the test is
    imported whole, without rank rows, and the import says why in a warning kept in the
    record; nothing is read through the link."""
    json_name, csv_name = "ior-ranks-fpp-i2.json", "ior-ranks-fpp-i2.csv"
    good = (FIX / csv_name).read_text().splitlines(keepends=True)
    other = (FIX / "ior-ranks-shared-i3.csv").read_text()
    cases = {
        "absent": None,
        "cut short": "".join(good[:-2]),
        "another run": "".join(good[:4]).replace("write,2,", "write,2,1") + "".join(good[4:]),
        "a rank left out": "".join(good[:2] + good[3:]),
        "another file": other,
        "planted": "link",
        # found by a hostile review: a digit int() does not read, a runtime longer than the
        # rank's open to close (a rate of 3 x 10^8 MB/s in report)
        "a superscript rank": "".join(good[:1]) + good[1].replace("write,0,", "write,\u00b2,")
        + "".join(good[2:]),
        "a runtime past its close": "".join(good[:1]) + ",".join(
            good[1].split(",")[:3] + [f"{float(good[1].split(',')[2]) * 2:.10e}"]
            + good[1].split(",")[4:]) + "".join(good[2:]),
        "a directory": "dir",
    }
    for name, text in cases.items():
        d = tmp_path / name.replace(" ", "-")
        d.mkdir()
        shutil.copy(FIX / json_name, d / json_name)
        if text == "link":
            os.symlink(FIX / csv_name, d / csv_name)
        elif text == "dir":
            (d / csv_name).mkdir()
        elif text is not None:
            (d / csv_name).write_text(text)
        res = d / "res"
        code, _out, err = cli(capsys, "import", d / json_name, "--results", res)
        assert code == 0, (name, err)
        rec = one(res)
        assert len(rec.ranks) == 0, name
        assert err.count("warning") == 1, (name, err)
        if text is None:
            assert "which is not beside the output" in err, (name, err)
        elif text == "link":
            assert "is not read: a symlink (never followed)" in err, (name, err)
        elif text == "dir":
            assert "is not read:" in err and "regular file" in err, (name, err)
        else:
            assert "does not fit this output" in err, (name, err)
        assert "remove this run's record from the results folder, then import" in err
        assert err.count("\n") == 1, err
        assert any("per-rank CSV" in w or "per-rank figures" in w for w in rec.warnings())
        assert "none:" in rec.imported()["per_rank"], name
        assert "rank_csv" not in rec.imported()
        assert f"per rank: {rec.imported()['per_rank']}" in cli(capsys, "show", rec.path)[1]
        assert agg(rec) == pytest.approx(agg(one_of(FIX / json_name, tmp_path, capsys)))


def one_of(path, tmp_path, capsys):
    """The record of `path` imported with its CSV beside it (the fixtures' folder)."""
    out = tmp_path / ("ref-" + path.name)
    if not out.exists():
        code, _o, err = cli(capsys, "import", path, "--results", out)
        assert code == 0, err
    return one(out)


@pytest.mark.timeout(60)
def test_an_io500_phase_has_its_ranks_from_ior_s_per_rank_csv(tmp_path, capsys):
    """IO500's ior-easy-write.csv (IOR's per-rank CSV, named by the phase's command line,
    beside result.txt) gives the phase's two rank rows, their rates IOR's throughputs."""
    code, _out, err = cli(capsys, "import", IO500, "--results", tmp_path)
    assert code == 0, err
    for rec in recs(tmp_path):
        phase = rec.params()["preset"]
        want = [r for r in _rank_csv(IO500 / f"{phase}.csv") if r[0] == "write"]
        assert list(rec.ranks["MB_per_s"]) == pytest.approx([r[3] / MB for r in want],
                                                             rel=1e-9)
        assert int(rec.ranks["bytes"].sum()) == int(rec.iterations["bytes"][0])


@pytest.mark.timeout(60)
def test_a_rank_row_without_a_node_is_refused_in_a_record_not_imported(tmp_path, capsys):
    """Node -1 ("not known") is an imported record's only: the same table in a record
    without the `imported` attribute is refused by the record check, in one line."""
    import h5py

    from mpiwrite.errors import RecordError

    code, _out, err = cli(capsys, "import", FIX / "ior-ranks-fpp-i2.json", "--results", tmp_path)
    assert code == 0, err
    path = one(tmp_path).path
    with h5py.File(path, "r+") as h5:
        del h5.attrs["imported"]
    with pytest.raises(RecordError, match="nodes: empty, but the ranks table has rows"):
        read_record(path)


# -- elbencho's services' own result files as per-service rows ------------------------------
SVC = [FIX / "elbencho-3.1-svc-1611.json", FIX / "elbencho-3.1-svc-1612.json"]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("master", ["elbencho-3.1-svc-master.json",
                                    "elbencho-3.1-svc-master.csv"])
def test_elbencho_services_own_files_become_the_masters_per_service_rows(
        tmp_path, capsys, master):
    """A distributed elbencho run (2 services on localhost, each started with its own
    --jsonfile): the master's file with the services' files is one record, whose
    imported.per_service holds each service's own bytes, first-done and last-done exactly as
    its file says, named as the master's --hosts names it; `show` lists them."""
    code, out, err = cli(capsys, "import", FIX / master, *SVC, "--results", tmp_path)
    assert code == 0 and "1 record(s) made" in out, (out, err)
    rec = one(tmp_path)
    rows = rec.imported()["per_service"]
    assert [r["service"] for r in rows] == ["localhost:1611", "localhost:1612"]
    for r, path in zip(rows, SVC):
        own = json.loads(path.read_text())
        assert r["bytes"] == int(own["last_done"]["bytes"])
        assert r["last_done_MB_per_s"] == int(own["last_done"]["bytes/s"]) / MB
        assert r["first_done_MB_per_s"] == int(own["first_done"]["bytes/s"]) / MB
        assert r["last_done_seconds"] == int(own["last_done"]["elapsed_time_ms"]) / 1e3
        assert r["threads"] == 2 and r["phase"] == "WRITE" and r["file"] == str(path)
    assert sum(r["bytes"] for r in rows) == int(rec.iterations["bytes"][0])
    code, out, err = cli(capsys, "show", rec.path)
    assert code == 0 and "per service (elbencho's services' own figures" in out, err
    assert "  WRITE       2    512MiB           780.9          688.6     0.78s  localhost:1612" \
        in out


@pytest.mark.timeout(60)
def test_an_elbencho_services_share_alone_or_not_adding_up_is_refused(tmp_path, capsys):
    """A service's own file is a share of a run, never a run: alone, with one service of
    two, or with figures that do not add up to the master's, it is one line and exit 2, and
    nothing is made."""
    master = FIX / "elbencho-3.1-svc-master.json"
    other = tmp_path / "svc-1612.json"
    doc = json.loads(SVC[1].read_text())
    doc["last_done"]["bytes"] = str(int(doc["last_done"]["bytes"]) - 2**20)
    other.write_text(json.dumps(doc) + "\n")
    threads = tmp_path / "threads-1612.json"
    doc = json.loads(SVC[1].read_text())
    doc["config"]["threads"] = "99"
    threads.write_text(json.dumps(doc) + "\n")
    phase = tmp_path / "phase-1612.json"
    doc = json.loads(SVC[1].read_text())
    doc["phase_id"] = "00000000-0000-0000-0000-000000000000"
    phase.write_text(json.dumps(doc) + "\n")
    for files, says in (([SVC[0]], "a service's own share of a distributed run"),
                        ([master, SVC[0]], "make 1 services, the master's"),
                        ([master, SVC[0], other], "bytes, the master's"),
                        ([FIX / "elbencho-3.1.json", *SVC], "is in none of the files"),
                        ([master, SVC[0], SVC[0]], "given twice"),
                        ([master, SVC[0], threads], "99 threads on a service, the master's"),
                        ([master, SVC[0], phase], "phase ids")):
        res = tmp_path / "res"
        code, out, err = cli(capsys, "import", *files, "--results", res)
        assert code == 2 and says in err and err.count("\n") == 1, (files, err)
        assert not list(res.glob("*.h5")) if res.exists() else True


@pytest.mark.timeout(60)
def test_every_master_file_of_the_phase_gets_the_services_rows(tmp_path, capsys):
    """The master's CSV and JSON of the run given together (or its file named twice): each
    record of the run gets the per-service rows, none is left without them (a hostile
    review found the rows given to a copy that was then skipped as already imported)."""
    master = FIX / "elbencho-3.1-svc-master.json"
    code, out, err = cli(capsys, "import", master, master, FIX / "elbencho-3.1-svc-master.csv",
                         *SVC, "--results", tmp_path)
    assert code == 0 and "2 record(s) made, 1 already there" in out, (out, err)
    for rec in recs(tmp_path):
        assert [r["service"] for r in rec.imported()["per_service"]] == [
            "localhost:1611", "localhost:1612"]


@pytest.mark.timeout(60)
def test_services_on_one_port_are_told_apart_by_their_files(tmp_path, capsys):
    """elbencho's default: a service a host, every one on the same port; a service's file
    does not say its host, so each row is named by its port and its file."""
    master = tmp_path / "master.json"
    master.write_text((FIX / "elbencho-3.1-svc-master.json").read_text().replace(
        "localhost:1611 localhost:1612", "nodeA:1611 nodeB:1611"))
    b = tmp_path / "svc-b.json"
    b.write_text(SVC[1].read_text().replace('\\"1612\\"', '\\"1611\\"'))
    assert '\\"1611\\"' in b.read_text()
    code, out, err = cli(capsys, "import", master, SVC[0], b, "--results", tmp_path / "r")
    assert code == 0, err
    rows = one(tmp_path / "r").imported()["per_service"]
    assert sorted(r["service"] for r in rows) == [
        "port 1611 (elbencho-3.1-svc-1611.json)", "port 1611 (svc-b.json)"]


@pytest.mark.timeout(60)
def test_a_crafted_per_service_row_is_refused_by_the_record_check(tmp_path, capsys):
    import h5py

    from mpiwrite.errors import RecordError

    code, _o, err = cli(capsys, "import", FIX / "elbencho-3.1-svc-master.json", *SVC,
                        "--results", tmp_path)
    assert code == 0, err
    path = one(tmp_path).path
    with h5py.File(path, "r+") as h5:
        imp = json.loads(h5.attrs["imported"])
        imp["per_service"][1]["bytes"] = -5
        h5.attrs["imported"] = json.dumps(imp)
    with pytest.raises(RecordError, match=r"imported.per_service\[1\].bytes"):
        read_record(path)
