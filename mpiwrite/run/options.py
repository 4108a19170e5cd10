"""The options of `mpiwrite run`, read from their table (vocab/keys.OPTIONS, where each is
declared once with the run key it is: docs/architecture.md, "Change recipes").

- cli/runcmd.py makes the click options from the table;
- `parse` converts a value as the command line would (no click: a study's points and the
  ranks that take rank 0's options check values with it, cli/ranks.py, study/points.py);
- run/config.py makes RunConfig's fields of the `field` entries and maps the parsed options
  onto them (the few that combine, such as --tag with --tag-file, by name there);
- `option_name` names the option of a setting in messages.

Pure standard library and the vocabulary: a rank's start-up imports it (docs/scaling.md).
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Optional, Tuple

from mpiwrite.units import parse_size, parse_time
from mpiwrite.vocab.keys import OPTIONS as TABLE
from mpiwrite.vocab.keys import Opt

ASCII_INT_MOST = 2 ** 62


def ascii_int(value: Any, most: int = ASCII_INT_MOST) -> int:
    """An integer written in ASCII digits (an optional '-'), at most `most` in size: Python's
    int() also takes '١٢' (Arabic-Indic digits), '1_0' and ' 12 ', which would record 12
    iterations from a typo or a pasted value.  ValueError says why not."""
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    else:
        text = str(value)
        digits = text[1:] if text.startswith("-") else text
        if not (digits.isascii() and digits.isdigit()):
            raise ValueError(f"{text!r} is not a whole number in digits 0-9")
        number = int(text)
    if abs(number) > most:
        raise ValueError(f"{number} is beyond {most}")
    return number


def size(value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        n = value
    else:
        n = parse_size(value)
    if n <= 0:
        raise ValueError(f"{value!r} must be larger than 0")
    return n


def duration(value: Any) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return parse_time(value)


BY_NAME: Dict[str, Opt] = {o.name: o for o in TABLE}
BY_KEY: Dict[str, Opt] = {o.key: o for o in TABLE}
# options a rank may take from its own environment (click's envvar; cli/ranks.py)
FROM_ENVIRONMENT: Dict[str, str] = {o.name: o.envvar for o in TABLE if o.envvar}


def choices_of(opt: Opt) -> Tuple[str, ...]:
    """The option's choices; the engines' and presets' names from where they are declared."""
    if opt.choices == ("*engines",):
        from mpiwrite.engines import base

        return tuple(base.names())
    if opt.choices == ("*presets",):
        from mpiwrite.vocab.presets import PRESETS

        return tuple(sorted(PRESETS))
    return opt.choices


_KINDS: Dict[str, Callable[[Any], Any]] = {"size": size, "duration": duration,
                                           "int": ascii_int, "text": str}


def parse(opt: Opt, value: Any) -> Any:
    """`value` as the command line reads it for this option (a study's TOML value or a word);
    ValueError says why not, in click's words where click had them."""
    if opt.kind in ("flag", "switch"):
        if not isinstance(value, bool):
            raise ValueError("must be true or false")
        return value
    if isinstance(value, bool):
        raise ValueError("must be a value, not true or false")
    if opt.kind == "texts":
        return tuple(str(v) for v in value) if isinstance(value, (list, tuple)) \
            else (str(value),)
    if opt.kind == "choice":
        allowed = choices_of(opt)
        if str(value) not in allowed:
            raise ValueError(f"{str(value)!r} is not one of "
                             + ", ".join(repr(c) for c in allowed) + ".")
        return str(value)
    return _KINDS[opt.kind](value)


# the options that are RunConfig fields of their names (run/config.py makes the fields)
FIELDS: Tuple[Opt, ...] = tuple(o for o in TABLE if o.field)


def field_default(opt: Opt) -> Any:
    """The RunConfig field's value when the option is not given: its default as parsed, or
    the entry's `unset` for an option without a default."""
    if opt.default is None:
        return opt.unset
    return bool(opt.default) if opt.kind in ("flag", "switch") else parse(opt, opt.default)


def defaults_of() -> Dict[str, Any]:
    """Every option's parameter at its default, parsed (what click gives when none is
    given; the environment not read)."""
    out: Dict[str, Any] = {"target": None}
    for o in TABLE:
        if o.default is None:
            out[o.name] = () if o.kind == "texts" else None
        elif o.kind in ("flag", "switch"):
            out[o.name] = bool(o.default)
        else:
            out[o.name] = parse(o, o.default)
    return out


# The option that sets each RunConfig field, for messages about settings: the table's long
# flags, and the few fields that more than one option sets.
_MESSAGE_NAMES: Dict[str, str] = {
    **{o.name: o.long for o in TABLE},
    "target": "TARGET", "tags": "--tag/--tag-file", "results": "--results/--no-record",
    "size": "--size/--count", "fsync": "--fsync/--no-fsync"}


def option_name(field: str) -> str:
    return _MESSAGE_NAMES.get(field, "--" + field.replace("_", "-"))


def flag_for(name: str, value: Any) -> str:
    """How the option that sets `name` to `value` is written: --collective, --independent
    (a switch given false), --mpiio-hint."""
    opt = BY_NAME[name]
    return opt.secondary if value is False and opt.secondary else opt.long


def find(key: str) -> Optional[Opt]:
    """The option of a study key (`block_size`) or parameter name (`time_limit`)."""
    return BY_KEY.get(key) or BY_NAME.get(key)


def _preset_word(name: str, value) -> str:
    """How the option is written on the command line (what the preset line prints)."""
    flag = BY_NAME[name].long
    if value is True:
        return flag
    if isinstance(value, float):
        return f"{flag} {value:g}s"
    return f"{flag} {value}"


def apply_preset(params: dict, given) -> Tuple[dict, list]:
    """`params` with --preset's options where the user gave none (`given`: the names given);
    and the options the preset set, as words.  A preset sets only what was left at its
    default (cli/presets.py, docs/engines.md)."""
    from mpiwrite.vocab.presets import PRESETS

    name = params.get("preset")
    if not name:
        return params, []
    out, words = dict(params), []
    for key, value in PRESETS[name].items():
        if key not in given and not (key == "count" and params.get("size") is not None):
            out[key] = value
            words.append(_preset_word(key, value))
    return out, words
