"""The offline optimum of a placement: the most GPU milli any placement of a set of pods can
allocate on a cluster, bracketed by a proven upper bound and a checked placement.

Offline means knowing every pod at once and choosing which to place: a bound on every online
policy (which must decide each pod on arrival and place any pod that fits). The bound is the
value of an arc-flow integer program over GPU packings (:mod:`.relaxation`); the placement is
built node by node from its solution and replayed through the cluster model (:mod:`.plan`).
When the two agree, the optimum is exact.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from cotenant.model.cluster import Cluster
from cotenant.model.workload import PodShape
from cotenant.policies.placement.optimum.plan import Placement, check, realise
from cotenant.policies.placement.optimum.relaxation import relax

__all__ = ["OfflineOptimum", "Placement", "check", "offline_optimum"]


@dataclass(frozen=True)
class OfflineOptimum:
    """The optimum's bracket for one set of pods on one cluster, in milli-GPUs."""

    upper_milli: int
    """No placement allocates more (HiGHS's proven dual bound on the relaxation)."""
    plan_milli: int
    """What :attr:`placements` allocates: a placement that exists."""
    solved: bool
    """HiGHS proved the relaxation optimal (else it stopped at the time limit, and the bound
    is its dual bound then)."""
    seconds: float
    placements: tuple[Placement, ...]

    @property
    def exact(self) -> bool:
        """Bound and placement agree: the optimum is known exactly."""
        return self.plan_milli >= self.upper_milli

    @property
    def kind(self) -> str:
        """``exact``, or ``bound`` where the optimum lies between plan and upper bound."""
        return "exact" if self.exact else "bound"


def offline_optimum(
    cluster: Cluster, shapes: Sequence[PodShape], time_limit: float = 10.0
) -> OfflineOptimum:
    """Bound and placement for ``shapes`` (CPU-only pods are ignored: they allocate no GPU)."""
    start = time.perf_counter()
    relaxed = relax(cluster, shapes, time_limit)
    placements = realise(cluster, shapes, relaxed)
    plan = check(cluster, shapes, placements)
    if plan > relaxed.upper_milli:  # a bug in the relaxation, never a property of the input
        raise RuntimeError(f"placement of {plan} milli beats the bound {relaxed.upper_milli}")
    return OfflineOptimum(relaxed.upper_milli, plan, relaxed.optimal, time.perf_counter() - start,
                          tuple(placements))
