"""An agent that starts reconciles its state with the processes it finds, by value: each
case (a start written but not made, a start made but not recorded, a process lost, adopted,
stopped mid-way, a copy, a process the state does not know) ends in the record, the process
and the event line it should, and what it adopted survives the next agent restart too."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from cotenant.agent.backends import ProcState
from cotenant.agent.faultpoints import AgentCrash
from cotenant.agent.state import StateStore, Status

from .harness import OFFLINE, ONLINE, Agent, make_agent

STUBBORN = {**OFFLINE, "argv": ["fake-workload", "--mem-mib", "8000", "--term-delay-s", "inf"]}


def log(agent: Agent, name: str, *kinds: str) -> list[tuple[float, str, str | None, str]]:
    return [(e.time, e.kind, e.fault, e.detail) for e in agent.store.events(name)
            if not kinds or e.kind in kinds]


def live(agent: Agent, name: str) -> list[int]:
    return [f.pid for f in agent.node.launched() if f.workload == name]


def crash_at(agent: Agent, point: str) -> None:
    agent.store.points.arm(point)
    with pytest.raises(AgentCrash):
        agent.run(0.5)


def lose_database(agent: Agent) -> None:
    """The database is deleted while the agent is down (its store closed: nothing in
    memory writes it anew)."""
    agent.store.close()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{agent.db}{suffix}").unlink(missing_ok=True)
    agent.store = StateStore(":memory:")  # what restart_agent closes: not the lost one


def pid_of(agent: Agent, name: str) -> int:
    pid = agent.record(name).pid
    assert pid is not None
    return pid


def test_a_start_written_but_not_made_is_made_at_once(tmp_path: Path) -> None:
    """The new agent starts it at its first tick, even with the wall clock stepped back
    an hour since the intent was written."""
    agent = make_agent(tmp_path)
    agent.submit(OFFLINE)
    crash_at(agent, "start.intent")
    assert agent.status("train") is Status.STARTING
    assert live(agent, "train") == []
    agent.clock.step(-3600.0)
    agent.restart_agent()
    now = agent.clock()
    agent.sup.tick(now)
    assert log(agent, "train", "start not made") == [
        (now, "start not made", None, "starting again")]
    assert agent.status("train") is Status.RUNNING
    assert live(agent, "train") == [pid_of(agent, "train")]


def test_a_start_made_but_not_recorded_is_adopted_from_its_launch_id(tmp_path: Path) -> None:
    """... and every other workload is reconciled too (here one stopped before it in name
    order, and one running after it)."""
    agent = make_agent(tmp_path)
    agent.submit({**OFFLINE, "name": "idle", "gpu": 1})
    agent.sup.stop("idle", agent.clock())
    agent.submit(ONLINE)
    agent.run(0.5)
    agent.submit(OFFLINE)
    crash_at(agent, "start.spawned")
    [pid] = live(agent, "train")
    web = pid_of(agent, "web")
    agent.clock.advance(5.0)  # the agent is down a while
    agent.restart_agent()
    now = agent.clock()
    agent.sup.tick(now)
    record = agent.record("train")
    assert (record.status, record.pid, record.since) == (Status.RUNNING, pid, now)
    assert log(agent, "train", "adopted") == [(now, "adopted", None, f"pid {pid} (was starting)")]
    assert log(agent, "web", "adopted") == [(now, "adopted", None, f"pid {web}")]
    assert live(agent, "web") == [web]
    assert agent.sup.orphans == {}


def test_a_running_process_is_adopted_and_its_exit_while_away_is_lost(tmp_path: Path) -> None:
    agent = make_agent(tmp_path)
    agent.submit(OFFLINE)
    agent.submit({**OFFLINE, "name": "gone", "gpu": 1})
    agent.run(1.0)
    pid, gone = pid_of(agent, "train"), pid_of(agent, "gone")
    agent.store.close()
    agent.node.send_signal(gone, signal.SIGKILL)  # dies while no agent watches
    agent.restart_agent()
    now = agent.clock()
    agent.sup.tick(now)
    assert log(agent, "train", "adopted", "lost") == [(now, "adopted", None, f"pid {pid}")]
    assert log(agent, "gone", "lost") == [(now, "lost", None, f"pid {gone} (status known)")]
    assert agent.record("gone").failures == 1  # its SIGKILL is its own fault


def test_a_process_whose_status_is_gone_is_lost_with_status_unknown(tmp_path: Path) -> None:
    agent = make_agent(tmp_path)
    agent.submit(OFFLINE)
    agent.run(0.5)
    agent.store.update(agent.record("train"), pid=999_999)  # a pid the node never had
    agent.restart_agent()
    now = agent.clock()
    agent.sup.tick(now)
    assert log(agent, "train", "lost") == [(now, "lost", None, "pid 999999 (status unknown)")]
    assert agent.record("train").failures == 0  # not its own fault


def test_a_stop_under_way_is_finished_by_the_next_agent_with_the_sigkill(
        tmp_path: Path) -> None:
    agent = make_agent(tmp_path)
    agent.submit(STUBBORN)
    agent.run(1.0)
    pid = pid_of(agent, "train")
    agent.sup.stop("train", agent.clock())
    agent.restart_agent()
    agent.run(9.0)  # the new agent's grace starts afresh
    assert agent.node.poll(pid).state is ProcState.RUNNING
    agent.run(2.0)
    assert agent.node.poll(pid).returncode == -signal.SIGKILL
    assert agent.status("train") is Status.STOPPED


def test_a_process_not_in_the_state_is_adopted_from_its_environment_for_good(
        tmp_path: Path) -> None:
    agent = make_agent(tmp_path)
    agent.submit(OFFLINE)
    agent.run(1.0)
    pid = pid_of(agent, "train")
    lose_database(agent)
    agent.restart_agent()
    now = agent.clock()
    agent.sup.tick(now)
    record = agent.record("train")
    assert (record.status, record.pid, record.since) == (Status.RUNNING, pid, now)
    assert record.share_pct == OFFLINE["sm_share"]
    assert record.to_dict()["share_pct"] == OFFLINE["sm_share"]
    assert log(agent, "train", "adopted") == [
        (now, "adopted", None, f"pid {pid} (not in the state: from its environment)")]
    agent.restart_agent()  # adopted with its launch id: the next agent finds it its own
    agent.run(1.0)
    assert agent.record("train").pid == pid
    assert live(agent, "train") == [pid]
    assert "duplicate stopped" not in agent.kinds("train")


def test_a_process_whose_start_was_not_recorded_is_adopted_for_good(tmp_path: Path) -> None:
    """A workload waiting in its backoff, and a live process of it with another launch id
    (its start's record lost with the disk): the process is adopted, not started twice."""
    agent = make_agent(tmp_path)
    agent.submit(OFFLINE)
    agent.run(1.0)
    agent.node.send_signal(pid_of(agent, "train"), signal.SIGKILL)
    agent.run(0.5)
    assert agent.status("train") is Status.BACKOFF
    env = {"COTENANT_LAUNCH": "lost-start", "COTENANT_WORKLOAD": "train"}
    pid = agent.node.spawn(["fake-workload"], env, 0)
    agent.restart_agent()
    now = agent.clock()
    agent.sup.tick(now)
    record = agent.record("train")
    assert (record.status, record.pid, record.since) == (Status.RUNNING, pid, now)
    assert log(agent, "train", "adopted") == [
        (now, "adopted", None, f"pid {pid} (its start not recorded)")]
    agent.run(5.0)  # its backoff ends: nothing else starts
    agent.restart_agent()
    agent.run(1.0)
    assert agent.record("train").pid == pid
    assert live(agent, "train") == [pid]


def test_a_copy_of_a_running_workload_gets_a_sigterm_and_its_grace(tmp_path: Path) -> None:
    agent = make_agent(tmp_path)
    agent.submit(OFFLINE)
    agent.run(1.0)
    pid = pid_of(agent, "train")
    env = {"COTENANT_LAUNCH": "stray", "COTENANT_WORKLOAD": "train"}
    stray = agent.node.spawn(["fake-workload", "--term-delay-s", "2"], env, 0)
    agent.restart_agent()
    now = agent.clock()
    agent.sup.tick(now)
    assert log(agent, "train", "duplicate stopped") == [
        (now, "duplicate stopped", None, f"pid {stray} (running, pid {pid})")]
    assert agent.sup.orphans == {stray: "copy of 'train' stopped"}
    agent.run(3.0)  # it checkpoints 2 s and exits by the SIGTERM, inside the grace
    assert agent.node.poll(stray).returncode == -signal.SIGTERM
    assert live(agent, "train") == [pid]


def test_a_process_of_an_unknown_workload_with_an_unreadable_spec_is_an_orphan(
        tmp_path: Path) -> None:
    agent = make_agent(tmp_path)
    env = {"COTENANT_LAUNCH": "x1", "COTENANT_WORKLOAD": "ghost",
           "COTENANT_SPEC": json.dumps({"name": "ghost"})}
    pid = agent.node.spawn(["fake-workload"], env, 0)
    agent.restart_agent()
    now = agent.clock()
    agent.sup.tick(now)
    why = "workload 'ghost' unknown, spec unreadable"
    assert agent.sup.orphans == {pid: why}
    assert log(agent, "node", "orphan") == [(now, "orphan", None, f"pid {pid}: {why}")]
    assert agent.store.get("ghost") is None
    assert agent.node.poll(pid).state is ProcState.RUNNING  # left alone, reported


def test_a_copy_is_given_its_whole_grace(tmp_path: Path) -> None:
    """A copy whose checkpoint takes 10.2 s, a little over the 10 s grace: the SIGKILL is
    due only after the grace, and it exits by the SIGTERM first."""
    agent = make_agent(tmp_path)
    agent.submit(OFFLINE)
    agent.run(1.0)
    env = {"COTENANT_LAUNCH": "stray", "COTENANT_WORKLOAD": "train"}
    stray = agent.node.spawn(["fake-workload", "--term-delay-s", "10.2"], env, 0)
    agent.restart_agent()
    agent.run(11.0)
    assert agent.node.poll(stray).returncode == -signal.SIGTERM


def test_a_live_copy_of_a_stopped_workload_is_stopped_and_the_workload_stays_stopped(
        tmp_path: Path) -> None:
    """A workload the user stopped, and a process of it still alive when the agent
    starts (a copy its launch id does not match): the copy is stopped, never adopted, so
    a stopped workload does not come back to life by an agent restart."""
    agent = make_agent(tmp_path)
    agent.submit(OFFLINE)
    agent.run(1.0)
    agent.sup.stop("train", agent.clock())
    agent.run(1.0)
    assert agent.status("train") is Status.STOPPED
    env = {"COTENANT_LAUNCH": "stray", "COTENANT_WORKLOAD": "train"}
    stray = agent.node.spawn(["fake-workload"], env, 0)
    agent.restart_agent()
    now = agent.clock()
    agent.sup.tick(now)
    assert agent.sup.orphans == {stray: "copy of 'train' stopped"}
    assert log(agent, "train", "duplicate stopped") == [
        (now, "duplicate stopped", None, f"pid {stray} (stopped, pid None)")]
    agent.run(1.0)
    assert agent.status("train") is Status.STOPPED
    assert agent.node.poll(stray).returncode == -signal.SIGTERM
