"""From a serving spec and a profile table to a partition problem and a plan.

For every service and every compute profile of the GPU model, the rate one instance sustains
is the profile table's best throughput whose latency meets the service's SLO. A service that
no profile can serve within its SLO is rejected with the best latency on offer, and a model
the table does not know is rejected with the list of known ones.
"""

from __future__ import annotations

import numpy as np

from cotenant.errors import InputError, UnknownNameError
from cotenant.model.serving import ServingSpec
from cotenant.perf.mig_profiles import ProfileTable
from cotenant.policies.partition.problem import PartitionProblem, Plan, verify
from cotenant.policies.partition.registry import PARTITION


def build_problem(spec: ServingSpec, table: ProfileTable) -> PartitionProblem:
    """The rate matrix for ``spec`` on its GPU model."""
    geometry = spec.gpu.require_mig("spec.gpu")  # parse_spec already refuses non-MIG models
    layouts = tuple(geometry.enumerate_maximal())
    profiles = tuple(
        sorted({p.profile.name for lay in layouts for p in lay.placements},
               key=lambda n: geometry.profile(n).compute_slices)
    )
    rate = np.zeros((len(spec.services), len(profiles)))
    others: dict[tuple[str, str], float] = {}  # profiles no planned layout uses
    for s, service in enumerate(spec.services):
        where = f"{spec.source}.services[{s}] ({service.name})"
        try:
            table.check(service.model, spec.gpu.name)
        except UnknownNameError as exc:
            raise InputError(where, exc.message) from exc
        measured = set(table.profiles(service.model, spec.gpu.name))
        for j, profile in enumerate(profiles):  # a profile the table has no data for: unused
            cap = (table.capacity(service.model, spec.gpu.name, profile, service.slo_ms)
                   if profile in measured else None)
            rate[s, j] = cap.throughput if cap is not None else 0.0
        for profile in measured - set(profiles):
            cap = table.capacity(service.model, spec.gpu.name, profile, service.slo_ms)
            if cap is not None:
                others[(service.name, profile)] = cap.throughput
        if service.rate > 0 and rate[s].max() <= 0:
            best = table.best_latency(service.model, spec.gpu.name)
            raise InputError(
                where,
                f"no MIG profile of {spec.gpu.name} meets an SLO of {service.slo_ms:g} ms for "
                f"{service.model}; the best latency available is {best:g} ms",
            )
    demand = np.array([s.rate for s in spec.services], dtype=np.float64)
    best = rate.max(axis=1)  # > 0 wherever demand is (checked above)
    fewest = float(np.sum(np.divide(demand, best, out=np.zeros_like(demand), where=best > 0)))
    if fewest > MAX_PLAN_GPUS:
        count = f"{fewest:,.0f}" if fewest < 1e9 else f"{fewest:.3g}"
        raise InputError(f"{spec.source}.services", f"the rates need at least {count} "
                         f"GPUs; the planner plans up to {MAX_PLAN_GPUS:,}",
                         hint="check the rates' unit (req/s), or split the spec")
    return PartitionProblem(
        geometry, tuple(s.name for s in spec.services), demand, profiles, rate, layouts, others
    )


MAX_PLAN_GPUS = 20_000
"""The largest plan: the cluster size cotenant is built for. Beyond it the solvers overrun their
time limit, and a rate that needs more is more often a unit mistake than a real fleet."""

DEFAULT_TIME_LIMIT = 1.0
"""Seconds the default optimiser gets: at 100 services it is within 1% of the optimum on
average in this time (benchmarks/mig_planner.py); give big plans more to close the gap."""


def plan_spec(
    spec: ServingSpec,
    table: ProfileTable,
    solver: str = "auto",
    time_limit: float = DEFAULT_TIME_LIMIT,
) -> tuple[PartitionProblem, Plan]:
    """Plan ``spec`` with ``solver`` and prove the plan valid before returning it."""
    problem = build_problem(spec, table)
    plan = PARTITION.get(solver)(problem, time_limit)
    verify(problem, plan)
    return problem, plan
