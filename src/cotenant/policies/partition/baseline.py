"""The whole-GPU baseline ("A100 as-is"): every service on whole GPUs, no MIG.

A whole GPU serves ``WHOLE_GPU_SPEEDUP`` x the 7g instance's rate: MIGER's measurements put a
7g instance at 1.02-1.06x the latency of the non-MIG GPU (ResNet-50 and BERT at batch 32,
A100-80GB; ../shared/reference/calibration.md), so the baseline is credited the midpoint. Each
service takes ``ceil(d / (1.04 r_7g))`` GPUs of its own. In the plan such a GPU shows as one 7g
instance, the closest MIG layout. The other optimisers' bounds and "optimal" speak of MIG
layouts only, so on a spec where MIG slicing gains nothing the baseline can use fewer GPUs
than an "optimal" MIG plan; its own bound is the MIG bound over the 1.04 credit.
"""

from __future__ import annotations

import math
import time

from cotenant.errors import InfeasibleError
from cotenant.model.deployment import GpuPlan
from cotenant.policies.partition.milp import relaxation
from cotenant.policies.partition.problem import PartitionProblem, Plan, unmet
from cotenant.policies.partition.registry import PARTITION

WHOLE_GPU_SPEEDUP = 1.04


@PARTITION.register("whole-gpu", aliases=("baseline", "as-is"))
def solve_whole_gpu(problem: PartitionProblem, time_limit: float = 10.0) -> Plan:  # noqa: ARG001
    """Whole GPUs per service; ``time_limit`` is unused (the rule is closed-form)."""
    start = time.perf_counter()
    full = max(problem.layouts, key=lambda lay: sum(lay.compute_slices()))
    if len(full.placements) != 1:
        raise InfeasibleError("the GPU model has no single full-GPU MIG profile")
    placement = full.placements[0]
    column = problem.profiles.index(placement.profile.name)
    gpus = []
    for s, name in enumerate(problem.services):
        rate = problem.rate[s, column] * WHOLE_GPU_SPEEDUP
        if not unmet(0.0, float(problem.demand[s])):
            continue
        if rate <= 0:
            raise InfeasibleError(f"{name}: a whole GPU cannot meet its latency target")
        needed = max(1, math.ceil(problem.demand[s] / rate - 1e-9))
        gpus += [GpuPlan(full, ((placement, name),))] * needed
    # every rate 1.04x higher bounds a world of MIG layouts and whole GPUs: the MIG LP bound
    # (a bound for MIG layouts only) divided by the credit
    value = relaxation(problem)[0]
    bound = min(math.ceil(value / WHOLE_GPU_SPEEDUP - 1e-6), len(gpus))
    return Plan(
        "whole-gpu", tuple(gpus), bound, len(gpus) <= bound, time.perf_counter() - start,
        WHOLE_GPU_SPEEDUP,
    )
