"""What the partition tests share: the A100-40GB's MIG geometry and its five compute
profiles (1, 2, 3, 4 and 7 slices), a one-service problem only a 4g serves (one A100 holds
one 4g, so n instances need n GPUs), and a deadline on a clock that does not move."""

from __future__ import annotations

import numpy as np

from cotenant.model.gpu import CATALOG
from cotenant.model.mig import MigGeometry
from cotenant.policies.partition import PartitionProblem
from cotenant.policies.partition.problem import Deadline

_FOUND = CATALOG.get("A100-40GB").mig
assert _FOUND is not None
GEOMETRY: MigGeometry = _FOUND
PROFILES = ("1g.5gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb")


def only_4g(demand: float, rate: float = 100.0) -> PartitionProblem:
    """One service only a 4g instance serves, at ``rate`` req/s each."""
    return PartitionProblem(GEOMETRY, ("s",), np.array([demand]), PROFILES,
                            np.array([[0.0, 0.0, 0.0, rate, 0.0]]))


def still(left: float) -> Deadline:
    """A deadline with ``left`` seconds left, on a clock that does not move."""
    return Deadline(left, clock=lambda: 0.0)
