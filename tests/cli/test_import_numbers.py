"""`mpiwrite import`: every number of an imported file is checked where it enters.

Each case is a real output (tests/fixtures/import, or fio and dd run here) with one number made
wrong the way an adversarial tester made it: not a number, NaN, infinite, out of
any sane range, thousands of digits, nested 100,000 deep, or a rate that contradicts its own
bytes and time.  Every one must be refused with one line naming the file and the field, exit 2,
no traceback and no record.  Also: a --results that is not a folder, and a link planted at
the name a record would get.
"""

import hashlib
import json
import os
import re
import shutil
import subprocess

import pytest
from common import FIXTURES

from mpiwrite.records import h5 as records

FIX = FIXTURES / "import"
DEEP = 100_000


def cli(capsys, *args):
    """(exit code, stdout, stderr) of `mpiwrite ARGS` in this process; any exception other
    than the exit (a traceback for the user) fails the test."""
    from mpiwrite.cli.main import main

    with pytest.raises(SystemExit) as exc:
        main([str(a) for a in args])
    out = capsys.readouterr()
    return exc.value.code, out.out, out.err


def refused(capsys, tmp_path, path, field, *more):
    """Import `path`: exit 2, one line naming the file and `field`, short, no record."""
    results = tmp_path / "r"
    code, out, err = cli(capsys, "import", path, "--results", results, *more)
    assert code == 2, (out, err)
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert str(path) in lines[0] and field in lines[0], lines[0]
    assert len(lines[0]) < 240 + len(str(path)), lines[0]  # no 300-digit number in it
    assert not results.exists() or not list(results.glob("*.h5"))
    return lines[0]


def deep_json(n=DEEP):
    return "[" * n + "]" * n


# -- IOR JSON ------------------------------------------------------------------------------
def _ior_json(change):
    doc = json.loads((FIX / "fpp-write-fsync-i3.json").read_text())
    change(doc)
    return json.dumps(doc, indent=1)


def _set(where, key, value):
    def change(doc):
        target = doc["tests"][0]["Parameters"] if where == "par" else doc["summary"][0]
        target[key] = value
    return change


def _bw(value):
    def change(doc):
        for r in doc["tests"][0]["Results"]:
            r["bwMiB"] = value
        doc["summary"][0]["bwMeanMIB"] = value
    return change


def _ior_deep(doc):
    doc["tests"][0]["Parameters"]["deep"] = "@DEEP@"


IOR_JSON = {
    "repetitions-nan": (_set("par", "repetitions", float("nan")), "repetitions"),
    "repetitions-inf": (_set("par", "repetitions", float("inf")), "repetitions"),
    "blockSize-1e30": (_set("par", "blockSize", 1e30), "blockSize"),
    "nodes-text": (_set("par", "nodes", "x"), "nodes"),
    "nodes-list": (_set("par", "nodes", [1]), "nodes"),
    "numTasks-inf": (_set("sum", "numTasks", float("inf")), "numTasks"),
    "numTasks-1e300": (_set("sum", "numTasks", 1e300), "numTasks"),
    "bw-1e307": (_bw(1e307), "bwMiB"),
    "nested": (_ior_deep, "nested"),
}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("case", sorted(IOR_JSON))
def test_ior_json_numbers_are_checked(tmp_path, capsys, case):
    change, field = IOR_JSON[case]
    path = tmp_path / f"{case}.json"
    path.write_text(_ior_json(change).replace('"@DEEP@"', deep_json()))
    refused(capsys, tmp_path, path, field)


# -- IOR text --------------------------------------------------------------------------------
def _ior_text_summary(column, value=None, rename=None):
    """fpp-write-i2.txt with one cell of its summary row (or its header's name) changed."""
    lines = (FIX / "fpp-write-i2.txt").read_text().splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.startswith("Summary of all tests")) + 1
    header, row = lines[at].split(), lines[at + 1].split()
    col = header.index(column)
    if rename:
        header[col] = rename
    else:
        row[col] = value
    lines[at], lines[at + 1] = " ".join(header), " ".join(row)
    return "\n".join(lines) + "\n"


def _ior_text_kv(key, value):
    text = (FIX / "fpp-write-i2.txt").read_text()
    changed = re.sub(rf"^({re.escape(key)}\s+: ).*$", rf"\g<1>{value}", text, count=1,
                     flags=re.M)
    assert changed != text
    return changed


IOR_TEXT = {
    "TestID": (lambda: _ior_text_kv("TestID", "x"), "TestID"),
    "repetitions": (lambda: _ior_text_kv("repetitions", "x"), "repetitions"),
    "nodes": (lambda: _ior_text_kv("nodes", "x"), "nodes"),
    "tasks": (lambda: _ior_text_summary("#Tasks", "x"), "#Tasks"),
    "testnum": (lambda: _ior_text_summary("Test#", "x"), "Test#"),
    "blksiz": (lambda: _ior_text_summary("blksiz", "6710886400000000000000000000"), "blksiz"),
    "segcnt-renamed": (lambda: _ior_text_summary("segcnt", rename="segcount"), "segcnt"),
    "mean-contradicts": (lambda: _ior_text_summary("Mean(MiB)", "9870.60"), "Mean(MiB)"),
}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("case", sorted(IOR_TEXT))
def test_ior_text_numbers_are_checked(tmp_path, capsys, case):
    make, field = IOR_TEXT[case]
    path = tmp_path / f"{case}.txt"
    path.write_text(make())
    refused(capsys, tmp_path, path, field)


# -- IOR CSV ---------------------------------------------------------------------------------
def _ior_csv(column, value):
    lines = (FIX / "fpp-write-i2.csv").read_text().splitlines()
    header = lines[0].split(",")
    row = lines[1].split(",")
    row[header.index(column)] = value
    lines[1] = ",".join(row)
    return "\n".join(lines) + "\n"


IOR_CSV = [("block(KiB)", "1e400"), ("xfer(KiB)", "1e400"), ("bw(MiB/s)", "inf"),
           ("bw(MiB/s)", "nan"), ("bw(MiB/s)", "1e307")]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("column,value", IOR_CSV)
def test_ior_csv_numbers_are_checked(tmp_path, capsys, column, value):
    path = tmp_path / "bad.csv"
    path.write_text(_ior_csv(column, value))
    refused(capsys, tmp_path, path, column)


# -- fio -------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def fio_doc(tmp_path_factory):
    if not shutil.which("fio"):
        pytest.skip("no fio")
    folder = tmp_path_factory.mktemp("fio")
    out = subprocess.run(["fio", "--name=w", "--rw=write", "--bs=64k", "--size=1m",
                          "--numjobs=2", f"--directory={folder}", "--end_fsync=1",
                          "--output-format=json"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout[out.stdout.index("{"):]


def _job(key, value, sub=None):
    def change(doc):
        for job in doc["jobs"]:
            (job[sub] if sub else job)[key] = value
    return change


def _top(key, value):
    def change(doc):
        doc[key] = value
    return change


FIO = {
    "groupid-text": (_job("groupid", "x"), "groupid"),
    "groupid-list": (_job("groupid", [0]), "groupid"),
    "job_runtime-text": (_job("job_runtime", "x"), "job_runtime"),
    "job_runtime-negative": (_job("job_runtime", -1e30), "job_runtime"),
    "io_bytes-nan": (_job("io_bytes", float("nan"), "write"), "io_bytes"),
    "io_bytes-inf": (_job("io_bytes", float("inf"), "write"), "io_bytes"),
    "io_bytes-huge": (_job("io_bytes", 10**25, "write"), "io_bytes"),
    "job-options-text": (_job("job options", "abc"), "job options"),
    "global-options-list": (_top("global options", [1, 2]), "global options"),
    "write-list": (_job("write", [1]), "write"),
    "numjobs-5000-digits": (_job("numjobs", "9" * 5000, "job options"), "numjobs"),
    "fsync-5000-digits": (_job("fsync", "9" * 5000, "job options"), "fsync"),
    "timestamp-inf": (_top("timestamp", float("inf")), "timestamp"),
    "timestamp-1e20": (_top("timestamp", 1e20), "timestamp"),
    "nested": (_top("deep", "@DEEP@"), "nested"),
}


@pytest.mark.timeout(90)
@pytest.mark.parametrize("case", sorted(FIO))
def test_fio_numbers_are_checked(tmp_path, capsys, fio_doc, case):
    change, field = FIO[case]
    doc = json.loads(fio_doc)
    change(doc)
    path = tmp_path / f"{case}.json"
    path.write_text(json.dumps(doc, indent=1).replace('"@DEEP@"', deep_json()))
    refused(capsys, tmp_path, path, field)


# -- lmdd and dd -----------------------------------------------------------------------------
LMDD = {
    "bytes-beyond-2^63": ("1000000000000000.0000 MB in 1.0000 secs, 1000000000000000.0000 "
                          "MB/sec", "MB"),
    "401-digit-MB": ("9" * 401 + ".0000 MB in 1.0000 secs, 1.0000 MB/sec", "MB"),
    "rate-contradicts": ("100.0000 MB in 1.0000 secs, 999999.0000 MB/sec", "MB/sec"),
    "rate-beyond-10^9": ("2000000000.0000 MB in 1.0000 secs, 2000000000.0000 MB/sec",
                         "MB/sec"),
}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("case", sorted(LMDD))
def test_lmdd_numbers_are_checked(tmp_path, capsys, case):
    line, field = LMDD[case]
    real = (FIX / "lmdd-tmpfs.txt").read_text().splitlines()
    path = tmp_path / "lmdd.txt"
    path.write_text("\n".join([real[0], line, real[2]]) + "\n")
    assert field in refused(capsys, tmp_path, path, "line 2")


@pytest.fixture(scope="module")
def dd_output(tmp_path_factory):
    folder = tmp_path_factory.mktemp("dd")
    out = subprocess.run(["dd", "if=/dev/zero", f"of={folder / 'f'}", "bs=64K", "count=16"],
                         capture_output=True, text=True, timeout=30,
                         env=dict(os.environ, LC_ALL="C"))
    assert out.returncode == 0, out.stderr
    return out.stderr


def _dd_bytes(text, nbytes):
    return re.sub(r"^\d+ bytes", f"{nbytes} bytes", text, count=1, flags=re.M)


DD = {
    "bytes-23-digits": (lambda t: _dd_bytes(t, "99999999999999999999999"), "bytes"),
    "bytes-5000-digits": (lambda t: _dd_bytes(t, "9" * 5000), "bytes"),
    "records-5000-digits": (lambda t: t.replace("16+0 records out", "9" * 5000 + "+0 records out"),
                            "records out"),
    "rate-contradicts": (lambda t: re.sub(r", [^,]+B/s$", ", 999 TB/s", t.rstrip()) + "\n",
                         "B/s"),
}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("case", sorted(DD))
def test_dd_numbers_are_checked(tmp_path, capsys, dd_output, case):
    change, field = DD[case]
    path = tmp_path / "dd.txt"
    path.write_text(change(dd_output))
    assert path.read_text() != dd_output
    refused(capsys, tmp_path, path, field)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("operand", ["count", "bs"])
def test_a_5000_digit_number_in_the_dd_command_is_refused(tmp_path, capsys, dd_output, operand):
    path = tmp_path / "dd.txt"
    path.write_text(dd_output)
    ops = {"bs": "64K", "count": "16", operand: "9" * 5000}
    command = f"dd if=/dev/zero of=/x bs={ops['bs']} count={ops['count']}"
    line = refused(capsys, tmp_path, path, f"{operand}=", "--command", command)
    assert "--command" in line


@pytest.mark.timeout(60)
def test_the_real_outputs_still_import(tmp_path, capsys, dd_output, fio_doc):
    (tmp_path / "dd.txt").write_text(dd_output)
    (tmp_path / "fio.json").write_text(fio_doc)
    files = [FIX / n for n in ("fpp-write-fsync-i3.json", "shared-write-read.json",
                               "fpp-write-i2.txt", "fpp-write-i2.csv", "lmdd-tmpfs.txt",
                               "fpp-write-read-fsyncperwrite.txt", "glusterfs-3hosts-6ranks.txt")]
    code, out, err = cli(capsys, "import", *files, tmp_path / "dd.txt", tmp_path / "fio.json",
                         "--results", tmp_path / "r")
    assert code == 0, err
    assert "11 record(s) made" in out, out


# -- where the records go --------------------------------------------------------------------
@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", ["file", "fifo", "dangling-link"])
def test_results_that_is_not_a_folder_is_exit_2(tmp_path, capsys, kind):
    rfile = tmp_path / "rfile"
    if kind == "file":
        rfile.write_text("x")
    elif kind == "fifo":
        os.mkfifo(rfile)
    else:
        rfile.symlink_to(tmp_path / "nowhere")
    code, _out, err = cli(capsys, "import", FIX / "fpp-write-i2.txt", "--results", rfile)
    assert code == 2, err
    assert "--results" in err and "not a folder" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "nowhere").exists()


@pytest.mark.timeout(60)
def test_results_that_is_another_users_link_is_exit_2(tmp_path, capsys):
    if os.geteuid() != 0:
        pytest.skip("needs root to make a link of another user")
    (tmp_path / "real").mkdir()
    link = tmp_path / "res2"
    link.symlink_to(tmp_path / "real")
    os.lchown(link, 65534, 65534)
    code, _out, err = cli(capsys, "import", FIX / "fpp-write-i2.txt", "--results", link)
    assert code == 2, err
    assert "--results" in err and "another user" in err
    assert not list((tmp_path / "real").iterdir())


@pytest.mark.timeout(60)
def test_a_link_planted_at_the_record_name_is_refused_and_named(tmp_path, capsys):
    src = FIX / "fpp-write-i2.txt"
    sha = hashlib.sha256(src.read_bytes()).hexdigest()
    name = records.record_path("", f"import-ior-{sha[:16]}-0")
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / name).symlink_to(victim)
    code, out, err = cli(capsys, "import", src, "--results", tmp_path / "r")
    assert code == 2, (out, err)
    assert "already imported" not in err and name in err and "link" in err
    assert len(err.strip().splitlines()) == 1
    assert victim.read_text() == "precious\n" and os.path.islink(tmp_path / "r" / name)


# -- found by a hostile review after the first round of checks -----------------------------
def _mpiwrite_json(change):
    doc = json.loads((FIX / "mpiwrite-run.json").read_text())
    change(doc)
    return json.dumps(doc, indent=1)


def _agg(value):
    def change(doc):
        doc["iterations"][0]["aggregate_MB_per_s"] = value
    return change


@pytest.mark.parametrize("value, field", [(0, "aggregate_MB_per_s"),
                                          (1e-320, "aggregate_MB_per_s"),
                                          (12345.0, "contradicts")])
def test_a_rate_that_is_no_rate_or_contradicts_its_bytes_is_refused(tmp_path, capsys, value,
                                                                     field):
    """A rate of 0 or 1e-320 for 4 MiB written in 6 ms was imported (report showed 0.0 MB/s,
    compare overflowed in exp()); so was a rate its own bytes and times contradict."""
    path = tmp_path / "run.json"
    path.write_text(_mpiwrite_json(_agg(value)))
    refused(capsys, tmp_path, path, field)


def test_a_subnormal_ior_rate_is_refused(tmp_path, capsys):
    path = tmp_path / "ior.json"
    path.write_text(_ior_json(_bw(1e-320)))
    refused(capsys, tmp_path, path, "below 1 byte a second")


def test_a_json_key_given_twice_is_ambiguous(tmp_path, capsys):
    text = (FIX / "mpiwrite-run.json").read_text().replace(
        '"status": "complete",', '"status": "failed",\n "status": "complete",', 1)
    path = tmp_path / "dup.json"
    path.write_text(text)
    refused(capsys, tmp_path, path, "given twice")


@pytest.mark.parametrize("name", ["mpiwrite-run.json", "fpp-write-i2.txt",
                                  "fpp-write-fsync-i3.json"])
def test_a_byte_order_mark_is_no_part_of_any_format(tmp_path, capsys, name):
    """mpiwrite's JSON with a BOM was refused ("Unexpected UTF-8 BOM") and IOR text with one
    was "an unknown tool", while fio and IOR JSON imported: alike for every format now."""
    path = tmp_path / name
    path.write_bytes(b"\xef\xbb\xbf" + (FIX / name).read_bytes())
    code, out, err = cli(capsys, "import", path, "--results", tmp_path / "r")
    assert code == 0, err
    assert list((tmp_path / "r").glob("*.h5"))
