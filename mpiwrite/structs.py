"""Value classes for what every rank loads, without the dataclasses module.

`dataclasses` imports `inspect`, which imports `ast`, `dis`, `tokenize`, `linecache` and
more: some 100 file-system calls a rank at start-up (measured: `python -c 'import typing,
json, dataclasses'` against the same without dataclasses, 2,647 against 2,547 calls), which
at a thousand nodes land on the filesystem that holds the install (docs/scaling.md).  The
run's settings (run/config.RunConfig) and the engines' plans and results (engines/base.py,
posix.py) are such classes; modules that only rank 0 or a command loads keep dataclasses.

    @structs.value(frozen=True)
    class Plan:
        size: int
        tags: Dict[str, str] = structs.field(dict)

gives `Plan(size, tags=...)` (positional in the order written, or by name; a field without
a default is required), equality and repr by the fields, and for a frozen class no
assignment after construction.  `replace(obj, **changes)` and `asdict(obj)` work as
dataclasses' do for these classes (asdict copies dicts and lists one level down, and turns
nested value objects into dicts).
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Tuple

_NO_DEFAULT = object()


class field:  # noqa: N801 - used like dataclasses.field, in the class body
    """A default made anew for each object (a dict, a list)."""

    def __init__(self, factory: Callable[[], Any]):
        self.factory = factory


def _fields(cls) -> Tuple[Tuple[str, Any], ...]:
    """(name, default or field or _NO_DEFAULT) in the order written, base classes first."""
    out: Dict[str, Any] = {}
    for klass in reversed(cls.__mro__):
        if "_value_specs" in klass.__dict__:  # a value class's own, defaults kept there
            out.update(klass.__dict__["_value_specs"])
            continue
        for name in klass.__dict__.get("__annotations__", {}):
            if name.startswith("__") or str(klass.__dict__["__annotations__"][name]).startswith(
                    ("ClassVar", "typing.ClassVar")):
                continue
            out[name] = klass.__dict__.get(name, out.get(name, _NO_DEFAULT))
    return tuple(out.items())


def value(frozen: bool = False):
    """The class decorator: __init__, __eq__, __repr__ (and, frozen, no __setattr__)."""

    def wrap(cls):
        specs = _fields(cls)
        names = tuple(name for name, _d in specs)
        required = [name for name, d in specs if d is _NO_DEFAULT]
        seen_default = False
        for name, d in specs:
            if d is _NO_DEFAULT and seen_default:
                raise TypeError(f"{cls.__name__}: field {name!r} without a default follows "
                                "one with a default")
            seen_default = seen_default or d is not _NO_DEFAULT

        def __init__(self, *args, **kwargs):
            if len(args) > len(names):
                raise TypeError(f"{cls.__name__}() takes {len(names)} arguments, "
                                f"{len(args)} given")
            given = dict(zip(names, args))
            for key in kwargs:
                if key not in names:
                    raise TypeError(f"{cls.__name__}() got an unexpected argument {key!r}")
                if key in given:
                    raise TypeError(f"{cls.__name__}() got {key!r} twice")
            given.update(kwargs)
            missing = [n for n in required if n not in given]
            if missing:
                raise TypeError(f"{cls.__name__}() missing {', '.join(missing)}")
            for name, default in specs:
                if name in given:
                    v = given[name]
                else:
                    v = default.factory() if isinstance(default, field) else default
                object.__setattr__(self, name, v)
            post = getattr(self, "__post_init__", None)
            if post is not None:
                post()

        def __eq__(self, other):
            if other.__class__ is not self.__class__:
                return NotImplemented
            return all(getattr(self, n) == getattr(other, n) for n in names)

        def __repr__(self):
            return f"{cls.__qualname__}(" + ", ".join(
                f"{n}={getattr(self, n)!r}" for n in names) + ")"

        cls.__init__ = __init__
        cls.__eq__ = __eq__
        cls.__repr__ = __repr__
        cls.__hash__ = None  # as dataclasses' eq=True: compared by value, not hashed
        cls._value_fields = names
        cls._value_specs = specs
        for name, default in specs:  # the class keeps plain defaults, not the factories
            if isinstance(default, field) and name in cls.__dict__:
                delattr(cls, name)
        if frozen:
            def __setattr__(self, name, v):
                raise AttributeError(f"{cls.__name__} is frozen: cannot assign {name!r}")

            def __delattr__(self, name):
                raise AttributeError(f"{cls.__name__} is frozen: cannot delete {name!r}")

            def __hash__(self):  # as dataclasses' frozen=True: by the fields' values
                return hash(tuple(getattr(self, n) for n in names))

            cls.__setattr__ = __setattr__
            cls.__delattr__ = __delattr__
            cls.__hash__ = __hash__
        return cls

    return wrap


def fields(obj_or_cls) -> Tuple[str, ...]:
    return obj_or_cls._value_fields


def replace(obj, **changes):
    """A copy of a value object with some fields changed."""
    names = fields(obj)
    for key in changes:
        if key not in names:
            raise TypeError(f"{type(obj).__name__} has no field {key!r}")
    return type(obj)(**{n: changes.get(n, getattr(obj, n)) for n in names})


def asdict(obj) -> Dict[str, Any]:
    """The fields as a dict (nested value objects as dicts; dicts, lists, tuples copied)."""

    def plain(v):
        if hasattr(type(v), "_value_fields"):
            return asdict(v)
        if isinstance(v, dict):
            return {k: plain(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return type(v)(plain(x) for x in v)
        return v

    return {n: plain(getattr(obj, n)) for n in fields(obj)}
