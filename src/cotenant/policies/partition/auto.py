"""The default optimiser: greedy first (a plan in milliseconds), then the exact MILP within
the remaining time budget; the better plan is kept, with the best lower bound either found."""

from __future__ import annotations

import time
from dataclasses import replace

from cotenant.errors import InfeasibleError
from cotenant.policies.partition.greedy import solve_greedy
from cotenant.policies.partition.milp import solve_milp
from cotenant.policies.partition.problem import PartitionProblem, Plan
from cotenant.policies.partition.registry import PARTITION


@PARTITION.register("auto", aliases=("default",))
def solve_auto(problem: PartitionProblem, time_limit: float = 10.0) -> Plan:
    start = time.perf_counter()
    greedy = solve_greedy(problem, time_limit)
    best = greedy
    bound = greedy.lower_bound
    if not greedy.optimal:
        left = time_limit - (time.perf_counter() - start)
        try:
            exact = solve_milp(problem, max(left, 0.05))
        except InfeasibleError:
            exact = None
        if exact is not None:
            bound = max(bound, exact.lower_bound)
            if exact.gpu_count <= greedy.gpu_count:
                best = exact
    optimal = best.gpu_count <= bound
    return replace(
        best,
        solver=f"auto:{best.solver}",
        lower_bound=min(bound, best.gpu_count),
        optimal=optimal,
        seconds=time.perf_counter() - start,
    )
