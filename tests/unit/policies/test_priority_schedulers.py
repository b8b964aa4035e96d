"""Priority schedulers as pure policies: what they decide from what they have seen."""

from __future__ import annotations

import inspect
import math

import pytest

from cotenant.errors import InputError, UnknownNameError
from cotenant.policies.priority import PRIORITY, Observation, RateControl, rate_step
from cotenant.policies.priority.registry import RANGES, TALLY_LIMIT_US


def _obs(now: float = 1000.0, *, request: bool = False, running: bool = False,
         idle_since: float | None = 0.0, hp_kind: int = -1, be_kind: int = -1) -> Observation:
    return Observation(now, request, running, idle_since, hp_kind, be_kind)


def test_unknown_scheduler_lists_the_valid_ones() -> None:
    with pytest.raises(UnknownNameError, match="valid: mps, mps-priority, orion, reef, "
                       "tally, tgs, time-slicing"):
        PRIORITY.create("fifo")


def test_sharing_schedulers_never_hold_be_back() -> None:
    for name in ("mps", "mps-priority", "time-slicing", "tgs"):
        s = PRIORITY.create(name)
        assert s.be_launch_at(_obs(request=True, running=True, idle_since=None)) == 1000.0


def test_tally_waits_for_hp_to_be_idle_its_minimum_wait() -> None:
    s = PRIORITY.create("tally")
    assert s.be_launch_at(_obs(running=True, idle_since=None)) == math.inf
    assert s.be_launch_at(_obs(now=1000.0, idle_since=950.0)) == 1050.0
    assert s.be_launch_at(_obs(now=1000.0, idle_since=800.0)) == 1000.0


def test_tally_slices_long_be_kernels_only_while_hp_was_recent() -> None:
    s = PRIORITY.create("tally")
    assert s.be_duration_factor(10.0, _obs()) == 1.0  # shorter than the limit: as it is
    assert s.be_duration_factor(500.0, _obs(now=1000.0, idle_since=900.0)) == 1.25
    assert s.be_duration_factor(500.0, _obs(now=200_000.0, idle_since=0.0)) == 1.0
    assert s.preemption_us == TALLY_LIMIT_US


def test_reef_holds_be_for_the_whole_request_orion_by_kernel_kind() -> None:
    reef, orion = PRIORITY.create("reef"), PRIORITY.create("orion")
    in_gap = _obs(request=True, running=False, idle_since=990.0)
    assert reef.be_launch_at(in_gap) == math.inf
    assert orion.be_launch_at(in_gap) == 1000.0
    same = _obs(request=True, running=True, idle_since=None, hp_kind=1, be_kind=1)
    other = _obs(request=True, running=True, idle_since=None, hp_kind=1, be_kind=0)
    assert orion.be_launch_at(same) == math.inf
    assert orion.be_launch_at(other) == 1000.0


def test_tgs_rate_is_aimd_on_hp_hold_up() -> None:
    c = RateControl(increase=0.1, decrease=0.5, tolerance=1.0, floor=0.05)
    assert rate_step(0.5, c, blocked_us=10.0, ran_us=100.0) == pytest.approx(0.6)
    assert rate_step(1.0, c, blocked_us=10.0, ran_us=100.0) == 1.0
    assert rate_step(0.5, c, blocked_us=200.0, ran_us=100.0) == 0.25
    assert rate_step(0.06, c, blocked_us=200.0, ran_us=100.0) == 0.05


def test_every_scheduler_parameter_has_a_stated_range() -> None:
    for name in PRIORITY.names():
        for param in inspect.signature(PRIORITY.get(name)).parameters:
            assert param in RANGES, (name, param)


@pytest.mark.parametrize(("name", "params", "match"), [
    ("time-slicing", {"timeslice_us": 0}, r"^timeslice_us: 0 must be a finite number"),
    ("tgs", {"window_us": math.inf}, r"^window_us: inf must be"),
    ("tgs", {"decrease": 1.5}, r"^decrease: 1.5 must be a fraction in \[0, 1\]"),
    ("tally", {"limit_us": 0}, r"^limit_us: 0 must be a finite number of microseconds > 0"),
    ("tally", {"idle_wait_us": True}, r"^idle_wait_us: True must be"),
    ("reef", {"reset_us": math.nan}, r"^reset_us: nan must be"),
])
def test_out_of_range_parameters_are_refused(name: str, params: dict[str, object],
                                             match: str) -> None:
    with pytest.raises(InputError, match=match):
        PRIORITY.create(name, **params)


def test_parameters_in_range_build_the_scheduler() -> None:
    s = PRIORITY.create("tally", limit_us=10, untransformed_after_us=math.inf)
    assert (s.preemption_us, s.untransformed_after_us) == (10.0, math.inf)
