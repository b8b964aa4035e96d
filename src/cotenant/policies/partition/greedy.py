"""Greedy MIG partitioning, in the spirit of MIG-serving's heuristic (its paper gives the
idea, this rule is ours):

1. **Instances per service.** Each service takes instances of its most efficient profile
   (highest req/s per compute slice; the larger profile on ties) while a whole instance is
   needed, and covers the rest of its demand with the *smallest* profile whose rate covers it.
2. **Layouts.** While instances are left to place, open a GPU with the maximal layout that
   holds the most of the remaining instances, weighted by compute slices (ties: fewer idle
   slices, then catalog order), and give it those instances.

Idle instances left on the last GPUs are not reused across services; that is where the gap
to the optimum comes from. Both steps are vectorised, so the greedy plan of 100,000 services
takes about a second; every other optimiser starts from it.
It is measured against the exact MILP in ``benchmarks/mig_planner.py``.
"""

from __future__ import annotations

import numpy as np

from cotenant.model.deployment import GpuPlan
from cotenant.policies.partition.bounds import lower_bound
from cotenant.policies.partition.problem import (
    TOLERANCE,
    Deadline,
    IntArray,
    PartitionProblem,
    Plan,
    realise,
)
from cotenant.policies.partition.registry import PARTITION


def instance_counts(problem: PartitionProblem) -> IntArray:
    """Step 1: (S, P) instance counts that cover every demand (vectorised over services)."""
    slices = problem.slices
    rate = problem.rate
    demand = problem.demand
    n_svc = len(demand)
    eff = np.where(rate > 0, rate / slices[None, :], -1.0)
    # the most efficient profile, the larger on ties: the last of a lexsort by (slices, eff)
    order = np.lexsort((np.broadcast_to(slices, rate.shape), eff), axis=1)
    best = order[:, -1]
    rows = np.arange(n_svc)
    best_rate = rate[rows, best]
    safe = np.where(best_rate > 0, best_rate, 1.0)
    whole = np.where(demand > 0, np.floor(demand / safe), 0).astype(np.int64)
    rest = demand - whole * best_rate
    short = (demand > 0) & (rest > TOLERANCE * np.maximum(1.0, demand))
    counts = np.zeros(rate.shape, dtype=np.int64)
    counts[rows, best] = whole
    # the rest: the smallest profile whose rate covers it, else one more of the best
    covering = (rate >= rest[:, None]) & (rate > 0)
    size = np.where(covering, slices[None, :], np.iinfo(np.int64).max)
    pick = np.where(covering.any(axis=1), size.argmin(axis=1), best)
    np.add.at(counts, (rows[short], pick[short]), 1)
    return counts


def pack(problem: PartitionProblem, need: IntArray) -> IntArray:
    """Step 2: layout counts (L,) holding ``need`` (P,) instances; a layout chosen once is
    taken as many times as it is filled (thousands of GPUs in a few dozen rounds)."""
    counts = problem.layout_counts()
    slices = problem.slices
    remaining = need.copy()
    use = np.zeros(len(problem.layouts), dtype=np.int64)
    capacity = counts @ slices
    while remaining.sum() > 0:
        held = np.minimum(counts, remaining[None, :])
        gain = held @ slices
        idle = capacity - gain
        best = int(np.lexsort((np.arange(len(gain)), idle, -gain))[0])
        inside = counts[best] > 0
        full = (held[best] == counts[best]).all()
        times = int((remaining[inside] // counts[best][inside]).min()) if full else 1
        times = max(times, 1)
        use[best] += times
        remaining = np.maximum(remaining - times * counts[best], 0)
    return use


def greedy_gpus(problem: PartitionProblem) -> tuple[GpuPlan, ...]:
    """The greedy plan's GPUs, without a bound (milliseconds even at 100,000 services)."""
    instances = instance_counts(problem)
    return realise(problem, pack(problem, instances.sum(axis=0)), instances)


@PARTITION.register("greedy")
def solve_greedy(problem: PartitionProblem, time_limit: float = 10.0) -> Plan:
    """Greedy plan; the bound (the slice bound, and the LP relaxation's where it solves in
    half the time limit) says how far it can be from the optimum."""
    deadline = Deadline(time_limit)
    gpus = greedy_gpus(problem)
    bound = lower_bound(problem, deadline)
    return Plan("greedy", gpus, min(bound, len(gpus)), len(gpus) <= bound, deadline.elapsed())
