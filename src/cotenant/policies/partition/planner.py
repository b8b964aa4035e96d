"""From a serving spec and a profile table to a partition problem and a plan.

For every service and every profile of the GPU model the table has rows for (``1g.10gb``,
``+me`` profiles included), the rate one instance sustains is the table's best throughput
whose latency meets the service's SLO. A service that
no profile can serve within its SLO is rejected with the best latency on offer, and a model
the table does not know is rejected with the list of known ones.
"""

from __future__ import annotations

from functools import partial

import numpy as np

from cotenant.errors import InputError, UnknownNameError
from cotenant.model.mig import MigGeometry
from cotenant.model.serving import ServingSpec
from cotenant.perf.mig_profiles import ProfileTable
from cotenant.policies.partition.auto import solve_auto
from cotenant.policies.partition.formulation import slice_bound
from cotenant.policies.partition.milp import MIN_SOLVE_S, solve_milp
from cotenant.policies.partition.problem import Deadline, PartitionProblem, Plan, verify
from cotenant.policies.partition.registry import PARTITION


def _profile_order(geometry: MigGeometry, name: str) -> tuple[int, int, bool, str]:
    profile = geometry.profile(name)
    return profile.compute_slices, profile.memory_slices, profile.media_extensions, name


def build_problem(spec: ServingSpec, table: ProfileTable) -> PartitionProblem:
    """The rate matrix for ``spec`` on its GPU model, over every profile of the model that
    the table has data for and that meets some service's SLO (``1g.10gb`` and ``+me``
    profiles included where the table has rows for them)."""
    geometry = spec.gpu.require_mig("spec.gpu")  # parse_spec already refuses non-MIG models
    slo = np.array([s.slo_ms for s in spec.services], dtype=np.float64)
    demand = np.array([s.rate for s in spec.services], dtype=np.float64)
    by_model: dict[str, list[int]] = {}
    for s, service in enumerate(spec.services):
        by_model.setdefault(service.model, []).append(s)
    names = [p.name for p in geometry.profiles]
    rates = np.zeros((len(spec.services), len(names)))
    for model, members in by_model.items():
        first = members[0]
        try:
            table.check(model, spec.gpu.name)
        except UnknownNameError as exc:
            where = f"{spec.source}.services[{first}] ({spec.services[first].name})"
            raise InputError(where, exc.message) from exc
        rows = np.array(members)
        for profile in table.profiles(model, spec.gpu.name):
            rates[rows, names.index(profile)] = table.capacities(
                model, spec.gpu.name, profile, slo[rows])
    cannot = np.flatnonzero((demand > 0) & (rates.max(axis=1) <= 0))
    if cannot.size:
        s = int(cannot[0])
        service = spec.services[s]
        best = table.best_latency(service.model, spec.gpu.name)
        raise InputError(
            f"{spec.source}.services[{s}] ({service.name})",
            f"no MIG profile of {spec.gpu.name} meets an SLO of {service.slo_ms:g} ms for "
            f"{service.model}; the best latency available is {best:g} ms",
        )
    used = sorted((names[j] for j in np.flatnonzero(rates.max(axis=0) > 0)),
                  key=lambda n: _profile_order(geometry, n))
    if not used:  # every demand is zero and no SLO can be met: plan over the 7g alone
        used = [max(names, key=lambda n: _profile_order(geometry, n))]
    columns = [names.index(n) for n in used]
    rate = rates[:, columns]
    best = rate.max(axis=1)  # > 0 wherever demand is (checked above)
    fewest = float(np.sum(np.divide(demand, best, out=np.zeros_like(demand), where=best > 0)))
    if fewest > 10 * MAX_PLAN_GPUS:  # before building anything: a unit mistake, say 1e12
        _too_many(spec, fewest)
    # every profile with a rate is used, so no service has a rate on a profile left out
    problem = PartitionProblem(geometry, tuple(s.name for s in spec.services), demand,
                               tuple(used), rate)
    fewest = max(fewest, slice_bound(problem))  # integer instances: the slices they take
    if fewest > MAX_PLAN_GPUS:
        _too_many(spec, fewest)
    return problem


def _too_many(spec: ServingSpec, gpus: float) -> None:
    count = f"{gpus:,.0f}" if gpus < 1e9 else f"{gpus:.3g}"
    raise InputError(f"{spec.source}.services", f"the rates need at least {count} "
                     f"GPUs; the planner plans up to {MAX_PLAN_GPUS:,}",
                     hint="check the rates' unit (req/s), or split the spec")


MAX_PLAN_GPUS = 20_000
"""The largest plan: the cluster size cotenant is built for. A spec whose slice bound
(:func:`~cotenant.policies.partition.formulation.slice_bound`) needs more, or a plan that
takes more, is refused with one line; a rate that needs more is more often a unit mistake
than a real fleet."""

NODE_LIMITED = {"milp": solve_milp, "auto": solve_auto}
"""The solvers that take a node limit besides their time limit."""

DEFAULT_TIME_LIMIT = 1.0
"""Seconds the default optimiser gets: at 100 services it is within 1% of the optimum on
average in this time (benchmarks/mig_planner.py); give big plans more to close the gap."""


def plan_spec(
    spec: ServingSpec,
    table: ProfileTable,
    solver: str = "auto",
    time_limit: float = DEFAULT_TIME_LIMIT,
    node_limit: int | None = None,
) -> tuple[PartitionProblem, Plan]:
    """Plan ``spec`` with ``solver`` and prove the plan valid before returning it, all within
    about ``time_limit`` seconds (the first plan, the greedy one, is returned even when the
    limit is shorter than it takes). ``node_limit`` (``milp`` and ``auto`` only) also stops
    HiGHS's branch and bound after that many nodes."""
    solver = PARTITION.canonical(solver)  # "MILP" or an alias takes a node limit too
    solve = PARTITION.get(solver)
    if node_limit is not None:
        if solver not in NODE_LIMITED:
            raise InputError("--node-limit", f"the {solver} solver takes no node limit",
                             hint=f"use it with --solver {' or '.join(NODE_LIMITED)}")
        solve = partial(NODE_LIMITED[solver], node_limit=node_limit)
    deadline = Deadline(time_limit)
    problem = build_problem(spec, table)
    # the solver gets what building left, less the time checking the plan takes (about
    # 10 microseconds a service), so that the whole call keeps to ``time_limit``
    left = deadline.left() - 1e-5 * len(spec.services)
    plan = solve(problem, max(left, min(time_limit, MIN_SOLVE_S)))
    verify(problem, plan)
    if plan.gpu_count > MAX_PLAN_GPUS:
        raise InputError(f"{spec.source}.services", f"the {plan.solver} plan takes "
                         f"{plan.gpu_count:,} GPUs; the planner plans up to {MAX_PLAN_GPUS:,}",
                         hint="split the spec, or try --solver auto with a longer "
                         "--time-limit")
    return problem, plan
