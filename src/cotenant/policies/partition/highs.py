"""HiGHS's MILP within a wall-clock limit.

HiGHS gets the limit, less :func:`reserve`, as its own ``time_limit``, and normally returns
with its best plan and bound by then; where it overruns (it checks the limit rarely in
presolve and in the root node's heuristics), the child process it runs in (:mod:`~.child`)
is killed at the limit plus :data:`~.child.GRACE_S`, and the caller gets no answer and goes
on with its best plan. Nothing is left running past the limit.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.optimize import Bounds, LinearConstraint, OptimizeResult, milp

from cotenant.policies.partition.child import Pending
from cotenant.policies.partition.problem import FloatArray


def reserve(seconds: float) -> float:
    """Of a child's ``seconds``, what HiGHS's own limit leaves for handing the model to
    HiGHS, winding down at its limit and sending the answer back: on this project's 2-core
    VM under a load of 4.6, scipy's ``milp`` with a 0.9 s limit returned 0.004-0.09 s late
    at 100 services and 0.09-1.3 s late at 500 (that overrun is killed)."""
    return min(0.05 + 0.05 * seconds, 1.0)


def _milp(cost: FloatArray, matrix: sp.csr_array | FloatArray, row_lower: FloatArray,
          row_upper: FloatArray, upper: FloatArray, options: dict[str, Any]) -> OptimizeResult:
    with warnings.catch_warnings():  # extra HiGHS options are passed on, noted
        warnings.simplefilter("ignore", RuntimeWarning)
        return milp(cost, constraints=[LinearConstraint(matrix, row_lower, row_upper)],
                    integrality=np.ones_like(cost), bounds=Bounds(0, upper),
                    options={"disp": False, **options})


class Solve:
    """One MILP started now in a child process (at CPU priority ``nice``), with HiGHS's
    ``time_limit`` set to ``seconds`` less :func:`reserve`; :meth:`result` waits for its
    answer at most ``seconds``."""

    def __init__(self, cost: FloatArray, matrix: sp.csr_array | FloatArray,
                 row_lower: FloatArray, row_upper: FloatArray, upper: FloatArray,
                 seconds: float, options: dict[str, Any] | None = None,
                 nice: int = 0) -> None:
        opts = {"time_limit": max(seconds - reserve(seconds), 0.001), **(options or {})}
        self.pending: Pending[OptimizeResult] = Pending(
            lambda: _milp(cost, matrix, row_lower, row_upper, upper, opts), seconds, nice)

    def result(self) -> OptimizeResult | None:
        """scipy's result, or None where HiGHS did not answer within its limit."""
        return self.pending.result()


def solve_small(
    cost: FloatArray, matrix: FloatArray, row_lower: FloatArray, row_upper: FloatArray,
    upper: FloatArray, seconds: float,
) -> OptimizeResult | None:
    """A program of a few dozen variables (packing instances onto layouts), solved at once
    in this process: HiGHS proves such a packing optimal in milliseconds."""
    if seconds <= 0:
        return None
    res = milp(cost, constraints=[LinearConstraint(matrix, row_lower, row_upper)],
               integrality=np.ones_like(cost), bounds=Bounds(0, upper),
               options={"time_limit": seconds, "disp": False})
    return res if res.x is not None else None
