"""Safe reconfiguration: from the deployment running today to a new plan, step by step.

:func:`plan_steps` tries the ordering rules first (:mod:`.rules`: fast, and enough for most
changes), then the bounded search (:mod:`.search`), which finds a safe order whenever one
exists within its bound. Both keep :mod:`.steps`' invariants, and every order is replayed
by :func:`~.steps.check_steps` before it is returned. :func:`.stages.node_stages` groups an
order into whole-node stages for tools that change a node at a time (mig-parted).
"""

from __future__ import annotations

from cotenant.errors import InfeasibleError
from cotenant.model.deployment import GpuPlan
from cotenant.policies.partition.problem import PartitionProblem
from cotenant.policies.partition.reconfig.rules import order_by_rules
from cotenant.policies.partition.reconfig.search import SearchBound, search_steps
from cotenant.policies.partition.reconfig.stages import (
    NodeStage,
    NodeStages,
    Temporary,
    check_stages,
    node_stages,
)
from cotenant.policies.partition.reconfig.steps import (
    Reconfiguration,
    State,
    Step,
    StepKind,
    check_steps,
    floor_of,
    replicas_today,
    shortfall,
)

__all__ = [
    "NodeStage",
    "NodeStages",
    "Reconfiguration",
    "SearchBound",
    "State",
    "Step",
    "StepKind",
    "Temporary",
    "check_stages",
    "check_steps",
    "floor_of",
    "node_stages",
    "order_by_rules",
    "plan_steps",
    "replicas_today",
    "search_steps",
    "shortfall",
]


def plan_steps(
    problem: PartitionProblem, current: tuple[GpuPlan, ...], plan: tuple[GpuPlan, ...],
    bound: SearchBound | None = None,
) -> Reconfiguration:
    """Ordered, safe steps from ``current`` to ``plan``: by the rules where they find an
    order, else by the search within ``bound``; :class:`InfeasibleError` naming the services
    that block every order found."""
    try:
        return order_by_rules(problem, current, plan)
    except InfeasibleError:
        return search_steps(problem, current, plan, bound)
