"""HDF5 objects of an untrusted record read through h5py's low-level API, fast: memory types
made once, each table's type looked at once per distinct type, no h5py object made that is
not needed (docs/history.md: a cold report reads thousands of records this way, in a
worker of records/sandbox.py).  The checks are recordcheck.Checker's; what is read is
runlevel._extract's choice.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

import numpy as np

from mpiwrite.records import check as recordcheck
from mpiwrite.records import h5 as records

_TYPES: Dict[Any, Any] = {}
_MEMBERS: Dict[bytes, Dict[str, str]] = {}
_PLANS: Dict[Any, Any] = {}


def mtype(dt: np.dtype):
    """The HDF5 memory type of a numpy dtype, made once (at most 64 kept)."""
    import h5py

    if dt not in _TYPES:
        if len(_TYPES) > 64:
            _TYPES.clear()
        _TYPES[dt] = h5py.h5t.py_create(dt)
    return _TYPES[dt]


def links_of(root) -> Dict[str, int]:
    """The root's links and their kinds (hard, soft, external), in one pass."""
    out: Dict[str, int] = {}
    root.links.iterate(lambda name, info: out.__setitem__(name.decode("utf-8", "replace"),
                                                          info.type), info=True)
    return out


def root_attrs(root) -> Dict[str, Any]:
    """The root's attributes: scalars as records.raw_attrs gives them (text and numbers
    read through memory types made once), arrays and compounds as JSON lists (`listed`).
    The fast path of a cold report (14 to 25 attributes a record): no h5py object made
    that is not needed."""
    import h5py

    h5a, h5t, h5s = h5py.h5a, h5py.h5t, h5py.h5s
    text_dt, i8, u8, f8 = scalar_types()
    out: Dict[str, Any] = {}
    for i in range(h5a.get_num_attrs(root)):
        a = h5a.open(root, index=i)
        name = a.name.decode("utf-8", "replace")
        tid = a.get_type()
        cls = tid.get_class()
        if a.get_space().get_simple_extent_type() == h5s.SCALAR:
            if cls == h5t.STRING and tid.is_variable_str():
                arr = np.empty((), text_dt[0])
                a.read(arr, mtype=text_dt[1])
                out[name] = _text(arr[()])
                continue
            if cls == h5t.INTEGER:
                dt = i8 if tid.get_sign() == h5t.SGN_2 or tid.get_size() < 8 else u8
                arr = np.empty((), dt[0])
                a.read(arr, mtype=dt[1])
                out[name] = int(arr)
                continue
            if cls == h5t.FLOAT:
                arr = np.empty((), f8[0])
                a.read(arr, mtype=f8[1])
                out[name] = float(arr)
                continue
        arr = np.empty(a.shape, a.dtype)
        a.read(arr)
        value = records.raw_attrs([(name, arr[()] if arr.shape == () else arr)])[name]
        out[name] = listed(name, value) if isinstance(value, (np.ndarray, tuple)) else value
    return out


MAX_ATTR_VALUES = 100_000


def _text(v: Any) -> Any:
    """Text as h5py's own reading decodes it (h5._read): bytes that are not UTF-8 kept
    as surrogates, which the checks of text then refuse or escape."""
    return v.decode("utf-8", "surrogateescape") if isinstance(v, bytes) else v


def listed(name: str, value: Any) -> Any:
    """An array (or compound) attribute as JSON values, as a site adds one with h5py
    (`h5.attrs["tickets"] = [101, 102]`): lists, text as h5py decodes it.  h5._read
    keeps such an attribute as it is; the run-level part must be JSON, and must not refuse
    a record that `show` reads."""
    if isinstance(value, np.ndarray):
        if value.size > MAX_ATTR_VALUES:
            raise ValueError(f"attribute {name}: {value.size} values, more than the "
                             f"{MAX_ATTR_VALUES} read")  # named with the file by the caller
        value = value.tolist()
    value = list(value)  # a compound's tuple, or the array's outer list
    todo = [value]
    while todo:
        items = todo.pop()
        for i, x in enumerate(items):
            if isinstance(x, bytes):
                items[i] = _text(x)
            elif isinstance(x, (list, tuple)):
                items[i] = list(x)
                todo.append(items[i])
    return value


_SCALARS: List[Any] = []
_NODES: List[Any] = []


def node_type():
    """(numpy dtype, HDF5 memory type) of the nodes' columns a report uses, made once."""
    if not _NODES:
        import h5py

        dt = np.dtype([("facts_json", h5py.string_dtype()), ("clock_offset_seconds", "<f8"),
                       ("clock_uncertainty_seconds", "<f8")])
        _NODES.append((dt, h5py.h5t.py_create(dt)))
    return _NODES[0]


def scalar_types():
    """(numpy dtype, HDF5 memory type) of text, int64, uint64 and float64, made once."""
    if not _SCALARS:
        import h5py

        for dt in (h5py.string_dtype(), np.dtype("<i8"), np.dtype("<u8"), np.dtype("<f8")):
            _SCALARS.append((dt, h5py.h5t.py_create(dt)))
    return _SCALARS


def dataset(ck, root, name: str):
    """(dataset id, rows, file type) after the checks of Checker.dataset."""
    import h5py

    try:
        d = h5py.h5d.open(root, name.encode())
    except (KeyError, ValueError) as exc:
        raise ck.fail(name, f"is not a dataset ({exc})") from None
    dcpl = d.get_create_plist()
    if dcpl.get_layout() == h5py.h5d.VIRTUAL:
        raise ck.fail(name, "is a virtual dataset (refused: it reads other files)")
    if dcpl.get_external_count():
        raise ck.fail(name, "uses external storage (refused: it reads other files)")
    space = d.get_space()
    if space.get_simple_extent_ndims() != 1:
        raise ck.fail(name, f"expected one dimension, found shape "
                      f"{space.get_simple_extent_dims()}")
    return d, int(space.get_simple_extent_dims()[0]), d.get_type()


_WHOLE: Dict[bytes, np.dtype] = {}


def whole_type(tid) -> np.dtype:
    """The numpy dtype h5py's high-level API reads a dataset of type `tid` as (what `show`
    reads), worked out once per distinct type."""
    key = tid.encode()
    if key not in _WHOLE:
        if len(_WHOLE) > 64:
            _WHOLE.clear()
        _WHOLE[key] = tid.dtype
    return _WHOLE[key]


def members(tid) -> Dict[str, str]:
    """A compound type's fields as numpy kind letters (recordcheck.member_kinds), worked
    out once per distinct type: the same type in every record of a version."""
    key = tid.encode()
    if key in _MEMBERS:
        return _MEMBERS[key]
    if len(_MEMBERS) > 64:  # bounded whatever the records hold
        _MEMBERS.clear()
    out = _MEMBERS[key] = recordcheck.member_kinds(tid)
    return out


def ck_rows(ck, name: str, n: int, max_rows: int, itemsize: int) -> None:
    if n > max_rows or n * itemsize > recordcheck.MAX_TABLE_BYTES:
        raise ck.fail(name, f"{n} rows is more than the declared ranks and iterations "
                      f"allow ({max_rows}); refused before reading")


def table(ck, root, name: str, expected: np.dtype, max_rows: int, later: tuple,
           used: Optional[tuple] = None):
    """Checker.table through the low-level API: the same checks, the same result (with
    `used`: only those fields read, every field's type checked all the same).  What a type
    of table needs (its fields checked, the memory type) is worked out once per type."""
    import h5py

    d, n, tid = dataset(ck, root, name)
    full = expected.itemsize
    key = (tid.encode(), expected, later, used)
    plan = _PLANS.get(key)
    if plan is None:
        kinds = members(tid)
        if not kinds:
            raise ck.fail(name, "expected a table with fields")
        present = ck.fields(name, kinds, expected, later)  # raises: nothing kept
        if used:
            present = [f for f in present if f in used]
            expected = np.dtype([(f, expected[f]) for f in expected.names if f in used])
        mdt = np.dtype([(f, expected[f]) for f in present])
        if len(_PLANS) > 64:
            _PLANS.clear()
        plan = _PLANS[key] = (present, expected, mdt, mtype(mdt), mdt == expected)
    present, out_dt, mdt, mt, whole = plan
    ck_rows(ck, name, n, max_rows, max(full, tid.get_size()))
    raw = np.empty(n, mdt)
    if n:
        d.read(h5py.h5s.ALL, h5py.h5s.ALL, raw, mt)
    if whole:  # every field there: the rows read are the table
        ck.finite(name, raw)
        return raw
    return ck.fill(name, raw, present, out_dt)
