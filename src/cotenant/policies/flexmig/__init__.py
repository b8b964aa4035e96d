"""Training jobs on MIG GPUs: one-to-one allocation (one instance of at least the size asked
for: static layouts, or layouts changed after a drain) against Flex-MIG's one-to-many (any
free instances on one node whose sizes add up to it, run as one process per instance)."""

from cotenant.policies.flexmig.allocate import (
    FreeInstance,
    one_to_many,
    one_to_one,
    smallest_profile,
    speed,
)
from cotenant.policies.flexmig.layouts import drain_choice, refill_layout, static_layouts

__all__ = [
    "FreeInstance",
    "drain_choice",
    "one_to_many",
    "one_to_one",
    "refill_layout",
    "smallest_profile",
    "speed",
    "static_layouts",
]
