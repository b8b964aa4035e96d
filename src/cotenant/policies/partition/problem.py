"""The partition problem as plain arrays, and a plan with its checker.

A problem has S services with demands ``d_s`` (req/s) and a rate matrix ``r[s, p]``: the
req/s one instance of profile p sustains for service s within its latency target (0 where no
batch size meets it). Profiles are the ones the profile table has rates for (by default the
one-per-compute-size set 1g, 2g, 3g, 4g, 7g; a table with ``1g.10gb`` or ``+me`` rows adds
them), and ``layouts`` are the maximal valid layouts over those profiles; any valid layout is
a subset of a maximal one, so nothing is lost by planning over maximal layouts and leaving
instances idle.

A :class:`Deadline` carries an optimiser's time limit through its steps, so that every step
stops in time and the wall time of a solve, building and checking the plan included, stays
within the limit.

A :class:`Plan` lists GPUs, each a valid :class:`MigLayout` whose instances are assigned to
services (or idle). :func:`verify` proves what every optimiser must guarantee: each layout is
valid by the catalog and each service's assigned capacity covers its demand.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import numpy.typing as npt

from cotenant.errors import InfeasibleError, InputError
from cotenant.model.deployment import GpuPlan
from cotenant.model.mig import MigGeometry, MigLayout, MigPlacement

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

TOLERANCE = 1e-6
"""Relative slack when comparing capacity with demand: one part in a million, below any
measured rate's precision, and above the LP/MILP solver's feasibility tolerance (HiGHS
accepts a demand row, scaled to 1, short by about 1e-7), so a plan the solver calls feasible
is one :func:`verify` accepts."""
MIN_DEMAND = 1e-3
"""Demands below this (req/s: one request per 17 minutes) are planned as zero."""


class Deadline:
    """A time limit started now: how many seconds are left, on a monotonic clock."""

    def __init__(self, seconds: float, clock: Callable[[], float] = time.perf_counter) -> None:
        self.clock = clock
        self.start = clock()
        self.seconds = seconds

    def elapsed(self) -> float:
        return self.clock() - self.start

    def left(self) -> float:
        return max(self.seconds - self.elapsed(), 0.0)

    def expired(self) -> bool:
        return self.left() <= 0.0


def demand_left(demand: FloatArray, served: FloatArray) -> FloatArray:
    """The demand ``served`` leaves: 0 where it is met within :data:`TOLERANCE`, else at least
    :data:`MIN_DEMAND` (a smaller remainder would be planned as zero and left unmet)."""
    rest = np.maximum(demand - served, 0.0)
    short = rest > TOLERANCE * np.maximum(1.0, demand)
    return np.where(short, np.maximum(rest, MIN_DEMAND), 0.0)


def unmet(capacity: float, demand: float) -> bool:
    """Whether ``capacity`` falls short of ``demand`` beyond :data:`TOLERANCE`."""
    return capacity < demand - TOLERANCE * max(1.0, demand)


def _check_figures(name: str, services: tuple[str, ...], values: FloatArray) -> None:
    """An :class:`InputError` naming the first service whose ``name`` figure is not a finite
    number >= 0 (a NaN demand would be planned as none, silently)."""
    if values.ndim == 0 or len(values) != len(services):
        raise InputError(f"partition problem.{name}", f"must have a row for each of the "
                         f"{len(services)} services, got shape {values.shape}")
    bad = ~(np.isfinite(values) & (values >= 0.0))
    if bad.any():
        row = int(np.argwhere(bad)[0][0])
        raise InputError(f"partition problem.{name}[{services[row]!r}]",
                         "must be a finite number >= 0")


@dataclass(frozen=True)
class PartitionProblem:
    """Services x profiles rates, demands, and the layouts to choose from."""

    geometry: MigGeometry
    services: tuple[str, ...]
    demand: FloatArray  # (S,)
    profiles: tuple[str, ...]  # (P,) profile names
    rate: FloatArray  # (S, P) req/s per instance
    layouts: tuple[MigLayout, ...] = field(default=())
    other_rates: Mapping[tuple[str, str], float] = field(default_factory=dict)
    """(service, profile) -> req/s per instance for profiles the problem does not plan over,
    so that a deployment running on them today is counted at its real capacity while it is
    reconfigured. The planner's own problems use every profile with a rate and leave this
    empty; it is for callers that build a problem over fewer profiles."""

    def rate_of(self, service: int, profile: str) -> float:
        """Req/s of one instance of ``profile`` serving service number ``service``."""
        if profile in self.profiles:
            return float(self.rate[service, self.profiles.index(profile)])
        return float(self.other_rates.get((self.services[service], profile), 0.0))

    def __post_init__(self) -> None:
        _check_figures("demand", self.services, np.asarray(self.demand, dtype=np.float64))
        _check_figures("rate", self.services, np.asarray(self.rate, dtype=np.float64))
        if np.ndim(self.rate) != 2 or np.shape(self.rate)[1] != len(self.profiles):
            raise InputError("partition problem.rate", f"has shape {np.shape(self.rate)} for "
                             f"{len(self.services)} services x {len(self.profiles)} profiles")
        demand = np.where(self.demand < MIN_DEMAND, 0.0, self.demand).astype(np.float64)
        object.__setattr__(self, "demand", demand)
        if not self.layouts:
            object.__setattr__(self, "layouts", self.geometry.maximal_layouts(self.profiles))
        unmet = [
            s for i, s in enumerate(self.services) if self.demand[i] > 0 and self.rate[i].max() <= 0
        ]
        if unmet:
            raise InfeasibleError("no MIG profile meets the latency target", unmet)

    @cached_property
    def slices(self) -> IntArray:
        """Compute slices per profile."""
        return np.array(
            [self.geometry.profile(p).compute_slices for p in self.profiles], dtype=np.int64
        )

    @cached_property
    def memory_slices(self) -> IntArray:
        """Memory slices per profile."""
        return np.array(
            [self.geometry.profile(p).memory_slices for p in self.profiles], dtype=np.int64
        )

    @cached_property
    def column(self) -> dict[str, int]:
        """Profile name -> its column in ``rate``."""
        return {p: j for j, p in enumerate(self.profiles)}

    @cached_property
    def _counts(self) -> IntArray:
        counts = np.zeros((len(self.layouts), len(self.profiles)), dtype=np.int64)
        for i, layout in enumerate(self.layouts):
            for name, n in layout.profile_counts().items():
                if name in self.column:
                    counts[i, self.column[name]] = n
        counts.setflags(write=False)
        return counts

    def layout_counts(self) -> IntArray:
        """(L, P): instances of each profile in each layout."""
        return self._counts


@dataclass(frozen=True)
class Plan:
    """A partition plan and what is known about its quality."""

    solver: str
    gpus: tuple[GpuPlan, ...]
    lower_bound: int  # no plan uses fewer GPUs
    optimal: bool
    seconds: float = 0.0
    speedup: float = 1.0  # rate multiplier of every instance (whole GPUs without MIG: > 1)

    @property
    def gpu_count(self) -> int:
        return len(self.gpus)

    @property
    def gap(self) -> float:
        """Relative distance to the lower bound: (GPUs - bound) / GPUs."""
        return 0.0 if not self.gpus else (self.gpu_count - self.lower_bound) / self.gpu_count


def served(problem: PartitionProblem, plan: Plan) -> FloatArray:
    """Capacity (req/s) the plan gives each service."""
    index = {s: i for i, s in enumerate(problem.services)}
    rows, cols = [], []
    for gpu in plan.gpus:
        for placement, service in gpu.assignment:
            if service is not None:
                rows.append(index[service])
                cols.append(problem.column[placement.profile.name])
    rates = problem.rate[np.array(rows, dtype=np.int64), np.array(cols, dtype=np.int64)]
    total = np.bincount(np.array(rows, dtype=np.int64), weights=rates,
                        minlength=len(problem.services))
    return np.asarray(total * plan.speedup, dtype=np.float64)


def verify(problem: PartitionProblem, plan: Plan) -> None:
    """Raise :class:`InfeasibleError` unless every layout is valid and every demand met."""
    reasons = []
    checked: set[MigLayout] = set()  # a plan of thousands of GPUs has a few dozen layouts
    for g, gpu in enumerate(plan.gpus):
        if gpu.layout not in checked:
            problem.geometry.check(gpu.layout.placements)
            checked.add(gpu.layout)
        if Counter(p for p, _ in gpu.assignment) != Counter(gpu.layout.placements):
            reasons.append(f"GPU {g}: assignment does not match its layout")
    have = served(problem, plan)
    short = have < problem.demand - TOLERANCE * np.maximum(1.0, problem.demand)
    for i in np.flatnonzero(short)[:20]:
        name = problem.services[int(i)]
        reasons.append(f"{name}: {have[i]:.1f} req/s < demand {problem.demand[i]:.1f}")
    if short.sum() > 20:
        reasons.append(f"and {int(short.sum()) - 20} more services short")
    if reasons:
        raise InfeasibleError(f"plan {plan.solver!r} is not valid", reasons)


def realise(
    problem: PartitionProblem, layout_use: IntArray, instances: IntArray
) -> tuple[GpuPlan, ...]:
    """GPUs from layout counts ``layout_use`` (L,) and per-service instance counts
    ``instances`` (S, P): instances of a profile are interchangeable, so each GPU's instances
    are handed to services that still need that profile, largest need first."""
    # per profile, the services that still need an instance of it, one entry per instance,
    # largest need first
    queues: list[list[int]] = []
    for j in range(len(problem.profiles)):
        need = instances[:, j]
        owners = np.flatnonzero(need > 0)
        owners = owners[np.argsort(-need[owners], kind="stable")]
        queues.append(np.repeat(owners, need[owners]).tolist()[::-1])  # pop() from the end
    gpus = []
    for li in np.flatnonzero(layout_use):
        layout = problem.layouts[int(li)]
        columns = [problem.column.get(p.profile.name) for p in layout.placements]
        for _ in range(int(layout_use[li])):
            assignment: list[tuple[MigPlacement, str | None]] = []
            for placement, column in zip(layout.placements, columns, strict=True):
                queue = queues[column] if column is not None else []
                who = problem.services[queue.pop()] if queue else None
                assignment.append((placement, who))
            gpus.append(GpuPlan(layout, tuple(assignment)))
    if any(queues):
        raise InfeasibleError("layouts hold fewer instances than the services were given")
    return tuple(gpus)
