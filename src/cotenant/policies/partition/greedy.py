"""Greedy MIG partitioning, in the spirit of MIG-serving's heuristic (its paper gives the
idea, this rule is ours):

1. **Instances per service.** Each service takes instances of its most efficient profile
   (highest req/s per compute slice; the larger profile on ties) while a whole instance is
   needed, and covers the rest of its demand with the *smallest* profile whose rate covers it.
2. **Layouts.** While instances are left to place, open a GPU with the maximal layout that
   holds the most of the remaining instances, weighted by compute slices (ties: fewer idle
   slices, then catalog order), and give it those instances.

Idle instances left on the last GPUs are not reused across services; that is where the gap
to the optimum comes from.
It is measured against the exact MILP in ``benchmarks/mig_planner.py``.
"""

from __future__ import annotations

import time

import numpy as np

from cotenant.policies.partition.milp import lp_bound
from cotenant.policies.partition.problem import IntArray, PartitionProblem, Plan, realise, unmet
from cotenant.policies.partition.registry import PARTITION


def instance_counts(problem: PartitionProblem) -> IntArray:
    """Step 1: (S, P) instance counts that cover every demand."""
    slices = problem.slices
    counts = np.zeros(problem.rate.shape, dtype=np.int64)
    for s, demand in enumerate(problem.demand):
        rates = problem.rate[s]
        if demand <= 0:
            continue
        usable = rates > 0
        eff = np.where(usable, rates / slices, -1.0)
        best = int(np.lexsort((slices, eff))[-1])
        whole = int(demand // rates[best])
        rest = demand - whole * rates[best]
        counts[s, best] = whole
        if unmet(whole * float(rates[best]), demand):
            covering = np.flatnonzero(rates >= rest)
            pick = int(covering[np.argmin(slices[covering])]) if covering.size else best
            counts[s, pick] += 1
    return counts


def pack(problem: PartitionProblem, need: IntArray) -> IntArray:
    """Step 2: layout counts (L,) holding ``need`` (P,) instances."""
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
        use[best] += 1
        remaining -= held[best]
    return use


@PARTITION.register("greedy")
def solve_greedy(problem: PartitionProblem, time_limit: float = 10.0) -> Plan:  # noqa: ARG001
    """Greedy plan; the LP bound says how far it can be from the optimum. It takes
    milliseconds, so ``time_limit`` is unused."""
    start = time.perf_counter()
    instances = instance_counts(problem)
    use = pack(problem, instances.sum(axis=0))
    gpus = realise(problem, use, instances)
    bound = lp_bound(problem)
    return Plan("greedy", gpus, bound, len(gpus) <= bound, time.perf_counter() - start)
