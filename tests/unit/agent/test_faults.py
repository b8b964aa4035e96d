"""Fault injection on the fake node. For every fault: online work keeps running (or is back at
once), offline work is restarted or reported, and nothing disappears from the state."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from cotenant.agent.backends import ProcState
from cotenant.agent.state import Status

from .harness import OFFLINE, ONLINE, Agent, make_agent


@pytest.fixture
def agent(tmp_path: Path) -> Agent:
    agent = make_agent(tmp_path)
    agent.submit(ONLINE)
    agent.submit(OFFLINE)
    agent.run(1.0)
    assert agent.status("web") is Status.RUNNING
    assert agent.status("train") is Status.RUNNING
    return agent


def online_alive(agent: Agent) -> bool:
    record = agent.record("web")
    return (record.status is Status.RUNNING and record.pid is not None
            and agent.node.poll(record.pid).state is ProcState.RUNNING)


def nothing_lost(agent: Agent) -> None:
    assert {r.spec.name for r in agent.store.all()} == {"web", "train"}


def exits(agent: Agent, name: str) -> list[str | None]:
    return [e.fault for e in agent.store.events(name) if e.kind == "exit"]


def test_offline_crash_restarts_with_backoff(tmp_path: Path) -> None:
    agent = make_agent(tmp_path)
    agent.submit(ONLINE)
    agent.submit({**OFFLINE, "argv": ["fake-workload", "--crash-at-s", "2"]})
    agent.run(2.5)
    record = agent.record("train")
    assert record.status is Status.BACKOFF
    assert record.restarts == 1
    assert record.next_start - record.since == 1.0
    assert exits(agent, "train") == ["cuda"]
    agent.run(1.0)  # backoff 1 s, then it runs (and crashes again 2 s later)
    assert agent.status("train") is Status.RUNNING
    agent.run(2.5)
    second = agent.record("train")
    assert second.restarts == 2
    assert second.next_start - second.since == 2.0  # the delay doubled
    assert online_alive(agent)
    nothing_lost(agent)


def test_offline_sigterm_is_a_graceful_stop(agent: Agent) -> None:
    pid = agent.record("train").pid
    assert pid is not None
    agent.node.send_signal(pid, signal.SIGTERM)
    agent.run(5.0)
    assert agent.status("train") is Status.STOPPED
    assert agent.record("train").restarts == 0
    assert "graceful stop" in agent.kinds("train")
    assert online_alive(agent)
    nothing_lost(agent)


def test_offline_sigint_is_a_graceful_stop_too(agent: Agent) -> None:
    pid = agent.record("train").pid
    assert pid is not None
    agent.node.send_signal(pid, signal.SIGINT)
    agent.run(1.0)
    assert agent.status("train") is Status.STOPPED


def test_mps_daemon_killed_restarts_it_online_first(agent: Agent) -> None:
    agent.node.kill_daemon(0)
    agent.run(0.5)
    assert online_alive(agent)
    assert agent.status("train") is Status.RUNNING
    kinds = [e.kind for e in agent.store.events("node")]
    assert "mps failure" in kinds
    assert "mps restarted" in kinds
    assert exits(agent, "web") == ["mps"]
    assert exits(agent, "train") == ["mps"]
    started = [e.workload for e in agent.store.events() if e.kind == "started"]
    assert started[-2:] == ["web", "train"]  # online back first
    assert agent.sup.mps.restarts[0] == 1
    nothing_lost(agent)


def test_nvml_error_on_a_query_is_logged_and_work_continues(agent: Agent) -> None:
    agent.node.inject_nvml_error("xid_events", times=2)
    agent.node.inject_nvml_error("gpus", times=1, permanent=True)
    agent.run(2.0)
    assert [e.kind for e in agent.store.events("node")].count("nvml error") == 2
    assert online_alive(agent)
    assert agent.status("train") is Status.RUNNING
    nothing_lost(agent)


def test_xid_event_is_classified_and_offline_restarted(agent: Agent) -> None:
    pid = agent.record("train").pid
    agent.node.inject_xid(0, 43, pid)
    agent.run(3.0)
    assert exits(agent, "train") == ["xid"]
    assert agent.status("train") is Status.RUNNING
    assert agent.record("train").restarts == 1
    assert online_alive(agent)
    nothing_lost(agent)


def test_offline_fatal_cuda_error_under_mps_reaches_online_which_comes_back(
    tmp_path: Path,
) -> None:
    agent = make_agent(tmp_path)
    agent.submit(ONLINE)
    agent.submit({**OFFLINE, "argv": ["fake-workload", "--crash-at-s", "2"]})
    agent.run(4.0)
    assert exits(agent, "train")[0] == "cuda"
    assert exits(agent, "web") == ["mps"]
    assert online_alive(agent)  # restarted without backoff once the server took clients again
    nothing_lost(agent)


def test_offline_oom_past_its_limit(tmp_path: Path) -> None:
    agent = make_agent(tmp_path)
    agent.submit(ONLINE)
    agent.submit({**OFFLINE, "argv": ["fake-workload", "--mem-mib", "8000", "--grow-mib", "4000",
                                      "--grow-at-s", "1"]})
    agent.run(1.5)
    assert exits(agent, "train") == ["oom"]
    assert agent.status("train") is Status.BACKOFF
    assert online_alive(agent)


def test_agent_killed_and_restarted_mid_workload(agent: Agent) -> None:
    pids = {n: agent.record(n).pid for n in ("web", "train")}
    agent.restart_agent()
    agent.run(1.0)
    assert "adopted" in agent.kinds("web")
    assert "adopted" in agent.kinds("train")
    assert {n: agent.record(n).pid for n in ("web", "train")} == pids
    assert online_alive(agent)
    nothing_lost(agent)


def test_agent_restart_accounts_for_a_workload_that_died_meanwhile(agent: Agent) -> None:
    pid = agent.record("train").pid
    assert pid is not None
    agent.store.close()
    agent.node.inject_xid(0, 31, pid)  # dies while no agent watches
    agent.restart_agent()
    agent.run(3.0)
    assert "lost" in agent.kinds("train")
    assert agent.status("train") is Status.RUNNING
    assert agent.record("train").pid != pid
    assert online_alive(agent)
    nothing_lost(agent)


def test_workload_gone_entirely_is_marked_lost_and_restarted(tmp_path: Path) -> None:
    agent = make_agent(tmp_path)
    agent.submit(ONLINE)
    agent.run(0.5)
    record = agent.record("web")
    agent.store.update(record, pid=999_999)  # a pid the node never had: exit status unknown
    agent.restart_agent()
    agent.run(0.5)
    assert exits(agent, "web") == ["lost"]
    assert online_alive(agent)


def test_permanent_xid_error_turns_xid_reading_off_once(agent: Agent) -> None:
    agent.node.inject_nvml_error("xid_events", times=1, permanent=True)
    agent.run(3.0)
    details = [e.detail for e in agent.store.events("node") if e.kind == "nvml error"]
    assert len(details) == 1
    assert "XID events off" in details[0]
    assert online_alive(agent)
