"""The default optimiser, within a time budget:

1. **greedy** (milliseconds); done if it meets the LP bound;
2. **LP rounding**: solve the LP relaxation, keep its layouts and instances rounded down, and
   cover what is left exactly with the MILP, where the instances the rounded layouts hold
   beyond the rounded assignment are free. A basic LP solution has at most one fractional
   value per constraint (services + profiles), so the remainder is a workload of small pieces,
   the kind HiGHS proves optimal in a fraction of a second. It gets half the budget left (if
   the MILP finds no remainder plan in that time, the greedy covers the remainder);
3. the full **MILP** with the rest of the budget, which can still improve on 2 and whose dual
   bound tightens the reported gap.

The best plan is kept, with the best lower bound any step found.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import replace

import numpy as np

from cotenant.errors import InfeasibleError, InvalidLayoutError
from cotenant.policies.partition.greedy import instance_counts, pack, solve_greedy
from cotenant.policies.partition.milp import relaxation, solve_counts, solve_milp
from cotenant.policies.partition.problem import (
    PartitionProblem,
    Plan,
    demand_left,
    realise,
    verify,
)
from cotenant.policies.partition.registry import PARTITION


@PARTITION.register("lp-round", aliases=("rounding",))
def solve_lp_round(problem: PartitionProblem, time_limit: float = 10.0) -> Plan:
    """LP relaxation rounded down, the remainder by the MILP (step 2 above)."""
    start = time.perf_counter()
    value, use, z = relaxation(problem)
    held = problem.layout_counts().T @ use  # (P,) instances on the rounded-down GPUs
    take = np.floor(z + 1e-9).astype(np.int64)
    for p in range(take.shape[1]):  # more instances than the GPUs hold: give back the smallest
        while take[:, p].sum() > held[p]:
            take[int(np.argmax(take[:, p])), p] -= 1
    rest = demand_left(problem.demand, (problem.rate * take).sum(axis=1))
    remainder = replace(problem, demand=rest)
    try:
        more_use, more, _, _ = solve_counts(remainder, time_limit, held - take.sum(axis=0))
    except InfeasibleError:  # no remainder plan in time: the greedy's, ignoring free instances
        more = instance_counts(remainder)
        more_use = pack(remainder, more.sum(axis=0))
    gpus = realise(problem, use + more_use, take + more)
    bound = math.ceil(value - 1e-6)
    return Plan(
        "lp-round", gpus, min(bound, len(gpus)), len(gpus) <= bound, time.perf_counter() - start
    )


@PARTITION.register("auto", aliases=("default",))
def solve_auto(problem: PartitionProblem, time_limit: float = 10.0) -> Plan:
    start = time.perf_counter()
    best = solve_greedy(problem, time_limit)
    bound = best.lower_bound

    def left() -> float:  # a tenth of the budget is kept for realising and checking the plan
        return max(0.9 * time_limit - (time.perf_counter() - start), 0.05)

    steps: list[Callable[[], Plan]] = [
        lambda: solve_lp_round(problem, left() / 2),
        lambda: solve_milp(problem, left()),
    ]
    for step in steps:
        if best.gpu_count <= bound:
            break
        try:
            plan = step()
            verify(problem, plan)  # a candidate that misses a demand is no candidate
        except (InfeasibleError, InvalidLayoutError):
            continue
        bound = max(bound, plan.lower_bound)
        if plan.gpu_count < best.gpu_count:
            best = plan
    return replace(
        best,
        solver=f"auto:{best.solver}",
        lower_bound=min(bound, best.gpu_count),
        optimal=best.gpu_count <= bound,
        seconds=time.perf_counter() - start,
    )
