"""ColocationPolicy.decide: share sizing and gains, the guard's pause, throttle and eviction,
the adaptive pause, and the state carried between calls."""

from __future__ import annotations

import numpy as np

from cotenant.policies.colocation import (
    COLOCATION,
    DynamicShare,
    GpuState,
    GuardSettings,
    Mechanism,
    Why,
)
from cotenant.policies.colocation.policy import ColocationPolicy
from tests.unit.policies.colocation.helpers import obs

GUARD_ACTIONS = (Why.PAUSE, Why.THROTTLE, Why.EVICT)


def _policy(guard: GuardSettings | None = None, **kw: object) -> ColocationPolicy:
    return ColocationPolicy("t", Mechanism.MPS, DynamicShare(), guard, **kw)  # type: ignore[arg-type]


def test_a_rise_in_load_raises_the_share_at_once_and_restarts_the_client() -> None:
    pol = _policy()
    act, state = pol.decide(obs(load=0.45, peak=0.45, share=20), GpuState.new(1, 0.0))
    assert act.share[0] > 20
    assert act.why[0] == Why.SHARE_UP
    assert act.restart[0]
    assert state.decided[0] == act.share[0]


def test_a_gain_waits_for_a_whole_window_of_watching() -> None:
    pol = _policy(load_window_s=60.0)
    low = obs(now=30.0, load=0.01, share=90)
    act, _ = pol.decide(low, GpuState.new(1, 0.0))
    assert act.share[0] == 90  # watched 30 s only
    act, state = pol.decide(obs(now=61.0, load=0.01, share=90), GpuState.new(1, 0.0))
    assert act.share[0] < 90
    assert act.why[0] == Why.SHARE_DOWN
    again, _ = pol.decide(obs(now=100.0, load=0.0, share=int(act.share[0]) + 40), state)
    assert again.share[0] == act.share[0] + 40  # at most one gain per window


def test_a_gain_smaller_than_the_threshold_is_not_worth_a_restart() -> None:
    pol = _policy(gain_threshold_pct=10)
    need_now, _ = pol.decide(obs(now=100.0, load=0.1, share=100), GpuState.new(1, 0.0))
    near = int(need_now.share[0]) + 5
    act, _ = pol.decide(obs(now=100.0, load=0.1, share=near), GpuState.new(1, 0.0))
    assert act.share[0] == near
    assert not act.restart[0]


def test_nothing_is_sized_where_no_offline_job_is_placed() -> None:
    pol = _policy()
    act, state = pol.decide(obs(load=0.5, placed=False, running=False, share=10),
                            GpuState.new(1, 0.0))
    assert state.decided[0] == -1
    assert not act.restart[0]


def test_the_guard_pauses_first_then_throttles_then_evicts() -> None:
    g = GuardSettings(pause_s=10.0, hold_s=60.0, settle_s=10.0, step_pct=20, evict_above=95)
    pol = _policy(g)
    over = {"load": 0.2, "peak": 0.2, "p99": 200.0, "slo_ms": 74.0}
    act, st = pol.decide(obs(now=1000.0, since=995.0, share=30, **over), GpuState.new(1, 0.0))
    assert act.why[0] == Why.PAUSE
    assert act.pause_until[0] == 1010.0
    # still over after the pause ended, within hold_s of it: throttle (a floor, held)
    act, st = pol.decide(obs(now=1020.0, since=1015.0, share=30, **over), st)
    assert act.why[0] == Why.THROTTLE
    assert act.share[0] >= 50
    assert act.restart[0]
    assert st.floor[0] == act.share[0]
    assert st.floor_until[0] == 1080.0
    # the floor holds while the load says less
    calm, _ = pol.decide(obs(now=1030.0, since=1025.0, load=0.01, share=int(act.share[0])), st)
    assert calm.share[0] == act.share[0]
    # past evict_above: evict, and hold the GPU
    act, st = pol.decide(obs(now=1040.0, since=1035.0, share=90, **over), st)
    assert act.evict[0]
    assert act.why[0] == Why.EVICT
    assert st.held_until[0] == 1040.0 + 300.0


def test_the_guard_acts_only_on_fresh_reports_after_its_last_action() -> None:
    pol = _policy(GuardSettings(pause_s=0.0, step_pct=0, settle_s=10.0, stale_s=10.0))
    over = {"load": 0.2, "p99": 200.0, "slo_ms": 74.0, "share": 30}
    act, st = pol.decide(obs(now=1000.0, since=990.0, **over), GpuState.new(1, 0.0))
    assert act.why[0] == Why.THROTTLE
    # within settle_s, or a report whose window began before the action: nothing
    for now, since in ((1005.0, 1001.0), (1020.0, 995.0)):
        again, _ = pol.decide(obs(now=now, since=since, **over), st)
        assert again.why[0] not in GUARD_ACTIONS
    stale, _ = pol.decide(obs(now=1030.0, since=1011.0, at=1015.0, **over), st)
    assert stale.why[0] not in GUARD_ACTIONS  # 15 s old
    fresh, _ = pol.decide(obs(now=1030.0, since=1011.0, **over), st)
    assert fresh.why[0] == Why.THROTTLE


def test_no_guard_action_under_the_threshold_or_without_a_running_co_runner() -> None:
    pol = _policy(GuardSettings())
    quiet, _ = pol.decide(obs(p99=60.0, slo_ms=74.0), GpuState.new(1, 0.0))
    assert quiet.why[0] not in GUARD_ACTIONS
    starting, _ = pol.decide(obs(p99=200.0, running=False), GpuState.new(1, 0.0))
    assert starting.why[0] not in GUARD_ACTIONS


def test_the_adaptive_guard_extends_a_pause_while_the_burst_lasts() -> None:
    g = GuardSettings(adaptive=True, hold_s=0.0, pause_s=30.0)
    pol = ColocationPolicy("t", Mechanism.PRIORITY, None, g)
    act, st = pol.decide(obs(now=100.0, since=95.0, load=0.6, p99=500.0, share=0, stretch=1.03),
                         GpuState.new(1, 0.0))
    assert act.why[0] == Why.PAUSE
    assert st.paused_until[0] == 130.0
    # during the pause, at a load the co-runner would push over: extended
    act, st = pol.decide(obs(now=120.0, load=0.6, running=False, share=0, stretch=1.03), st)
    assert act.pause_until[0] == 150.0
    assert st.paused_until[0] == 150.0
    # at a load it would not: the pause runs out as set
    act, st = pol.decide(obs(now=140.0, load=0.05, running=False, share=0, stretch=1.03), st)
    assert np.isnan(act.pause_until[0])
    assert st.paused_until[0] == 150.0
    assert not act.evict.any()


def test_priority_guard_never_throttles_a_share() -> None:
    pol = COLOCATION.create("priority", guard="muxflow")
    act, _ = pol.decide(obs(load=0.3, p99=500.0, share=0, stretch=1.03), GpuState.new(1, 0.0))
    assert act.evict[0]
    assert act.share[0] == 0


def test_time_slicing_throttle_is_in_place() -> None:
    pol = COLOCATION.create("time-slicing", guard="muxflow")
    act, _ = pol.decide(obs(load=0.3, p99=500.0, share=0, stretch=1.5), GpuState.new(1, 0.0))
    assert act.why[0] == Why.THROTTLE
    assert act.share[0] > 0
    assert not act.restart[0]


def test_gpus_are_decided_independently() -> None:
    pol = _policy(GuardSettings(pause_s=0.0, step_pct=0))
    o = obs(2, load=0.2, p99=200.0, slo_ms=74.0, share=30)
    o.p99_ms[1] = float("nan")
    act, _ = pol.decide(o, GpuState.new(2, 0.0))
    assert act.why[0] == Why.THROTTLE
    assert act.why[1] != Why.THROTTLE


def test_dedicated_decides_nothing() -> None:
    pol = COLOCATION.create("dedicated")
    act, _ = pol.decide(obs(load=0.9, p99=999.0), GpuState.new(1, 0.0))
    assert act.why[0] == Why.NONE
    assert not act.restart[0]
    assert not act.evict[0]
