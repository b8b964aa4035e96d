"""Exact MIG partitioning: the integer program of
:mod:`~cotenant.policies.partition.formulation`, solved by HiGHS (through scipy).

Instances of one profile are interchangeable across GPUs, so given the layouts any split of
the pooled instances among services is realisable. HiGHS improves its bound during branch and
bound and stops at the time limit with its best plan and bound; where it finds no plan as
good as the greedy one in time, the greedy plan is the answer. (Design after MIG-serving,
Tan et al., "Serving DNN models with multi-instance GPUs: a case of the reconfigurable
machine scheduling problem", arXiv 2109.11067, which also formulates the problem as an
integer program.)

Every call takes a :class:`~cotenant.policies.partition.problem.Deadline`; HiGHS gets the
time left less a margin for turning its answer into GPUs and checking them, and runs in a
child process that is killed if it overruns (:mod:`~cotenant.policies.partition.highs`).
:func:`start_exact` is the one way the exact solve is started, by ``milp`` and by ``auto``
alike. ``node_limit`` bounds HiGHS's branch and bound by nodes as well as by time: a limit
that does not depend on how much CPU the machine gives, so that runs can be repeated
exactly.
"""

from __future__ import annotations

__all__ = ["MIN_SOLVE_S", "Relaxation", "children_deadline", "lower_bound", "lp_bound",
           "relaxation", "solver_time", "start_exact"]

import math
from dataclasses import dataclass

import numpy as np
from scipy.optimize import OptimizeResult

from cotenant.model.deployment import GpuPlan
from cotenant.policies.partition.bounds import (
    MIN_SOLVE_S,
    Relaxation,
    lower_bound,
    lp_bound,
    relaxation,
    solver_time,
)
from cotenant.policies.partition.child import GRACE_S, Pending
from cotenant.policies.partition.formulation import formulate, slice_bound
from cotenant.policies.partition.greedy import greedy_gpus
from cotenant.policies.partition.highs import Solve
from cotenant.policies.partition.problem import (
    Deadline,
    IntArray,
    PartitionProblem,
    Plan,
    realise,
)
from cotenant.policies.partition.registry import PARTITION

QUIET_HEURISTICS_VARIABLES = 2_000
"""Above this many instance variables per second of its limit HiGHS runs without its primal
heuristics (``mip_heuristic_effort`` 0): at 1,000 services of the large family its root
heuristics overran a 0.5 s limit by 1.3 s, and without them it found the same plan in
time. With more time they are what finds a plan (500 large services, 30 s: none without)."""


def _options(problem: PartitionProblem, seconds: float,
             node_limit: int | None = None) -> dict[str, float | int]:
    pairs = int(np.count_nonzero((problem.rate > 0) & (problem.demand > 0)[:, None]))
    quiet = pairs > QUIET_HEURISTICS_VARIABLES * max(seconds, 1.0)
    options: dict[str, float | int] = {"mip_heuristic_effort": 0.0} if quiet else {}
    if node_limit is not None:
        options["node_limit"] = int(node_limit)
    return options


@dataclass(frozen=True)
class MilpResult:
    """What HiGHS returned: layout use (L,) and instances (S, P) where it found a plan,
    its dual bound (None if it has none) and whether it proved its plan optimal."""

    use: IntArray | None
    instances: IntArray | None
    bound: int | None
    proven: bool


NO_ANSWER = MilpResult(None, None, None, False)


class PendingMilp:
    """The MILP solving in a child process (:class:`~.highs.Solve`); :meth:`result` waits
    for it. ``auto`` rounds the LP meanwhile, so the MILP gets the whole time limit."""

    def __init__(self, problem: PartitionProblem, seconds: float,
                 free: IntArray | None = None, node_limit: int | None = None,
                 nice: int = 0) -> None:
        self.problem = problem
        self.form = formulate(problem, free)
        self.solve = (Solve(self.form.cost, self.form.matrix, self.form.row_lower,
                            self.form.row_upper, self.form.upper, seconds,
                            _options(problem, seconds, node_limit), nice)
                      if seconds >= MIN_SOLVE_S else None)

    @property
    def pending(self) -> Pending[OptimizeResult] | None:
        """The child process solving it (None where there was no time to start one)."""
        return self.solve.pending if self.solve is not None else None

    def result(self) -> MilpResult:
        res = self.solve.result() if self.solve is not None else None
        if res is None:  # no answer in time
            return NO_ANSWER
        dual = getattr(res, "mip_dual_bound", None)
        bound = (math.ceil(float(dual) - 1e-6) if dual is not None and np.isfinite(dual)
                 else None)
        if res.x is None:
            return MilpResult(None, None, bound, False)
        x = np.rint(res.x)
        problem, form = self.problem, self.form
        use = form.layout_use(x, len(problem.layouts)).astype(np.int64)
        instances = form.instances(x, len(problem.services), len(problem.profiles))
        return MilpResult(use, instances.astype(np.int64), bound, res.status == 0)


def solve_counts(
    problem: PartitionProblem, seconds: float, free: IntArray | None = None
) -> MilpResult:
    """The MILP for at most ``seconds`` of wall time; ``free`` (P,) instances exist already,
    at no cost."""
    return PendingMilp(problem, seconds, free).result()


WIND_DOWN_S = 0.05
"""Seconds kept back from a solver's children for what follows them before the deadline:
stopping them, reading their answers, turning them into GPUs, checking and choosing the plan
(and :data:`~.child.GRACE_S`, the time an answer takes on its way past a child's deadline,
and 20 microseconds a service, are kept back too). Without it, ``auto`` at 100 services with
a 1 s limit returned after 1.01-1.14 s on this project's 2-core VM under load."""


def children_deadline(problem: PartitionProblem, deadline: Deadline) -> Deadline:
    """The deadline of the work done in child processes: ``deadline`` less the wind-down
    (:data:`WIND_DOWN_S`), so that the solve as a whole ends by ``deadline``."""
    keep = GRACE_S + WIND_DOWN_S + 2e-5 * len(problem.services)
    return Deadline(max(deadline.left() - keep, 0.0), deadline.clock)


def start_exact(problem: PartitionProblem, deadline: Deadline,
                node_limit: int | None = None, nice: int = 0) -> PendingMilp:
    """The exact solve, started with all the time ``deadline`` has left less the wind-down
    (:func:`children_deadline`): what ``milp`` waits for, and what ``auto`` starts at the
    same point of its own deadline (both after the greedy plan and the slice bound), so that
    ``auto`` has the exact solver's answer in hand when it picks its plan. ``nice`` lowers
    its CPU priority (``auto``, where HiGHS is unlikely to find a plan in time)."""
    return PendingMilp(problem, solver_time(problem, children_deadline(problem, deadline)),
                       node_limit=node_limit, nice=nice)


def plan_from(problem: PartitionProblem, found: MilpResult,
              fallback: tuple[GpuPlan, ...]) -> tuple[tuple[GpuPlan, ...], bool]:
    """The MILP's plan where it found one no larger than ``fallback``, else ``fallback``;
    and whether the MILP's plan was taken."""
    if found.use is None or found.instances is None:
        return fallback, False
    gpus = realise(problem, found.use, found.instances)
    return (gpus, True) if len(gpus) <= len(fallback) else (fallback, False)


@PARTITION.register("milp", aliases=("exact", "highs"))
def solve_milp(problem: PartitionProblem, time_limit: float = 10.0,
               node_limit: int | None = None) -> Plan:
    """The optimum where HiGHS proves it within ``time_limit`` s (and ``node_limit``
    nodes), else its best plan and bound; the greedy plan where HiGHS finds none as good."""

    deadline = Deadline(time_limit)
    greedy = greedy_gpus(problem)
    bound = slice_bound(problem)
    if len(greedy) <= bound:
        return Plan("milp:greedy", greedy, len(greedy), True, deadline.elapsed())
    found = start_exact(problem, deadline, node_limit).result()
    if found.bound is not None:
        bound = max(bound, found.bound)
    gpus, taken = plan_from(problem, found, greedy)
    optimal = (taken and found.proven) or len(gpus) <= bound
    return Plan("milp" if taken else "milp:greedy", gpus, min(bound, len(gpus)), optimal,
                deadline.elapsed())
