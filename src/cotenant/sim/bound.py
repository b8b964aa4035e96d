"""The offline optimum beside the fragmentation experiment: for each seed and reported demand
point, the most GPU capacity any placement of the pods arrived by then could allocate.

A policy's figure at x% demand is the mean allocation over the arrivals whose demand rounds
to x% (:meth:`FragmentationRun.curve`). The optimum is taken for every pod arrived by the last
of those arrivals, so it bounds the allocation after each of them and hence their mean: a
policy's gap to it is at least its gap to the optimum at exactly x%. The pods arrive in the
order the experiment draws from the seed, the same for every policy (:func:`arrival_order`).
Bounds are independent per seed, so they run on a sweep executor like the policy runs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from cotenant.model.cluster import Cluster
from cotenant.model.workload import Pod
from cotenant.policies.placement.optimum import offline_optimum
from cotenant.sim.experiment import PolicySummary
from cotenant.sim.fragmentation import (
    FragmentationConfig,
    arrival_order,
    check_gpu_demand,
    point_window,
)
from cotenant.sim.sweep.executor import Executor, RunFailure, local_executor, results

DEFAULT_TIME_LIMIT = 10.0
"""Seconds HiGHS may spend on one bound before it answers with its best dual bound."""


@dataclass(frozen=True)
class BoundPoint:
    """The offline optimum at one (seed, demand point)."""

    seed: int
    percent: int
    arrivals: int  # pods tried up to the end of the point's window (CPU-only pods included)
    capacity_milli: int
    upper_milli: int | None  # None: no arrival rounds to this point
    plan_milli: int | None
    solved: bool
    seconds: float

    @property
    def reached(self) -> bool:
        return self.upper_milli is not None

    @property
    def kind(self) -> str:
        """``exact`` (a placement reaches the proven bound), ``bound`` (the optimum lies
        between the placement and the bound) or ``n/a``."""
        if self.upper_milli is None or self.plan_milli is None:
            return "n/a"
        return "exact" if self.plan_milli >= self.upper_milli else "bound"

    def percent_of(self, milli: int | None) -> float:
        return float("nan") if milli is None else 100.0 * milli / self.capacity_milli

    @property
    def upper_percent(self) -> float:
        return self.percent_of(self.upper_milli)

    @property
    def plan_percent(self) -> float:
        return self.percent_of(self.plan_milli)


def bound_points(
    cluster: Cluster,
    pods: Sequence[Pod],
    seed: int,
    percents: Sequence[int],
    config: FragmentationConfig = FragmentationConfig(),
    time_limit: float = DEFAULT_TIME_LIMIT,
) -> list[BoundPoint]:
    """The optimum at each of ``percents`` for the arrivals the experiment draws from
    ``seed``."""
    capacity = cluster.total_gpu_milli
    order = arrival_order(pods, capacity, config.demand_multiple, np.random.default_rng(seed))
    arrived = np.cumsum([s.gpu_milli_total for s in order], dtype=np.int64)
    out = []
    for percent in percents:
        window = point_window(arrived, capacity, percent)
        if window.size == 0:
            out.append(BoundPoint(seed, percent, 0, capacity, None, None, False, 0.0))
            continue
        last = int(window.max()) + 1
        best = offline_optimum(cluster, order[:last], time_limit)
        out.append(BoundPoint(seed, percent, last, capacity, best.upper_milli,
                              best.plan_milli, best.solved, best.seconds))
    return out


BoundInputs = tuple[Cluster, Sequence[Pod], FragmentationConfig, float, Sequence[int]]


def bound_run(inputs: BoundInputs, seed: int) -> list[BoundPoint]:
    """One seed's bounds at every point (a sweep's unit of work)."""
    cluster, pods, config, time_limit, percents = inputs
    return bound_points(cluster, pods, seed, percents, config, time_limit)


def run_bounds(
    cluster: Cluster,
    pods: Sequence[Pod],
    seeds: Sequence[int],
    percents: Sequence[int],
    config: FragmentationConfig = FragmentationConfig(),
    *,
    time_limit: float = DEFAULT_TIME_LIMIT,
    workers: int | None = None,
    on_done: Callable[[BoundPoint], None] | None = None,
    executor: Executor | None = None,
) -> list[BoundPoint]:
    """Every (seed, point), ordered by seed then point, by ``executor`` (default: a local
    pool of ``workers`` processes)."""
    check_gpu_demand(pods)

    def done(_: int, points: list[BoundPoint] | RunFailure) -> None:
        if on_done is not None and not isinstance(points, RunFailure):
            for point in points:
                on_done(point)

    chosen = executor or local_executor(workers)
    outcomes = chosen.map(bound_run, (cluster, pods, config, time_limit, list(percents)),
                          list(seeds), on_done=done)
    per_seed = results(outcomes, [f"offline optimum seed {s}" for s in seeds])
    return [point for points in per_seed for point in points]


@dataclass(frozen=True)
class BoundSummary:
    """The optimum at one demand point over all seeds."""

    percent: int
    seeds: int
    upper_mean: float  # % of GPU capacity; NaN where some seed had no arrival there
    plan_mean: float
    exact: int  # seeds where the placement reaches the bound
    solved: int  # seeds where HiGHS proved the relaxation optimal
    seconds_mean: float

    @property
    def kind(self) -> str:
        if self.exact == self.seeds:
            return "exact"
        return "bound" if np.isfinite(self.upper_mean) else "n/a"

    def as_dict(self) -> dict[str, float | int | str | None]:
        return {
            "percent": self.percent,
            "seeds": self.seeds,
            "kind": self.kind,
            "upper_percent_mean": _rounded(self.upper_mean),
            "plan_percent_mean": _rounded(self.plan_mean),
            "exact_seeds": self.exact,
            "solved_seeds": self.solved,
            "seconds_mean": _rounded(self.seconds_mean),
        }


def _rounded(value: float) -> float | None:
    return round(value, 3) if np.isfinite(value) else None


def summarise_bounds(points: Sequence[BoundPoint]) -> list[BoundSummary]:
    """Per demand point, in increasing order."""
    out = []
    for percent in sorted({p.percent for p in points}):
        mine = [p for p in points if p.percent == percent]
        out.append(BoundSummary(
            percent,
            len(mine),
            float(np.mean([p.upper_percent for p in mine])),
            float(np.mean([p.plan_percent for p in mine])),
            sum(p.kind == "exact" for p in mine),
            sum(p.solved for p in mine),
            float(np.mean([p.seconds for p in mine])),
        ))
    return out


def gap_to_bound(summary: PolicySummary, bound: BoundSummary) -> float:
    """Percentage points between the bound and the policy's mean allocation at that point."""
    return bound.upper_mean - summary.alloc_mean
