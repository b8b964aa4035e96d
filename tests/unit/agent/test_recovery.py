"""The supervisor answers exits with the co-location core's recovery rules (``Recovery``):
only a workload's own faults count against its budget, a stable run clears the count, an
online service is never given up, an XID quarantines the GPU for offline work."""

from __future__ import annotations

import signal
import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest

from cotenant.agent.faults import FaultClass, recovery_fault
from cotenant.agent.state import StateStore, Status
from cotenant.policies.colocation.recovery import Fault

from .harness import OFFLINE, ONLINE, Agent, make_agent

CRASHING_ONLINE = {**ONLINE, "argv": ["fake-workload", "--exit-code", "3", "--duration-s", "1"]}


def restarts_in(agent: Agent, name: str) -> list[str]:
    return [e.detail for e in agent.store.events(name) if e.kind == "restart"]


def test_an_mps_daemon_death_does_not_count_against_an_online_budget(tmp_path: Path) -> None:
    agent = make_agent(tmp_path)
    agent.sup.recovery = replace(agent.sup.recovery, max_restarts=1)
    agent.submit(ONLINE)
    agent.run(1.0)
    for _ in range(3):  # three daemon deaths: none is the service's fault
        agent.node.kill_daemon(0)
        agent.run(1.0)
    web = agent.record("web")
    assert web.status is Status.RUNNING
    assert (web.restarts, web.failures) == (3, 0)
    assert restarts_in(agent, "web") == ["in 0 s"] * 3  # at once, no backoff


def test_an_online_service_is_never_given_up(tmp_path: Path) -> None:
    """Past ``max_restarts`` an offline job would be given up; an online service is restarted
    at the capped backoff (the first crash at once, then 1, 2, 4 ... s, at most 30 s)."""
    agent = make_agent(tmp_path)
    agent.sup.recovery = replace(agent.sup.recovery, max_restarts=2, stable_s=3600.0)
    agent.submit(CRASHING_ONLINE)
    agent.run(300.0)
    web = agent.record("web")
    assert web.status is not Status.FAILED
    assert "gave up" not in agent.kinds("web")
    assert web.failures > 2
    delays = restarts_in(agent, "web")
    assert delays[:4] == ["in 0 s", "in 1 s", "in 2 s", "in 4 s"]
    assert delays[-1] == "in 30 s"  # the cap


def test_a_stable_run_clears_the_budget(tmp_path: Path) -> None:
    """Two crashes in a row count 1, 2; after a run of ``stable_s`` the next crash counts 1
    again and waits the first backoff, not the third."""
    agent = make_agent(tmp_path)
    agent.sup.recovery = replace(agent.sup.recovery, max_restarts=3, stable_s=20.0)
    agent.submit({**OFFLINE, "argv": ["fake-workload", "--crash-at-s", "2"]})
    agent.run(2.5)
    agent.run(3.5)  # backoff 1 s, runs 2 s, crashes again
    assert agent.record("train").failures == 2
    assert restarts_in(agent, "train") == ["in 1 s", "in 2 s"]
    agent.sup.recovery = replace(agent.sup.recovery, stable_s=1.5)  # 2 s runs are stable now
    agent.run(5.0)
    train = agent.record("train")
    assert train.failures == 1
    assert restarts_in(agent, "train")[-1] == "in 1 s"
    assert train.restarts == 3  # every restart is still shown


def test_an_offline_budget_without_stable_runs_is_given_up(tmp_path: Path) -> None:
    agent = make_agent(tmp_path)
    agent.sup.recovery = replace(agent.sup.recovery, max_restarts=2)
    agent.submit({**OFFLINE, "argv": ["fake-workload", "--crash-at-s", "1"]})
    agent.run(20.0)
    train = agent.record("train")
    assert train.status is Status.FAILED
    assert (train.restarts, train.failures) == (2, 3)
    [gave_up] = [e.detail for e in agent.store.events("train") if e.kind == "gave up"]
    assert gave_up == "3 faults of its own, 2 restarts"


def test_an_xid_quarantines_the_gpu_for_offline_work(tmp_path: Path) -> None:
    agent = make_agent(tmp_path)
    agent.sup.recovery = replace(agent.sup.recovery, quarantine_s=60.0)
    agent.submit(ONLINE)
    agent.submit(OFFLINE)
    agent.run(1.0)
    pid = agent.record("train").pid
    agent.node.inject_xid(0, 43, pid)
    agent.run(1.0)
    agent.submit({**OFFLINE, "name": "other"})  # the quarantine covers new offline work too
    agent.submit({**OFFLINE, "name": "elsewhere", "gpu": 1})
    agent.run(50.0)
    assert agent.status("train") is Status.BACKOFF
    assert agent.status("other") is Status.PENDING
    assert agent.status("elsewhere") is Status.RUNNING
    assert agent.status("web") is Status.RUNNING  # online work is not held
    assert "gpu quarantined" in agent.kinds("node")
    agent.run(15.0)
    assert agent.status("train") is Status.RUNNING
    assert agent.status("other") is Status.RUNNING


def test_without_graceful_signals_a_sigterm_is_a_crash(tmp_path: Path) -> None:
    """The policy's rule: MuxFlow's (graceful) stops an offline job on SIGTERM; a policy
    without it restarts the job after its backoff and counts it."""
    agent = make_agent(tmp_path)
    agent.sup.recovery = replace(agent.sup.recovery, graceful_signals=False)
    agent.submit(OFFLINE)
    agent.run(1.0)
    pid = agent.record("train").pid
    assert pid is not None
    agent.node.send_signal(pid, signal.SIGTERM)
    agent.run(0.5)
    train = agent.record("train")
    assert train.status is Status.BACKOFF
    assert train.failures == 1


@pytest.mark.parametrize(
    ("fault", "signum", "expected"),
    [
        (FaultClass.NONE, 0, Fault.NONE),
        (FaultClass.SIGNAL, signal.SIGTERM, Fault.SIGNAL),
        (FaultClass.SIGNAL, signal.SIGINT, Fault.SIGNAL),
        (FaultClass.SIGNAL, signal.SIGSEGV, Fault.CRASH),
        (FaultClass.SIGNAL, signal.SIGKILL, Fault.CRASH),
        (FaultClass.OOM, 0, Fault.CRASH),
        (FaultClass.CUDA, 0, Fault.CRASH),
        (FaultClass.CRASH, 0, Fault.CRASH),
        (FaultClass.MPS, 0, Fault.NOT_ITS_OWN),
        (FaultClass.LOST, 0, Fault.NOT_ITS_OWN),
        (FaultClass.XID, 0, Fault.XID),
    ],
)
def test_each_exit_class_as_recovery_sees_it(fault: FaultClass, signum: int,
                                             expected: Fault) -> None:
    assert recovery_fault(fault, signum) is expected


def test_a_state_from_before_the_budget_count_opens_with_none_counted(tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    StateStore(db).close()
    with sqlite3.connect(db) as conn:  # as an older agent left it: no failures column
        conn.execute("ALTER TABLE workloads DROP COLUMN launch")
        conn.execute("ALTER TABLE workloads DROP COLUMN failures")
        conn.execute("INSERT INTO workloads VALUES (?,?,?,?,?,?,?,?,?,?)",
                     ("web", '{"name": "web", "argv": ["x"], "role": "online", "gpu": 0}',
                      "running", 7, 4, 0.0, None, None, 1.0, ""))
    store = StateStore(db)
    record = store.get("web")
    assert record is not None
    assert (record.restarts, record.failures) == (4, 0)
    store.update(record, failures=2)
    again = store.get("web")
    assert again is not None
    assert again.failures == 2
    store.close()
