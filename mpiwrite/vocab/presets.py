"""IO500's two write phases as presets of `run`: the options each stands for (what
cli/presets.py applies where the command line left an option at its default)."""

from __future__ import annotations

from typing import Dict

PRESETS: Dict[str, Dict[str, object]] = {
    "ior-easy-write": {"layout": "fpp", "pattern": "sequential", "block_size": 2 * 2**20,
                       "stonewall": 300.0, "fsync": True},
    "ior-hard-write": {"layout": "shared", "pattern": "strided", "block_size": 47008,
                       "count": 1_000_000, "stonewall": 300.0, "fsync": True},
}

