"""Placement policies, registered by name in :data:`PLACEMENT`.

Importing this package registers the built-in policies: random, best-fit, dot-product,
gpu-packing, gpu-clustering, fgd and cotenant-pack.
"""

from cotenant.policies.placement import fgd, fit, pack, packing, random_
from cotenant.policies.placement.base import PlacementPolicy, Scores, select_node
from cotenant.policies.placement.registry import PLACEMENT

__all__ = [
    "PLACEMENT",
    "PlacementPolicy",
    "Scores",
    "fgd",
    "fit",
    "pack",
    "packing",
    "random_",
    "select_node",
]
