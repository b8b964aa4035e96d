"""Priority sharing enforced by the agent on the fake node: online services start as the HP
side of their GPU's runtime board and offline jobs as the BE side; the guard's pause becomes
the board's hold where the GPU's BE job runs the runtime, and SIGSTOP where it does not."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cotenant.agent.backends import FakeNode, ManualClock
from cotenant.agent.colocation import PriorityRuntime, check_enforceable
from cotenant.agent.latency import INLINE
from cotenant.agent.service import AgentService
from cotenant.agent.spec import WorkloadSpec
from cotenant.errors import InputError
from cotenant.policies.colocation import COLOCATION, GuardSettings
from cotenant.runtime import BOARD, HOOK_DIR, ROLE, Board, Gate, GateSettings

from .harness import OFFLINE, WEB

PAUSING = COLOCATION.create("priority", guard=GuardSettings(pause_s=30.0, hold_s=60.0))


@pytest.fixture
def service(tmp_path: Path) -> Iterator[AgentService]:
    node = FakeNode.build("A100-40GB", 2, ManualClock(1000.0))
    svc = AgentService(node, tmp_path, PAUSING, clock=ManualClock(1000.0), executor=INLINE)
    yield svc
    svc.close()


def started(service: AgentService, *specs: dict[str, object]) -> dict[str, int]:
    for spec in specs:
        service.submit(spec)
    service.tick()
    pids = {}
    for spec in specs:
        record = service.store.get(str(spec["name"]))
        assert record is not None
        assert record.pid is not None
        pids[str(spec["name"])] = record.pid
    return pids


def test_the_priority_policies_are_enforceable_time_slicing_is_not() -> None:
    for name in ("priority", "cotenant-priority", "mps-fixed"):
        assert check_enforceable(COLOCATION.create(name)).name == name
    with pytest.raises(InputError) as caught:
        check_enforceable(COLOCATION.create("time-slicing"))
    assert caught.value.one_line() == (
        "co-location policy 'time-slicing': shares GPUs by time-slicing; the node agent "
        "enforces MPS shares and priority sharing only (hint: use one of: mps-fixed, "
        "priority, muxflow, cotenant-pause, cotenant-priority)")


def test_online_starts_as_hp_and_offline_as_be_on_their_gpus_board(
        service: AgentService, tmp_path: Path) -> None:
    other = {**OFFLINE, "name": "train1", "gpu": 1, "env": {"PYTHONPATH": "/opt/app"}}
    pids = started(service, WEB, OFFLINE, other)
    node = service.backend
    assert isinstance(node, FakeNode)
    web, train, train1 = (node.env_of(pids[n]) for n in ("web", "train", "train1"))
    assert (web[ROLE], train[ROLE], train1[ROLE]) == ("hp", "be", "be")
    assert web[BOARD] == train[BOARD] == str(tmp_path / "priority" / "gpu0.board")
    assert train1[BOARD] == str(tmp_path / "priority" / "gpu1.board")
    assert train1["PYTHONPATH"] == f"{HOOK_DIR}{os.pathsep}/opt/app"  # its own path kept
    assert web["PYTHONPATH"].split(os.pathsep)[0] == str(HOOK_DIR)
    assert Board(train[BOARD]).hold_until_ns() == 0


def test_an_mps_policy_starts_workloads_without_the_runtime(tmp_path: Path) -> None:
    node = FakeNode.build("A100-40GB", 1, ManualClock(1000.0))
    svc = AgentService(node, tmp_path, COLOCATION.create("mps-fixed"), clock=ManualClock(1000.0))
    try:
        pids = started(svc, WEB, OFFLINE)
        assert svc.runtime is None
        assert all(ROLE not in node.env_of(pid) for pid in pids.values())
    finally:
        svc.close()


def test_a_pause_without_a_live_gate_falls_back_to_sigstop(service: AgentService) -> None:
    pids = started(service, WEB, OFFLINE)
    service.report_p99("web", {"p99_ms": 199.0})  # over 95 % of the 200 ms SLO
    assert service.supervisor.paused() == {"train"}
    node = service.backend
    assert isinstance(node, FakeNode)
    assert node.paused(pids["train"])
    assert service.runtime is not None
    assert service.runtime.held(0) == 0.0


def test_a_pause_with_a_live_gate_is_the_boards_hold_no_signal(service: AgentService) -> None:
    pids = started(service, WEB, OFFLINE)
    runtime = service.runtime
    assert runtime is not None
    runtime.board(0).beat(pids["train"], time.monotonic_ns())  # the BE process's gate is live
    service.report_p99("web", {"p99_ms": 199.0})
    assert service.supervisor.paused() == set()
    node = service.backend
    assert isinstance(node, FakeNode)
    assert not node.paused(pids["train"])
    assert 29.0 < runtime.held(0) <= 30.0  # the guard's 30 s pause, on the board
    assert runtime.held(1) == 0.0
    [event] = [e for e in service.store.events("node") if e.kind == "guard pause"]
    assert event.detail.endswith("offline paused 30 s (the runtime's hold: at its next operator)")
    assert service.colocation.counts["pause"] == 1
    service.close()  # the agent stops: no hold outlives it
    assert Board(runtime.board_dir / "gpu0.board").hold_until_ns() == 0


def test_a_gate_that_stopped_beating_is_not_live(tmp_path: Path) -> None:
    now = [10**12]
    runtime = PriorityRuntime(tmp_path, monotonic_ns=lambda: now[0])
    assert not runtime.gated(0)  # never beat
    runtime.board(0).beat(1, now[0])
    assert runtime.gated(0)
    now[0] += 2_100_000_000
    assert not runtime.gated(0)
    runtime.close()


def test_a_spec_may_not_set_the_runtimes_variables() -> None:
    with pytest.raises(InputError, match=r"env\.COTENANT_PRIORITY_ROLE: is set by the agent"):
        WorkloadSpec.from_dict({**OFFLINE, "env": {"COTENANT_PRIORITY_ROLE": "hp"}})


def test_a_board_path_that_is_not_a_board_fails_the_start_with_one_line(
        tmp_path: Path) -> None:
    (tmp_path / "priority").mkdir()
    (tmp_path / "priority" / "gpu0.board").write_bytes(b"junk")
    node = FakeNode.build("A100-40GB", 1, ManualClock(1000.0))
    svc = AgentService(node, tmp_path, PAUSING, clock=ManualClock(1000.0))
    try:
        svc.submit(OFFLINE)
        svc.tick()
        record = svc.store.get("train")
        assert record is not None
        assert record.status.value == "failed"
        assert "priority board" in (record.last_exit or "")
        assert "not a priority board" in (record.last_exit or "")
    finally:
        svc.close()


def test_a_workload_on_a_mig_instance_runs_without_the_runtime(tmp_path: Path) -> None:
    runtime = PriorityRuntime(tmp_path)
    spec = WorkloadSpec.from_dict({**OFFLINE, "sm_share": None, "mem_limit_mib": None,
                                   "mig_instance": "3g.20gb@4"})
    assert runtime.env_for(spec) == {}
    assert runtime.env_for(WorkloadSpec.from_dict(OFFLINE))[ROLE] == "be"
    runtime.close()


def test_the_agent_resets_a_board_left_from_before(tmp_path: Path) -> None:
    """A hold, a beat and a lease from before (an earlier agent; a reboot, after which the
    board's times lie days ahead of the new monotonic clock) are gone once the agent opens
    the board; a live lease stays."""
    now = 10**12
    old = Board(tmp_path / "gpu0.board")
    old.set_hold(now + 86400 * 10**9)
    old.beat(1, now)
    stale, live = old.claim(10**7, now), old.claim(10**7 + 1, now)
    old.renew(stale, now + 86400 * 10**9)
    old.renew(live, now + 10**9)
    runtime = PriorityRuntime(tmp_path, monotonic_ns=lambda: now)
    board = runtime.board(0)
    assert (board.hold_until_ns(), board.last_beat_ns()) == (0, 0)
    assert board.hp_until_ns() == now + 10**9
    runtime.close()
    old.close()


def test_a_long_hold_stays_the_boards_hold_to_its_end_never_a_sigstop(
        service: AgentService) -> None:
    """The gate beats while it waits out the agent's hold, so the guard's 30 s pause (longer
    than the 2 s a beat stays fresh) is the board's hold all through, not SIGSTOP partway."""
    pids = started(service, WEB, OFFLINE)
    runtime = service.runtime
    assert runtime is not None
    clock = [10**12]  # one manual monotonic clock for the agent's runtime and the gate

    def sleep(seconds: float) -> None:
        clock[0] += round(seconds * 1e9)
        seen.append(runtime.gated(0))
        if len(seen) == 60:  # ~6 s into the hold the guard pauses again: still no signal
            service.report_p99("web", {"p99_ms": 199.0})

    seen: list[bool] = []
    runtime.monotonic_ns = lambda: clock[0]
    gate = Gate(runtime.board(0), GateSettings(), clock_ns=lambda: clock[0], sleep=sleep,
                pid=pids["train"])
    gate.check()  # the BE process's gate is live
    service.report_p99("web", {"p99_ms": 199.0})
    assert runtime.held(0) == 30.0
    assert gate.check() == pytest.approx(30.0)
    assert len(seen) > 250
    assert all(seen)
    assert service.supervisor.paused() == set()
    node = service.backend
    assert isinstance(node, FakeNode)
    assert not node.paused(pids["train"])
