"""The throughput/violation frontier: settings run, Pareto filter, best within a budget."""

from __future__ import annotations

import numpy as np
import pytest

from cotenant.errors import InputError
from cotenant.policies.colocation import COLOCATION
from cotenant.sim.colocation import run_colocation
from cotenant.sim.colocation_frontier import (
    FrontierPoint,
    best_within,
    frontier,
    pareto,
    settings,
)
from cotenant.sim.colocation_workload import synthetic_workload


def _p(policy: str, setting: str, viol: float, tput: float) -> FrontierPoint:
    return FrontierPoint(policy, setting, 50.0, viol, tput)


def test_pareto_keeps_per_policy_the_points_nothing_beats_on_both_axes() -> None:
    points = [
        _p("ts", "a", 0.1, 0.2), _p("ts", "b", 0.5, 0.6), _p("ts", "c", 0.6, 0.5),
        _p("ts", "d", 1.0, 0.9), _p("mps", "e", 0.2, 0.1), _p("mps", "f", 0.2, 0.3),
    ]
    kept = {p.setting for p in pareto(points)}
    assert kept == {"a", "b", "d", "f"}  # c: b has fewer violations and more work; e: f


def test_best_within_a_budget_picks_the_most_work_or_none() -> None:
    points = [_p("ts", "a", 0.1, 0.2), _p("ts", "b", 0.5, 0.6), _p("ts", "d", 1.0, 0.9)]
    best = best_within(points, "ts", 0.5)
    assert best is not None
    assert best.setting == "b"
    assert best_within(points, "ts", 0.05) is None
    assert best_within(points, "mps", 10.0) is None


def test_settings_cover_muxflow_and_each_baseline_knob() -> None:
    labels = [(policy.name, label) for label, policy in settings((80, 50), (0.5, 1.0))]
    assert labels[0] == ("muxflow", "default")
    assert sum(name == "time-slicing" for name, _ in labels) == 2 * 2  # x memory limit
    assert sum(name == "mps-fixed" for name, _ in labels) == 4 * 2
    limited = {label for _, label in labels if label.endswith(" mem-limit")}
    assert limited == {
        f"{s}peak<={p} mem-limit" for s in ("", "share=80% ", "share=50% ") for p in ("0.5", "1")
    }
    baselines = settings((80, 50), (0.5, 1.0))[1:]
    assert all(p.memory_limit == label.endswith("mem-limit") for label, p in baselines)
    with pytest.raises(InputError, match="frontier"):
        settings((), (1.0,))
    both = settings((50,), (0.5,), quantiles=(1.0, 0.99))
    assert [label for label, _ in both] == [
        "default", "peak<=0.5", "share=50% peak<=0.5", "p99<=0.5", "share=50% p99<=0.5",
        "peak<=0.5 mem-limit", "share=50% peak<=0.5 mem-limit", "p99<=0.5 mem-limit",
        "share=50% p99<=0.5 mem-limit"]
    assert [p.admit_quantile for _, p in both[1:5]] == [1.0, 1.0, 0.99, 0.99]


def test_frontier_points_are_the_runs_totals() -> None:
    work = synthetic_workload(np.random.default_rng(5), gpus=60, intervals=90)
    seen: list[tuple[str, str]] = []
    points = frontier(work, 2, shares=(50,), peaks=(0.5, 1.0),
                      on_run=lambda name, label: seen.append((name, label)))
    assert [p.policy for p in points] == [name for name, _ in seen]
    assert len(points) == 1 + 2 * (2 + 2)
    mux = run_colocation(work, "muxflow", 2)
    assert points[0].offline_throughput == float(mux.offline_throughput.mean())
    assert points[0].slo_violation_pct == 100.0 * float(mux.violation_rate.mean())
    assert points[0].offline_throughput > 0.0
    ts = {p.setting: p for p in points if p.policy == "time-slicing"}
    # admitting fewer GPUs never adds offline work
    assert 0.0 < ts["peak<=0.5"].offline_throughput < ts["peak<=1"].offline_throughput
    # a memory limit rules out online out-of-memory: never more violations than without
    lim = ts["peak<=1 mem-limit"]
    assert lim.slo_violation_pct <= ts["peak<=1"].slo_violation_pct


def test_the_frontier_runs_the_muxflow_it_is_given() -> None:
    slow = COLOCATION.create("muxflow", guard_reaction_s=5.0)
    first = settings(shares=(50,), peaks=(1.0,), muxflow=slow)[0]
    assert first == ("default", slow)
    assert settings(shares=(50,), peaks=(1.0,))[0][1] == COLOCATION.create("muxflow")
    with pytest.raises(InputError, match="takes a MuxFlow policy"):
        settings(muxflow=COLOCATION.create("time-slicing"))


def test_the_frontier_can_admit_the_baselines_by_history() -> None:
    hist = settings(shares=(50,), peaks=(0.5,), quantiles=(1.0, 0.99), history=True)
    assert [label for label, _ in hist] == [
        "default", "peak<=0.5 hist", "share=50% peak<=0.5 hist", "p99<=0.5 hist",
        "share=50% p99<=0.5 hist", "peak<=0.5 mem-limit hist",
        "share=50% peak<=0.5 mem-limit hist", "p99<=0.5 mem-limit hist",
        "share=50% p99<=0.5 mem-limit hist",
    ]
    assert all(p.admit_history for _, p in hist[1:])
    assert not hist[0][1].admit_history  # MuxFlow admits every GPU
    assert not any(p.admit_history for _, p in settings(shares=(50,), peaks=(0.5,))[1:])
