"""Exact MIG partitioning as a mixed-integer linear program, solved by HiGHS.

Variables: ``y_l`` GPUs configured with maximal layout l, and ``z_sp`` instances of profile p
serving service s (integers). Instances of one profile are interchangeable across GPUs, so
given y any split of the pooled instances among services is realisable::

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
from cotenant.policies.partition.problem import PartitionProblem, Plan, realise
from cotenant.policies.partition.registry import PARTITION


def _matrices(problem: PartitionProblem) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    counts = problem.layout_counts()  # (L, P)
    n_layouts, n_prof = counts.shape
    n_svc = len(problem.services)
    n_vars = n_layouts + n_svc * n_prof
    cost = np.concatenate([np.ones(n_layouts), np.zeros(n_svc * n_prof)])
    # instances: sum_s z_sp - sum_l c_lp y_l <= 0
    inst = np.zeros((n_prof, n_vars))
    inst[:, :n_layouts] = -counts.T
    for p in range(n_prof):
        inst[p, n_layouts + p :: n_prof] = 1.0
    # demand: sum_p (r_sp / d_s) z_sp >= 1, scaled so the solver's tolerance is relative
    dem = np.zeros((n_svc, n_vars))
    need = np.zeros(n_svc)
    for s in range(n_svc):
        if problem.demand[s] > 0:
            row = problem.rate[s] / problem.demand[s]
            dem[s, n_layouts + s * n_prof : n_layouts + (s + 1) * n_prof] = row
            need[s] = 1.0
    return cost, inst, dem, need


def lp_bound(problem: PartitionProblem) -> int:
    """ceil of the LP relaxation: no plan uses fewer GPUs."""
    cost, inst, dem, need = _matrices(problem)
    a_ub = np.vstack([inst, -dem])
    b_ub = np.concatenate([np.zeros(inst.shape[0]), -need])
    res = linprog(cost, A_ub=a_ub, b_ub=b_ub, bounds=(0, None), method="highs")
    if res.status != 0:
        raise InfeasibleError(f"LP relaxation failed: {res.message}")
    return math.ceil(float(res.fun) - 1e-6)


@PARTITION.register("milp", aliases=("exact", "highs"))
def solve_milp(problem: PartitionProblem, time_limit: float = 10.0) -> Plan:
    """The optimum where HiGHS proves it within ``time_limit`` s, else its best plan and
    bound."""
    start = time.perf_counter()
    cost, inst, dem, need = _matrices(problem)
    n_layouts = len(problem.layouts)
    res = milp(
        cost,
        constraints=[
            LinearConstraint(inst, -np.inf, 0.0),
            LinearConstraint(dem, need, np.inf),
        ],
        integrality=np.ones_like(cost),
        bounds=Bounds(0, np.inf),
        options={"time_limit": max(time_limit, 0.01), "disp": False},
    )
    if res.x is None:
        raise InfeasibleError(f"MILP found no plan within {time_limit:g} s: {res.message}")
    x = np.rint(res.x).astype(np.int64)
    layout_use = x[:n_layouts]
    instances = x[n_layouts:].reshape(len(problem.services), len(problem.profiles))
    gpus = realise(problem, layout_use, instances)
    # HiGHS's dual bound is at least the LP relaxation's; solve the LP only without one.
    dual = getattr(res, "mip_dual_bound", None)
    if dual is not None and np.isfinite(dual):
        bound = math.ceil(float(dual) - 1e-6)
    else:
        bound = lp_bound(problem)
    optimal = res.status == 0 or len(gpus) <= bound
    return Plan("milp", gpus, min(bound, len(gpus)), optimal, time.perf_counter() - start)
