"""The default optimiser, within a time budget:

1. **greedy** (milliseconds even at 100,000 services); done if it meets the slice bound;
2. the full **MILP** is started in the background with the whole budget (HiGHS releases
   the GIL, so it has a core of its own), exactly as ``--solver milp`` runs it, where it
   is small enough to help (:data:`MAX_MILP_PAIRS`): ``auto`` is not worse than the exact
   solver given the same time, and meanwhile
3. the **LP relaxation** (with the knapsack cuts of
   :mod:`~cotenant.policies.partition.formulation`) in at most 40% of the budget (80%
   without the MILP) gives a stronger bound and the start of
4. **LP rounding**: keep the LP's instances rounded down, cover the remainder service by
   service with the cheapest instance pattern at the LP's dual prices (the ``lp-round``
   solver covers a small remainder exactly by the MILP instead), then pack all instances
   onto the fewest GPUs exactly (:func:`~cotenant.policies.partition.packing.repack`). A
   basic LP solution has at most one fractional value per constraint, so the remainder is a
   workload of small pieces. (The LP's own layouts are not kept: rounded down, they hold
   instances that tempt the remainder onto large idle ones, and the exact packing does
   better.) This is what plans thousands of services, where the MILP finds nothing in time.

The best plan is kept, with the best lower bound any step found.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from cotenant.errors import InfeasibleError, InvalidLayoutError
from cotenant.model.deployment import GpuPlan
from cotenant.policies.partition.formulation import slice_bound
from cotenant.policies.partition.greedy import greedy_gpus, pack
from cotenant.policies.partition.milp import (
    PendingMilp,
    Relaxation,
    plan_from,
    relaxation,
    solve_counts,
    solver_time,
)
from cotenant.policies.partition.packing import cheapest_patterns, repack
from cotenant.policies.partition.problem import (
    Deadline,
    IntArray,
    PartitionProblem,
    Plan,
    demand_left,
    realise,
    verify,
)
from cotenant.policies.partition.registry import PARTITION

REPACK_S = 0.5
"""The most the exact packing may take (milliseconds in practice: a few dozen variables)."""
REMAINDER_MILP_SERVICES = 400
"""Remainders with more services than this are covered by dual prices, not the MILP (which
rarely finds a first plan for thousands of services within a second)."""


def lp_round_gpus(
    problem: PartitionProblem, relaxed: Relaxation, deadline: Deadline, share: float
) -> tuple[GpuPlan, ...]:
    """Step 3: the LP's instances rounded down, the remainder covered, all packed."""
    take = np.floor(relaxed.z + 1e-9).astype(np.int64)
    rest = demand_left(problem.demand, (problem.rate * take).sum(axis=1))
    remainder = replace(problem, demand=rest)
    more: IntArray | None = None
    if np.count_nonzero(rest) <= REMAINDER_MILP_SERVICES and share > 0:
        found = solve_counts(remainder, solver_time(problem, deadline, share))
        more = found.instances
    if more is None:
        more = cheapest_patterns(remainder, relaxed.price)
    total = take + more
    use = repack(problem, total.sum(axis=0), min(REPACK_S, solver_time(problem, deadline)))
    if use is None:
        use = pack(problem, total.sum(axis=0))
    return realise(problem, use, total)


@PARTITION.register("lp-round", aliases=("rounding",))
def solve_lp_round(problem: PartitionProblem, time_limit: float = 10.0) -> Plan:
    """LP relaxation rounded down, the remainder covered (steps 2-3 above); the greedy plan
    where the LP does not solve in time."""
    deadline = Deadline(time_limit)
    relaxed = relaxation(problem, solver_time(problem, deadline, 0.5))
    bound = slice_bound(problem)
    if relaxed is None:
        gpus = greedy_gpus(problem)
        name = "lp-round:greedy"
    else:
        bound = max(bound, math.ceil(relaxed.value - 1e-6))
        gpus, name = lp_round_gpus(problem, relaxed, deadline, 0.5), "lp-round"
        greedy = greedy_gpus(problem)  # milliseconds: never return worse than the greedy
        if len(greedy) < len(gpus):
            gpus, name = greedy, "lp-round:greedy"
    return Plan(name, gpus, min(bound, len(gpus)), len(gpus) <= bound, deadline.elapsed())


MILP_PAIRS_PER_SECOND = 5_000
MAX_MILP_PAIRS = 10_000
"""``auto`` starts the full MILP only up to :data:`MILP_PAIRS_PER_SECOND` (service, profile)
variables per second of its budget, and never beyond :data:`MAX_MILP_PAIRS` (about 2,000
services): in our runs HiGHS found no first plan for 3,000 services (14,000 variables) in
10 s and overran that limit by 6 s, and a solve it cannot use only takes a core from the
LP. Without it the LP may take 80% of the budget, not 40%."""


@PARTITION.register("auto", aliases=("default",))
def solve_auto(problem: PartitionProblem, time_limit: float = 10.0) -> Plan:
    deadline = Deadline(time_limit)
    best, solver = greedy_gpus(problem), "greedy"
    bound = slice_bound(problem)
    if len(best) <= bound:
        return Plan("auto:greedy", best, bound, True, deadline.elapsed())
    pairs = int(np.count_nonzero((problem.rate > 0) & (problem.demand > 0)[:, None]))
    useful = pairs <= min(MAX_MILP_PAIRS, MILP_PAIRS_PER_SECOND * time_limit)
    exact = (PendingMilp(problem, solver_time(problem, deadline))  # step 4, in the background
             if useful else None)
    relaxed = relaxation(problem, solver_time(problem, deadline, 0.4 if useful else 0.8))
    if relaxed is not None:
        bound = max(bound, math.ceil(relaxed.value - 1e-6))
        if len(best) > bound:
            try:
                rounded = lp_round_gpus(problem, relaxed, deadline, 0.0)
                verify(problem, Plan("lp-round", rounded, 0, False))
            except (InfeasibleError, InvalidLayoutError):  # no candidate: keep the greedy
                rounded = best
            if len(rounded) < len(best):
                best, solver = rounded, "lp-round"
    if exact is not None:
        found = exact.result()
        if found.bound is not None:
            bound = max(bound, found.bound)
        gpus, taken = plan_from(problem, found, best)
        if taken and len(gpus) < len(best):
            best, solver = gpus, "milp"
        if taken and found.proven:
            bound = len(best)
    return Plan(f"auto:{solver}", best, min(bound, len(best)), len(best) <= bound,
                deadline.elapsed())
