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
from dataclasses import replace

from cotenant.errors import InfeasibleError
from cotenant.model.deployment import GpuPlan
from cotenant.policies.partition.milp import lower_bound
from cotenant.policies.partition.problem import Deadline, PartitionProblem, Plan, unmet
from cotenant.policies.partition.registry import PARTITION

WHOLE_GPU_SPEEDUP = 1.04


@PARTITION.register("whole-gpu", aliases=("baseline", "as-is"))
def solve_whole_gpu(problem: PartitionProblem, time_limit: float = 10.0) -> Plan:
    """Whole GPUs per service (closed-form); ``time_limit`` bounds the time its lower bound
    may take."""
    deadline = Deadline(time_limit)
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
    # a world where every MIG instance is 1.04x faster holds every whole-GPU plan: its bound
    # bounds this one
    faster = replace(problem, rate=problem.rate * WHOLE_GPU_SPEEDUP)
    bound = min(lower_bound(faster, deadline), len(gpus))
    return Plan(
        "whole-gpu", tuple(gpus), bound, len(gpus) <= bound, deadline.elapsed(),
        WHOLE_GPU_SPEEDUP,
    )
