"""The frontier's settings, its floor, the Pareto front and the verdict, by value.

The settings are listed here by hand from the frontier's description for a small grid; the
frontier's own bookkeeping (the dedicated reference first, each point's added late requests,
who is told of what, a failed setting named) runs on an executor that hands back points
built here, so no simulation decides what is checked.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import astuple, replace
from typing import Any

import numpy as np
import pytest

from cotenant.errors import InputError
from cotenant.policies.colocation import ColocationPolicy, FixedShare
from cotenant.policies.colocation.registry import GUARDS
from cotenant.sim.colocation.frontier import (
    FrontierPoint,
    best_within,
    frontier,
    frontier_run,
    pareto,
    settings,
    verdict,
)
from cotenant.sim.colocation.records import ColocationConfig
from cotenant.sim.colocation.run import run_colocation
from cotenant.sim.colocation.workload import synthetic_workload
from cotenant.sim.sweep.executor import RunFailure, SweepError


def _p(policy: str, added: float, tput: float, setting: str = "s") -> FrontierPoint:
    return FrontierPoint(policy, setting, 0.0, 0.0, added + 1.0, added, 0.0, tput)


def _describe(policy: ColocationPolicy) -> tuple[object, ...]:
    guard = None
    if policy.guard is not None:
        kind = [k for k, g in GUARDS.items() if replace(g, threshold=0.95)
                == replace(policy.guard, threshold=0.95)]
        guard = (*kind, policy.guard.threshold)
    share = policy.share.share if isinstance(policy.share, FixedShare) else None
    adm = policy.admission
    return (policy.name, share, policy.memory_limit, adm.max_load, adm.quantile, guard)


def test_the_settings_of_a_small_grid() -> None:
    runs = settings(shares=(25,), max_loads=(1.0, 0.8), windows_s=(90.0,),
                    thresholds=(0.95, 0.5))
    head = [(label, p.name) for label, p in runs[:4]]
    assert head == [("window=90s", "muxflow"), ("window=90s", "cotenant-pause"),
                    ("threshold=0.95", "cotenant-priority"),
                    ("threshold=0.5", "cotenant-priority")]
    assert [p.load_window_s for _, p in runs[:2]] == [90.0, 90.0]
    assert [p.guard.threshold for _, p in runs[2:4] if p.guard] == [0.95, 0.5]
    adm = (True, 1.0, 0.99)
    low = (True, 0.8, 0.99)
    variants = [
        ("bare", (False, 1.0, 1.0), None), ("mem-limit", adm, None),
        ("mem-limit+muxflow guard", adm, ("muxflow", 0.95)),
        ("mem-limit+muxflow guard threshold=0.5", adm, ("muxflow", 0.5)),
        ("mem-limit+pause guard", adm, ("pause", 0.95)),
        ("mem-limit+pause guard threshold=0.5", adm, ("pause", 0.5)),
        ("mem-limit+adaptive guard", adm, ("adaptive", 0.95)),
        ("mem-limit+adaptive guard threshold=0.5", adm, ("adaptive", 0.5)),
        ("mem-limit p99<=0.8", low, None),  # below 1 only the first trigger
        ("mem-limit+muxflow guard p99<=0.8", low, ("muxflow", 0.95)),
        ("mem-limit+pause guard p99<=0.8", low, ("pause", 0.95)),
        ("mem-limit+adaptive guard p99<=0.8", low, ("adaptive", 0.95)),
    ]
    want = []
    for label, (mem, load, q), guard in variants:
        want += [(f"share=25% {label}", ("mps-fixed", 25, mem, load, q, guard)),
                 (label, ("time-slicing", 0, mem, load, q, guard)),
                 (label, ("priority", 0, mem, load, q, guard))]
    assert [(label, _describe(p)) for label, p in runs[4:]] == want


def test_every_share_and_window_is_offered() -> None:
    runs = settings(shares=(10, 90), max_loads=(1.0,), windows_s=(30.0, 600.0),
                    thresholds=(0.7,))
    assert [lb for lb, p in runs if p.name == "muxflow"] == ["window=30s", "window=600s"]
    assert [lb for lb, p in runs if p.name == "cotenant-priority"] == ["threshold=0.7"]
    fixed = [lb for lb, p in runs if p.name == "mps-fixed"]
    assert fixed[:2] == ["share=10% bare", "share=90% bare"]
    assert "share=90% mem-limit+pause guard threshold=0.7" in fixed


@pytest.mark.parametrize("empty", ["shares", "max_loads", "windows_s", "thresholds"])
def test_an_empty_axis_is_refused(empty: str) -> None:
    with pytest.raises(InputError) as err:
        settings(**{empty: ()})
    assert err.value.where == "frontier"
    assert err.value.rule == "needs at least one share, admission load, window and threshold"


class _Canned:
    """Hands back a point with the late requests given for each label (2% where none is
    given; a failure where None), without simulating."""

    workers = 1

    def __init__(self, slo: dict[str, float | None]) -> None:
        self.slo = slo

    def map(self, fn: Callable[[Any, Any], Any], shared: object, items: Sequence[Any], *,
            order: Sequence[int] | None = None,
            on_done: Callable[[int, Any], None] | None = None) -> list[Any]:
        out: list[Any] = []
        for i, (label, policy) in enumerate(items):
            slo = self.slo.get(label, 2.0)
            out.append(RunFailure(i, "boom") if slo is None else
                       FrontierPoint(policy.name, label, 1.0, 2.0, slo, slo, 3.0, 0.5))
            if on_done is not None:
                on_done(i, out[-1])
        return out


def test_the_frontier_measures_every_setting_against_dedicated() -> None:
    work = synthetic_workload(np.random.default_rng(1), gpus=4, intervals=3)
    runs = [(lb, p) for lb, p in settings() if lb in ("window=60s", "threshold=0.6")]
    told: list[tuple[str, str]] = []
    floor, points = frontier(work, 3, runs=runs, executor=_Canned(
        {"reference": 0.25, "window=60s": 1.5, "threshold=0.6": 0.75}),
        on_run=lambda name, label: told.append((name, label)))
    assert floor == 0.25
    assert [(p.policy, p.setting, p.slo_violation_pct, p.added_violation_pct)
            for p in points] == [("muxflow", "window=60s", 1.5, 1.25),
                                 ("cotenant-pause", "window=60s", 1.5, 1.25),
                                 ("cotenant-priority", "threshold=0.6", 0.75, 0.5)]
    assert told == [("dedicated", "reference"), ("muxflow", "window=60s"),
                    ("cotenant-pause", "window=60s"), ("cotenant-priority", "threshold=0.6")]
    with pytest.raises(SweepError, match=r"cotenant-priority threshold=0\.6: boom"):
        frontier(work, 3, runs=runs, executor=_Canned(
            {"reference": 0.25, "window=60s": 1.5, "threshold=0.6": None}))


def test_without_settings_the_frontier_runs_every_default_setting() -> None:
    work = synthetic_workload(np.random.default_rng(1), gpus=4, intervals=3)
    floor, points = frontier(work, 3, executor=_Canned({"reference": 0.5}))
    assert floor == 0.5
    assert [(p.policy, p.setting) for p in points] == [(p.name, lb) for lb, p in settings()]
    assert {p.added_violation_pct for p in points} == {1.5}


def test_one_settings_point_is_its_runs_totals() -> None:
    work = synthetic_workload(np.random.default_rng(2), gpus=6, intervals=8)
    label, policy = settings(shares=(50,), max_loads=(1.0,), windows_s=(60.0,),
                             thresholds=(0.95,))[0]
    cfg = ColocationConfig(share_change_s=0.0)
    point = frontier_run((work, 4, cfg), (label, policy))
    run = run_colocation(work, policy, 4, cfg)
    late = 100.0 * run.late_requests.sum() / run.requests.sum()
    assert (point.policy, point.setting) == ("muxflow", "window=60s")
    assert astuple(point)[2:] == pytest.approx((
        100.0 * run.utilisation.mean(), 100.0 * run.sm_activity.mean(), late, late,
        100.0 * run.minute_violation.mean(), run.offline_throughput.mean()))


def test_pareto_keeps_ties_and_drops_what_is_beaten_on_one_axis_only() -> None:
    pts = [_p("a", 0.2, 0.5, "tie1"), _p("a", 0.2, 0.5, "tie2"),  # equal: neither beats
           _p("a", 0.2, 0.4, "less work"), _p("a", 0.3, 0.5, "more misses"),
           _p("a", 0.1, 0.3, "fewest"), _p("b", 0.3, 0.4, "other policy")]
    assert [p.setting for p in pareto(pts)] == ["fewest", "tie1", "tie2", "other policy"]


def test_best_within_counts_a_setting_exactly_at_the_budget() -> None:
    pts = [_p("a", 0.25, 0.6, "at"), _p("a", 0.26, 0.9, "over"), _p("b", 0.0, 0.95, "b"),
           _p("a", 0.1, 0.6, "same work")]
    best = best_within(pts, "a", 0.25)
    assert best is not None
    assert best.setting == "at"  # the first of equal work
    assert best_within(pts, "a", 0.09) is None
    assert best_within(pts, "c", 1.0) is None


def test_the_verdict_lists_every_policy_per_budget() -> None:
    pts = [_p("a", 0.1, 0.5, "x"), _p("b", 0.5, 0.7, "y")]
    low, high = verdict(pts, (0.05, 0.5))
    assert low == {"budget_added_pct": 0.05, "best": {"a": None, "b": None}, "winner": None}
    assert high == {
        "budget_added_pct": 0.5, "winner": "b",
        "best": {"a": {"setting": "x", "offline_throughput": 0.5, "added_violation_pct": 0.1},
                 "b": {"setting": "y", "offline_throughput": 0.7,
                       "added_violation_pct": 0.5}}}
    assert [v["budget_added_pct"] for v in verdict(pts)] == [0.01, 0.05, 0.1, 0.25, 0.5, 1.0]
