"""The compute guard: measured p99 over the SLO throttles the offline co-runner, then evicts it;
the floor it sets expires; bad reports are refused with one line. These tests take the
throttle ladder alone (``pause_s=0``); ``test_guard_pause`` covers the pause before it."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from cotenant.agent.guard import GuardSettings, LatencyGuard
from cotenant.agent.share import ShareController
from cotenant.agent.state import Status
from cotenant.errors import InputError
from cotenant.policies.colocation.contract import SharePolicy
from cotenant.policies.colocation.share import DynamicShare, FixedShare

from .harness import OFFLINE, ONLINE, Agent, make_agent


class Node:
    """An agent on a fake node with the guard feeding the share controller (static 50/50);
    the guard throttles at once unless ``settings`` say otherwise."""

    def __init__(self, tmp_path: Path, settings: GuardSettings | None = None,
                 policy: SharePolicy | None = None, slo_ms: float = 50.0) -> None:
        self.agent: Agent = make_agent(tmp_path)
        self.guard = LatencyGuard(self.agent.sup, settings or GuardSettings(pause_s=0.0))
        self.share = ShareController(self.agent.sup, self.agent.node, policy or FixedShare(50),
                                     window_s=0.0, floor=self.guard.floor)
        self.agent.submit({**ONLINE, "slo_ms": slo_ms})  # resnet50, SLO 50 ms by default
        self.agent.submit(OFFLINE)  # sm_share 50
        self.run(1.0)

    def run(self, seconds: float) -> None:
        for _ in range(round(seconds / 0.5)):
            now = self.agent.clock.advance(0.5)
            self.guard.tick(now, self.share.shares)
            self.share.tick(now)
            self.agent.sup.tick(now)

    def report(self, p99_ms: float) -> None:
        self.guard.report("web", p99_ms, self.agent.clock())

    def train(self) -> tuple[Status, int | None]:
        record = self.agent.record("train")
        return record.status, record.applied_pct


def test_throttle_then_evict_then_come_back(tmp_path: Path) -> None:
    node = Node(tmp_path)
    assert node.train() == (Status.RUNNING, 50)
    node.report(45.0)  # under 95 % of the 50 ms SLO: nothing to do
    node.run(1.0)
    assert node.guard.throttles == 0
    node.report(49.0)  # over: the online share's floor rises 20 points
    node.run(1.0)
    assert node.guard.throttles == 1
    assert node.share.shares[0] == 70
    assert node.train() == (Status.RUNNING, 30)  # restarted with the smaller share
    node.report(49.0)  # within the settle time: a p99 window still holds older requests
    node.run(1.0)
    node.run(9.0)
    assert node.guard.throttles == 1  # ignored, also once the settle time is over
    node.report(49.0)
    node.run(1.0)
    assert node.guard.throttles == 2
    assert node.train() == (Status.RUNNING, 10)
    node.run(10.0)
    node.report(60.0)  # 90 + 20 is past evict_above (95): evict
    node.run(1.0)
    assert node.guard.evictions == 1
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
    # back after the hold, at the static policy's share: the guard's floor expired
    assert node.train() == (Status.RUNNING, 50)
    assert node.agent.status("late") is Status.RUNNING
    assert node.agent.record("train").restarts == 0  # not counted as faults


def test_the_floor_expires_after_the_hold(tmp_path: Path) -> None:
    node = Node(tmp_path, GuardSettings(pause_s=0.0, hold_s=30.0))
    node.report(49.0)
    node.run(1.0)
    assert node.train() == (Status.RUNNING, 30)
    node.run(28.0)
    assert node.share.shares[0] == 70
    node.run(2.0)
    assert node.share.shares[0] == 50
    assert node.train() == (Status.RUNNING, 50)


def test_the_floor_ends_with_the_hold_under_the_dynamic_policy(tmp_path: Path) -> None:
    """The policy sees its own share as current, not the floor, so its hysteresis does not
    keep a throttle after the guard lets go."""
    node = Node(tmp_path, GuardSettings(pause_s=0.0, hold_s=30.0), policy=DynamicShare(),
                slo_ms=200.0)
    node.run(2.0)
    decided = node.share.shares[0]  # resnet50 at 30 % load with a 200 ms SLO
    assert decided < 80
    node.report(199.0)
    node.run(1.0)
    assert node.share.shares[0] == decided + 20
    node.run(40.0)
    assert node.share.shares[0] == decided


def test_stale_reports_and_gpus_without_offline_work_are_left_alone(tmp_path: Path) -> None:
    node = Node(tmp_path)
    node.report(49.0)
    node.run(11.0)  # past settle: but the report is now 11 s old (stale_s 10) ...
    assert node.guard.throttles == 1  # ... so it acted once, on the fresh report only
    node.agent.sup.stop("train", node.agent.clock())
    node.run(1.0)
    node.report(80.0)
    node.run(1.0)
    assert node.guard.throttles == 1
    assert node.guard.evictions == 0


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
    node = Node(tmp_path)
    with pytest.raises(InputError, match=rule) as info:
        node.guard.report(name, value, node.agent.clock())
    assert "\n" not in info.value.one_line()
    assert info.value.one_line().startswith(f"p99 report for {name!r}")


def test_settings_are_checked() -> None:
    with pytest.raises(InputError, match="guard threshold"):
        GuardSettings(threshold=1.5)
    with pytest.raises(InputError, match="guard hold_s"):
        GuardSettings(hold_s=math.inf)


def test_a_wall_clock_stepping_back_keeps_what_a_hold_had_left(tmp_path: Path) -> None:
    node = Node(tmp_path)
    node.report(80.0)  # 50 + 20 = 70: throttle
    node.run(1.0)
    node.run(10.0)
    node.report(80.0)  # 90
    node.run(1.0)
    node.run(10.0)
    node.report(80.0)  # past 95: evict, hold 300 s
    node.run(1.0)
    assert node.guard.evictions == 1
    assert node.train()[0] is Status.PENDING
    node.agent.clock.advance(-3600.0)
    node.run(290.0)
    assert node.train()[0] is Status.PENDING  # the hold keeps what it had left ...
    node.run(10.0)
    assert node.train()[0] is Status.RUNNING  # ... not an hour more
