"""The frontier: every policy with the same protections, added late requests, the verdict."""

from __future__ import annotations

import numpy as np

from cotenant.sim.colocation.frontier import (
    DEFAULT_THRESHOLDS,
    GUARDS,
    FrontierPoint,
    best_within,
    frontier,
    pareto,
    settings,
    verdict,
)
from cotenant.sim.colocation.workload import synthetic_workload


def _p(policy: str, added: float, tput: float, setting: str = "s") -> FrontierPoint:
    return FrontierPoint(policy, setting, 0.0, 0.0, added + 1.0, added, 0.0, tput)


def test_pareto_keeps_per_policy_what_nothing_beats_on_both_axes() -> None:
    pts = [_p("a", 0.1, 0.5, "x"), _p("a", 0.2, 0.4, "y"), _p("a", 0.3, 0.6, "z"),
           _p("b", 0.05, 0.1)]
    assert [(p.policy, p.setting) for p in pareto(pts)] == [("a", "x"), ("a", "z"), ("b", "s")]


def test_best_within_and_the_verdict_pick_the_most_work_under_each_budget() -> None:
    pts = [_p("a", 0.1, 0.5), _p("a", 0.6, 0.9), _p("b", 0.01, 0.3), _p("b", 0.2, 0.7)]
    assert best_within(pts, "a", 0.05) is None
    got = best_within(pts, "a", 1.0)
    assert got is not None
    assert got.offline_throughput == 0.9
    v = {x["budget_added_pct"]: x["winner"] for x in verdict(pts, (0.05, 0.25, 1.0))}
    assert v == {0.05: "b", 0.25: "b", 1.0: "a"}


def test_every_baseline_is_offered_every_guard_and_the_memory_limit() -> None:
    runs = settings()
    for name in ("mps-fixed", "time-slicing", "priority"):
        mine = [p for _, p in runs if p.name == name]
        assert any(not p.memory_limit and p.guard is None for p in mine)
        assert any(p.memory_limit and p.guard is None for p in mine)
        guards = {(p.guard.adaptive, p.guard.pause_s, p.guard.threshold)
                  for p in mine if p.guard is not None}
        assert len(guards) == len(GUARDS) * len(DEFAULT_THRESHOLDS)
        triggers = {p.guard.threshold for p in mine if p.guard is not None}
        mine_cp = {p.guard.threshold for _, p in runs if p.name == "cotenant-priority"
                   and p.guard is not None}
        assert triggers == mine_cp  # cotenant-priority's knob is offered to every guard
        assert any(not p.admission.admits_all for p in mine)
    assert {p.name for _, p in runs} >= {"muxflow", "cotenant-pause", "cotenant-priority"}


def test_points_are_the_runs_totals_against_dedicated() -> None:
    w = synthetic_workload(np.random.default_rng(1), gpus=30, intervals=40)
    runs = [r for r in settings() if r[1].name in ("muxflow", "priority")][:3]
    calls: list[str] = []
    floor, pts = frontier(w, 3, runs=runs, on_run=lambda n, label: calls.append(n))
    assert calls[0] == "dedicated"
    assert len(pts) == 3
    for p in pts:
        assert p.added_violation_pct == p.slo_violation_pct - floor
        assert p.added_violation_pct >= -1e-9
