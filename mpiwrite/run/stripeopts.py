"""--stripe-count, --stripe-size, --ost-index: the run directories' Lustre layout.

`check` validates the values (exit 2 naming the option) and refuses them when the target is
not on Lustre, before anything is created (the options themselves are in cli/runcmd.py);
`describe` is what the record stores under `stripe_request`.
"""

from __future__ import annotations

from typing import Any, Dict, Optional

from mpiwrite.errors import ConfigError

MIN_STRIPE_SIZE = 64 * 1024  # LOV_MIN_STRIPE_SIZE; sizes are multiples of it
MAX_STRIPE_SIZE = 4 * 2**30 - MIN_STRIPE_SIZE  # it must fit the u32 of lov_user_md
MAX_STRIPE_COUNT = 2000  # LOV_MAX_STRIPE_COUNT
MAX_OST_INDEX = 65533  # u16, 0xFFFF meaning "any"


def check(stripe_count: Optional[int], stripe_size: Optional[str], ost_index: Optional[int],
          fstype: Optional[str]) -> Optional[Dict[str, Any]]:
    """{'count', 'size', 'ost'} (None where not given), or None when no option is given.
    ConfigError naming the option: out of range, or the target's filesystem is not Lustre."""
    from mpiwrite.units import parse_size

    given = {"--stripe-count": stripe_count, "--stripe-size": stripe_size,
             "--ost-index": ost_index}
    if all(v is None for v in given.values()):
        return None
    from mpiwrite.clients import registry

    if not registry.for_mount(fstype).striping:
        name = next(k for k, v in given.items() if v is not None)
        raise ConfigError(f"{name}: the target is on {fstype or 'an unknown filesystem'}, not "
                          "Lustre; striping applies only to Lustre (nothing was created)")
    if stripe_count is not None and not -1 <= stripe_count <= MAX_STRIPE_COUNT:
        raise ConfigError(f"--stripe-count: {stripe_count} is outside -1..{MAX_STRIPE_COUNT}")
    size = None
    if stripe_size is not None:
        try:
            size = parse_size(str(stripe_size))
        except (ValueError, ConfigError) as exc:
            raise ConfigError(f"--stripe-size: {exc}") from None
        if size % MIN_STRIPE_SIZE or not MIN_STRIPE_SIZE <= size <= MAX_STRIPE_SIZE:
            raise ConfigError(f"--stripe-size: {stripe_size} is not a multiple of 64KiB "
                              "between 64KiB and 4GiB")
    if ost_index is not None and not -1 <= ost_index <= MAX_OST_INDEX:
        raise ConfigError(f"--ost-index: {ost_index} is outside -1..{MAX_OST_INDEX}")
    return {"count": stripe_count, "size": size, "ost": ost_index}
