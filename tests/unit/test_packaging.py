"""Packaging recipes: the Spack package read with a stand-in for Spack's directives, and the
Apptainer definition's sections.  Neither Spack nor Apptainer runs here (see each file)."""

import importlib.util
import os
import re
import sys
import types

import pytest
from common import ROOT as REPO

ROOT = str(REPO)
SPACK_PACKAGE = os.path.join(ROOT, "packaging", "spack", "packages", "py-mpiwrite",
                             "package.py")
APPTAINER_DEF = os.path.join(ROOT, "packaging", "apptainer", "mpiwrite.def")


def load_spack_recipe(monkeypatch):
    """Import package.py with `spack.package` replaced by recorders of its directives."""
    calls = []

    def directive(name):
        return lambda *args, **kwargs: calls.append((name, args, kwargs))

    class PythonPackage:
        pass

    stub = types.ModuleType("spack.package")
    names = ["version", "variant", "depends_on", "license", "maintainers", "conflicts"]
    for name in names:
        setattr(stub, name, directive(name))
    stub.PythonPackage = PythonPackage
    stub.__all__ = names + ["PythonPackage"]
    monkeypatch.setitem(sys.modules, "spack", types.ModuleType("spack"))
    monkeypatch.setitem(sys.modules, "spack.package", stub)
    spec = importlib.util.spec_from_file_location("spack_py_mpiwrite", SPACK_PACKAGE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, PythonPackage, calls


def pyproject_dependencies():
    tomllib = pytest.importorskip("tomllib")
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as fh:
        doc = tomllib.load(fh)
    deps = {}
    for req in doc["project"]["dependencies"]:
        name, bound, marker = re.match(
            r"^([A-Za-z0-9_.-]+)>=([0-9.]+)(?:; python_version < '(\d+)\.(\d+)')?$",
            req).group(1, 2, 4)
        # a dependency for older Pythons only: Spack's `when` names the last one that needs it
        deps[f"py-{name.lower()}"] = (bound, f"^python@:3.{int(marker) - 1}" if marker else None)
    return deps, doc


def version(text):
    parts = [int(p) for p in text.split(".")]
    while parts and parts[-1] == 0:
        parts.pop()
    return parts


def test_spack_recipe_declares_what_pyproject_needs(monkeypatch):
    module, base, calls = load_spack_recipe(monkeypatch)
    assert issubclass(module.PyMpiwrite, base)
    deps = {}
    for name, args, kwargs in calls:
        if name == "depends_on":
            spec = args[0]
            pkg, _, bound = spec.partition("@")
            deps[pkg] = (bound.rstrip(":"), kwargs.get("type"), kwargs.get("when"))
    wanted, doc = pyproject_dependencies()
    for pkg, (bound, only_when) in wanted.items():
        assert pkg in deps, f"{pkg} missing from the Spack recipe"
        have, kind, when = deps[pkg]
        assert version(have) == version(bound), (pkg, have, bound)
        assert "run" in kind and when == only_when, (pkg, when, only_when)
    assert deps["py-setuptools"][1] == "build"
    assert deps["python"][0] == doc["project"]["requires-python"].lstrip(">=")
    assert any(name == "version" for name, *_ in calls)
    assert "mpiwrite" in module.PyMpiwrite.import_modules


def def_sections(text):
    header, _, rest = text.partition("\n%")
    sections = {}
    for chunk in ("%" + rest).split("\n%"):
        name, _, body = chunk.lstrip("%").partition("\n")
        sections[name.strip()] = body
    return header, sections


def test_apptainer_definition_is_complete():
    with open(APPTAINER_DEF) as fh:
        header, sections = def_sections(fh.read())
    keys = dict(ln.split(":", 1) for ln in header.splitlines()
                if ln.strip() and not ln.startswith("#"))
    assert keys["Bootstrap"].strip() == "docker" and keys["From"].strip().startswith("debian:")
    assert {"labels", "help", "setup", "files", "post", "environment", "runscript",
            "test"} <= set(sections)
    for line in sections["files"].split("\n"):
        if line.strip() and not line.strip().startswith("#"):
            assert os.path.exists(os.path.join(ROOT, line.split()[0])), line
    assert "mpi4py>=4.1" in sections["post"] and "[mpich]" not in sections["post"]
    assert "openmpi-bin" in sections["post"]
    assert "MPI4PY_LIBMPI=${MPI4PY_LIBMPI:-libmpi.so.40}" in sections["environment"]
    assert 'exec /opt/mpiwrite/bin/mpiwrite "$@"' in sections["runscript"]
    assert "--mpi-lib-version" in sections["test"]


HEAVY = ("pandas", "matplotlib", "scipy", "reframe-hpc", "ruff")


def test_the_quick_starts_test_extra_is_light_and_test_full_has_the_rest():
    """The README's install brings what the core tests need; what only some tests use is in
    test-full, which .ci/run installs, and each such test skips naming the package."""
    _deps, doc = pyproject_dependencies()
    extras = doc["project"]["optional-dependencies"]
    names = {e: {re.split(r"[<>=\[;]", r, maxsplit=1)[0].strip() for r in reqs}
             for e, reqs in extras.items()}
    assert not set(HEAVY) & names["test"], names["test"]
    assert set(HEAVY) <= names["test-full"] and "mpiwrite" in names["test-full"]
    with open(os.path.join(ROOT, ".ci", "run")) as fh:
        assert ".[mpich,test-full]" in fh.read()
    with open(os.path.join(ROOT, "README.md")) as fh:
        readme = fh.read()
    assert "pip install -e '.[mpich,test]'" in readme and "test-full" in readme
    tests = os.path.join(ROOT, "tests")
    for name in sorted(os.listdir(tests)):
        if name.startswith("test_") and name.endswith(".py"):
            with open(os.path.join(tests, name)) as fh:
                for ln in fh:
                    bare = re.match(r"^(?:import|from) (pandas|matplotlib|scipy|reframe)\b", ln)
                    assert not bare, f"{name}: {ln.strip()} (use pytest.importorskip)"
