"""The compute guard on the node: a p99 report over the SLO, decided by the core, throttles
the offline co-runner (restarted with a smaller cap), then evicts it and holds the GPU; the
floor expires; bad reports are refused with one line. These tests take the throttle ladder
alone (``pause_s=0``); ``test_guard_pause`` covers the pause before it."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from cotenant.agent.state import Status
from cotenant.errors import InputError
from cotenant.policies.colocation import COLOCATION

from .harness import OFFLINE, WEB, Node, fixed


def test_throttle_then_evict_then_come_back(tmp_path: Path) -> None:
    node = Node(tmp_path, fixed(50, pause_s=0.0), WEB, OFFLINE)  # SLO 200 ms
    assert node.train() == (Status.RUNNING, 50)
    node.report(180.0)  # under 95 % of the SLO: nothing to do
    node.run(1.0)
    assert node.ctl.counts["throttle"] == 0
    node.report(199.0)  # over: the online share's floor rises 20 points
    node.run(1.0)
    assert node.ctl.counts["throttle"] == 1
    assert node.share() == 70
    assert node.train() == (Status.RUNNING, 30)  # restarted with the smaller cap
    node.report(199.0)  # within the settle time: a p99 window still holds older requests
    node.run(1.0)
    node.run(9.0)
    assert node.ctl.counts["throttle"] == 1  # ignored, also once the settle time is over
    node.report(199.0)
    node.run(1.0)
    assert node.ctl.counts["throttle"] == 2
    assert node.train() == (Status.RUNNING, 10)
    node.run(10.0)
    node.report(250.0)  # 90 + 20 is past evict_above (95): evict
    node.run(1.0)
    assert node.ctl.counts["evict"] == 1
    assert node.train()[0] is Status.PENDING
    assert "guard evict" in node.agent.kinds("train")
    assert node.agent.record("web").status is Status.RUNNING  # online untouched throughout
    assert node.agent.record("web").restarts == 0
    node.agent.submit({**OFFLINE, "name": "late"})  # the hold covers new offline work too
    node.agent.submit({**OFFLINE, "name": "elsewhere", "gpu": 1})  # ... on this GPU only
    node.run(290.0)
    assert node.train()[0] is Status.PENDING  # held off for evict_hold_s (300 s)
    assert node.agent.status("late") is Status.PENDING
    assert node.agent.status("elsewhere") is Status.RUNNING
    node.run(10.0)
    # back after the hold as a new pair, at the fixed split: the guard's floor is gone
    assert node.train() == (Status.RUNNING, 50)
    assert node.agent.status("late") is Status.RUNNING
    assert node.agent.record("train").restarts == 0  # not counted as faults


def test_under_nvmls_mps_sampling_the_first_breach_evicts(tmp_path: Path) -> None:
    """As NVML does, the node samples MPS clients on their server, so the service's load reads
    as the whole GPU's (train's 60 % included): its need is every SM, and the throttle that
    gives it 70 above becomes an eviction at the first report over the SLO."""
    node = Node(tmp_path, fixed(50, pause_s=0.0), WEB, OFFLINE, per_client_util=False)
    node.run(1.0)
    node.report(199.0)
    node.run(1.0)
    assert node.ctl.counts["throttle"] == 0
    assert node.ctl.counts["evict"] == 1
    assert node.train()[0] is not Status.RUNNING


def test_the_floor_expires_after_the_hold(tmp_path: Path) -> None:
    """When the floor's hold ends, offline gets its SMs back (a gain: once the GPU has been
    watched for a whole load window, 20 s here)."""
    node = Node(tmp_path, fixed(50, pause_s=0.0, hold_s=30.0).with_(load_window_s=20.0),
                WEB, OFFLINE)
    node.report(199.0)
    node.run(1.0)
    assert node.train() == (Status.RUNNING, 30)
    node.run(28.0)
    assert node.share() == 70
    node.run(2.0)
    assert node.share() == 50
    node.run(1.0)
    assert node.train() == (Status.RUNNING, 50)


def test_the_floor_ends_with_the_hold_under_the_dynamic_policy(tmp_path: Path) -> None:
    """The sizing keeps its own share apart from the guard's floor, so its hysteresis does not
    keep a throttle after the guard lets go."""
    policy = COLOCATION.create("cotenant-pause", load_window_s=20.0)
    policy = policy.with_(guard=fixed(pause_s=0.0, hold_s=30.0).guard)
    node = Node(tmp_path, policy, WEB, OFFLINE)
    node.run(25.0)
    decided = node.share()  # resnet50 at 30 % load with a 200 ms SLO
    assert decided is not None
    assert decided < 80
    node.report(199.0)
    node.run(1.0)
    assert node.share() == decided + 20
    node.run(40.0)
    assert node.share() == decided


def test_stale_reports_and_gpus_without_offline_work_are_left_alone(tmp_path: Path) -> None:
    node = Node(tmp_path, fixed(50, pause_s=0.0), WEB, OFFLINE)
    node.report(199.0)
    node.run(11.0)  # past settle: but the report is now 11 s old (stale_s 10) ...
    assert node.ctl.counts["throttle"] == 1  # ... so it acted once, on the fresh report only
    node.agent.sup.stop("train", node.agent.clock())
    node.run(1.0)
    node.report(400.0)
    node.run(1.0)
    assert node.ctl.counts == {"pause": 0, "throttle": 1, "evict": 0}


@pytest.mark.parametrize(
    ("name", "value", "rule"),
    [
        ("web", math.nan, "must be a finite number >= 0"),
        ("web", -1.0, "must be a finite number >= 0"),
        ("web", True, "must be a number"),
        ("web", "40", "must be a number"),
        ("web", 10**400, "must be a finite number >= 0"),
        ("nope", 40.0, "no such workload"),
        ("train", 40.0, "only a running online workload"),
    ],
)
def test_bad_reports_are_refused(tmp_path: Path, name: str, value: object, rule: str) -> None:
    node = Node(tmp_path, fixed(50, pause_s=0.0), WEB, OFFLINE)
    with pytest.raises(InputError, match=rule) as info:
        node.observer.reports.report(name, value, node.agent.clock())
    assert "\n" not in info.value.one_line()
    assert info.value.one_line().startswith(f"p99 report for {name!r}")


def test_a_wall_clock_stepping_back_keeps_what_a_hold_had_left(tmp_path: Path) -> None:
    node = Node(tmp_path, fixed(50, pause_s=0.0), WEB, OFFLINE)
    for _ in range(3):  # 70, 90, then past 95: evict, hold 300 s
        node.report(250.0)
        node.run(1.0)
        node.run(10.0)
    assert node.ctl.counts["evict"] == 1
    assert node.train()[0] is Status.PENDING
    node.agent.clock.step(-3600.0)  # the wall clock alone
    node.run(278.0)
    assert node.train()[0] is Status.PENDING  # the hold keeps what it had left ...
    node.run(13.0)
    assert node.train()[0] is Status.RUNNING  # ... not an hour more
