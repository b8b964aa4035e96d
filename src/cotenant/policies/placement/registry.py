"""The registry of placement policies: ``PLACEMENT.create("fgd", workload=shapes)``."""

from __future__ import annotations

from cotenant.policies.placement.base import PlacementPolicy
from cotenant.registry import Registry

PLACEMENT: Registry[PlacementPolicy] = Registry("placement policy")
