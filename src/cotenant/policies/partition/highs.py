"""HiGHS's MILP within a wall-clock limit.

HiGHS takes a time limit, but checks it rarely in presolve and in the root node's heuristics:
measured on this project's 2-core VM, a 0.5 s limit took 5 s at 10,000 services and 1.8 s at
1,000 large services. :class:`Solve` therefore runs HiGHS in a thread of its own (scipy's
HiGHS releases the GIL) and gives up on it when the limit has passed: the caller gets no
answer and goes on with its best plan, on time. An abandoned solve runs on until HiGHS stops
it; until then no other large solve starts (the next one waits for it within its own
limit), and a process that ends waits for it (a thread inside HiGHS at exit would abort
the interpreter).
"""

from __future__ import annotations

import threading
import time
import warnings
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.optimize import Bounds, LinearConstraint, OptimizeResult, milp

from cotenant.policies.partition.problem import FloatArray

GRACE_S = 0.05
"""Seconds past its limit a solve may take before it is abandoned."""

_busy = threading.Lock()


class Solve:
    """One MILP started in the background (after any abandoned one has stopped, waiting at
    most ``seconds``); :meth:`result` waits for its answer."""

    def __init__(self, cost: FloatArray, matrix: sp.csr_array | FloatArray,
                 row_lower: FloatArray, row_upper: FloatArray, upper: FloatArray,
                 seconds: float, options: dict[str, Any] | None = None) -> None:
        self._box: list[OptimizeResult] = []
        self._failed: list[BaseException] = []
        began = time.perf_counter()
        self.started = _busy.acquire(timeout=max(seconds, 0.0))
        self.seconds = seconds - (time.perf_counter() - began)
        self.ends = time.perf_counter() + self.seconds + GRACE_S
        if not self.started:
            return
        limit = max(self.seconds, 0.001)

        def run() -> None:
            try:
                with warnings.catch_warnings():  # extra HiGHS options are passed on, noted
                    warnings.simplefilter("ignore", RuntimeWarning)
                    self._box.append(milp(
                        cost,
                        constraints=[LinearConstraint(matrix, row_lower, row_upper)],
                        integrality=np.ones_like(cost),
                        bounds=Bounds(0, upper),
                        options={"time_limit": limit, "disp": False, **(options or {})},
                    ))
            except Exception as exc:
                self._failed.append(exc)
            finally:
                _busy.release()

        self._worker = threading.Thread(target=run, name="cotenant-highs")
        self._worker.start()

    def result(self) -> OptimizeResult | None:
        """scipy's result, or None where HiGHS did not answer within its limit (plus
        :data:`GRACE_S`) or could not start."""
        if not self.started:
            return None
        self._worker.join(max(self.ends - time.perf_counter(), 0.0))
        if self._failed:
            raise self._failed[0]
        return self._box[0] if self._box else None


def wait_idle(seconds: float) -> bool:
    """Wait until no abandoned solve runs (at most ``seconds``); whether none does. For
    benchmarks, so that one optimiser's overrun is not charged to the next."""
    if _busy.acquire(timeout=seconds):
        _busy.release()
        return True
    return False


def solve_within(
    cost: FloatArray,
    matrix: sp.csr_array | FloatArray,
    row_lower: FloatArray,
    row_upper: FloatArray,
    upper: FloatArray,
    seconds: float,
    options: dict[str, Any] | None = None,
) -> OptimizeResult | None:
    """``min cost x`` over integers ``0 <= x <= upper`` with ``row_lower <= matrix x <=
    row_upper``: scipy's result, or None when HiGHS did not answer within ``seconds`` (an
    abandoned solve that still runs counts against them)."""
    return Solve(cost, matrix, row_lower, row_upper, upper, seconds, options).result()


def solve_small(
    cost: FloatArray, matrix: FloatArray, row_lower: FloatArray, row_upper: FloatArray,
    upper: FloatArray, seconds: float,
) -> OptimizeResult | None:
    """A program of a few dozen variables (packing instances onto layouts), solved at once
    in this thread, even beside a background solve: HiGHS instances are independent (145
    such packings beside a 5 s MILP in another thread all came back right)."""
    if seconds <= 0:
        return None
    res = milp(cost, constraints=[LinearConstraint(matrix, row_lower, row_upper)],
               integrality=np.ones_like(cost), bounds=Bounds(0, upper),
               options={"time_limit": seconds, "disp": False})
    return res if res.x is not None else None
