"""Every run key that is a `run` option, end to end: the option as the table declares it
(run/options.py) -> RunConfig -> the record -> the run's keys -> `report --by KEY`.

Real runs (one rank, without a launcher), real records, the command a user types.  A key
added to the table of keys (vocab/keys.py) as an option and not carried through fails here.
"""

import json

import pytest
from common import cli, read_record, records_in

from mpiwrite.formats.runkeys import run_keys
from mpiwrite.run import options
from mpiwrite.vocab import keys

pytestmark = pytest.mark.timeout(240)

BASE = ["-s", "1M", "-b", "64k", "--progress-interval", "0"]
# what some options need beside them to be a valid run: the option's own value comes from
# the table (the first value that is not the default); these only make the run possible
WITH = {
    "collective": ["--engine", "mpiio"],
    "mpiio_hints": ["--engine", "mpiio"],
    "seed": ["--pattern", "random"],
    "pattern": ["--layout", "shared"],
    "stonewall": ["-t", "2"],
    "preset": ["--stonewall", "0.2", "-t", "1", "--count", "16"],
    "time_limit": ["-s", "64M"],
    "direct": ["--engine", "posix"],
    "ramp": ["-t", "1"],
}
VALUES = {"mpiio_hints": "romio_cb_write=enable"}  # a text option: any value of its own


def _other_value(opt: options.Opt):
    """The option's words for a value that is not its default, from its kind."""
    if opt.kind == "flag":
        return [opt.long]
    if opt.kind == "switch":
        return [opt.secondary if opt.default else opt.long]
    if opt.kind == "choice":
        default = opt.default or ""
        value = [c for c in options.choices_of(opt) if c != default and c != "null"][-1]
        return [opt.long, value]
    if opt.name in VALUES:
        return [opt.long, VALUES[opt.name]]
    if opt.kind == "text":  # a label or a name: any text of its own
        return [opt.long, "conformance"]
    if opt.kind == "size":  # half the default (a block smaller than the default size)
        return [opt.long, str(options.parse(opt, opt.default) // 2) if opt.default else "2M"]
    if opt.kind == "duration":
        return [opt.long, "0.5"]
    if opt.kind == "int":
        return [opt.long, str(int(options.parse(opt, opt.default or 0)) + 2)]
    raise AssertionError(f"{opt.name}: no value of kind {opt.kind}")


OPTION_KEYS = [k.name for k in keys.TABLE if k.source == keys.OPTION]


def test_every_option_that_sets_a_field_has_it_with_the_same_default():
    import inspect

    from mpiwrite import structs
    from mpiwrite.run import config

    fields = structs.asdict(config.RunConfig())
    taken = set(inspect.signature(config.build).parameters)  # what build combines (count)
    for opt in options.TABLE:
        if not opt.field:
            continue
        assert opt.name in fields or opt.name in taken, f"{opt.name}: no RunConfig field"
        if opt.default is None or opt.name not in fields:
            continue
        want = opt.default if opt.kind in ("flag", "switch") else options.parse(opt,
                                                                                opt.default)
        assert fields[opt.name] == want, (opt.name, fields[opt.name], want)


def test_runconfig_spells_no_option_of_the_table():
    """An option that is a field is made a RunConfig field by its entry alone: the class
    body names only what more than one option makes."""
    from mpiwrite import structs
    from mpiwrite.run import config

    written = set(config.RunConfig.__dict__.get("__annotations__", {}))
    assert not written & {o.name for o in options.TABLE if o.field}
    assert {o.name for o in options.FIELDS} <= set(structs.fields(config.RunConfig))


def test_every_option_key_has_an_option_of_the_table():
    assert OPTION_KEYS and all(options.find(k) for k in OPTION_KEYS), [
        k for k in OPTION_KEYS if not options.find(k)]


@pytest.fixture(scope="module")
def base_runs(tmp_path_factory):
    """The run each key's changed run is set beside: BASE and the key's companions, made
    once per set of companions (most keys have none)."""
    made = {}

    def base(extra):
        words = tuple(extra)
        if words not in made:
            where = tmp_path_factory.mktemp("base")
            one = cli(["run", "d", "--results", "r", "--tag", "which=base"] + BASE + extra,
                      cwd=where, timeout=120)
            assert one.returncode == 0, one.stderr
            made[words] = records_in(where / "r")[0]
        return made[words]

    return base


@pytest.mark.parametrize("key", OPTION_KEYS)
def test_an_option_key_goes_from_the_command_line_to_report_by(tmp_path, key, base_runs):
    import shutil

    opt = options.find(key)
    extra = WITH.get(key, [])
    given = _other_value(opt)
    (tmp_path / "r").mkdir()
    shutil.copy(base_runs(extra), tmp_path / "r")
    two = cli(["run", "d", "--results", "r", "--tag", "which=changed"] + BASE + extra + given,
              cwd=tmp_path, timeout=120)
    if two.returncode != 0 and key == "direct" and "O_DIRECT" in two.stderr:
        pytest.skip(f"this filesystem takes no O_DIRECT: {two.stderr.strip()[:200]}")
    assert two.returncode == 0, (given, two.stderr)
    key = keys.BY_NAME[key].part_of or key  # fsync_every: the `fsync` key says `every N`
    recs = {read_record(p).tags()["which"]: read_record(p) for p in records_in(tmp_path / "r")}
    got = {which: run_keys(rec) for which, rec in recs.items()}
    assert key in got["changed"], sorted(got["changed"])
    assert str(got["changed"][key]) != str(got["base"].get(key)), (key, got["changed"][key])
    # the key's journey, valid or not (a stonewall a 1 MiB run never reaches, a ramp it never
    # ends: formats/validity.py leaves such runs out unless asked)
    rep = cli(["report", "r", "--by", key, "--format", "json", "--include-invalid"],
              cwd=tmp_path)
    assert rep.returncode == 0, rep.stderr
    rows = json.loads(rep.stdout)["rows"]
    assert len(rows) == 2, (key, [r.get(key) for r in rows])  # the key splits the two runs
