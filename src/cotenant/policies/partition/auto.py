"""The default optimiser, within a time budget:

1. **greedy** (milliseconds even at 100,000 services); done if it meets the slice bound;
2. the **exact solve**, started exactly as ``--solver milp`` starts it
   (:func:`~cotenant.policies.partition.milp.start_exact`: the same program, options and
   time, at the same point of the deadline, in a child process of its own); and beside it,
   in a second child process,
3. the **LP relaxation** (with the knapsack cuts of
   :mod:`~cotenant.policies.partition.formulation`) gives a stronger bound and the start of
4. **LP rounding**: keep the LP's instances rounded down, cover the remainder service by
   service with the cheapest instance pattern at the LP's dual prices (the ``lp-round``
   solver covers a small remainder exactly by the MILP instead), then pack all instances
   onto the fewest GPUs exactly (:func:`~cotenant.policies.partition.packing.repack`). A
   basic LP solution has at most one fractional value per constraint, so the remainder is a
   workload of small pieces. (The LP's own layouts are not kept: rounded down, they hold
   instances that tempt the remainder onto large idle ones, and the exact packing does
   better.) This is what plans thousands of services, where the MILP finds nothing in time.

The plan returned is the best of the greedy plan, the rounded plan and the exact solver's
plan, with the best lower bound any step found: ``auto`` holds the answer ``milp`` would
give, so it is never worse than ``milp`` given the same limit, by construction, wherever the
two exact solves get the same CPU. With ``node_limit`` (a limit that does not depend on the
CPU the machine gives) they are the same computation, and ``auto`` is never worse, exactly.
Under a time limit on a busy machine, two runs of the same exact solve differ by the CPU
each got (on this project's 2-core VM under a load of 4, ``milp`` with 1 s returned 803,
807, 903 and 903 GPUs for one spec in four runs a few seconds apart).

The rounding runs at normal CPU priority: at the lowest it starved under load (a load of 12
on 2 cores) and ``auto`` lost its rounded plans. Beyond the size where the MILP is likely to
help (:data:`MILP_PAIRS_PER_SECOND`) the exact solve runs at the lowest priority instead,
since there the rounding is what plans.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from cotenant.errors import InfeasibleError, InvalidLayoutError
from cotenant.model.deployment import GpuPlan
from cotenant.policies.partition.bounds import relaxation_within
from cotenant.policies.partition.child import LOWEST_PRIORITY, Pending
from cotenant.policies.partition.formulation import slice_bound
from cotenant.policies.partition.greedy import greedy_gpus, pack
from cotenant.policies.partition.milp import (
    Relaxation,
    children_deadline,
    plan_from,
    relaxation,
    solve_counts,
    solver_time,
    start_exact,
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


def lp_round_counts(
    problem: PartitionProblem, relaxed: Relaxation, deadline: Deadline, share: float
) -> tuple[IntArray, IntArray]:
    """Step 4: the LP's instances rounded down, the remainder covered, all packed: layout
    use (L,) and instances (S, P)."""
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
    return use, total


def lp_round_gpus(
    problem: PartitionProblem, relaxed: Relaxation, deadline: Deadline, share: float
) -> tuple[GpuPlan, ...]:
    """:func:`lp_round_counts` as GPUs."""
    return realise(problem, *lp_round_counts(problem, relaxed, deadline, share))


@PARTITION.register("lp-round", aliases=("rounding",))
def solve_lp_round(problem: PartitionProblem, time_limit: float = 10.0) -> Plan:
    """LP relaxation rounded down, the remainder covered (steps 2-3 above); the greedy plan
    where the LP does not solve in time."""
    deadline = Deadline(time_limit)
    relaxed = relaxation_within(problem, solver_time(problem, deadline, 0.5))
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
"""Up to :data:`MILP_PAIRS_PER_SECOND` (service, profile) variables per second of its budget,
and at most :data:`MAX_MILP_PAIRS` (about 2,000 services), the exact solve is likely to
help and runs at normal CPU priority. Beyond, HiGHS rarely finds a first plan in time (none
for 3,000 services, 14,000 variables, in 10 s in our runs), the rounding is what plans, and
the exact solve yields the CPU to it."""
LP_SHARE = 0.7
"""Of the time left, the most the LP relaxation may take; the rounding takes the rest."""


@dataclass(frozen=True)
class Rounded:
    """What the rounding child sends back: the LP's optimum and, where rounding gave one, a
    plan as layout use (L,) and instances (S, P)."""

    value: float
    use: IntArray | None = None
    instances: IntArray | None = None


def _round(problem: PartitionProblem, deadline: Deadline) -> Rounded | None:
    """Steps 3-4, in the rounding child."""
    relaxed = relaxation(problem, solver_time(problem, deadline, LP_SHARE))
    if relaxed is None:
        return None
    try:
        use, instances = lp_round_counts(problem, relaxed, deadline, 0.0)
    except (InfeasibleError, InvalidLayoutError):  # no candidate: the LP's bound alone
        return Rounded(relaxed.value)
    return Rounded(relaxed.value, use, instances)


def _rounded_plan(problem: PartitionProblem, rounded: Rounded) -> tuple[GpuPlan, ...] | None:
    if rounded.use is None or rounded.instances is None:
        return None
    try:
        gpus = realise(problem, rounded.use, rounded.instances)
        verify(problem, Plan("lp-round", gpus, 0, False))
    except (InfeasibleError, InvalidLayoutError):
        return None
    return gpus


@PARTITION.register("auto", aliases=("default",))
def solve_auto(problem: PartitionProblem, time_limit: float = 10.0,
               node_limit: int | None = None) -> Plan:
    deadline = Deadline(time_limit)
    best, solver = greedy_gpus(problem), "greedy"
    bound = slice_bound(problem)
    if len(best) <= bound:
        return Plan("auto:greedy", best, bound, True, deadline.elapsed())
    pairs = int(np.count_nonzero((problem.rate > 0) & (problem.demand > 0)[:, None]))
    helps = pairs <= min(MAX_MILP_PAIRS, MILP_PAIRS_PER_SECOND * time_limit)
    # as solve_milp starts it; where it is unlikely to help, it yields the CPU
    exact = start_exact(problem, deadline, node_limit, nice=0 if helps else LOWEST_PRIORITY)
    inner = children_deadline(problem, deadline)  # the wind-down is kept back
    rounding = Pending(lambda: _round(problem, inner), solver_time(problem, inner))
    if exact.pending is not None:  # the rounding's answer is read meanwhile
        exact.pending.wait(rounding)
    found = exact.result()
    if found.proven and found.use is not None:  # the optimum: no rounding can beat it
        rounding.cancel()
    rounded = rounding.result()
    if rounded is not None:
        bound = max(bound, math.ceil(rounded.value - 1e-6))
        gpus = _rounded_plan(problem, rounded) if len(best) > bound else None
        if gpus is not None and len(gpus) < len(best):
            best, solver = gpus, "lp-round"
    if found.bound is not None:
        bound = max(bound, found.bound)
    gpus, taken = plan_from(problem, found, best)
    if taken and len(gpus) < len(best):
        best, solver = gpus, "milp"
    if taken and found.proven:
        bound = len(best)
    return Plan(f"auto:{solver}", best, min(bound, len(best)), len(best) <= bound,
                deadline.elapsed())
