"""Two small exact steps that make rounding scale: pack given instances onto the fewest GPUs,
and choose each service's instances at given prices.

:func:`repack` solves ``min sum_l y_l  s.t.  sum_l c_lp y_l >= n_p`` over the distinct
layouts: a handful of integer variables whatever the number of services, so HiGHS proves it
optimal in milliseconds where the services' instance counts are known.

:func:`cheapest_patterns` covers each service's demand with the instance *pattern* (a count
per profile, up to two GPUs' worth of slices) of least cost at the given price per instance
(the LP's dual prices: GPUs per instance); vectorised over services, patterns enumerated once.
"""

from __future__ import annotations

import numpy as np

from cotenant.policies.partition.formulation import distinct_layouts
from cotenant.policies.partition.highs import solve_small
from cotenant.policies.partition.problem import TOLERANCE, FloatArray, IntArray, PartitionProblem

PATTERN_GPUS = 2
"""Patterns span up to this many GPUs' worth of compute and memory slices."""
CHUNK = 2048
"""Services priced at once."""


def repack(problem: PartitionProblem, need: IntArray, seconds: float) -> IntArray | None:
    """(L,) the fewest layouts holding ``need`` (P,) instances; None if HiGHS has no plan
    in ``seconds``."""
    if seconds <= 0:
        return None
    layouts = distinct_layouts(problem)
    counts = problem.layout_counts()[layouts].astype(np.float64)  # (L', P)
    res = solve_small(np.ones(len(layouts)), counts.T, need.astype(np.float64),
                      np.full(len(need), np.inf), np.full(len(layouts), np.inf), seconds)
    if res is None or res.x is None:
        return None
    use = np.zeros(len(problem.layouts), dtype=np.int64)
    use[layouts] = np.rint(res.x).astype(np.int64)
    return use


def patterns(problem: PartitionProblem) -> IntArray:
    """(Q, P) every instance count vector within :data:`PATTERN_GPUS` GPUs' slices."""
    geometry = problem.geometry
    compute = PATTERN_GPUS * geometry.compute_slices
    memory = PATTERN_GPUS * geometry.memory_slices
    k, m = problem.slices, problem.memory_slices
    found: list[tuple[int, ...]] = []

    def grow(prefix: tuple[int, ...], used_k: int, used_m: int) -> None:
        p = len(prefix)
        if p == len(k):
            if any(prefix):
                found.append(prefix)
            return
        n = 0
        while used_k + n * k[p] <= compute and used_m + n * m[p] <= memory:
            grow((*prefix, n), used_k + n * int(k[p]), used_m + n * int(m[p]))
            n += 1

    grow((), 0, 0)
    return np.array(found, dtype=np.int64).reshape(-1, len(k))


def cheapest_patterns(problem: PartitionProblem, price: FloatArray) -> IntArray:
    """(S, P) per service the least-cost pattern covering its demand at ``price`` (P,) per
    instance (ties: fewer compute slices); a service no pattern covers gets the greedy's
    instances."""
    from cotenant.policies.partition.greedy import instance_counts  # noqa: PLC0415  (cycle)

    table = patterns(problem)  # (Q, P)
    slices = table @ problem.slices
    cost = table @ np.maximum(price, 0.0) + 1e-6 * slices
    order = np.argsort(cost, kind="stable")
    table, cost = table[order], cost[order]
    active = np.flatnonzero(problem.demand > 0)
    out = np.zeros(problem.rate.shape, dtype=np.int64)
    if not active.size:
        return out
    covered = np.zeros(len(active), dtype=bool)
    for lo in range(0, len(active), CHUNK):  # (chunk, Q) at a time: memory stays flat
        rows = active[lo:lo + CHUNK]
        serves = problem.rate[rows] @ table.T  # req/s of each pattern
        ok = serves >= (problem.demand[rows] * (1.0 - TOLERANCE / 2))[:, None]
        first = ok.argmax(axis=1)  # patterns are sorted by cost: the first that covers
        hit = ok[np.arange(len(rows)), first]
        out[rows[hit]] = table[first[hit]]
        covered[lo:lo + CHUNK] = hit
    if not covered.all():
        out[active[~covered]] = instance_counts(problem)[active[~covered]]
    return out
