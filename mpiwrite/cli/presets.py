"""IO500's two write phases as presets of `run` (`--preset ior-easy-write|ior-hard-write`).

A preset stands for options, each of which the command line may still give itself: a preset
sets only the options left at their defaults, and the options it set are printed and
recorded (the record's `preset` key and its parameters), so a site can put mpiwrite's figure
beside its IO500 list entry.  The IOR command each phase runs in IO500 (io500's ior-easy and
ior-hard phases) is what the preset mirrors:

  ior-easy-write: ior -w -e -F -t 2m -b <large> -D 300 -O stoneWallingWearOut=1
  ior-hard-write: ior -w -e -t 47008 -b 47008 -s <segments> -D 300 -O stoneWallingWearOut=1

ior-hard's segment count bounds its file; here --count does (1,000,000 blocks, 47 GB per
rank, so that the free-space check has a figure to check; IO500 uses far more, and the
stonewall ends the phase long before either is reached on most systems).
"""

from __future__ import annotations

from typing import Dict, List, Tuple

import click

PRESETS: Dict[str, Dict[str, object]] = {
    "ior-easy-write": {"layout": "fpp", "pattern": "sequential", "block_size": 2 * 2**20,
                       "stonewall": 300.0, "fsync": True},
    "ior-hard-write": {"layout": "shared", "pattern": "strided", "block_size": 47008,
                       "count": 1_000_000, "stonewall": 300.0, "fsync": True},
}

# how each option is written on the command line (what the preset line prints)
_FLAG = {"layout": "--layout", "pattern": "--pattern", "block_size": "--block-size",
         "stonewall": "--stonewall", "count": "--count", "fsync": "--fsync"}


def _word(name: str, value) -> str:
    if value is True:
        return _FLAG[name]
    if isinstance(value, float):
        return f"{_FLAG[name]} {value:g}s"
    return f"{_FLAG[name]} {value}"


def apply(ctx: click.Context, params: dict) -> Tuple[dict, List[str]]:
    """`params` with the preset's options where the command line left them at their defaults;
    and the options the preset set, as words."""
    name = params.get("preset")
    if not name:
        return params, []
    out, words = dict(params), []
    for key, value in PRESETS[name].items():
        source = ctx.get_parameter_source(key)
        if source in (None, click.core.ParameterSource.DEFAULT) and not (
                key == "count" and params.get("size") is not None):
            out[key] = value
            words.append(_word(key, value))
    return out, words
