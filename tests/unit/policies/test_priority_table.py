"""Each registered priority scheduler is the scheduler its documentation describes: the table
below is written from the registry's docstring and the papers' figures it cites (Tally's
31.6 us limit, 0.1 ms idle wait, 25% transform overhead, 100 ms untransformed wait; TGS's
window and steps; REEF's reset at Tally's bound; Orion's kind rule), not from the code."""

from __future__ import annotations

import math

import pytest

from cotenant.policies.priority import (
    PRIORITY,
    Blocks,
    Preemption,
    RateControl,
    Scheduler,
    Sharing,
)
from cotenant.sim.priority.run import Pair, run_pair

DOCUMENTED = {
    "time-slicing": Scheduler("time-slicing", Sharing.TIME_SLICED, Blocks.SHARED,
                              Preemption.NONE, timeslice_us=2000.0),
    "mps": Scheduler("mps", Sharing.CONCURRENT, Blocks.SHARED),
    "mps-priority": Scheduler("mps-priority", Sharing.CONCURRENT, Blocks.PRIORITY),
    "tgs": Scheduler("tgs", Sharing.TIME_SLICED, Blocks.SHARED, timeslice_us=2000.0,
                     rate_control=RateControl(window_us=10_000.0, increase=0.05,
                                              decrease=0.5, tolerance=1.0, floor=0.05)),
    "reef": Scheduler("reef", Sharing.CONCURRENT, Blocks.PRIORITY, Preemption.RESET,
                      preemption_us=31.6, be_in_requests=False, gated=True),
    "tally": Scheduler("tally", Sharing.CONCURRENT, Blocks.PRIORITY, Preemption.DRAIN,
                       preemption_us=31.6, idle_wait_us=100.0, transform_overhead=0.25,
                       untransformed_after_us=100_000.0, gated=True),
    "orion": Scheduler("orion", Sharing.CONCURRENT, Blocks.PRIORITY, kind_rule=True,
                       gated=True),
}


def test_the_registry_holds_exactly_the_documented_schedulers_in_order() -> None:
    assert PRIORITY.names() == list(DOCUMENTED)


@pytest.mark.parametrize("name", list(DOCUMENTED))
def test_each_scheduler_is_built_as_documented(name: str) -> None:
    assert PRIORITY.create(name) == DOCUMENTED[name]


@pytest.mark.parametrize(("alias", "name"), [("ts", "time-slicing"),
                                             ("timeslicing", "time-slicing"),
                                             ("mps-prio", "mps-priority")])
def test_aliases_build_the_scheduler_they_name(alias: str, name: str) -> None:
    assert PRIORITY.create(alias) == DOCUMENTED[name]


@pytest.mark.parametrize(("name", "params", "changed"), [
    ("time-slicing", {"timeslice_us": 500.0}, {"timeslice_us": 500.0}),
    ("reef", {"reset_us": 5.0}, {"preemption_us": 5.0}),
    ("tally", {"limit_us": 10.0, "idle_wait_us": 0.0, "transform_overhead": 0.5,
               "untransformed_after_us": math.inf},
     {"preemption_us": 10.0, "idle_wait_us": 0.0, "transform_overhead": 0.5,
      "untransformed_after_us": math.inf}),
])
def test_each_parameter_reaches_the_field_it_names(name: str, params: dict[str, float],
                                                   changed: dict[str, float]) -> None:
    got = PRIORITY.create(name, **params)
    assert {k: getattr(got, k) for k in changed} == changed
    assert got.name == name


def test_tgs_parameters_reach_its_rate_control() -> None:
    got = PRIORITY.create("tgs", window_us=5000.0, increase=0.2, decrease=0.25,
                          tolerance=2.0)
    assert got.rate_control == RateControl(5000.0, 0.2, 0.25, 2.0)


def test_tgs_gives_be_less_than_plain_time_slicing_when_hp_is_held_up() -> None:
    """TGS is time slicing plus the rate control: on the same pair and seed the BE job's
    rate is cut while BERT is held up, so BE gets less than under plain time slicing and
    BERT's tail is shorter."""
    pair = Pair("bert", "pytorch_resnet50", requests=40)
    plain = run_pair(PRIORITY.create("time-slicing"), pair, 3)
    tgs = run_pair(PRIORITY.create("tgs"), pair, 3)
    assert tgs.be_norm_tput < 0.9 * plain.be_norm_tput
    assert tgs.p99_ratio < plain.p99_ratio
