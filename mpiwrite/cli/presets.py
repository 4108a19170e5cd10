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

from typing import List, Tuple

import click

from mpiwrite.run import options


def apply(ctx: click.Context, params: dict) -> Tuple[dict, List[str]]:
    """`params` with the preset's options where the command line left them at their defaults;
    and the options the preset set, as words (run/options.apply_preset)."""
    given = {name for name in params
             if ctx.get_parameter_source(name) not in (None, click.core.ParameterSource.DEFAULT)}
    return options.apply_preset(params, given)
