"""The supervisor's requests by value: what a stop, a share change, an eviction, a pause and
an offline hold do to the record, the process and the event log (the operator's record of
each step, with its time), including the requests it must refuse or leave alone."""

from __future__ import annotations

import signal
import sqlite3
from pathlib import Path

import pytest

from cotenant.agent import supervisor
from cotenant.agent.backends import BackendFeature, FakeNode, ManualClock, ProcState
from cotenant.agent.downtime import START
from cotenant.agent.mig import MigManager
from cotenant.agent.mps import MpsManager
from cotenant.agent.spec import WorkloadSpec
from cotenant.agent.state import StateStore, Status, StorageError
from cotenant.agent.supervisor import Supervisor
from cotenant.errors import InputError

from .harness import OFFLINE, ONLINE, RECOVERY, Agent, WallClock, make_agent, make_supervisor

DISK_FULL = sqlite3.OperationalError("database or disk is full")
STUBBORN = {**OFFLINE, "argv": ["fake-workload", "--mem-mib", "8000", "--term-delay-s", "inf"]}
"""An offline job that ignores SIGTERM: only the SIGKILL after the grace ends it."""


def log(agent: Agent, name: str, *kinds: str) -> list[tuple[float, str, str | None, str]]:
    """``name``'s events (of ``kinds``, where given) as (time, kind, fault, detail)."""
    return [(e.time, e.kind, e.fault, e.detail) for e in agent.store.events(name)
            if not kinds or e.kind in kinds]


def running(tmp_path: Path, *specs: dict[str, object]) -> Agent:
    agent = make_agent(tmp_path)
    for spec in specs:
        agent.submit(spec)
    agent.run(1.0)
    assert all(agent.status(str(s["name"])) is Status.RUNNING for s in specs)
    return agent


def pid_of(agent: Agent, name: str) -> int:
    pid = agent.record(name).pid
    assert pid is not None
    return pid


def disk_full(agent: Agent) -> None:
    agent.store.points.arm("store.write", lambda: DISK_FULL, times=-1)


# --- stop -------------------------------------------------------------------------------------

def test_a_stop_is_logged_at_its_time_and_the_record_says_since_when(tmp_path: Path) -> None:
    agent = running(tmp_path, OFFLINE)
    now = agent.clock()
    record = agent.sup.stop("train", now)
    assert (record.status, record.since) == (Status.STOPPING, now)
    assert log(agent, "train", "stop requested") == [(now, "stop requested", None, "")]
    agent.run(1.0)
    assert agent.status("train") is Status.STOPPED


def test_a_waiting_workload_is_stopped_at_once_and_never_started(tmp_path: Path) -> None:
    agent = make_agent(tmp_path)
    agent.submit(OFFLINE)  # pending: not ticked yet
    now = agent.clock()
    record = agent.sup.stop("train", now)
    assert (record.status, record.pid, record.since) == (Status.STOPPED, None, now)
    agent.run(2.0)
    assert agent.status("train") is Status.STOPPED
    assert agent.node.launched() == []


def test_a_stop_whose_intent_cannot_be_written_sends_nothing(tmp_path: Path) -> None:
    """The intent reaches the disk before the SIGTERM, or the stop is refused (the API's
    503) and nothing is done: a crash cannot leave a stopped job the state thinks runs."""
    agent = running(tmp_path, OFFLINE)
    pid = pid_of(agent, "train")
    disk_full(agent)
    with pytest.raises(StorageError):
        agent.sup.stop("train", agent.clock())
    assert agent.status("train") is Status.RUNNING
    assert agent.node.poll(pid).state is ProcState.RUNNING
    agent.store.points.disarm("store.write")
    agent.run(1.0)
    assert agent.record("train").pid == pid


@pytest.mark.parametrize("why", ["stop", "share"])
def test_stopping_a_paused_workload_resumes_it_at_the_stop(tmp_path: Path, why: str) -> None:
    """A paused process cannot act on a SIGTERM: a stop (or a share change's restart)
    resumes it, and says so."""
    agent = running(tmp_path, OFFLINE)
    start = agent.clock()
    assert agent.sup.pause("train", start, start + 60.0)
    agent.run(2.0)
    now = agent.clock()
    if why == "stop":
        agent.sup.stop("train", now)
    else:
        agent.sup.restart_for_share("train", 30, now)
    assert agent.sup.paused() == set()
    assert log(agent, "train", "paused", "resumed") == [
        (start, "paused", None, "for 60 s"), (now, "resumed", None, "to stop")]
    agent.run(1.0)
    assert agent.status("train") is (Status.STOPPED if why == "stop" else Status.RUNNING)


def test_a_share_change_cut_short_by_a_stop_is_no_downtime_sample(tmp_path: Path) -> None:
    """The supervisor tells the downtime meter that a job stopped during a share change is
    down for good: submitted again, its next start is measured as a start."""
    agent = running(tmp_path, OFFLINE)
    agent.sup.restart_for_share("train", 30, agent.clock())
    agent.sup.stop("train", agent.clock())
    agent.run(1.0)
    assert agent.status("train") is Status.STOPPED
    agent.submit(OFFLINE)
    agent.run(1.0)
    done, _ = agent.sup.downtime.observe(agent.node.gpus(), {"train"}, (), agent.clock())
    assert [d.kind for d in done] == [START]


def test_stopping_an_unknown_name_says_it_does_not_exist(tmp_path: Path) -> None:
    agent = make_agent(tmp_path)
    with pytest.raises(InputError) as caught:
        agent.sup.stop("nope", agent.clock())
    assert caught.value.one_line() == "workload 'nope': does not exist"


def test_stopping_a_quarantined_name_says_so_and_logs_its_removal(tmp_path: Path) -> None:
    agent = make_agent(tmp_path)
    agent.store.close()
    with sqlite3.connect(agent.db) as conn:  # a row this version cannot read
        conn.execute("INSERT INTO workloads (name, spec, status) VALUES (?, ?, ?)",
                     ("odd", '{"name": "odd", "argv": "sh -c id"}', "completed"))
    agent.restart_agent()
    agent.run(0.5)
    assert "odd" in agent.store.quarantined
    now = agent.clock()
    with pytest.raises(InputError) as caught:
        agent.sup.stop("odd", now)
    assert caught.value.one_line() == ("workload 'odd': was set aside as unreadable "
                                       "(quarantined); its row is removed now")
    assert log(agent, "odd", "quarantine cleared") == [
        (now, "quarantine cleared", None, "stop requested")]


def test_stopping_a_job_stops_every_rank_and_answers_with_the_first(tmp_path: Path) -> None:
    clock = ManualClock(1000.0)
    node = FakeNode.build("A100-40GB", 1, clock=clock, mig=True)
    MigManager(node).apply(0, "3g.20gb,2g.10gb,1g.5gb,1g.5gb")
    store = StateStore(tmp_path / "agent.db")
    sup = Supervisor(node, store, MpsManager(node, tmp_path), recovery=RECOVERY,
                     monotonic=clock)
    first = sup.submit(WorkloadSpec.from_dict({
        "name": "job", "argv": ["fake-workload"], "role": "offline", "gpu": 0,
        "mig_instances": ["3g.20gb@4", "2g.10gb@0"]}), clock())
    assert first.spec.name == "job.r0"
    clock.advance(1.0)
    sup.tick(clock())
    record = sup.stop("job", clock())
    assert (record.spec.name, record.status) == ("job.r0", Status.STOPPING)
    assert {r.spec.name: r.status for r in store.all()} == {
        "job.r0": Status.STOPPING, "job.r1": Status.STOPPING}


# --- share changes and evictions ----------------------------------------------------------------

def test_a_share_change_is_logged_with_the_old_and_new_share(tmp_path: Path) -> None:
    agent = running(tmp_path, ONLINE, OFFLINE)
    first = pid_of(agent, "train")
    now = agent.clock()
    agent.sup.restart_for_share("train", 30, now)
    assert log(agent, "train", "share change") == [(now, "share change", None, "50->30")]
    record = agent.record("train")
    assert (record.status, record.since, record.share_pct) == (Status.RESTARTING, now, 30)
    agent.run(1.0)
    assert agent.record("train").applied_pct == 30
    assert log(agent, "train", "started") == [
        (1000.0, "started", None, f"pid {first} share 50"),
        (now, "started", None, f"pid {pid_of(agent, 'train')} share 30")]


def test_an_online_service_is_never_restarted_for_a_share(tmp_path: Path) -> None:
    agent = running(tmp_path, ONLINE)
    before = agent.record("web")
    agent.sup.restart_for_share("web", 30, agent.clock())
    agent.sup.evict("web", agent.clock())
    agent.run(1.0)
    assert agent.record("web") == before
    assert agent.kinds("web") == ["submitted", "started"]


def test_a_share_change_of_a_waiting_workload_only_records_the_share(tmp_path: Path) -> None:
    agent = make_agent(tmp_path)
    agent.submit(OFFLINE)
    agent.sup.restart_for_share("train", 30, agent.clock())
    agent.sup.evict("train", agent.clock())  # nothing runs: nothing to evict
    assert agent.status("train") is Status.PENDING
    assert agent.record("train").share_pct == 30
    agent.run(0.5)
    assert agent.record("train").applied_pct == 30
    assert "share change" not in agent.kinds("train")


def test_a_share_change_kills_a_client_that_ignores_sigterm_after_the_grace(
        tmp_path: Path) -> None:
    agent = running(tmp_path, STUBBORN)
    first = pid_of(agent, "train")
    agent.sup.restart_for_share("train", 30, agent.clock())
    agent.run(9.0)
    assert agent.node.poll(first).state is ProcState.RUNNING  # within the 10 s grace
    agent.run(2.0)
    assert agent.node.poll(first).returncode == -signal.SIGKILL
    assert agent.status("train") is Status.RUNNING
    assert agent.record("train").applied_pct == 30


@pytest.mark.parametrize("why", ["share", "evict"])
def test_a_restart_whose_intent_cannot_be_written_is_deferred(tmp_path: Path,
                                                              why: str) -> None:
    """No SIGTERM without the ``restarting`` intent on disk (after a crash it would read as
    a stop from outside); the deferral is logged, and the process runs on."""
    agent = running(tmp_path, OFFLINE)
    pid = pid_of(agent, "train")
    now = agent.clock()
    disk_full(agent)
    if why == "share":
        agent.sup.restart_for_share("train", 30, now)
    else:
        agent.sup.evict("train", now)
    record = agent.record("train")
    assert (record.status, record.pid) == (Status.RUNNING, pid)
    assert agent.node.poll(pid).state is ProcState.RUNNING
    deferred = log(agent, "train", f"{why} deferred")
    assert len(deferred) == 1
    assert deferred[0][:3] == (now, f"{why} deferred", None)
    assert "disk is full" in deferred[0][3]


def test_an_eviction_restarts_the_job_after_the_hold_without_counting_it(
        tmp_path: Path) -> None:
    agent = running(tmp_path, OFFLINE)
    first = pid_of(agent, "train")
    now = agent.clock()
    agent.sup.hold_offline(0, now + 5.0, now)
    agent.sup.evict("train", now)
    assert agent.status("train") is Status.RESTARTING
    agent.run(3.0)
    assert agent.status("train") is Status.PENDING
    agent.run(3.0)
    record = agent.record("train")
    assert record.status is Status.RUNNING
    assert record.pid != first
    assert (record.restarts, record.failures) == (0, 0)


# --- pauses and holds ---------------------------------------------------------------------------

def test_only_a_running_offline_workload_can_be_paused(tmp_path: Path) -> None:
    agent = running(tmp_path, ONLINE, STUBBORN)
    now = agent.clock()
    assert not agent.sup.pause("web", now, now + 10.0)
    assert not agent.sup.pause("nope", now, now + 10.0)
    agent.sup.stop("train", now)  # stopping: it has a process, but is not running
    assert not agent.sup.pause("train", now, now + 10.0)
    assert agent.sup.paused() == set()


def test_a_hold_lasts_its_seconds_and_reads_back_in_wall_time(tmp_path: Path) -> None:
    agent = make_agent(tmp_path)
    agent.clock.step(500.0)  # the wall clock runs 500 s ahead of the monotonic one
    agent.run(0.5)
    now = agent.clock()
    agent.sup.hold_offline(0, now + 60.0, now)
    assert agent.sup.held_until(0) == now + 60.0
    assert agent.sup.held_until(1) == -float("inf")
    agent.sup.hold_offline(0, now + 10.0, now)  # a shorter hold keeps the longer one
    assert agent.sup.held_until(0) == now + 60.0
    agent.submit(OFFLINE)
    agent.submit({**OFFLINE, "name": "other", "gpu": 1})
    agent.run(59.0)
    assert agent.status("train") is Status.PENDING
    assert agent.status("other") is Status.RUNNING
    agent.run(1.0)  # no start *before* the hold's end: at it, one may
    assert agent.status("train") is Status.RUNNING
    assert agent.record("train").since == now + 60.0


def test_a_hold_without_a_time_is_measured_from_the_last_tick(tmp_path: Path) -> None:
    agent = make_agent(tmp_path)
    agent.clock.step(500.0)
    agent.run(0.5)
    now = agent.clock()
    agent.sup.hold_offline(0, now + 30.0)
    assert agent.sup.held_until(0) == now + 30.0


def test_a_hold_given_before_the_first_tick_lasts_its_seconds(tmp_path: Path) -> None:
    """The guard decides before the supervisor's first tick: a hold without a time then is
    measured from now."""
    agent = make_agent(tmp_path)
    now = agent.clock()
    agent.sup.hold_offline(0, now + 30.0)
    agent.submit(OFFLINE)
    agent.run(29.5)
    assert agent.status("train") is Status.PENDING
    agent.run(0.5)
    assert agent.status("train") is Status.RUNNING


def test_a_hold_is_measured_from_the_time_it_is_given_after_a_wall_step(
        tmp_path: Path) -> None:
    """The wall clock steps forward after the last tick: a hold of 20 s from the new wall
    time lasts 20 s, not 20 s plus the step."""
    agent = make_agent(tmp_path)
    agent.submit(OFFLINE)
    agent.run(0.5)
    agent.sup.stop("train", agent.clock())
    agent.run(1.0)
    now = agent.clock.step(100.0)
    agent.sup.hold_offline(0, now + 20.0, now)
    agent.submit({**OFFLINE, "name": "next"})
    agent.run(19.0)
    assert agent.status("next") is Status.PENDING
    agent.run(2.0)
    assert agent.status("next") is Status.RUNNING


# --- starts -------------------------------------------------------------------------------------

def test_a_program_that_cannot_start_fails_with_the_reason(tmp_path: Path) -> None:
    agent = make_agent(tmp_path)
    agent.submit({**OFFLINE, "argv": ["fake-workload", "--bogus"]})
    now = agent.clock.advance(2.0)
    agent.run(1.0)
    why = "fake-workload argv: flag '--bogus' has no value"
    record = agent.record("train")
    assert (record.status, record.pid, record.since, record.last_exit) == (
        Status.FAILED, None, now, why)
    assert log(agent, "train", "start failed") == [(now, "start failed", None, why)]
    assert agent.node.launched() == []
    assert agent.store.errors == 0  # every step reached the disk


def test_a_start_the_node_refuses_for_now_is_retried_after_its_delay(tmp_path: Path) -> None:
    """A MIG instance being remade: the start waits MIG_WAIT_S (10 s), then goes ahead."""
    clock = WallClock(1000.0)
    node = FakeNode.build("A100-40GB", 1, clock, mig=True)
    MigManager(node).apply(0, "3g.20gb,2g.10gb,1g.5gb,1g.5gb")
    store = StateStore(tmp_path / "agent.db", monotonic=clock.monotonic)
    agent = Agent(node, clock, store, make_supervisor(node, store, tmp_path),
                  tmp_path / "agent.db")
    agent.submit({"name": "train", "argv": ["fake-workload", "--util-pct", "60"],
                  "role": "offline", "gpu": 0, "mig_instance": "3g.20gb@4"})
    three = next(d for d in node.mig_devices(0) if str(d.placement) == "3g.20gb@4")
    node.destroy_instance(0, three.placement)
    now = clock()
    agent.sup.tick(now)
    record = agent.record("train")
    assert (record.status, record.pid, record.next_start) == (Status.PENDING, None, now + 10.0)
    [(when, _, _, why)] = log(agent, "train", "start deferred")
    assert when == now
    assert "3g.20gb@4" in why
    node.create_instance(0, "3g.20gb", 4)
    clock.step(3600.0)  # a wall step forward ends no wait early (monotonic clock)
    agent.run(9.0)
    assert agent.status("train") is Status.PENDING
    agent.run(1.0)
    assert agent.status("train") is Status.RUNNING
    assert log(agent, "train", "started") == [
        (now + 3610.0, "started", None, f"pid {pid_of(agent, 'train')} MIG 3g.20gb@4")]
    assert agent.store.errors == 0
    # the downtime meter measures MPS clients' starts only: a MIG job's is not one
    assert agent.sup.downtime.observe(node.gpus(), {"train"}, (), clock()) == ([], [])


def test_a_record_without_a_share_starts_with_its_specs(tmp_path: Path) -> None:
    """A state row with no share recorded (an older version's) starts the client with the
    spec's ``sm_share``."""
    agent = make_agent(tmp_path)
    agent.submit(OFFLINE)
    agent.store.update(agent.record("train"), share_pct=None)
    agent.run(0.5)
    env = agent.node.env_of(pid_of(agent, "train"))
    assert env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == str(OFFLINE["sm_share"])
    assert agent.record("train").applied_pct == OFFLINE["sm_share"]


def test_a_start_gets_the_extra_environment_asked_for_its_spec(tmp_path: Path) -> None:
    """``start_env`` (the priority runtime's hook) adds to each start's environment, per
    spec."""
    agent = make_agent(tmp_path)
    agent.sup.start_env = lambda spec: {"COTENANT_TEST_ROLE": f"{spec.name}:{spec.role.value}"}
    agent.submit(OFFLINE)
    agent.submit(ONLINE)
    agent.run(0.5)
    assert agent.node.env_of(pid_of(agent, "train"))["COTENANT_TEST_ROLE"] == "train:offline"
    assert agent.node.env_of(pid_of(agent, "web"))["COTENANT_TEST_ROLE"] == "web:online"


class NoMpsNode(FakeNode):
    """A node whose backend offers no MPS (plain processes on whole GPUs)."""

    def features(self) -> frozenset[BackendFeature]:
        return super().features() - {BackendFeature.MPS, BackendFeature.MPS_MEM_LIMIT}


def test_without_mps_a_start_sees_its_gpu_alone_by_nvml_index(tmp_path: Path) -> None:
    clock = WallClock(1000.0)
    node = NoMpsNode.build("A100-40GB", 2, clock)
    store = StateStore(tmp_path / "agent.db", monotonic=clock.monotonic)
    agent = Agent(node, clock, store, make_supervisor(node, store, tmp_path),
                  tmp_path / "agent.db")
    agent.submit({**OFFLINE, "gpu": 1})
    agent.run(0.5)
    env = node.env_of(pid_of(agent, "train"))
    assert (env["CUDA_DEVICE_ORDER"], env["CUDA_VISIBLE_DEVICES"]) == ("PCI_BUS_ID", "1")
    assert not [k for k in env if k.startswith("CUDA_MPS_")]


def test_a_pause_ends_at_its_time_and_says_so(tmp_path: Path) -> None:
    agent = running(tmp_path, OFFLINE)
    start = agent.clock()
    assert agent.sup.pause("train", start, start + 5.0)
    assert agent.sup.paused() == {"train"}
    agent.run(5.0)
    assert agent.sup.paused() == set()
    assert log(agent, "train", "resumed") == [(start + 5.0, "resumed", None, "pause over")]


def test_the_sigkill_never_cuts_a_stops_grace_short(tmp_path: Path) -> None:
    """A job whose checkpoint takes 10.2 s, a little over the 10 s grace, with ticks every
    0.5 s: the SIGKILL is due only after the grace, and it exits by the SIGTERM first."""
    agent = running(tmp_path, {**OFFLINE, "argv": ["fake-workload", "--term-delay-s", "10.2"]})
    agent.sup.stop("train", agent.clock())
    agent.run(11.0)
    assert agent.record("train").last_exit == "requested: killed by SIGTERM"


def test_a_restart_a_previous_agent_made_is_no_start_sample(tmp_path: Path) -> None:
    """Evicted (held 60 s), then the agent restarts before the job is back: the new agent
    did not see why it was down, so its next start is not measured."""
    agent = running(tmp_path, OFFLINE)
    now = agent.clock()
    agent.sup.hold_offline(0, now + 60.0, now)
    agent.sup.evict("train", now)
    agent.run(1.0)
    assert agent.status("train") is Status.PENDING
    agent.restart_agent()  # the hold lived in memory: it starts at once
    agent.run(1.0)
    assert agent.status("train") is Status.RUNNING
    assert agent.sup.downtime.observe(agent.node.gpus(), {"train"}, (), agent.clock()) == (
        [], [])


# --- submits ------------------------------------------------------------------------------------

def test_a_submit_is_checked_against_the_node_with_a_one_line_reason(tmp_path: Path) -> None:
    agent = make_agent(tmp_path, gpus=2)
    with pytest.raises(InputError) as caught:
        agent.submit({**ONLINE, "gpu": 2})
    assert caught.value.one_line() == "workload 'web'.gpu: no GPU 2; this node has 0-1"
    with pytest.raises(InputError) as caught:
        agent.submit({**OFFLINE, "gpu": 1, "mem_limit_mib": 40961})
    assert caught.value.one_line() == (
        "workload 'train'.mem_limit_mib: 40961 MiB is more than GPU 1 has (40960 MiB), so it "
        "would limit nothing (hint: give at most 40960)")
    agent.submit({**OFFLINE, "gpu": 1, "mem_limit_mib": 40960})  # the whole GPU: accepted
    assert agent.store.get("train") is not None
    assert [r.spec.name for r in agent.store.all()] == ["train"]


def test_an_agent_takes_at_most_max_active_workloads(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(supervisor, "MAX_ACTIVE", 2)
    agent = make_agent(tmp_path)
    agent.submit({**OFFLINE, "name": "t0"})
    agent.submit({**OFFLINE, "name": "t1"})
    with pytest.raises(InputError) as caught:
        agent.submit({**OFFLINE, "name": "t2"})
    assert caught.value.one_line() == ("workload 't2': this agent already runs 2 workloads, "
                                       "its limit (hint: stop some first)")
    with pytest.raises(InputError, match="already exists"):  # not refused for the limit
        agent.submit({**OFFLINE, "name": "t1"})
    agent.sup.stop("t0", agent.clock())
    agent.submit({**OFFLINE, "name": "t0"})  # a finished one submitted again takes its place
    assert agent.status("t0") is Status.PENDING
    assert agent.store.get("t2") is None


def test_a_job_counts_each_rank_against_the_limit(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(supervisor, "MAX_ACTIVE", 2)
    clock = ManualClock(1000.0)
    node = FakeNode.build("A100-40GB", 1, clock=clock, mig=True)
    MigManager(node).apply(0, "3g.20gb,2g.10gb,1g.5gb,1g.5gb")
    store = StateStore(tmp_path / "agent.db")
    sup = Supervisor(node, store, MpsManager(node, tmp_path), recovery=RECOVERY,
                     monotonic=clock)
    sup.submit(WorkloadSpec.from_dict({"name": "one", "argv": ["fake-workload"],
                                       "role": "offline", "gpu": 0,
                                       "mig_instance": "1g.5gb@2"}), clock())
    job = {"name": "job", "argv": ["fake-workload"], "role": "offline", "gpu": 0,
           "mig_instances": ["3g.20gb@4", "2g.10gb@0"]}
    with pytest.raises(InputError, match="its limit"):  # two ranks, one place left
        sup.submit(WorkloadSpec.from_dict(job), clock())
    assert [r.spec.name for r in store.all()] == ["one"]
