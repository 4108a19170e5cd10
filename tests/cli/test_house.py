"""The house: the package's folders are its layers, and the import rules between them hold.

docs/architecture.md draws the layers; these tests read every module's imports (also those
inside functions) and check the rules written there, so that a new module lands in a folder
whose rules it keeps.  The wheel test builds the package as pip would and checks that every
subpackage is in it and that the installed commands run from it.
"""

import ast
import os
import pathlib
import subprocess
import sys
import zipfile

import pytest
from common import ROOT, TESTS

PKG = ROOT / "mpiwrite"
FOLDERS = ("cli", "study", "run", "engines", "facts", "clients", "records", "formats", "answers",
           "vocab", "importers")
SHARED = {"errors", "files", "text", "units", "stats", "procs", "structs", "sysroot", "host"}
# Which folders a folder may import (besides itself and the shared modules at the top).
ALLOWED = {
    "cli": {"study", "run", "engines", "facts", "clients", "records", "formats", "answers",
            "vocab", "importers"},
    "study": {"run", "engines", "facts", "records", "formats", "vocab"},
    "run": {"engines", "facts", "clients", "records", "formats", "vocab"},
    "engines": {"formats", "vocab"},
    "answers": {"facts", "clients", "records", "formats", "vocab"},
    # the record (model, HDF5 form, checks, sandbox, store): the shared words of formats/
    # (names, summary's tables, status, runkeys, a node's facts as keys), the clients (who
    # wrote a record older than the `client` key)
    "records": {"formats", "clients", "vocab"},
    "formats": {"clients", "vocab"},
    # facts/nodeinfo asks the clients (the target's client, its mount); the clients read
    # their files through the shared sysroot reader and import nothing of facts/
    "facts": {"clients", "vocab"},
    "clients": {"vocab"},
    "vocab": set(),
    # other tools' outputs into records: the record model and the numbers' checks (formats),
    # the shared words; only the command line imports them
    "importers": {"records", "formats", "vocab"},
    "top": set(),
    "api": {"answers"},  # mpiwrite/__init__.py: mpiwrite.load, imported when called
}
# Imports across the layers that a module makes for a reason of its own (none now).
EXCEPTIONS: dict = {}


def modules():
    """{dotted name relative to mpiwrite: path} for every module of the package."""
    found = {}
    for path in PKG.rglob("*.py"):
        rel = path.relative_to(PKG).with_suffix("")
        found[".".join(rel.parts)] = path
    return found


def imports(path: pathlib.Path):
    """(dotted mpiwrite module or name, other top-level packages) imported by one file."""
    ours, theirs = set(), set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "mpiwrite" or node.module.startswith("mpiwrite."):
                base = node.module[len("mpiwrite."):] if "." in node.module else ""
                for a in node.names:
                    ours.add(f"{base}.{a.name}".strip("."))
            else:
                theirs.add(node.module.split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.level:
            raise AssertionError(f"{path}: relative import; the package uses absolute ones")
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("mpiwrite."):
                    ours.add(a.name[len("mpiwrite."):])
                else:
                    theirs.add(a.name.split(".")[0])
    return ours, theirs


def folder_of(name: str) -> str:
    if name == "__main__":
        return "cli"  # `python -m mpiwrite` is the command line
    if name == "__init__":
        return "api"  # `import mpiwrite`: the Python API's door
    first = name.split(".")[0]
    return first if first in FOLDERS else "top"


def resolve(name: str, mods) -> str:
    """The module an imported dotted name belongs to (`run.config.RunConfig` -> `run.config`)."""
    while name and name not in mods:
        name = name.rpartition(".")[0]
    return name


def cycle_in(graph) -> "list | None":
    """A cycle of `graph` (node -> the nodes it points to) as the path that closes it, or
    None: a depth-first walk that meets a node still on its path."""
    state = {}

    def visit(node, trail):
        if state.get(node) == 1:
            return trail + [node]
        if state.get(node) == 2:
            return None
        state[node] = 1
        for nxt in graph[node]:
            found = visit(nxt, trail + [node])
            if found:
                return found
        state[node] = 2
        return None

    for node in graph:
        found = visit(node, [])
        if found:
            return found
    return None


def test_the_cycle_rule_sees_a_cycle():
    assert cycle_in({"a": ["b"], "b": ["c"], "c": ["a"]}) == ["a", "b", "c", "a"]
    assert cycle_in({"a": ["b"], "b": [], "c": ["a", "b"]}) is None


def test_the_folders_are_the_layers():
    top = {p.name for p in PKG.iterdir() if not p.name.startswith((".", "__pycache__"))}
    assert set(FOLDERS) <= top
    loose = {n[:-3] for n in top if n.endswith(".py")} - {"__init__", "__main__"}
    assert loose == SHARED, "a module at the top that is not one of the shared pieces"
    for folder in FOLDERS:
        assert (PKG / folder / "__init__.py").is_file(), folder


def test_folders_import_only_what_their_layer_may():
    mods = modules()
    wrong = []
    for name, path in mods.items():
        mine = folder_of(name)
        for imp in imports(path)[0]:
            target = resolve(imp, mods)
            if not target:
                continue  # mpiwrite.__version__ and the like
            theirs = folder_of(target)
            if theirs in (mine, "top"):
                continue
            if theirs not in ALLOWED[mine] and target not in EXCEPTIONS.get(name, ()):
                wrong.append(f"{name} ({mine}/) imports {target} ({theirs}/)")
    assert not wrong, "\n".join(wrong)


def test_the_layers_run_one_way():
    """The folders' rules form no cycle, so every arrow runs down: nothing a folder below
    facts/ (clients/, formats/, records/, vocab/) imports facts/, and clients/ imports only
    the vocabulary and the shared pieces (the sysroot reader among them)."""
    cycle = cycle_in(ALLOWED)
    assert cycle is None, "the layers' rules cycle: " + " -> ".join(cycle or [])

    def below(folder):
        return set().union(*({u} | below(u) for u in ALLOWED[folder])) if ALLOWED[folder] \
            else set()

    assert ALLOWED["clients"] == {"vocab"}
    for folder in ("clients", "formats", "records", "engines", "vocab"):
        assert "facts" not in below(folder) | {folder}, folder


def test_the_shared_modules_import_no_folder():
    mods = modules()
    for name in SHARED:
        for imp in imports(mods[name])[0]:
            assert folder_of(resolve(imp, mods) or "x") == "top", (name, imp)


def test_only_the_command_line_imports_click():
    users = sorted(n for n, p in modules().items() if "click" in imports(p)[1])
    assert users and all(n.startswith("cli.") for n in users), users


def test_the_import_graph_has_no_cycle():
    mods = modules()
    graph = {m: sorted({resolve(i, mods) for i in imports(p)[0]} - {"", m})
             for m, p in mods.items()}
    cycle = cycle_in(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


# The modules that may start a process: the bounded runner, and the record sandbox's
# long-lived workers, spawned or forked (which bound themselves: records/sandbox.py).
STARTS_PROCESSES = {"procs", "records.sandbox"}
STARTERS = {("subprocess", a) for a in ("run", "Popen", "call", "check_call", "check_output",
                                         "getoutput", "getstatusoutput")} \
    | {("os", a) for a in ("system", "popen", "spawnl", "spawnlp", "spawnv", "spawnvp",
                           "execv", "execvp", "execve", "posix_spawn", "posix_spawnp", "fork",
                           "forkpty")}


def test_every_external_command_goes_through_the_bounded_runner():
    """One way to run a command (procs.run_bounded): bounded in time and output, in its own
    process group.  Read from the AST: a call of subprocess.*/os.* that starts a process."""
    found = []
    for name, path in modules().items():
        if name in STARTS_PROCESSES:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and isinstance(node.func.value, ast.Name) \
                    and (node.func.value.id, node.func.attr) in STARTERS:
                found.append(f"{name}:{node.lineno} {node.func.value.id}.{node.func.attr}")
            if isinstance(node, ast.ImportFrom) and node.module in ("subprocess",) \
                    and any((node.module, a.name) in STARTERS for a in node.names):
                found.append(f"{name}:{node.lineno} from {node.module} import ...")
    assert not found, found


def test_no_module_outside_the_engines_compares_an_engines_name():
    """The run asks an engine's capability flags (engines/base.py), never its name: a new
    engine must not silently skip the free-space check or --drop-cache.  Read from the AST:
    a comparison with `.engine` or `engine` on one side and an engine's name on the other."""
    from mpiwrite.engines import base

    found = []
    for name, path in modules().items():
        if name.startswith("engines."):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Compare):
                continue
            sides = [node.left] + list(node.comparators)
            named = any(isinstance(x, ast.Attribute) and x.attr == "engine"
                        or isinstance(x, ast.Name) and x.id == "engine" for x in sides)
            literal = any(isinstance(x, ast.Constant) and x.value in base.ENGINES
                          for x in sides)
            if named and literal:
                found.append(f"{name}:{node.lineno}")
    assert not found, found


def _names_fstype(x) -> bool:
    """`fstype`, `fs.fstype`, `x["fstype"]`, `x.get("fstype")`: a mount's type."""
    if isinstance(x, ast.Name):
        return "fstype" in x.id
    if isinstance(x, ast.Attribute):
        return "fstype" in x.attr
    if isinstance(x, ast.Subscript):
        return isinstance(x.slice, ast.Constant) and x.slice.value == "fstype"
    if isinstance(x, ast.Call) and isinstance(x.func, ast.Attribute) and x.func.attr == "get":
        return bool(x.args) and isinstance(x.args[0], ast.Constant) \
            and x.args[0].value == "fstype"
    return False


def test_no_module_outside_the_clients_compares_a_filesystem_type():
    """Callers ask the client object (clients/registry.for_mount and its flags), never the
    mount's type by name: a new client is one module and one registry line.  Read from the
    AST: a comparison (==, !=, in) or a startswith/endswith of a mount's type with a
    filesystem's name that some registered client serves or names."""
    from mpiwrite.clients import registry

    names = {"fuse", "fuse.", "fuseblk", "fuseblk."}
    for c in registry.every():
        names |= set(c.fstypes) | set(c.magics.values()) | {c.name}

    def literal(x):
        if isinstance(x, ast.Constant):
            return x.value in names
        return isinstance(x, (ast.Tuple, ast.List, ast.Set)) and any(map(literal, x.elts))

    found = []
    for name, path in modules().items():
        if name.startswith("clients."):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Compare):
                sides = [node.left] + list(node.comparators)
                if any(map(_names_fstype, sides)) and any(map(literal, sides)):
                    found.append(f"{name}:{node.lineno}")
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr in ("startswith", "endswith") \
                    and _names_fstype(node.func.value) and any(map(literal, node.args)):
                found.append(f"{name}:{node.lineno}")
    assert not found, found


def test_subpackage_init_files_are_empty():
    """No import side effects: a rank's start-up imports only what it uses."""
    for folder in FOLDERS:
        assert (PKG / folder / "__init__.py").read_text() == "", folder


# The modules that may touch MPI, and why; every other module reaches MPI through a Team.
MPI_MODULES = {
    "run.parallel": "every message of a run: Team",
    "run.clocks": "the node leaders' clock ping-pong",
    "run.guard": "starts MPI and aborts the world when the guard's line cannot be sent",
    "cli.ranks": "finalizes MPI as a rank leaves",
    "engines.mpiio": "the MPI-IO engine: MPI_File_* on the team's communicator",
}
MPI_ATTRS = {"comm", "fcomm", "node_comm", "COMM_WORLD", "COMM_NULL", "MPI"}


def mpi_uses(path: pathlib.Path):
    """Where a module touches MPI itself: imports mpi4py, names MPI, or reaches a
    communicator (`.comm`, `.MPI`, COMM_WORLD, ...); line numbers."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] + [getattr(node, "module", None) or ""]
            if any(n.split(".")[0] == "mpi4py" for n in names):
                yield node.lineno, "imports mpi4py"
        elif isinstance(node, ast.Attribute) and node.attr in MPI_ATTRS:
            yield node.lineno, f".{node.attr}"
        elif isinstance(node, ast.Name) and node.id == "MPI":
            yield node.lineno, "MPI"


def test_mpi_is_called_only_where_the_house_allows_it():
    """Over every module (an AST rule, not a list of files to look in): only MPI_MODULES
    touch MPI; the runner, the guard's steps, the study and everything else go through
    their Team."""
    found = {name: list(mpi_uses(path)) for name, path in modules().items()
             if name not in MPI_MODULES}
    assert not {n: u for n, u in found.items() if u}, found
    for name in MPI_MODULES:  # the exceptions exist (a renamed module is not exempt)
        assert name in modules(), name


def test_the_rule_sees_an_mpi_call(tmp_path):
    bad = tmp_path / "m.py"
    bad.write_text("def f(team):\n    return team.comm.Split(0, 1)\n")
    assert list(mpi_uses(bad)) == [(2, ".comm")]


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_wheel_holds_every_subpackage_and_its_commands_run(tmp_path):
    """Build the wheel without network (setuptools from the test environment), install it into a
    folder of its own, and run its commands from there."""
    root = PKG.parent
    out = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                          "-w", str(tmp_path / "dist"), str(root)],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    wheel = next((tmp_path / "dist").glob("mpiwrite-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    for name, path in modules().items():
        assert path.relative_to(root).as_posix() in names, name
    for schema in (PKG / "formats" / "schemas").glob("*.json"):
        assert schema.relative_to(root).as_posix() in names
    # installed into a folder of its own, ahead of the checkout on the path: the test
    # environment's mpi4py, numpy, h5py and click serve it, the checkout does not
    site = tmp_path / "site"
    out = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index",
                          "--target", str(site), str(wheel)],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["PYTHONPATH"] = str(site)
    where = subprocess.run([sys.executable, "-c",
                            "import mpiwrite.run.runner as r, mpiwrite.formats.contract as c; "
                            "print(r.__file__); print(len(c.schema('run')))"],
                           cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env)
    assert where.returncode == 0, where.stderr
    assert where.stdout.startswith(str(site))
    for cmd in (["mpiwrite", "--version"], ["mpiwrite", "env", str(tmp_path)],
                ["mpiwrite", "run", "d", "-s", "1M", "--no-record", "--progress-interval", "0"],
                ["mpiwrite-man", str(tmp_path / "man")]):
        out = subprocess.run([str(site / "bin" / cmd[0])] + cmd[1:], cwd=tmp_path,
                             capture_output=True, text=True, timeout=120, env=env)
        assert out.returncode == 0, (cmd, out.stderr)
    assert (tmp_path / "man" / "mpiwrite-run.1").is_file()


def test_no_module_is_over_800_lines():
    """Modules are split by concept, not by a line count (a 500-line cap once split modules
    where they fit, not where they change together); a module past 800 lines is the sign
    that it holds more than one concept: split it by concept."""
    long = {n: len(p.read_text().splitlines()) for n, p in modules().items()}
    assert not {n: k for n, k in long.items() if k > 800}, long


# Modules that list words of the tables in another sense, and why.
SPELLING_EXEMPT = {
    "records.check": "the facts' own structure (lustre, fs and client are objects there), "
                     "checked before any key is made from them",
    "importers.fio": "fio's own option names (direct, fsync), which two jobs must share",
    "importers.elbencho": "elbencho's own settings (block size, direct IO), which a WRITE and "
                          "the READ after it must share to be one run",
    "importers.ior": "which of a test's settings IOR's command line already gave",
    "importers.mpiwrite_json": "an mpiwrite JSON document's fields, checked by their types "
                               "before any key is made from them",
}


def spelled_lists(path: pathlib.Path, words: set):
    """List, tuple and set literals of a module that name two or more of `words`."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            named = [e.value for e in node.elts
                     if isinstance(e, ast.Constant) and isinstance(e.value, str)
                     and e.value in words]
            if len(named) >= 2:
                yield node.lineno, named


def test_the_tables_are_the_only_spelling_of_keys_options_and_metrics():
    """No list, tuple or set outside vocab/keys.py and vocab/metrics.py names two node-fact
    keys, two run options that are keys, or two metrics: every such list is read from the
    table (a client may list the keys it owns, in its own modules)."""
    from mpiwrite.vocab import keys, metrics

    words = set(keys.NODE_COLUMNS) | set(metrics.NAMES) | {
        k.name for k in keys.TABLE if k.source == keys.OPTION}
    found = {}
    for name, path in modules().items():
        if name in ("vocab.keys", "vocab.metrics") or name in SPELLING_EXEMPT:
            continue
        for line, named in spelled_lists(path, words):
            owner = name.startswith("clients.") and any(
                name.split(".")[1].startswith(o) and set(named) <= set(keys.owned(o))
                | {k.name for k in keys.TABLE if k.owner == o} for o in keys.owners())
            if not owner:
                found[f"{name}:{line}"] = named
    assert not found, found


def test_the_spelling_rule_sees_a_list(tmp_path):
    bad = tmp_path / "m.py"
    bad.write_text('SHOWN = ("kernel", "fstype")\nOK = ("kernel", "size")\n')
    assert list(spelled_lists(bad, {"kernel", "fstype"})) == [(1, ["kernel", "fstype"])]


def test_every_metric_name_has_its_figures():
    """--metric's names are written once (vocab/metrics.py, which the command line reads
    without numpy); each is a column of the iterations table or one of the sources
    answers/results.py computes."""
    from mpiwrite.answers import results
    from mpiwrite.formats.summary import ITER_DTYPE
    from mpiwrite.vocab import metrics as metricnames

    sources = {metricnames.COLUMN, metricnames.PER_NODE, metricnames.CPU, metricnames.STONEWALL}
    for m in metricnames.TABLE:
        assert m.source in sources, m
        if m.source == metricnames.COLUMN:
            assert m.column in ITER_DTYPE.names and results.METRICS[m.name] == m.column, m
    assert set(metricnames.NAMES) == set(results.METRICS) | set(results.CPU_METRICS) | {
        m.name for m in metricnames.TABLE if m.source in (metricnames.PER_NODE,
                                                           metricnames.STONEWALL)}

def test_the_null_ledger_takes_every_call_the_steps_make():
    """Ranks other than 0 hold run/prepare.NullLedger (docs/architecture.md): each ledger
    call in runner.py and guard.py must be one it takes (but those only rank 0 reaches: the
    timeout, from rank 0's progress board; finish, behind keeps_record), and it must offer
    nothing the real Ledger lacks."""
    import re

    from mpiwrite.run.ledger import Ledger
    from mpiwrite.run.prepare import NullLedger

    used = set()
    for name in ("runner.py", "guard.py"):
        used |= set(re.findall(r"(?:self|run)\.ledger\.(\w+)", (PKG / "run" / name).read_text()))
    null = NullLedger()
    assert {n for n in used - {"timed_out", "finish"} if not hasattr(null, n)} == set()
    offered = {n for n in dir(null) if not n.startswith("_")}
    assert {n for n in offered if not hasattr(Ledger, n) and n not in ("extra", "keys")} \
        == set()


# -- one entrance for untrusted records ------------------------------------------------------
# libhdf5 parses a record (a file anyone may have made) only in the record sandbox's worker
# process: records/worker.py is the one module that calls the HDF5 read.  The readers are
# found from the AST: the functions of records/ that open an HDF5 file for reading
# (h5py.File without a writing mode, h5py.h5f.open, h5py.h5f.open_file_image), and every
# function of records/ that calls one of them, but for the worker's.
READING_ENTRANCE = {"records.worker"}
# functions that read back only an image this process has just built in memory (its own
# bytes, never a file): not readers of records (records/h5.py stamps what a reader will see)
OWN_IMAGE = {("records.h5", "_seen")}
ROOTS = (PKG, PKG.parent / "benchmarks", PKG.parent / "reframe")


def _opens_hdf5_to_read(call: ast.Call) -> bool:
    func = ast.unparse(call.func)
    if func.endswith(("h5f.open_file_image", "h5f.open")):
        return True
    if func.endswith("h5py.File"):
        mode = call.args[1] if len(call.args) > 1 else next(
            (k.value for k in call.keywords if k.arg == "mode"), None)
        return mode is None or isinstance(mode, ast.Constant) and mode.value == "r"
    return False


def _calls(tree: ast.Module, here: str):
    """(the top-level function it is made in or None, (module, function) called) for each
    call of this module that names a module's function: f() of this module's own top-level
    functions or of a name imported from a module, m.f() of an imported module."""
    aliases, names = {}, {}
    own = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module \
                and node.module.startswith("mpiwrite."):
            base = node.module[len("mpiwrite."):]
            for a in node.names:
                aliases[a.asname or a.name] = f"{base}.{a.name}"  # if a.name is a module
                names[a.asname or a.name] = (base, a.name)  # if a.name is a function
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("mpiwrite.") and a.asname:
                    aliases[a.asname] = a.name[len("mpiwrite."):]
    for top in tree.body:
        where = top.name if isinstance(top, (ast.FunctionDef, ast.AsyncFunctionDef)) else None
        for node in ast.walk(top):
            if not isinstance(node, ast.Call):
                continue
            f = node.func
            if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) \
                    and f.value.id in aliases:
                yield where, (aliases[f.value.id], f.attr)
            elif isinstance(f, ast.Name) and f.id in own:
                yield where, (here, f.id)
            elif isinstance(f, ast.Name) and f.id in names:
                yield where, names[f.id]


def _trees():
    for root in ROOTS:
        for path in root.rglob("*.py"):
            rel = path.relative_to(root).with_suffix("")
            name = ".".join(rel.parts) if root == PKG else f"{root.name}.{'.'.join(rel.parts)}"
            yield name, ast.parse(path.read_text())


def hdf5_readers():
    """{(module, function)}: the record's HDF5 readers of records/ (see above)."""
    trees = {n: t for n, t in _trees() if n.startswith("records.")}
    readers = set()
    for name, tree in trees.items():
        for top in tree.body:
            if isinstance(top, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                    isinstance(c, ast.Call) and _opens_hdf5_to_read(c) for c in ast.walk(top)) \
                    and (name, top.name) not in OWN_IMAGE:
                readers.add((name, top.name))
    while True:
        more = {(name, where) for name, tree in trees.items() if name not in READING_ENTRANCE
                for where, called in _calls(tree, name) if where and called in readers}
        if more <= readers:
            return readers
        readers |= more


def test_only_the_sandbox_worker_reads_a_record_with_libhdf5():
    """Reading a record's HDF5 is private to records/: its readers are private functions,
    and no module calls or imports one but the worker of the sandbox (and the readers
    themselves).  tests/ may: they read records they made, and the reader's own checks."""
    readers = hdf5_readers()
    assert ("records.h5", "_read") in readers and ("records.runlevel", "_extract") in readers
    assert not [r for r in readers if not r[1].startswith("_")], readers
    found = []
    for name, tree in _trees():
        if name in READING_ENTRANCE:
            continue
        for where, called in _calls(tree, name):
            if called in readers and (name, where) not in readers:
                found.append(f"{name}.{where} calls {'.'.join(called)}")
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and any(
                    (node.module[len("mpiwrite."):], a.name) in readers for a in node.names):
                found.append(f"{name}:{node.lineno} imports a reader from {node.module}")
    assert not found, found
    worker = dict(_trees())["records.worker"]
    assert {c for _w, c in _calls(worker, "records.worker")} & readers  # the one caller


def test_the_python_api_loads_no_mpi_and_no_h5py():
    code = ("import sys, mpiwrite; mpiwrite.load; "
            "print(sorted(m for m in ('mpi4py', 'h5py', 'numpy', 'click') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, cwd=PKG.parent)
    assert out.returncode == 0 and out.stdout.strip() == "[]", (out.stdout, out.stderr)
    import mpiwrite
    from mpiwrite.answers import results
    assert callable(mpiwrite.load) and callable(results.load)


def test_no_test_names_an_issue_or_a_round():
    """A test says what behaviour it holds, not which issue or round of testing found it:
    issues close and rounds are forgotten, the behaviour stays."""
    import re

    said = re.compile(r"\b(issue \d+|issue's|round \d)\b", re.I)
    found = []
    for path in sorted(TESTS.rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef)):
                doc = ast.get_docstring(node) or ""
                if said.search(doc):
                    found.append(f"{path.name}:{getattr(node, 'lineno', 1)}")
        for no, line in enumerate(path.read_text().splitlines(), 1):
            if line.lstrip().startswith("#") and said.search(line):
                found.append(f"{path.name}:{no}")
    assert not found, found
