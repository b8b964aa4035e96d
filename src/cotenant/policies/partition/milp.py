"""Exact MIG partitioning as a mixed-integer linear program, solved by HiGHS.

Variables: ``y_l`` GPUs configured with maximal layout l (one per distinct multiset), and
``z_sp`` instances of profile p serving service s (integers). Instances of one profile are
interchangeable across GPUs, so given y any split of the pooled instances among services is
realisable::

    minimise    sum_l y_l
    subject to  sum_s z_sp <= sum_l c_lp y_l        for every profile p   (instances exist)
                sum_p r_sp z_sp >= d_s              for every service s   (demand met)
                y, z >= 0 integer

with ``c_lp`` the instances of p in layout l and ``r_sp`` their rate for s. The LP relaxation's
value, rounded up, is a lower bound on any plan; HiGHS improves the bound during branch and
bound and stops at the time limit with its best plan and bound. (Design after MIG-serving,
Tan et al., "Serving DNN models with multi-instance GPUs: a case of the reconfigurable machine
scheduling problem", arXiv 2109.11067, which also formulates the problem as an integer program.)
"""

from __future__ import annotations

import math
import time

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, linprog, milp

from cotenant.errors import InfeasibleError
from cotenant.policies.partition.problem import (
    TOLERANCE,
    FloatArray,
    IntArray,
    PartitionProblem,
    Plan,
    realise,
)
from cotenant.policies.partition.registry import PARTITION


def _distinct(problem: PartitionProblem) -> np.ndarray:
    """Indices of one layout per distinct profile multiset. Layouts that differ only in where
    instances sit (A100: 19 layouts, 14 multisets) are the same column to the MILP, and
    duplicate columns only make branch and bound explore symmetric copies."""
    _, first = np.unique(problem.layout_counts(), axis=0, return_index=True)
    return np.sort(first)


def _matrices(problem: PartitionProblem) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    counts = problem.layout_counts()[_distinct(problem)]  # (L', P)
    n_layouts, n_prof = counts.shape
    n_svc = len(problem.services)
    n_vars = n_layouts + n_svc * n_prof
    cost = np.concatenate([np.ones(n_layouts), np.zeros(n_svc * n_prof)])
    # instances: sum_s z_sp - sum_l c_lp y_l <= free_p (0 unless some already exist)
    inst = np.zeros((n_prof, n_vars))
    inst[:, :n_layouts] = -counts.T
    for p in range(n_prof):
        inst[p, n_layouts + p :: n_prof] = 1.0
    # demand: sum_p (r_sp / d_s) z_sp >= 1 - TOLERANCE / 2, scaled so the solver's tolerance
    # is relative: a shortfall verify() accepts is allowed, and HiGHS's own (about 1e-7 of
    # the row) stays within the other half
    dem = np.zeros((n_svc, n_vars))
    need = np.zeros(n_svc)
    for s in range(n_svc):
        if problem.demand[s] > 0:
            row = problem.rate[s] / problem.demand[s]
            dem[s, n_layouts + s * n_prof : n_layouts + (s + 1) * n_prof] = row
            need[s] = 1.0 - TOLERANCE / 2
    return cost, inst, dem, need


def relaxation(problem: PartitionProblem) -> tuple[float, IntArray, FloatArray]:
    """The LP relaxation: its value, and its layout use (L,) and instances (S, P) rounded
    down (a partial plan that the rest of the demand can be added to)."""
    cost, inst, dem, need = _matrices(problem)
    a_ub = np.vstack([inst, -dem])
    b_ub = np.concatenate([np.zeros(inst.shape[0]), -need])
    res = linprog(cost, A_ub=a_ub, b_ub=b_ub, bounds=(0, None), method="highs")
    if res.status != 0:
        raise InfeasibleError(f"LP relaxation failed: {res.message}")
    distinct = _distinct(problem)
    use = np.zeros(len(problem.layouts), dtype=np.int64)
    use[distinct] = np.floor(res.x[: len(distinct)] + 1e-9).astype(np.int64)
    z = res.x[len(distinct) :].reshape(len(problem.services), len(problem.profiles))
    return float(res.fun), use, z


def lp_bound(problem: PartitionProblem) -> int:
    """ceil of the LP relaxation: no plan uses fewer GPUs."""
    return math.ceil(relaxation(problem)[0] - 1e-6)


def solve_counts(
    problem: PartitionProblem, time_limit: float, free: IntArray | None = None
) -> tuple[IntArray, IntArray, int | None, bool]:
    """The MILP: layout use (L,), instances (S, P), HiGHS's dual bound (None if it has none)
    and whether the optimum was proven. ``free`` (P,) instances exist already, at no cost."""
    cost, inst, dem, need = _matrices(problem)
    distinct = _distinct(problem)
    n_layouts = len(distinct)
    extra = np.zeros(inst.shape[0]) if free is None else free.astype(np.float64)
    res = milp(
        cost,
        constraints=[
            LinearConstraint(inst, -np.inf, extra),
            LinearConstraint(dem, need, np.inf),
        ],
        integrality=np.ones_like(cost),
        bounds=Bounds(0, np.inf),
        options={"time_limit": max(time_limit, 0.01), "disp": False},
    )
    if res.x is None:
        raise InfeasibleError(f"MILP found no plan within {time_limit:g} s: {res.message}")
    x = np.rint(res.x).astype(np.int64)
    layout_use = np.zeros(len(problem.layouts), dtype=np.int64)
    layout_use[distinct] = x[:n_layouts]
    instances = x[n_layouts:].reshape(len(problem.services), len(problem.profiles))
    dual = getattr(res, "mip_dual_bound", None)
    bound = math.ceil(float(dual) - 1e-6) if dual is not None and np.isfinite(dual) else None
    return layout_use, instances, bound, res.status == 0


@PARTITION.register("milp", aliases=("exact", "highs"))
def solve_milp(problem: PartitionProblem, time_limit: float = 10.0) -> Plan:
    """The optimum where HiGHS proves it within ``time_limit`` s, else its best plan and
    bound."""
    start = time.perf_counter()
    layout_use, instances, dual, proven = solve_counts(problem, time_limit)
    gpus = realise(problem, layout_use, instances)
    # HiGHS's dual bound is at least the LP relaxation's; solve the LP only without one.
    bound = dual if dual is not None else lp_bound(problem)
    optimal = proven or len(gpus) <= bound
    return Plan("milp", gpus, min(bound, len(gpus)), optimal, time.perf_counter() - start)
