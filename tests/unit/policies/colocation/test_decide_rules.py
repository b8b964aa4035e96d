"""``ColocationPolicy.decide`` over a run of decisions on one GPU, the share in force following
the actions: the checks the node agent's own share controller and guard tests used to make
(the agent's tests now check what it observes and how it enforces). No gain where the SLO is
at risk or the co-runner is paused; the floor's expiry waits for a watched window; a throttle
goes to the need at the measured load; no guard action during a pause, a throttle after it,
a pause again once ``pause_s + hold_s`` have passed; a new pair is sized afresh."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np
import pytest

from cotenant.errors import InputError
from cotenant.perf import mps
from cotenant.policies.colocation import (
    COLOCATION,
    Actions,
    ColocationPolicy,
    DynamicShare,
    GpuState,
    GuardSettings,
    Mechanism,
    Why,
    need,
)
from tests.unit.policies.colocation.helpers import obs

RESNET = mps.model_index("resnet50")
STRETCH = 1.0
WINDOW = 60.0


@dataclass
class Gpu:
    """One GPU driven through ``decide``, the share in force following the actions."""

    policy: ColocationPolicy
    now: float = 0.0
    share: int = 50
    state: GpuState = field(default_factory=lambda: GpuState.new(1, 0.0))
    paused_until: float = -math.inf
    log: list[Actions] = field(default_factory=list)

    def decide(self, **kw: object) -> Actions:
        kw.setdefault("running", self.now >= self.paused_until)
        kw.setdefault("slo_ms", 200.0)
        kw.setdefault("load", 0.3)
        seen = obs(now=self.now, share=self.share, **kw)  # type: ignore[arg-type]
        act, self.state = self.policy.decide(seen, self.state)
        self.share = int(act.share[0])
        if math.isfinite(act.pause_until[0]):
            self.paused_until = float(act.pause_until[0])
        self.log.append(act)
        return act

    def wait(self, seconds: float, **kw: object) -> None:
        """Decide every second for ``seconds``."""
        for _ in range(int(seconds)):
            self.now += 1.0
            self.decide(**kw)

    def report(self, p99: float, **kw: object) -> Actions:
        """A p99 report arriving now whose window began a second ago."""
        self.now += 1.0
        return self.decide(p99=p99, since=self.now - 1.0, at=self.now, **kw)

    def whys(self) -> list[Why]:
        return [Why(int(a.why[0])) for a in self.log if a.why[0] != Why.NONE]


def dynamic(**guard: object) -> ColocationPolicy:
    return COLOCATION.create("cotenant-pause", guard=GuardSettings(**guard))  # type: ignore[arg-type]


def needed(load: float, slo: float = 200.0) -> int:
    return int(DynamicShare().needed(Mechanism.MPS, np.array([RESNET]), np.array([load]),
                                     np.array([slo]), np.array([STRETCH]))[0])


def test_a_gpu_at_risk_or_paused_gets_no_more_sms() -> None:
    """The load says offline may have more SMs, the p99 says the SLO is at risk: the guard
    pauses, and no gain comes with the pause nor while it lasts."""
    gpu = Gpu(dynamic(pause_s=30.0), share=90, now=WINDOW)
    act = gpu.report(199.0, load=0.05)
    assert act.why[0] == Why.PAUSE
    assert act.share[0] == 90
    assert not act.restart[0]
    assert act.pause_until[0] == gpu.now + 30.0
    gpu.wait(28, load=0.05)
    assert gpu.share == 90  # the fall could be a gain, but not while paused
    gpu.wait(3, load=0.05)
    assert gpu.share == needed(0.05)


def test_the_guard_throttles_then_evicts_and_the_floor_expires() -> None:
    """Fixed 50/50 and a guard that throttles at once: +20 points, held ``hold_s``; a report
    within ``settle_s`` or whose window began before the action is ignored; past
    ``evict_above`` the co-runner is evicted and the GPU held ``evict_hold_s``."""
    guard = GuardSettings(pause_s=0.0, hold_s=30.0)
    gpu = Gpu(COLOCATION.create("mps-fixed", share=50, guard=guard))
    assert gpu.report(180.0).why[0] == Why.NONE  # under 95 % of 200 ms
    act = gpu.report(199.0)
    assert (act.why[0], act.share[0]) == (Why.THROTTLE, 70)
    assert act.restart[0]
    acted = gpu.now
    assert gpu.report(199.0).why[0] == Why.NONE  # within settle_s
    gpu.now = acted + guard.settle_s
    late = gpu.decide(p99=199.0, since=acted - 1.0, at=gpu.now)  # began before the action
    assert late.why[0] == Why.NONE
    gpu.wait(guard.hold_s - guard.settle_s - 2)
    assert gpu.share == 70  # the floor holds ...
    gpu.wait(2)
    assert gpu.share == 70  # ... and when its hold ends, the offline gain waits for the
    gpu.wait(WINDOW - gpu.now - 1)  # GPU to have been watched a whole window
    assert gpu.share == 70
    gpu.wait(1)
    assert gpu.share == 50
    for share in (70, 90):
        gpu.wait(guard.settle_s)
        assert gpu.report(199.0).share[0] == share
    gpu.wait(guard.settle_s)
    act = gpu.report(199.0)
    assert act.evict[0]
    assert act.why[0] == Why.EVICT
    assert act.hold_until[0] == gpu.now + guard.evict_hold_s
    assert gpu.whys() == [Why.THROTTLE, Why.SHARE_DOWN, Why.THROTTLE, Why.THROTTLE, Why.EVICT]


def test_a_throttle_goes_to_the_need_at_the_measured_load() -> None:
    gpu = Gpu(COLOCATION.create("mps-fixed", share=10, guard=GuardSettings(pause_s=0.0)),
              share=10)
    act = gpu.report(199.0, load=0.3)
    at_load = int(need(Mechanism.MPS, np.array([RESNET]), np.array([0.3]),
                       np.array([0.95 * 200.0]), np.array([STRETCH]))[0])
    assert at_load > 30
    assert act.share[0] == at_load  # not 10 + 20
    assert gpu.report(199.0, slo_ms=50.0).why[0] == Why.NONE  # settling
    gpu.wait(10)
    assert gpu.report(49.0, slo_ms=50.0).evict[0]  # no share keeps this SLO at this load


def test_pause_first_then_a_lasting_rise_throttles_then_pause_again_later() -> None:
    guard = GuardSettings(pause_s=30.0, hold_s=60.0)
    gpu = Gpu(COLOCATION.create("mps-fixed", share=50, guard=guard))
    act = gpu.report(199.0)
    assert (act.why[0], act.share[0], act.restart[0]) == (Why.PAUSE, 50, False)
    gpu.wait(guard.settle_s)
    assert gpu.report(199.0).why[0] == Why.NONE  # paused: the co-runner does not run
    gpu.wait(30 - guard.settle_s)
    act = gpu.report(199.0)  # within pause_s + hold_s: lasting
    assert (act.why[0], act.share[0]) == (Why.THROTTLE, 70)
    gpu.wait(guard.pause_s + guard.hold_s)
    assert gpu.report(199.0).why[0] == Why.PAUSE


def test_a_new_pair_starts_at_its_need() -> None:
    """``GpuState.reset`` forgets a pair (the caller does it when its offline work changes):
    the next decision sizes afresh, the watch window stays."""
    gpu = Gpu(dynamic(), share=90)
    gpu.wait(WINDOW, load=0.05)
    assert gpu.share == needed(0.05)
    gpu.state = gpu.state.reset(np.array([0]), gpu.now)
    gpu.share = 100
    gpu.wait(1, load=0.05)
    assert gpu.share == needed(0.05)  # watched for long enough already: a gain at once


def test_the_load_window_is_checked() -> None:
    with pytest.raises(InputError, match="load_window_s"):
        replace(COLOCATION.create("cotenant-pause"), load_window_s=0.0)
