"""mpiwrite/structs.py: the value classes every rank loads instead of dataclasses (whose
import costs some 100 file-system calls a rank at start-up)."""

import subprocess
import sys
from typing import Dict, List, Optional

import pytest

from mpiwrite import structs
from mpiwrite.engines.base import ReadResult, StreamPlan, StreamResult
from mpiwrite.run.config import RunConfig


@structs.value(frozen=True)
class Frozen:
    size: int
    name: str = "a"
    tags: Dict[str, str] = structs.field(dict)


@structs.value()
class Base:
    path: str
    n: int = 0
    items: List[int] = structs.field(list)


@structs.value()
class Child(Base):
    extra: Optional[str] = None


def test_fields_in_order_defaults_and_fresh_factories():
    a, b = Frozen(3), Frozen(size=4, name="b")
    assert (a.size, a.name, a.tags) == (3, "a", {}) and (b.size, b.name) == (4, "b")
    assert a.tags is not Frozen(3).tags  # a new dict for every object
    assert Frozen(3) == Frozen(3) and Frozen(3) != Frozen(3, "b")
    assert repr(Frozen(3)) == "Frozen(size=3, name='a', tags={})"
    assert structs.fields(Frozen) == ("size", "name", "tags")


def test_frozen_refuses_assignment_and_hashes_by_value():
    f = Frozen(1)
    with pytest.raises(AttributeError, match="frozen"):
        f.size = 2
    assert hash(Frozen(1, "x", None)) == hash(Frozen(1, "x", None))
    with pytest.raises(TypeError):
        hash(Base("p"))  # a mutable value class is compared by value, never hashed


def test_bad_arguments_are_refused():
    with pytest.raises(TypeError, match="missing size"):
        Frozen()
    with pytest.raises(TypeError, match="unexpected"):
        Frozen(1, colour="red")
    with pytest.raises(TypeError, match="twice"):
        Frozen(1, size=2)
    with pytest.raises(TypeError, match="without a default"):
        @structs.value()
        class Bad:
            a: int = 1
            b: int


def test_inheritance_replace_and_asdict():
    c = Child("p", 2, [1], "x")
    assert structs.fields(Child) == ("path", "n", "items", "extra")
    assert Child("q").items == [] and Child("q").items is not Child("q").items
    d = structs.replace(c, n=5)
    assert (d.path, d.n, d.extra) == ("p", 5, "x") and c.n == 2
    with pytest.raises(TypeError, match="no field"):
        structs.replace(c, colour=1)
    out = structs.asdict(c)
    assert out == {"path": "p", "n": 2, "items": [1], "extra": "x"}
    assert out["items"] is not c.items


def test_the_runs_classes_are_value_classes():
    cfg = RunConfig(tags={"a": "1"})
    assert structs.replace(cfg, tags={}).to_json() != cfg.to_json()
    assert RunConfig() == RunConfig() and RunConfig().tags is not RunConfig().tags
    assert isinstance(ReadResult("p"), StreamResult) and ReadResult("p").samples == []
    assert "samples" in structs.fields(ReadResult)
    assert structs.fields(StreamPlan)


def test_a_rank_loads_no_dataclasses():
    """What a rank other than 0 imports for a run (the run's settings, the engines, the
    guard) loads neither dataclasses nor inspect."""
    code = ("import sys; import mpiwrite.run.guard, mpiwrite.engines.posix, "
            "mpiwrite.engines.null, mpiwrite.cli.ranks; "
            "print(sorted(m for m in ('dataclasses', 'inspect') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]", out.stdout
