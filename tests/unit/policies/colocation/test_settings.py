"""Every co-location setting's check: the exact one-line message at each bound, and the bound
itself accepted (the mutation run's survivors in the settings' checks are killed here)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from cotenant.errors import InputError
from cotenant.policies.colocation import DynamicShare, FixedShare, GuardSettings, Recovery


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
