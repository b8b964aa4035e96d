"""Lower bounds on the GPUs a MIG partition needs, within a time budget: the slice bound and
the LP relaxation of :mod:`~cotenant.policies.partition.formulation` (HiGHS through scipy).
Every optimiser reports one; kept apart from the exact solver so that the heuristics need not
import it."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.optimize import linprog

from cotenant.policies.partition.child import Pending
from cotenant.policies.partition.formulation import formulate, slice_bound
from cotenant.policies.partition.problem import Deadline, FloatArray, PartitionProblem

MIN_SOLVE_S = 0.02
"""The shortest time worth handing HiGHS; with less left a step is skipped."""


def solver_time(problem: PartitionProblem, deadline: Deadline, share: float = 1.0) -> float:
    """Seconds HiGHS may take of what ``deadline`` has left: ``share`` of it, less a margin
    for HiGHS's own set-up past its limit and for realising and verifying the plan (both
    grow with the services: about 20 microseconds each, measured at 10,000 services)."""
    margin = 0.03 + 2e-5 * len(problem.services)
    return max(share * (deadline.left() - margin), 0.0)


@dataclass(frozen=True)
class Relaxation:
    """The LP relaxation's optimum: its value, the instances (S, P) (fractional), and the dual
    price of one instance of each profile (P,), in GPUs."""

    value: float
    z: FloatArray
    price: FloatArray


def relaxation(problem: PartitionProblem, seconds: float = 10.0) -> Relaxation | None:
    """The LP relaxation (cuts included), or None when HiGHS does not finish in
    ``seconds``."""
    if seconds < MIN_SOLVE_S:
        return None
    form = formulate(problem)
    n_prof = len(problem.profiles)
    a_ub, b_ub = form.as_upper_rows()  # the instance rows first, as they are
    res = linprog(
        form.cost,
        A_ub=a_ub,
        b_ub=b_ub,
        bounds=np.stack([np.zeros_like(form.upper), form.upper], axis=1),
        method="highs",
        options={"time_limit": seconds},
    )
    if res.status != 0:
        return None
    price = -np.asarray(res.ineqlin.marginals[:n_prof], dtype=np.float64)
    return Relaxation(float(res.fun), form.instances(res.x, len(problem.services), n_prof),
                      np.maximum(price, 0.0))


def relaxation_within(problem: PartitionProblem, seconds: float) -> Relaxation | None:
    """:func:`relaxation` in a child process that is killed if HiGHS overruns ``seconds``
    (:mod:`~cotenant.policies.partition.child`)."""
    if seconds < MIN_SOLVE_S:
        return None
    return Pending(lambda: relaxation(problem, seconds), seconds).result()


def lower_bound(problem: PartitionProblem, deadline: Deadline | None = None,
                relaxed: Relaxation | None = None, share: float = 0.5) -> int:
    """The best bound available in time: the slice bound, and the LP relaxation's where it
    is given or solves within ``share`` of the time ``deadline`` has left."""
    bound = slice_bound(problem)
    if relaxed is None and deadline is not None:
        relaxed = relaxation_within(problem, solver_time(problem, deadline, share))
    if relaxed is not None:
        bound = max(bound, math.ceil(relaxed.value - 1e-6))
    return bound


def lp_bound(problem: PartitionProblem) -> int:
    """The bound with the LP relaxation solved to the end (tests and small problems)."""
    return lower_bound(problem, relaxed=relaxation(problem, 60.0))
