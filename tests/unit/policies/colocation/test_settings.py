"""Every co-location setting's check: the exact one-line message at each bound, and the bound
itself accepted (the mutation run's survivors in the settings' checks are killed here)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from cotenant.errors import InputError, UnknownNameError
from cotenant.policies.colocation import (
    COLOCATION,
    Admission,
    ColocationPolicy,
    DynamicShare,
    FixedShare,
    GpuState,
    GuardSettings,
    Mechanism,
    Observation,
    Recovery,
)
from cotenant.policies.colocation.registry import GUARDS


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: GuardSettings(threshold=0.0), "guard.threshold: 0.0 must be in (0, 1]"),
        (lambda: GuardSettings(threshold=1.01), "guard.threshold: 1.01 must be in (0, 1]"),
        (lambda: GuardSettings(step_pct=-1), "guard.step_pct: SM share -1 is outside 0-100"),
        (lambda: GuardSettings(step_pct=101), "guard.step_pct: SM share 101 is outside 0-100"),
        (lambda: GuardSettings(evict_above=0), "guard.evict_above: SM share 0 is outside 1-100"),
        (lambda: GuardSettings(pause_s=-1.0), "guard.pause_s: -1 s must be a finite number >= 0"),
        (lambda: GuardSettings(hold_s=-1.0), "guard.hold_s: -1 s must be a finite number >= 0"),
        (lambda: GuardSettings(evict_hold_s=-1.0),
         "guard.evict_hold_s: -1 s must be a finite number >= 0"),
        (lambda: GuardSettings(settle_s=-1.0),
         "guard.settle_s: -1 s must be a finite number >= 0"),
        (lambda: GuardSettings(stale_s=-1.0), "guard.stale_s: -1 s must be a finite number >= 0"),
        (lambda: GuardSettings(scrape_s=0.0), "guard.scrape_s: 0 s must be a finite number > 0"),
        (lambda: GuardSettings(max_window_s=0.0),
         "guard.max_window_s: 0 s must be a finite number > 0"),
        (lambda: GuardSettings(min_requests=0), "guard.min_requests: 0 must be an integer >= 1"),
        (lambda: GuardSettings(min_requests=True),
         "guard.min_requests: True must be an integer >= 1"),
        (lambda: GuardSettings(min_requests=2.0),  # type: ignore[arg-type]
         "guard.min_requests: 2.0 must be an integer >= 1"),
        (lambda: DynamicShare(margin=-0.01), "DynamicShare.margin: -0.01 is outside [0, 1)"),
        (lambda: DynamicShare(margin=1.0), "DynamicShare.margin: 1.0 is outside [0, 1)"),
        (lambda: DynamicShare(step=0), "DynamicShare.step: SM share 0 is outside 1-100"),
        (lambda: DynamicShare(max_drop=0), "DynamicShare.max_drop: SM share 0 is outside 1-100"),
        (lambda: DynamicShare(min_share=-1),
         "DynamicShare.min_share: SM share -1 is outside 0-100"),
        (lambda: FixedShare(share=101), "FixedShare.share: SM share 101 is outside 0-100"),
        (lambda: Recovery(backoff_base_s=-1.0),
         "recovery.backoff_base_s: -1 s must be a finite number >= 0"),
        (lambda: Recovery(backoff_cap_s=-1.0),
         "recovery.backoff_cap_s: -1 s must be a finite number >= 0"),
        (lambda: Recovery(stable_s=-1.0), "recovery.stable_s: -1 s must be a finite number >= 0"),
        (lambda: Recovery(quarantine_s=-1.0),
         "recovery.quarantine_s: -1 s must be a finite number >= 0"),
        (lambda: Recovery(backoff_factor=0.99), "recovery.backoff_factor: 0.99 must be >= 1"),
        (lambda: Recovery(max_restarts=-1), "recovery.max_restarts: must be >= 0"),
        (lambda: Admission(max_load=-0.1), "admission.max_load: -0.1 must be in [0, 1]"),
        (lambda: Admission(max_load=1.1), "admission.max_load: 1.1 must be in [0, 1]"),
        (lambda: Admission(quantile=0.0), "admission.quantile: 0.0 must be in (0, 1]"),
        (lambda: Admission(quantile=1.5), "admission.quantile: 1.5 must be in (0, 1]"),
        (lambda: Admission(warmup_s=-1.0),
         "admission.warmup_s: -1 s must be a finite number >= 0"),
        (lambda: ColocationPolicy("p", Mechanism.MPS, load_window_s=0.0),
         "policy p: load_window_s: 0 s must be a finite number > 0"),
        (lambda: ColocationPolicy("p", Mechanism.MPS, gain_threshold_pct=101),
         "policy p: gain_threshold_pct: SM share 101 is outside 0-100"),
        (lambda: ColocationPolicy("p", Mechanism.NONE, share=FixedShare(50)),
         "policy p: a policy that shares nothing has no share sizing or guard"),
        (lambda: ColocationPolicy("p", Mechanism.NONE, guard=GuardSettings()),
         "policy p: a policy that shares nothing has no share sizing or guard"),
        (lambda: FixedShare(share=50.0),  # type: ignore[arg-type]
         "FixedShare.share: SM share must be an integer percentage, got 50.0"),
        (lambda: FixedShare(share=True),
         "FixedShare.share: SM share must be an integer percentage, got True"),
    ],
)
def test_a_bad_setting_is_one_exact_message(make: Callable[[], object], message: str) -> None:
    with pytest.raises(InputError) as info:
        make()
    assert str(info.value) == message


def test_the_bounds_themselves_are_accepted() -> None:
    GuardSettings(threshold=1.0, step_pct=0, evict_above=1, pause_s=0.0, hold_s=0.0,
                  evict_hold_s=0.0, settle_s=0.0, stale_s=0.0, min_requests=1)
    GuardSettings(step_pct=100, evict_above=100, threshold=1e-9)
    DynamicShare(margin=0.0, step=1, max_drop=1, min_share=0)
    DynamicShare(margin=0.999, step=100, max_drop=100, min_share=100)
    FixedShare(share=0)
    FixedShare(share=100)
    Recovery(backoff_base_s=0.0, backoff_cap_s=0.0, stable_s=0.0, quarantine_s=0.0,
             backoff_factor=1.0, max_restarts=0)
    Admission(max_load=0.0, quantile=1.0, warmup_s=0.0)
    Admission(max_load=1.0, quantile=1e-9)
    ColocationPolicy("p", Mechanism.MPS, gain_threshold_pct=0)
    ColocationPolicy("p", Mechanism.MPS, gain_threshold_pct=100)
    ColocationPolicy("p", Mechanism.NONE)


def test_a_bad_share_carries_its_hint() -> None:
    with pytest.raises(InputError) as info:
        FixedShare(share=101)
    assert info.value.hint == "MPS active-thread percentages run from 1 to 100"


def test_a_guard_is_named_given_or_switched_on() -> None:
    assert COLOCATION.create("mps-fixed", share=50, guard="muxflow").guard == GUARDS["muxflow"]
    assert COLOCATION.create("mps-fixed", share=50, guard=True).guard == GUARDS["pause"]
    assert COLOCATION.create("mps-fixed", share=50, guard=False).guard is None
    with pytest.raises(UnknownNameError) as info:
        COLOCATION.create("mps-fixed", share=50, guard="calm")
    assert "unknown guard 'calm'" in str(info.value)
    assert "adaptive, muxflow, pause" in str(info.value)


def observation(n: int, **changes: object) -> Observation:
    fields: dict[str, object] = {
        "now_s": 0.0, "model": np.zeros(n, np.int64), "slo_ms": np.full(n, 50.0),
        "load": np.zeros(n), "load_peak": np.zeros(n), "p99_ms": np.full(n, np.nan),
        "p99_since_s": np.zeros(n), "p99_at_s": np.zeros(n), "placed": np.zeros(n, bool),
        "running": np.zeros(n, bool), "share": np.full(n, 100, np.int64),
        "stretch": np.ones(n), **changes}
    return Observation(**fields)  # type: ignore[arg-type]


def test_an_observation_is_checked() -> None:
    observation(2, load=np.array([0.0, 1.5]), slo_ms=np.array([1e-3, 1.0]))  # bounds: taken
    with pytest.raises(InputError) as info:
        observation(2, share=np.array([100]))
    assert str(info.value) == "observation.share: has 1 entries for 2 GPUs"
    for bad in ({"load": np.array([0.0, -0.1])}, {"slo_ms": np.array([50.0, 0.0])}):
        with pytest.raises(InputError) as info:
            observation(2, **bad)
        assert str(info.value) == "observation: loads must be >= 0 and SLOs > 0"


def test_a_new_gpu_state() -> None:
    state = GpuState.new(2, 7)
    assert state.decided.dtype == np.int64
    assert state.decided.tolist() == [-1, -1]
    assert state.floor.dtype == np.int64
    assert state.watched_since.dtype == np.float64
    assert state.watched_since.tolist() == [7.0, 7.0]
    assert np.isneginf(state.held_until).all()


@pytest.mark.parametrize(
    ("needed", "current", "applied"),
    [
        ([40], [-1], [40]),  # a new pair starts at its need
        ([60], [40], [60]),  # raised at once
        ([150], [40], [100]),  # never past 100
        ([31], [40], [40]),  # 9 below: within the step, held
        ([30], [40], [30]),  # exactly a step below: lowered
        ([10], [90], [40]),  # lowered by at most max_drop
    ],
)
def test_the_share_hysteresis(needed: list[int], current: list[int], applied: list[int]) -> None:
    share = DynamicShare(step=10, max_drop=50)
    got = share.hold(np.array(needed), np.array(current))
    assert got.dtype == np.int64
    assert got.tolist() == applied
