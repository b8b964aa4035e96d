"""Crash consistency on the fake node: no workload run twice, lost, or given up for faults
not its own, whatever the agent meets between two steps (an injected crash at a fault
point, a storage fault, a lost or unreadable database, a clock step)."""

from __future__ import annotations

import json
import signal
import sqlite3
from pathlib import Path

import pytest

from cotenant.agent.backends import FakeNode, ManualClock
from cotenant.agent.faultpoints import AgentCrash
from cotenant.agent.mps import MpsManager
from cotenant.agent.state import StateStore, Status, StorageError
from cotenant.agent.supervisor import Supervisor
from cotenant.errors import InputError

from .harness import OFFLINE, ONLINE, RECOVERY, Agent, make_agent

DISK_FULL = sqlite3.OperationalError("database or disk is full")


def live(agent: Agent, name: str) -> list[int]:
    """The fake node's live processes started for workload ``name`` (by their environment)."""
    return [f.pid for f in agent.node.launched() if f.workload == name]


def crash_at(agent: Agent, point: str, action: object) -> None:
    """Arm ``point``, run ``action`` (a callable) until the agent dies there."""
    agent.store.points.arm(point)
    with pytest.raises(AgentCrash):
        action()  # type: ignore[operator]


# --- 1. an online service is never given up for faults not its own ---------------------------

def test_twenty_mps_deaths_and_agent_restarts_leave_an_online_budget_whole(
        tmp_path: Path) -> None:
    """20 MPS-daemon deaths and 3 agent restarts count nothing: the service's own first crash
    after them restarts it at once (no backoff), and it is never failed."""
    agent = make_agent(tmp_path)
    agent.submit(ONLINE)
    agent.run(1.0)
    for i in range(20):
        agent.node.kill_daemon(0)
        agent.run(1.0)
        if i % 7 == 6:
            agent.restart_agent()
            agent.run(1.0)
        assert agent.status("web") is Status.RUNNING
    web = agent.record("web")
    assert web.failures == 0
    assert web.restarts == 20
    agent.node.send_signal(web.pid or 0, signal.SIGKILL)  # its own crash
    agent.run(0.5)
    web = agent.record("web")
    assert web.status is Status.RUNNING
    assert web.failures == 1
    assert [e.detail for e in agent.store.events("web") if e.kind == "restart"][-1] == "in 0 s"


# --- 2. a storage fault degrades, never kills ---------------------------------------------------

def test_a_full_disk_keeps_online_services_running_and_answers_submits_503(
        tmp_path: Path) -> None:
    agent = make_agent(tmp_path)
    agent.submit(ONLINE)
    agent.run(1.0)
    first = agent.record("web").pid
    agent.store.points.arm("store.write", lambda: DISK_FULL, times=-1)  # every write fails
    agent.node.kill_daemon(0)
    agent.run(2.0)  # no exception: the tick goes on from memory
    web = agent.record("web")
    assert web.status is Status.RUNNING
    assert web.pid not in (None, first)
    assert live(agent, "web") == [web.pid]
    assert agent.store.degraded
    assert agent.store.errors > 0
    with pytest.raises(StorageError) as caught:  # not answered as done: nothing was done
        agent.submit(OFFLINE)
    assert caught.value.delay_s > 0
    assert agent.store.get("train") is None
    agent.store.points.disarm("store.write")
    agent.run(2.0)  # the retry writes what memory held
    assert not agent.store.degraded
    agent.restart_agent()
    assert agent.record("web").pid == web.pid  # on disk now


def test_a_locked_database_is_waited_out_from_memory(tmp_path: Path) -> None:
    agent = make_agent(tmp_path)
    agent.store.busy_timeout_s = 0.05
    agent.store._db.execute("PRAGMA busy_timeout = 50")
    agent.submit(ONLINE)
    agent.run(1.0)
    holder = sqlite3.connect(agent.db, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")  # another process holds the write lock
    try:
        agent.node.kill_daemon(0)
        agent.run(2.0)
        assert agent.status("web") is Status.RUNNING
        assert len(live(agent, "web")) == 1
        assert "locked" in agent.store.degraded
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    agent.run(2.0)
    assert not agent.store.degraded
    pid = agent.record("web").pid
    agent.restart_agent()
    agent.run(1.0)
    assert agent.record("web").pid == pid
    assert live(agent, "web") == [pid]


def test_a_database_deleted_under_the_agent_is_written_anew(tmp_path: Path) -> None:
    agent = make_agent(tmp_path)
    agent.submit(ONLINE)
    agent.run(1.0)
    for suffix in ("", "-wal", "-shm"):
        Path(f"{agent.db}{suffix}").unlink(missing_ok=True)
    agent.run(1.0)
    pid = agent.record("web").pid
    agent.restart_agent()
    agent.run(1.0)
    assert agent.record("web").pid == pid
    assert live(agent, "web") == [pid]


# --- 3. never two copies -----------------------------------------------------------------------

def test_a_crash_between_spawn_and_record_adopts_the_process(tmp_path: Path) -> None:
    agent = make_agent(tmp_path)
    agent.submit(OFFLINE)
    crash_at(agent, "start.spawned", lambda: agent.run(0.5))
    assert len(live(agent, "train")) == 1
    agent.restart_agent()
    agent.run(2.0)
    assert live(agent, "train") == [agent.record("train").pid]
    assert agent.status("train") is Status.RUNNING


def test_a_deleted_database_adopts_the_running_processes(tmp_path: Path) -> None:
    agent = make_agent(tmp_path)
    agent.submit(ONLINE)
    agent.submit(OFFLINE)
    agent.run(1.0)
    pids = {n: agent.record(n).pid for n in ("web", "train")}
    agent.store.close()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{agent.db}{suffix}").unlink(missing_ok=True)
    agent.store = StateStore(":memory:")  # restart_agent closes this one, not the lost one
    agent.restart_agent()
    assert agent.store.all() == []  # the new agent has nothing but the live processes
    agent.run(1.0)
    assert {n: agent.record(n).pid for n in ("web", "train")} == pids
    assert agent.record("train").spec.sm_share == OFFLINE["sm_share"]
    with pytest.raises(InputError, match="already exists"):  # a resubmit starts no copy
        agent.submit(OFFLINE)
    assert all(live(agent, n) == [pids[n]] for n in pids)


# --- 4. (real processes: test_laptop.py) ---------------------------------------------------------

# --- 5. a bad row is quarantined, not fatal ------------------------------------------------------

def test_an_unreadable_row_is_quarantined_and_the_rest_supervised(tmp_path: Path) -> None:
    agent = make_agent(tmp_path)
    agent.submit(ONLINE)
    agent.run(1.0)
    agent.store.close()
    with sqlite3.connect(agent.db) as conn:  # a spec a later version's rules refuse
        conn.execute("INSERT INTO workloads (name, spec, status) VALUES (?, ?, ?)",
                     ("odd", json.dumps({"name": "odd", "argv": "sh -c id", "role": "offline",
                                         "gpu": 0}), "running"))
    agent.restart_agent()  # no exit 2: the agent starts
    agent.run(1.0)
    assert "odd" in agent.store.quarantined
    assert "argv" in agent.store.quarantined["odd"]
    assert agent.status("web") is Status.RUNNING
    assert agent.store.get("odd") is None
    StateStore(agent.db).close()  # and stays set aside, visible, on the next start
    assert "odd" in StateStore(agent.db).quarantined


def quarantine_row(agent: Agent, name: str, status: str = "running") -> None:
    """Write an unreadable row ``name`` (a spec a later version refuses) and restart."""
    agent.store.close()
    with sqlite3.connect(agent.db) as conn:
        conn.execute("INSERT OR REPLACE INTO workloads (name, spec, status) VALUES (?, ?, ?)",
                     (name, json.dumps({"name": name, "argv": "sh -c id", "role": "offline",
                                        "gpu": 0}), status))
    agent.restart_agent()
    agent.run(1.0)


def test_a_quarantine_entry_is_cleared_when_its_name_is_submitted_again(
        tmp_path: Path) -> None:
    agent = make_agent(tmp_path)
    quarantine_row(agent, "odd", "completed")
    assert "odd" in agent.store.quarantined
    agent.submit({**OFFLINE, "name": "odd"})
    assert "odd" not in agent.store.quarantined
    agent.run(1.0)
    assert agent.status("odd") is Status.RUNNING
    agent.restart_agent()
    assert "odd" not in agent.store.quarantined


def test_a_quarantine_entry_is_cleared_when_its_process_is_adopted(tmp_path: Path) -> None:
    agent = make_agent(tmp_path)
    agent.submit(OFFLINE)
    agent.run(1.0)
    pid = agent.record("train").pid
    quarantine_row(agent, "train")  # its row unreadable; its process runs on
    assert agent.record("train").pid == pid  # adopted from the spec in its environment
    assert "train" not in agent.store.quarantined
    agent.restart_agent()
    assert "train" not in agent.store.quarantined


def test_a_stop_of_a_quarantined_name_clears_its_entry(tmp_path: Path) -> None:
    agent = make_agent(tmp_path)
    quarantine_row(agent, "odd", "completed")
    with pytest.raises(InputError, match="quarantined"):
        agent.sup.stop("odd", agent.clock())
    assert "odd" not in agent.store.quarantined
    agent.restart_agent()
    assert "odd" not in agent.store.quarantined
    with pytest.raises(InputError, match="does not exist"):
        agent.sup.stop("odd", agent.clock())


# --- 6. the intent before the act; an exit recorded once ---------------------------------------

def test_a_crash_after_stopping_is_written_still_stops(tmp_path: Path) -> None:
    agent = make_agent(tmp_path)
    agent.submit(OFFLINE)
    agent.run(1.0)
    crash_at(agent, "stop.intent", lambda: agent.sup.stop("train", agent.clock()))
    agent.restart_agent()
    agent.run(2.0)
    assert agent.status("train") is Status.STOPPED
    assert live(agent, "train") == []
    assert "restart" not in agent.kinds("train")


@pytest.mark.parametrize("point", ["exit.seen", "exit.recorded"])
def test_a_crash_around_an_exit_counts_it_once(tmp_path: Path, point: str) -> None:
    agent = make_agent(tmp_path)
    agent.submit(OFFLINE)
    agent.run(1.0)
    agent.node.send_signal(agent.record("train").pid or 0, signal.SIGKILL)
    crash_at(agent, point, lambda: agent.run(0.5))
    agent.restart_agent()
    agent.run(3.0)
    assert agent.store.fault_counts() == {("train", "signal"): 1}
    assert agent.record("train").failures == 1
    assert len(live(agent, "train")) == 1


# --- 7. monotonic timeouts ---------------------------------------------------------------------

def test_a_backward_clock_step_does_not_delay_the_sigkill(tmp_path: Path) -> None:
    wall, mono = ManualClock(1000.0), ManualClock(0.0)
    node = FakeNode.build("A100-40GB", 1, wall)
    store = StateStore(tmp_path / "agent.db")
    sup = Supervisor(node, store, MpsManager(node, tmp_path), recovery=RECOVERY,
                     stop_grace_s=10.0, monotonic=mono)
    sup.submit(replace_argv(OFFLINE, "--term-delay-s", "inf"), wall())
    sup.tick(wall())
    sup.stop("train", wall())
    wall.now -= 3600.0  # the wall clock steps back an hour
    for _ in range(12):  # the SIGKILL 10 s on, its exit seen at the next tick
        mono.advance(1.0)
        wall.advance(1.0)
        sup.tick(wall())
    record = store.get("train")
    assert record is not None
    assert record.status is Status.STOPPED
    assert "SIGKILL" in record.last_exit


def crash_own(agent: Agent, name: str) -> None:
    agent.node.send_signal(agent.record(name).pid or 0, signal.SIGKILL)


def test_a_forward_clock_step_ends_no_backoff_early(tmp_path: Path) -> None:
    agent = make_agent(tmp_path)
    agent.submit(OFFLINE)
    agent.run(1.0)
    for _ in range(3):  # three crashes of its own: a backoff of 4 s
        crash_own(agent, "train")
        agent.run(0.5)
        assert agent.run_until_running("train", 30.0)
    crash_own(agent, "train")
    agent.run(0.5)
    assert agent.status("train") is Status.BACKOFF
    agent.clock.step(3600.0)  # NTP steps the wall clock an hour forward
    agent.run(1.0)
    assert agent.status("train") is Status.BACKOFF  # the wait is not over ...
    agent.run(10.0)
    assert agent.status("train") is Status.RUNNING  # ... until its seconds have passed


def test_a_forward_clock_step_ends_no_quarantine_or_pause_early(tmp_path: Path) -> None:
    agent = make_agent(tmp_path)
    agent.submit(OFFLINE)
    agent.submit({**OFFLINE, "name": "other", "gpu": 1})
    agent.run(1.0)
    now = agent.clock()
    agent.sup.hold_offline(0, now + 60.0, now)  # an XID's quarantine, or the guard's hold
    agent.sup.stop("train", now)
    assert agent.sup.pause("other", now, now + 30.0)
    agent.run(2.0)
    agent.submit(OFFLINE)  # submitted again
    agent.clock.step(3600.0)
    agent.run(5.0)
    assert agent.status("train") is Status.PENDING  # held 60 s on the monotonic clock
    assert agent.sup.paused() == {"other"}  # paused 30 s on the monotonic clock
    agent.run(30.0)
    assert agent.sup.paused() == set()
    assert agent.status("train") is Status.PENDING
    agent.run(30.0)
    assert agent.status("train") is Status.RUNNING


def test_a_forward_clock_step_does_not_make_a_short_run_stable(tmp_path: Path) -> None:
    """The restart budget recovers after ``stable_s`` (600 s) of running, on the monotonic
    clock: an hour's wall step in a 2 s run clears nothing."""
    agent = make_agent(tmp_path)
    agent.submit(OFFLINE)
    agent.run(1.0)
    crash_own(agent, "train")
    agent.run(0.5)
    assert agent.run_until_running("train", 30.0)
    assert agent.record("train").failures == 1
    agent.clock.step(3600.0)
    agent.run(1.0)
    crash_own(agent, "train")
    agent.run(0.5)
    assert agent.record("train").failures == 2


def replace_argv(spec: dict[str, object], *extra: str) -> object:
    from cotenant.agent.spec import WorkloadSpec  # noqa: PLC0415 - local helper

    argv = [*spec["argv"], *extra]  # type: ignore[misc]
    return WorkloadSpec.from_dict({**spec, "argv": argv})


def test_the_fault_points_are_all_passed(tmp_path: Path) -> None:
    """The chaos suite's points exist where it expects them (a renamed one would make its
    crash tests vacuous)."""
    agent = make_agent(tmp_path)
    agent.submit(ONLINE)
    agent.submit(OFFLINE)
    agent.run(1.0)
    agent.sup.restart_for_share("train", 30, agent.clock())
    agent.run(1.0)
    agent.node.send_signal(agent.record("web").pid or 0, signal.SIGKILL)
    agent.run(1.0)
    agent.sup.stop("train", agent.clock())
    agent.run(1.0)
    from cotenant.agent.faultpoints import POINTS  # noqa: PLC0415

    passed = set(agent.store.points.passed)
    assert {p for points in POINTS.values() for p in points} <= passed


def test_recovery_leaves_a_copy_stopped_never_two(tmp_path: Path) -> None:
    """A process of a workload that already runs another (an intent lost with the disk) is
    stopped at recovery."""
    agent = make_agent(tmp_path)
    agent.submit(OFFLINE)
    agent.run(1.0)
    record = agent.record("train")
    env = {"COTENANT_LAUNCH": "stray", "COTENANT_WORKLOAD": "train"}
    stray = agent.node.spawn(["fake-workload", "--term-delay-s", "inf"], env, 0)
    agent.restart_agent()
    agent.run(11.0)  # it ignores the SIGTERM: killed after the grace
    assert agent.node.poll(stray).state.value == "exited"
    assert live(agent, "train") == [record.pid]


def test_a_store_that_cannot_open_says_so_in_one_line(tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    StateStore(db).close()
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("PRAGMA journal_mode=DELETE")
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises((StorageError, InputError)):
            StateStore(db, busy_timeout_s=0.05)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
