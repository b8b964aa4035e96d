"""Registry of partition optimisers: ``PARTITION.get("milp")(problem, time_limit)`` returns a
:class:`Plan`."""

from __future__ import annotations

from cotenant.policies.partition.problem import PartitionProblem, Plan
from cotenant.registry import Registry

PARTITION: Registry[Plan] = Registry("partition optimiser")
__all__ = ["PARTITION", "PartitionProblem", "Plan"]
