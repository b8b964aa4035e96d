"""The offline optimum beside the fragmentation experiment, by value on tiny clusters.

Each demand point's optimum is worked out by hand (400-milli pods on two T4s: two per GPU,
so at most four of them), and the summaries over seeds from points built here with distinct
figures per field, so that a field read in place of another shows.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from cotenant.errors import InputError
from cotenant.model.cluster import Cluster
from cotenant.model.gpu import CATALOG
from cotenant.model.workload import Node, Pod, PodShape
from cotenant.policies.placement.optimum import offline_optimum
from cotenant.sim import bound as bound_module
from cotenant.sim.bound import (
    BoundPoint,
    BoundSummary,
    bound_points,
    bound_run,
    gap_to_bound,
    run_bounds,
    summarise_bounds,
)
from cotenant.sim.experiment import PolicySummary
from cotenant.sim.fragmentation import FragmentationConfig
from cotenant.sim.sweep.executor import RunFailure, SerialExecutor, SweepError

T4S = Cluster([Node("n0", 64_000, 262_144, 2, CATALOG.get("T4"))])
PODS = [Pod(f"p{i}", PodShape(1000, 1000, 1, 400)) for i in range(6)]
"""Each pod is 20% of the two GPUs' capacity; six arrive (a seventh would pass 130%)."""


def test_each_point_bounds_the_pods_arrived_by_the_end_of_its_window() -> None:
    points = bound_points(T4S, PODS, 5, [20, 40, 59, 80, 100, 120])
    assert [p.seed for p in points] == [5] * 6
    assert [p.percent for p in points] == [20, 40, 59, 80, 100, 120]
    assert [p.arrivals for p in points] == [1, 2, 3, 4, 5, 6]  # 59 is within 1 of 60
    assert [p.capacity_milli for p in points] == [2000] * 6
    assert [p.upper_milli for p in points] == [400, 800, 1200, 1600, 1600, 1600]
    assert [p.plan_milli for p in points] == [400, 800, 1200, 1600, 1600, 1600]
    assert all(p.solved and p.kind == "exact" and p.seconds > 0 for p in points)
    assert [p.upper_percent for p in points] == pytest.approx([20, 40, 60, 80, 80, 80])


def test_a_point_between_the_arrivals_has_no_bound() -> None:
    point, later = bound_points(T4S, PODS, 5, [50, 60])  # demand goes 40% -> 60%
    assert (later.arrivals, later.upper_milli) == (3, 1200)  # the next point is still bound
    assert point == BoundPoint(5, 50, 0, 2000, None, None, False, 0.0)
    assert not point.reached
    assert point.kind == "n/a"
    assert math.isnan(point.upper_percent)
    assert math.isnan(point.plan_percent)


def test_the_config_sets_the_arrivals_and_bound_run_unpacks_its_inputs() -> None:
    points = bound_run((T4S, PODS, FragmentationConfig(demand_multiple=0.8), 5.0, [60, 80]), 1)
    assert [(p.arrivals, p.upper_milli) for p in points] == [(3, 1200), (4, 1600)]
    fewer = bound_run((T4S, PODS, FragmentationConfig(demand_multiple=0.6), 5.0, [60, 80]), 1)
    assert [p.reached for p in fewer] == [True, False]


def test_the_kind_of_a_point() -> None:
    def point(upper: int | None, plan: int | None) -> BoundPoint:
        return BoundPoint(1, 100, 9, 4000, upper, plan, True, 1.0)

    assert point(3000, 3000).kind == "exact"
    assert point(3000, 2999).kind == "bound"
    assert point(3000, None).kind == "n/a"
    assert point(None, 2000).kind == "n/a"
    assert point(3000, 1000).percent_of(1000) == 25.0
    assert point(3000, 1000).plan_percent == 25.0
    assert point(3000, 1000).upper_percent == 75.0


def _pt(seed: int, percent: int, upper: int | None, plan: int | None, solved: bool,
        seconds: float) -> BoundPoint:
    return BoundPoint(seed, percent, 7, 8000, upper, plan, solved, seconds)


def test_the_summary_per_point_is_the_mean_over_seeds() -> None:
    points = [_pt(1, 100, 8000, 8000, True, 2.0), _pt(1, 60, 4000, 4000, True, 0.5),
              _pt(2, 100, 7000, 6000, False, 4.0), _pt(2, 60, 4800, 4800, False, 1.5),
              _pt(3, 100, 6000, 6000, True, 3.0)]
    at60, at100 = summarise_bounds(points)
    assert at60 == BoundSummary(60, 2, 55.0, 55.0, 2, 1, 1.0)
    assert at100.percent == 100
    assert at100.seeds == 3
    assert at100.upper_mean == pytest.approx(87.5)  # (100 + 87.5 + 75) / 3
    assert at100.plan_mean == pytest.approx(83.333333)  # (100 + 75 + 75) / 3
    assert (at100.exact, at100.solved, at100.seconds_mean) == (2, 2, 3.0)
    assert (at60.kind, at100.kind) == ("exact", "bound")


def test_a_summary_where_some_seed_had_no_arrival_is_not_a_figure() -> None:
    summary, = summarise_bounds([_pt(1, 130, 8000, 8000, True, 1.0),
                                 _pt(2, 130, None, None, False, 0.0)])
    assert math.isnan(summary.upper_mean)
    assert summary.kind == "n/a"
    assert summary.as_dict() == {
        "percent": 130, "seeds": 2, "kind": "n/a", "upper_percent_mean": None,
        "plan_percent_mean": None, "exact_seeds": 1, "solved_seeds": 1, "seconds_mean": 0.5}


def test_a_summary_as_json_rounds_each_figure_to_three_places() -> None:
    summary = BoundSummary(100, 3, 61.23449, 48.76551, 1, 2, 0.1234567)
    assert summary.as_dict() == {
        "percent": 100, "seeds": 3, "kind": "bound", "upper_percent_mean": 61.234,
        "plan_percent_mean": 48.766, "exact_seeds": 1, "solved_seeds": 2,
        "seconds_mean": 0.123}


def test_the_gap_is_the_bound_less_the_policys_mean_allocation() -> None:
    policy = PolicySummary("fgd", 3, 90.25, 0.5, 96.0, 2.0, 4.0)
    bound = BoundSummary(100, 3, 95.5, 94.0, 3, 3, 1.0)
    assert gap_to_bound(policy, bound) == pytest.approx(5.25)


class _Failing:
    """Runs serially, but the run at ``index`` fails (as a worker lost would)."""

    workers = 1

    def __init__(self, index: int) -> None:
        self.index = index

    def map(self, fn: Callable[[Any, Any], Any], shared: object, items: Sequence[Any], *,
            order: Sequence[int] | None = None,
            on_done: Callable[[int, Any], None] | None = None) -> list[Any]:
        out: list[Any] = []
        for i, item in enumerate(items):
            out.append(RunFailure(i, "lost") if i == self.index else fn(shared, item))
            if on_done is not None:
                on_done(i, out[-1])
        return out


def test_run_bounds_orders_by_seed_then_point_and_tells_of_each() -> None:
    told: list[tuple[int, int]] = []
    points = run_bounds(T4S, PODS, [3, 1], [80, 20], time_limit=5.0,
                        on_done=lambda p: told.append((p.seed, p.percent)),
                        executor=SerialExecutor())
    assert [(p.seed, p.percent, p.upper_milli) for p in points] == [
        (3, 80, 1600), (3, 20, 400), (1, 80, 1600), (1, 20, 400)]
    assert told == [(3, 80), (3, 20), (1, 80), (1, 20)]
    told.clear()
    with pytest.raises(SweepError, match="offline optimum seed 1: lost"):
        run_bounds(T4S, PODS, [3, 1], [20], on_done=lambda p: told.append((p.seed, p.percent)),
                   executor=_Failing(1))
    assert told == [(3, 20)]  # a failed run tells of nothing


def test_run_bounds_refuses_pods_without_gpu_demand_before_any_run() -> None:
    with pytest.raises(InputError, match="no pod asks for a GPU"):
        run_bounds(T4S, [Pod("c", PodShape(1000, 1000, 0, 0))], [1], [100],
                   executor=_Failing(0))


def test_the_time_limit_and_the_workers_asked_for_are_the_ones_used(
        monkeypatch: pytest.MonkeyPatch) -> None:
    limits: list[float] = []
    workers: list[int | None] = []

    def optimum(cluster: Cluster, shapes: Sequence[PodShape], time_limit: float) -> Any:
        limits.append(time_limit)
        return real(cluster, shapes, time_limit)

    def executor(count: int | None) -> SerialExecutor:
        workers.append(count)
        return SerialExecutor()

    real = offline_optimum
    monkeypatch.setattr(bound_module, "offline_optimum", optimum)
    monkeypatch.setattr(bound_module, "local_executor", executor)
    run_bounds(T4S, PODS, [1, 2], [20], time_limit=2.5, workers=3)
    bound_run((T4S, PODS, FragmentationConfig(), 4.5, [20]), 1)
    bound_points(T4S, PODS, 1, [20])
    assert limits == [2.5, 2.5, 4.5, 10.0]  # 10 s by default
    assert workers == [3]
