"""How an exit is read and answered, by value: the class and one-line detail of each kind of
exit (at the XID window's edge too), which exits during a stop the agent asked for, what the
record and the event log say after each response, and an MPS daemon that hangs with its
clients still alive."""

from __future__ import annotations

import signal
from dataclasses import replace
from pathlib import Path

import pytest

from cotenant.agent.backends import ProcessStatus, ProcState, XidEvent
from cotenant.agent.backends.base import DaemonConfig
from cotenant.agent.faults import FaultClass, asked_for, classify
from cotenant.agent.state import Status
from cotenant.errors import TemporaryError

from .harness import OFFLINE, ONLINE, Agent, make_agent


def exited(code: int | None, message: str = "") -> ProcessStatus:
    state = ProcState.UNKNOWN if code is None else ProcState.EXITED
    return ProcessStatus(7, state, code, message)


def log(agent: Agent, name: str, *kinds: str) -> list[tuple[float, str, str | None, str]]:
    return [(e.time, e.kind, e.fault, e.detail) for e in agent.store.events(name)
            if not kinds or e.kind in kinds]


def pid_of(agent: Agent, name: str) -> int:
    pid = agent.record(name).pid
    assert pid is not None
    return pid


# --- classification ---------------------------------------------------------------------------

def test_each_exit_has_its_class_and_detail() -> None:
    assert classify(exited(None), 0, 5.0) == (FaultClass.LOST,
                                              "exit status unknown (process gone)")
    assert classify(exited(0), 0, 5.0) == (FaultClass.NONE, "exit 0")
    assert classify(exited(3, "boom"), 0, 5.0) == (FaultClass.CRASH, "exit 3: boom")
    assert classify(exited(-11), 0, 5.0) == (FaultClass.SIGNAL, "killed by SIGSEGV")
    assert classify(exited(-9), 1, 5.0, mps_failed=True) == (
        FaultClass.MPS, "MPS server of GPU 1 failed")
    assert classify(exited(1, "RuntimeError: boom"), 1, 5.0, mps_failed=True) == (
        FaultClass.MPS, "MPS server of GPU 1 failed: RuntimeError: boom")
    xid = [XidEvent(1, 79, 4.0, None)]  # for no pid in particular
    assert classify(exited(1, "CUDA error: unspecified launch failure"), 1, 5.0, xid) == (
        FaultClass.XID, "XID 79 on GPU 1: CUDA error: unspecified launch failure")


def test_an_xid_counts_up_to_exactly_its_window_before_the_exit() -> None:
    """An XID reported 10 s (the window) before the exit is its cause; 10.5 s is not."""
    xid = [XidEvent(0, 43, 100.0, 7)]
    assert classify(exited(1), 0, 110.0, xid) == (FaultClass.XID, "XID 43 on GPU 0")
    assert classify(exited(1), 0, 110.5, xid)[0] is FaultClass.CRASH


@pytest.mark.parametrize(("fault", "code", "asked"), [
    (FaultClass.SIGNAL, -signal.SIGTERM, True),  # the SIGTERM the agent sent
    (FaultClass.SIGNAL, -signal.SIGKILL, True),  # the SIGKILL after the grace
    (FaultClass.SIGNAL, -signal.SIGSEGV, False),
    (FaultClass.NONE, 0, True),
    (FaultClass.CRASH, 1, True),  # torchrun exits 1 on SIGTERM
    (FaultClass.CUDA, 128 + signal.SIGTERM, True),
    (FaultClass.OOM, 128 + signal.SIGKILL, True),
    (FaultClass.CUDA, 0, True),
    (FaultClass.CUDA, 1, False),
    (FaultClass.OOM, 1, False),
    (FaultClass.XID, -signal.SIGKILL, False),  # a GPU error on the way out is a fault
    (FaultClass.XID, 128 + signal.SIGTERM, False),
    (FaultClass.MPS, 0, False),
    (FaultClass.MPS, -signal.SIGTERM, False),
    (FaultClass.LOST, None, False),
])
def test_which_exits_during_a_stop_are_the_stop(fault: FaultClass, code: int | None,
                                                asked: bool) -> None:
    assert asked_for(exited(code), fault) is asked


# --- the record and the log after an exit ------------------------------------------------------

def test_an_exit_is_logged_with_its_class_or_as_requested(tmp_path: Path) -> None:
    agent = make_agent(tmp_path)
    agent.submit(OFFLINE)
    agent.run(1.0)
    agent.node.send_signal(pid_of(agent, "train"), signal.SIGKILL)  # its own (the OOM killer)
    crash = agent.clock()  # seen at the next tick
    agent.run(0.5)
    record = agent.record("train")
    assert (record.pid, record.last_exit) == (None, "signal: killed by SIGKILL")
    assert log(agent, "train", "exit") == [(crash, "exit", "signal", "killed by SIGKILL")]
    agent.run(2.0)
    agent.sup.stop("train", agent.clock())
    stop = agent.clock()
    agent.run(0.5)
    record = agent.record("train")
    assert (record.status, record.pid) == (Status.STOPPED, None)
    assert record.last_exit == "requested: killed by SIGTERM"
    assert log(agent, "train", "exit")[1:] == [
        (stop, "exit", None, "requested: killed by SIGTERM")]


def test_a_finished_workload_keeps_its_fault_count(tmp_path: Path) -> None:
    """One crash, then exit 0 soon after: completed, with its one fault still counted."""
    agent = make_agent(tmp_path)
    agent.submit({**OFFLINE, "argv": ["fake-workload", "--duration-s", "5"]})
    agent.run(1.0)
    agent.node.send_signal(pid_of(agent, "train"), signal.SIGKILL)
    agent.run(10.0)
    record = agent.record("train")
    assert (record.status, record.failures, record.restarts) == (Status.COMPLETED, 1, 1)
    assert record.to_dict()["failures"] == 1


def test_a_workload_that_ends_after_a_stable_run_has_its_budget_back(tmp_path: Path) -> None:
    """After a run of ``stable_s`` (600 s) the count is cleared, also where the workload then
    completes or is stopped from outside (a SIGTERM: a graceful stop)."""
    agent = make_agent(tmp_path)
    agent.sup.recovery = replace(agent.sup.recovery, graceful_signals=True)
    agent.submit({**OFFLINE, "argv": ["fake-workload", "--duration-s", "700"]})
    agent.submit({**OFFLINE, "name": "other", "gpu": 1})
    agent.run(1.0)
    for name in ("train", "other"):
        agent.node.send_signal(pid_of(agent, name), signal.SIGKILL)
    agent.run(2.0)
    assert [agent.record(n).failures for n in ("train", "other")] == [1, 1]
    agent.run(650.0, step=10.0)
    agent.node.send_signal(pid_of(agent, "other"), signal.SIGTERM)
    agent.run(100.0, step=10.0)
    train, other = agent.record("train"), agent.record("other")
    assert (train.status, train.failures) == (Status.COMPLETED, 0)
    assert (other.status, other.failures) == (Status.STOPPED, 0)
    [(_, _, _, detail)] = log(agent, "other", "graceful stop")
    assert detail == "killed by SIGTERM"


def test_only_an_xid_quarantines_the_gpu_however_short_the_quarantine(tmp_path: Path) -> None:
    agent = make_agent(tmp_path)
    agent.sup.recovery = replace(agent.sup.recovery, quarantine_s=1.0)
    agent.submit(OFFLINE)
    agent.run(1.0)
    agent.node.send_signal(pid_of(agent, "train"), signal.SIGKILL)  # a crash: no quarantine
    agent.run(3.0)
    assert log(agent, "node", "gpu quarantined") == []
    pid = pid_of(agent, "train")
    agent.node.inject_xid(0, 43, pid)
    xid = agent.clock()
    agent.run(0.5)
    assert log(agent, "node", "xid", "gpu quarantined") == [
        (xid, "xid", "xid", f"XID 43 on GPU 0 pid {pid}"),
        (xid, "gpu quarantined", None, "GPU 0: no offline work for 1 s")]


def test_a_run_adopted_by_a_new_agent_is_timed_on_its_monotonic_clock(tmp_path: Path) -> None:
    """An agent restart, then an hour's wall step forward: the adopted process's short run
    does not clear its fault count."""
    agent = make_agent(tmp_path)
    agent.submit(OFFLINE)
    agent.run(1.0)
    agent.node.send_signal(pid_of(agent, "train"), signal.SIGKILL)
    agent.run(3.0)
    assert (agent.status("train"), agent.record("train").failures) == (Status.RUNNING, 1)
    agent.restart_agent()
    agent.run(1.0)
    agent.clock.step(3600.0)
    agent.run(1.0)
    agent.node.send_signal(pid_of(agent, "train"), signal.SIGKILL)
    agent.run(0.5)
    assert agent.record("train").failures == 2


def test_a_process_recorded_with_no_start_time_is_adopted_not_killed(tmp_path: Path) -> None:
    """A state row from an older version has ``since`` 0 (the column's default): its process
    is no client that outlived a daemon, and its own crash is its own."""
    agent = make_agent(tmp_path)
    agent.submit(OFFLINE)
    agent.run(1.0)
    pid = pid_of(agent, "train")
    agent.store.update(agent.record("train"), since=0.0)
    agent.restart_agent()
    agent.run(2.0)
    assert agent.record("train").pid == pid
    assert agent.node.poll(pid).state is ProcState.RUNNING
    agent.node.send_signal(pid, signal.SIGKILL)
    agent.run(0.5)
    assert log(agent, "train", "exit")[-1][2] == "signal"
    assert agent.record("train").failures == 1


# --- an MPS daemon that hangs -----------------------------------------------------------------

def hang_daemon_once(agent: Agent, monkeypatch: pytest.MonkeyPatch) -> None:
    """The next health check of the MPS daemon gets no answer (a hung daemon: its clients
    stay alive, unlike a dead one's); it answers again after that."""
    answer = agent.node.daemon_healthy
    calls = {"n": 0}

    def healthy(config: DaemonConfig) -> bool:
        calls["n"] += 1
        return calls["n"] > 1 and answer(config)

    monkeypatch.setattr(agent.node, "daemon_healthy", healthy)


def test_clients_that_outlive_a_hung_daemon_are_killed_and_not_blamed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The clients running before the daemon hung are SIGKILLed and restarted, their exit
    not their fault; one started in the same tick, after the daemon was restarted, is left
    alone, and its own crash is its own."""
    agent = make_agent(tmp_path)
    agent.submit(ONLINE)
    agent.run(1.0)
    web = pid_of(agent, "web")
    agent.submit({**OFFLINE, "name": "late", "gpu": 0})
    agent.submit({**OFFLINE, "name": "crasher", "argv": ["fake-workload", "--crash-at-s", "0.5"]})
    hang_daemon_once(agent, monkeypatch)
    agent.clock.advance(0.5)
    agent.sup.tick(agent.clock())
    hung = agent.clock()
    assert log(agent, "node", "mps failure") == [(hung, "mps failure", "mps", "GPU 0")]
    late = pid_of(agent, "late")
    assert agent.record("late").since == hung
    agent.clock.advance(0.5)  # the crasher's exit is seen before the old client's
    agent.sup.tick(agent.clock())
    assert agent.node.poll(late).state is ProcState.RUNNING  # not taken for an old client
    assert log(agent, "crasher", "exit")[0][2] == "cuda"
    agent.run(1.0)
    assert agent.node.poll(web).returncode == -signal.SIGKILL
    assert log(agent, "web", "exit")[0][2] == "mps"
    assert agent.record("web").failures == 0
    assert agent.record("crasher").failures == 1


def test_a_backoff_keeps_its_wait_across_a_wall_step_back_and_an_agent_restart(
        tmp_path: Path) -> None:
    """The wall clock steps back 100 s during a 30 s backoff: the state's backoff moves back
    with it, so an agent that starts later still waits out what was left."""
    agent = make_agent(tmp_path)
    agent.sup.recovery = replace(agent.sup.recovery, backoff_base_s=30.0)
    agent.submit(OFFLINE)
    agent.run(1.0)
    agent.node.send_signal(pid_of(agent, "train"), signal.SIGKILL)
    agent.run(10.0)
    assert agent.status("train") is Status.BACKOFF
    agent.clock.step(-100.0)
    agent.run(0.5)
    agent.restart_agent()
    agent.run(18.0)
    assert agent.status("train") is Status.BACKOFF
    agent.run(2.0)
    assert agent.status("train") is Status.RUNNING


# --- node-level readings: XID events and MPS daemons ---------------------------------------------

def test_a_failed_xid_reading_is_logged_and_the_next_one_still_made(tmp_path: Path) -> None:
    agent = make_agent(tmp_path)
    agent.submit(OFFLINE)
    agent.run(1.0)
    agent.node.inject_nvml_error("xid_events", times=1)
    failed = agent.clock()
    agent.run(0.5)
    [(when, kind, fault, detail)] = log(agent, "node", "nvml error")
    assert (when, kind, fault) == (failed, "nvml error", None)
    assert "xid_events" in detail
    pid = pid_of(agent, "train")
    agent.node.inject_xid(0, 43, pid)
    agent.run(0.5)
    assert log(agent, "train", "exit")[0][2] == "xid"


def test_a_permanent_xid_error_stops_the_readings_for_good(tmp_path: Path) -> None:
    agent = make_agent(tmp_path)
    agent.run(0.5)
    agent.node.inject_nvml_error("xid_events", times=3, permanent=True)
    off = agent.clock()
    agent.run(2.0)
    [(when, _, _, detail)] = log(agent, "node", "nvml error")
    assert when == off
    assert detail.startswith("XID events off: ")


def test_each_gpus_mps_daemon_is_checked_and_restarted(tmp_path: Path) -> None:
    """Daemons on GPUs 0 and 1: the one on GPU 1 dies and is restarted, its failure logged;
    a GPU whose only workload has stopped is not watched."""
    agent = make_agent(tmp_path, gpus=3)
    agent.submit(OFFLINE)
    agent.submit({**OFFLINE, "name": "other", "gpu": 1})
    agent.submit({**OFFLINE, "name": "done", "gpu": 2})
    agent.run(1.0)
    agent.sup.stop("done", agent.clock())
    agent.run(1.0)
    agent.node.kill_daemon(2)  # no client left there: nothing to watch
    agent.node.kill_daemon(1)
    died = agent.clock()
    agent.run(0.5)
    assert log(agent, "node", "mps failure", "mps restarted") == [
        (died, "mps failure", "mps", "GPU 1"), (died, "mps restarted", None, "GPU 1")]
    agent.run(1.0)
    assert agent.status("other") is Status.RUNNING


def test_a_daemon_that_cannot_be_restarted_is_logged_and_tried_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    agent = make_agent(tmp_path)
    agent.submit(OFFLINE)
    agent.run(1.0)
    start = agent.node.start_daemon
    refusals = {"left": 1}

    def start_daemon(config: DaemonConfig) -> None:
        if refusals["left"]:
            refusals["left"] -= 1
            raise TemporaryError("nvidia-cuda-mps-control: cannot start (test)")
        start(config)

    monkeypatch.setattr(agent.node, "start_daemon", start_daemon)
    agent.node.kill_daemon(0)
    died = agent.clock()
    agent.run(0.5)
    assert log(agent, "node", "mps error") == [
        (died, "mps error", None, "nvidia-cuda-mps-control: cannot start (test)")]
    agent.run(3.0)
    assert agent.status("train") is Status.RUNNING


def test_once_a_daemons_old_clients_are_gone_a_wall_step_back_blames_no_new_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """After a hung daemon's clients were killed and restarted, the wall clock steps back
    past the failure: a client started then is not taken for one that outlived it."""
    agent = make_agent(tmp_path)
    agent.submit({**OFFLINE, "name": "idle", "gpu": 1})
    agent.submit(ONLINE)
    agent.run(1.0)
    agent.sup.stop("idle", agent.clock())  # a record from before the failure, no process
    agent.run(1.0)
    agent.submit({**OFFLINE, "name": "late"})
    hang_daemon_once(agent, monkeypatch)
    agent.run(2.0)  # web killed and back; late started in the failure's tick
    assert log(agent, "web", "exit")[0][2] == "mps"
    agent.clock.step(-100.0)
    agent.submit({**OFFLINE, "name": "new", "gpu": 0, "sm_share": 20})
    agent.run(0.5)
    new = pid_of(agent, "new")
    agent.run(2.0)
    assert agent.record("new").pid == new
    assert agent.node.poll(new).state is ProcState.RUNNING
    assert log(agent, "new", "exit") == []
