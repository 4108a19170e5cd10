"""The importers' seam: every importer in importers/registry.IMPORTERS keeps the same contract.

Each reads its tool's real outputs (tests/fixtures/import/README.md), refuses every other
tool's, and refuses garbage with one line (ImportRefused), both when asked by name
(`--from`) and when its parser is handed the file directly.  A new importer fails here until
its real outputs are in FIXTURES.
"""


import pytest
from common import FIXTURES

from mpiwrite.formats.numbers import ImportRefused
from mpiwrite.importers import registry
from mpiwrite.importers.base import check_test
from mpiwrite.importers.base import read_source as read_text


def read_source(path):
    """A fixture as `import` reads it: its text, or a binary log's bytes (Darshan's)."""
    return read_text(path, binary=lambda data: registry.detect_binary(data) is not None)

FIX = FIXTURES / "import"
# Real outputs of each registered tool (the IOR JSON broken by a warning is refused: not here).
FIXTURES = {
    "ior": ["fpp-write-fsync-i3.json", "shared-write-read.json", "fpp-write-i2.txt",
            "fpp-write-i2.csv", "fpp-write-read-fsyncperwrite.txt",
            "glusterfs-3hosts-6ranks.txt"],
    "fio": ["fio-write-2jobs.json", "fio-randrw70-libaio.json"],
    "elbencho": ["elbencho-3.1.csv", "elbencho-3.1.json"],
    "io500": ["io500-isc26/result.txt"],
    "darshan": ["darshan-3.2.1-ior-hdf5.darshan", "darshan-3.2.1-write-only.darshan"],
    "lmdd": ["lmdd-tmpfs.txt"],
    "dd": ["dd-fsync.txt"],
    "mpiwrite-json": ["mpiwrite-run.json"],
}
GARBAGE = {
    "empty": "",
    "words": "hello\nthis is not a benchmark's output\n",
    "json-object": '{"a": 1}\n',
    "json-list": "[1, 2, 3]\n",
    "cut-json": '{"tests": [{"Parameters": ',
    "numbers": "1 2 3\n4 5 6\n",
}


def _others(name):
    return [f for other, files in FIXTURES.items() if other != name for f in files]


def test_every_registered_importer_has_real_outputs_here():
    assert set(FIXTURES) == set(registry.names())
    for files in FIXTURES.values():
        for f in files:
            assert (FIX / f).is_file(), f


def test_the_command_line_offers_exactly_the_registered_importers():
    from mpiwrite.cli.importcmd import import_

    opt = next(p for p in import_.params if p.name == "tool")
    assert tuple(opt.type.choices) == registry.names()


def test_the_registry_loads_what_it_names():
    for name in registry.names():
        imp = registry.get(name)
        assert imp.name == name and imp.title and callable(imp.detect) and callable(imp.parse)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_an_importer_reads_its_real_outputs(name):
    if name == "darshan":  # its logs are read by the package (the `darshan` extra)
        pytest.importorskip("darshan", reason="reading Darshan logs needs the darshan "
                            "package (pip install 'mpiwrite[darshan]', in `test-full`)")
    imp = registry.get(name)
    for f in FIXTURES[name]:
        path = str(FIX / f)
        src = read_source(path)
        if src.data is not None:
            assert imp.detect_bytes(src.data) and registry.detect_binary(src.data) == name
        else:
            assert imp.detect(src.text), f
            assert registry.detect(src.text) == name, f
        tests = imp.parse(src, "")
        assert tests, f
        for t in tests:
            check_test(t, path)
            assert t.tool == name.split("-")[0], (f, t.tool)
        src2, again = registry.read_tests(path, name)
        assert len(again) == len(tests)


def _one_line_refusal(call, path, *args):
    with pytest.raises(ImportRefused) as exc:
        call(*args)
    text = str(exc.value)
    assert "\n" not in text.strip() and path in text, text
    return text


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_an_importer_refuses_the_other_tools_outputs(name):
    imp = registry.get(name)
    for f in _others(name):
        path = str(FIX / f)
        src = read_source(path)
        assert not imp.detect(src.text), f
        assert src.data is None or imp.detect_bytes is None or not imp.detect_bytes(src.data)
        _one_line_refusal(imp.parse, path, src, "")
        assert "but the file is" in _one_line_refusal(registry.read_tests, path, path, name)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", sorted(FIXTURES))
@pytest.mark.parametrize("garbage", sorted(GARBAGE))
def test_an_importer_refuses_garbage_with_one_line(tmp_path, name, garbage):
    imp = registry.get(name)
    path = tmp_path / f"{garbage}.txt"
    path.write_text(GARBAGE[garbage])
    src = read_source(str(path))
    assert not imp.detect(src.text)
    _one_line_refusal(imp.parse, str(path), src, "")
    _one_line_refusal(registry.read_tests, str(path), str(path), name)


@pytest.mark.timeout(60)
def test_garbage_without_from_is_refused_naming_every_registered_tool(tmp_path):
    path = tmp_path / "words.txt"
    path.write_text(GARBAGE["words"])
    text = _one_line_refusal(registry.read_tests, str(path), str(path))
    for name in registry.names():
        assert registry.get(name).title in text


def _lmdd(lines, command=""):
    from mpiwrite.importers.base import Source
    from mpiwrite.importers.ddlines import parse_lmdd

    text = "\n".join(lines) + "\n"
    return parse_lmdd(Source("f.txt", "0" * 64, len(text), text), command)


def test_lines_that_ran_the_same_seconds_with_bytes_that_vary_were_time_limited():
    """lmdd's time=200 as a site keeps its lines (no --command): the bytes are the outcome."""
    tests = _lmdd(["166400.0000 MB in 200.0000 secs, 832.0000 MB/sec",
                   "165800.0000 MB in 200.0000 secs, 829.0000 MB/sec"])
    assert all(t.params["time_limit"] == 200 and "size" not in t.params for t in tests)
    assert all("inferred" in t.derived["params.time_limit"] for t in tests)


@pytest.mark.parametrize("lines", [
    ["166400.0000 MB in 200.0000 secs, 832.0000 MB/sec"],  # one line says nothing
    ["512.0000 MB in 2.0000 secs, 256.0000 MB/sec",  # the same bytes: a sized run
     "512.0000 MB in 2.0000 secs, 256.0000 MB/sec"],
    ["512.0000 MB in 2.0000 secs, 256.0000 MB/sec",  # seconds that differ: a sized run too
     "600.0000 MB in 2.5000 secs, 240.0000 MB/sec"],
])
def test_no_time_limit_is_inferred_where_the_lines_do_not_say_so(lines):
    tests = _lmdd(lines)
    assert all("time_limit" not in t.params and t.params.get("size") for t in tests)


def test_a_command_with_its_own_time_limit_is_kept_as_given():
    tests = _lmdd(["166400.0000 MB in 200.0000 secs, 832.0000 MB/sec",
                   "165800.0000 MB in 200.0000 secs, 829.0000 MB/sec"],
                  "lmdd of=/x bs=1m time=200 fsync=1")
    assert all(t.derived["params.time_limit"].startswith("from --command") for t in tests)
