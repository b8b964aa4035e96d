"""The priority schedulers' rules at their boundaries: equal hold-up and run time, a kernel
exactly as long as the preemption limit, HP idle exactly as long as the untransformed wait,
and BE's launch while an HP request waits for its next kernel."""

from __future__ import annotations

import math

from cotenant.policies.priority import PRIORITY, Observation, RateControl, rate_step


def test_a_hold_up_equal_to_the_tolerance_still_raises_the_rate() -> None:
    c = RateControl(increase=0.1, decrease=0.5, tolerance=2.0, floor=0.05)
    assert rate_step(0.5, c, blocked_us=200.0, ran_us=100.0) == 0.6  # 200 == 2 x 100
    assert rate_step(0.5, c, blocked_us=200.5, ran_us=100.0) == 0.25


def test_be_between_an_hp_requests_kernels() -> None:
    # a request in flight, no HP kernel running, HP not idle (its next kernel is queued)
    waiting = Observation(500.0, True, False, None)
    assert PRIORITY.create("orion").be_launch_at(waiting) == 500.0  # the kind rule lets BE in
    assert PRIORITY.create("tally").be_launch_at(waiting) == math.inf
    # no request and no idle time: HP's kernels are queued without a request (Orion's rule
    # does not apply)
    queued = Observation(500.0, False, False, None)
    assert PRIORITY.create("orion").be_launch_at(queued) == math.inf


def test_a_kernel_as_long_as_tallys_limit_is_not_transformed() -> None:
    s = PRIORITY.create("tally", limit_us=50.0)
    recent = Observation(1000.0, False, False, 990.0)
    assert s.be_duration_factor(50.0, recent) == 1.0
    assert s.be_duration_factor(50.5, recent) == 1.25


def test_tally_runs_untransformed_once_hp_was_idle_exactly_the_wait() -> None:
    s = PRIORITY.create("tally", untransformed_after_us=1000.0)
    assert s.be_duration_factor(500.0, Observation(61_000.0, False, False, 60_000.0)) == 1.0
    assert s.be_duration_factor(500.0, Observation(60_999.0, False, False, 60_000.0)) == 1.25


def test_no_transformation_overhead_means_no_transformed_kernels() -> None:
    s = PRIORITY.create("tally", transform_overhead=0.0)
    obs = Observation(1000.0, False, False, 990.0)
    assert not s.transformed(500.0, obs)
    assert s.be_duration_factor(500.0, obs) == 1.0
