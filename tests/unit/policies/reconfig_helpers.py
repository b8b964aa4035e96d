"""What the reconfiguration tests share: a two-service problem on A100-40GB (services ``a``
and ``b``), GPUs written as layouts with their services, and a random replan from the greedy
plan for one demand to the greedy plan for another."""

from __future__ import annotations

import numpy as np

from cotenant.model.deployment import GpuPlan
from cotenant.model.mig import MigLayout
from cotenant.policies.partition import PARTITION, PartitionProblem
from cotenant.policies.partition.reconfig import Reconfiguration, plan_steps
from tests.unit.policies.a100 import GEOMETRY, PROFILES

RATES = [[100, 190, 260, 330, 650], [50, 100, 150, 200, 350]]
EMPTY = GpuPlan(MigLayout(), ())


def problem(demand: list[float]) -> PartitionProblem:
    return PartitionProblem(GEOMETRY, ("a", "b"), np.array(demand, dtype=np.float64), PROFILES,
                            np.array(RATES, dtype=np.float64))


def gpu(text: str, services: list[str | None]) -> GpuPlan:
    layout = GEOMETRY.parse(text)
    return GpuPlan(layout, tuple(zip(layout.placements, services, strict=True)))


def replan(before: list[float], after: list[float], spare: int
           ) -> tuple[PartitionProblem, tuple[GpuPlan, ...], Reconfiguration]:
    """From the greedy plan for demand ``before`` (with ``spare`` empty GPUs beside) to the
    greedy plan for ``after``: the problem, today's GPUs and the planner's safe steps
    (:class:`~cotenant.errors.InfeasibleError` where it finds none)."""
    old = PARTITION.get("greedy")(problem(before), 1.0)
    new = PARTITION.get("greedy")(problem(after), 1.0)
    pb = problem(after)
    current = old.gpus + (EMPTY,) * spare
    return pb, current, plan_steps(pb, current, new.gpus)
