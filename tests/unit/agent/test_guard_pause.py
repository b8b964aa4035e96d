"""The guard's first action: pause the offline co-runner (SIGSTOP), resume it (SIGCONT) when
the pause is over; a p99 still over the SLO soon after a pause throttles. Also the fake
node's and the supervisor's side of a pause: stop, restart and agent restart of a paused
process."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from cotenant.agent.backends import FakeNode, ManualClock
from cotenant.agent.latency import INLINE
from cotenant.agent.service import AgentService
from cotenant.agent.state import Status
from cotenant.policies.colocation import COLOCATION, ColocationPolicy

from .harness import OFFLINE, ONLINE, WEB, Node, fixed, make_agent

PAUSING = fixed(50, pause_s=30.0, hold_s=60.0)


def paused(node: Node, name: str = "train") -> bool:
    record = node.agent.record(name)
    return record.pid is not None and node.agent.node.paused(record.pid)


def test_a_burst_pauses_the_offline_client_which_resumes_unrestarted(tmp_path: Path) -> None:
    node = Node(tmp_path, PAUSING, WEB, OFFLINE)
    pid = node.agent.record("train").pid
    node.report(199.0)  # over 95 % of the 200 ms SLO
    node.run(1.0)
    assert node.ctl.counts == {"pause": 1, "throttle": 0, "evict": 0}
    assert paused(node)
    # its kernels stopped: the online service, at its 30 % load, has the GPU to itself
    assert node.agent.node.gpu(0).utilisation_pct == 30.0
    assert node.agent.node.gpu(0).memory_used_mib == 12000  # it keeps its memory
    assert node.share() == 50  # no floor: the split in force stays
    assert node.agent.sup.paused() == {"train"}
    node.run(29.0)
    assert paused(node)
    node.run(1.0)
    assert not paused(node)
    record = node.agent.record("train")
    assert (record.status, record.pid, record.applied_pct, record.restarts) == (
        Status.RUNNING, pid, 50, 0)
    kinds = node.agent.kinds("train")
    assert kinds[-2:] == ["paused", "resumed"]
    assert "exit" not in kinds[kinds.index("paused"):]
    assert "guard pause" in node.agent.kinds("node")


def test_a_p99_over_during_the_pause_waits_for_it_to_end(tmp_path: Path) -> None:
    """While the co-runner is paused the guard has nothing more to take from it (the core
    acts only on a running one): a report over the SLO then is no action. The pause ends,
    the client runs, and the next report over the SLO within ``hold_s`` throttles."""
    node = Node(tmp_path, PAUSING, WEB, OFFLINE)
    node.report(199.0)
    node.run(1.0)
    node.run(10.0)
    node.report(199.0)  # past settle_s, but the co-runner is paused
    node.run(1.0)
    assert node.ctl.counts["throttle"] == 0
    assert paused(node)
    node.run(19.0)
    assert not paused(node)
    node.report(199.0)
    node.run(1.0)
    assert node.ctl.counts == {"pause": 1, "throttle": 1, "evict": 0}
    assert node.train() == (Status.RUNNING, 30)
    assert node.agent.sup.paused() == set()
    events = node.agent.store.events("train")
    assert [e.detail for e in events if e.kind == "resumed"] == ["pause over"]
    assert node.agent.record("train").restarts == 0


def test_a_second_burst_soon_after_a_pause_throttles_a_later_one_pauses(
        tmp_path: Path) -> None:
    node = Node(tmp_path, PAUSING, WEB, OFFLINE)
    node.report(199.0)
    node.run(31.0)  # paused 30 s, resumed
    node.report(199.0)  # within hold_s (60 s) after the pause ended: lasting, throttle
    node.run(1.0)
    assert node.ctl.counts == {"pause": 1, "throttle": 1, "evict": 0}
    assert node.train() == (Status.RUNNING, 30)
    node.run(100.0)  # the floor's hold is over, and so is pause_s + hold_s
    assert node.train() == (Status.RUNNING, 50)
    node.report(199.0)
    node.run(1.0)
    assert node.ctl.counts == {"pause": 2, "throttle": 1, "evict": 0}
    assert paused(node)


def test_a_paused_client_gets_no_more_sms_while_the_pause_lasts(tmp_path: Path) -> None:
    """The sizing would give offline more SMs when the online load falls (a restart); not
    while the guard pauses the client: that would end the pause early."""
    policy: ColocationPolicy = COLOCATION.create("cotenant-pause", load_window_s=5.0)
    node = Node(tmp_path, policy.with_(guard=PAUSING.guard), WEB, OFFLINE)
    web = node.pid("web")
    node.agent.node.set_util(web, 60.0)
    node.run(70.0)
    high = node.share()
    pid = node.pid("train")
    node.agent.node.set_util(web, 5.0)
    node.report(199.0)
    node.run(1.0)
    assert paused(node)
    node.run(28.0)  # the fall is 29 s old: past the 5 s window, a gain is due ...
    assert node.share() == high
    assert paused(node)  # ... but the paused client is not restarted for it
    node.run(2.0)
    assert not paused(node)
    node.run(1.0)
    assert node.share() is not None
    assert node.share() < high  # once the pause is over
    assert node.pid("train") != pid


def test_stopping_a_paused_workload_lets_it_checkpoint(tmp_path: Path) -> None:
    """A stopped process holds a SIGTERM until SIGCONT: the supervisor resumes it, so it
    checkpoints and exits as asked (a requested exit, not a fault)."""
    agent = make_agent(tmp_path)
    agent.submit({**OFFLINE, "argv": [*OFFLINE["argv"], "--term-delay-s", "3"]})
    agent.run(1.0)
    assert agent.sup.pause("train", agent.clock(), agent.clock() + 600.0)
    agent.sup.stop("train", agent.clock())
    agent.run(2.5)
    assert agent.status("train") is Status.STOPPING  # checkpointing, not held by the pause
    agent.run(1.0)
    assert agent.status("train") is Status.STOPPED
    assert agent.record("train").last_exit is not None
    assert agent.record("train").last_exit.startswith("requested")
    assert agent.store.fault_counts() == {}


def test_an_agent_restart_resumes_what_the_last_agent_paused(tmp_path: Path) -> None:
    """Pauses live in memory: a new agent resumes every offline process it adopts, so none
    stays stopped with no one left to resume it."""
    agent = make_agent(tmp_path)
    agent.submit(ONLINE)
    agent.submit(OFFLINE)
    agent.run(1.0)
    pid = agent.record("train").pid
    assert pid is not None
    assert agent.sup.pause("train", agent.clock(), agent.clock() + 600.0)
    assert not agent.sup.pause("web", agent.clock(), agent.clock() + 600.0)  # offline only
    assert agent.node.paused(pid)
    agent.restart_agent()
    agent.run(0.5)
    assert not agent.node.paused(pid)
    assert agent.record("train").pid == pid  # adopted, not restarted


def test_the_fake_node_pauses_like_linux(tmp_path: Path) -> None:
    """SIGSTOP: no utilisation, memory kept, the program's clock stands still; SIGTERM waits
    for SIGCONT; SIGKILL does not."""
    agent = make_agent(tmp_path)
    agent.submit({**OFFLINE, "argv": ["fake-workload", "--mem-mib", "100", "--util-pct", "60",
                                      "--duration-s", "10"]})
    agent.run(0.5)
    pid = agent.record("train").pid
    assert pid is not None
    node = agent.node
    agent.run(4.0)  # 4.5 s of its 10 done
    node.send_signal(pid, signal.SIGSTOP)
    assert node.gpu(0).utilisation_pct == 0.0
    assert node.gpu(0).processes[0].sm_util_pct == 0.0
    assert node.gpu(0).memory_used_mib == 100
    agent.run(20.0)
    assert agent.status("train") is Status.RUNNING  # would have ended 15 s ago
    node.send_signal(pid, signal.SIGCONT)
    agent.run(5.0)
    assert agent.status("train") is Status.RUNNING
    agent.run(1.0)
    assert agent.status("train") is Status.COMPLETED  # 5.5 s more after the pause
    agent.submit({**OFFLINE, "name": "b", "argv": ["fake-workload", "--term-delay-s", "2"]})
    agent.run(0.5)
    pid = agent.record("b").pid
    assert pid is not None
    node.send_signal(pid, signal.SIGSTOP)
    node.send_signal(pid, signal.SIGTERM)  # while stopped: pending
    agent.run(10.0)
    assert node.paused(pid)
    node.send_signal(pid, signal.SIGCONT)
    agent.run(1.5)
    assert node.poll(pid).returncode is None  # checkpointing
    agent.run(1.0)
    assert node.poll(pid).returncode == -signal.SIGTERM
    agent.submit({**OFFLINE, "name": "c"})
    agent.run(0.5)
    pid = agent.record("c").pid
    assert pid is not None
    node.send_signal(pid, signal.SIGSTOP)
    node.send_signal(pid, signal.SIGKILL)
    assert node.poll(pid).returncode == -signal.SIGKILL


def test_a_clock_stepping_back_keeps_what_a_pause_had_left(tmp_path: Path) -> None:
    """The supervisor keeps the pause's length; the guard forgets its last pause, so the
    next report over the SLO pauses again rather than throttling."""
    node = Node(tmp_path, PAUSING, WEB, OFFLINE)
    node.report(199.0)
    node.run(1.0)
    assert paused(node)
    node.agent.clock.step(-3600.0)  # the wall clock alone
    node.run(28.0)
    assert paused(node)  # 29 s of its 30 s: not an hour more, not over at once
    node.run(2.0)  # (the tick that saw the step counts as no time)
    assert not paused(node)
    node.report(199.0)
    node.run(1.0)
    assert node.ctl.counts == {"pause": 2, "throttle": 0, "evict": 0}


def test_an_agent_that_stops_resumes_what_it_paused(tmp_path: Path) -> None:
    clock = ManualClock(1000.0)
    fake = FakeNode.build("A100-40GB", 1, clock, per_client_util=True)
    service = AgentService(fake, tmp_path, fixed(50), clock=clock, executor=INLINE)
    service.submit(OFFLINE)
    service.tick()
    record = service.store.get("train")
    assert record is not None
    assert record.pid is not None
    assert service.supervisor.pause("train", clock(), clock() + 600.0)
    assert fake.paused(record.pid)
    service.close()
    assert not fake.paused(record.pid)


def test_an_interrupted_close_still_resumes_what_the_agent_paused(tmp_path: Path) -> None:
    """A second Ctrl-C while ``close`` joins the watcher, and a store that cannot log the
    first resume: every paused client is resumed all the same, and the interrupt goes on."""
    clock = ManualClock(1000.0)
    fake = FakeNode.build("A100-40GB", 2, clock, per_client_util=True)
    service = AgentService(fake, tmp_path, fixed(50), clock=clock, executor=INLINE)
    service.submit(OFFLINE)
    service.submit({**OFFLINE, "name": "train-b", "gpu": 1})
    service.tick()
    pids = []
    for name in ("train", "train-b"):
        record = service.store.get(name)
        assert record is not None
        assert record.pid is not None
        assert service.supervisor.pause(name, clock(), clock() + 600.0)
        pids.append(record.pid)
    service.start_watching(60.0)
    assert service._watching is not None
    thread = service._watching[0]

    def interrupted(timeout: float | None = None) -> None:
        raise KeyboardInterrupt

    thread.join = interrupted  # type: ignore[method-assign]
    event = service.store.event
    calls = []

    def first_fails(*args: object, **kwargs: object) -> None:
        calls.append(args)
        if len(calls) == 1:
            raise OSError("database is locked")
        event(*args, **kwargs)  # type: ignore[arg-type]

    service.store.event = first_fails  # type: ignore[method-assign]
    with pytest.raises(KeyboardInterrupt):
        service.close()
    assert not any(fake.paused(pid) for pid in pids)


def test_an_mps_fault_reaches_a_paused_client_once_it_is_resumed(tmp_path: Path) -> None:
    agent = make_agent(tmp_path)
    agent.submit({**OFFLINE, "name": "crash", "argv": ["fake-workload", "--crash-at-s", "5"]})
    agent.submit({**OFFLINE, "name": "train"})
    agent.run(0.5)
    pid = agent.record("train").pid
    assert pid is not None
    agent.node.send_signal(pid, signal.SIGSTOP)
    agent.run(20.0)  # the other client's fatal error came meanwhile
    assert agent.node.poll(pid).returncode is None  # a stopped process sees nothing
    agent.node.send_signal(pid, signal.SIGCONT)
    agent.run(0.5)
    assert agent.node.poll(pid).returncode is None
    agent.run(1.0)  # FAULT_EXIT_DELAY_S after its resume, not a whole pause later
    assert agent.node.poll(pid).returncode == 1


def test_the_adaptive_guard_keeps_the_co_runner_paused_while_the_burst_lasts(
        tmp_path: Path) -> None:
    """The core extends a pause while the load says the co-runner would push the service over;
    the agent moves the resume time, and counts one pause."""
    node = Node(tmp_path, fixed(50, adaptive=True, hold_s=0.0, pause_s=30.0), WEB, OFFLINE)
    web = node.pid("web")
    node.agent.node.set_util(web, 80.0)
    node.report(199.0)
    node.run(1.0)
    assert paused(node)
    node.run(60.0)  # twice the pause: extended while the load stays
    assert paused(node)
    node.agent.node.set_util(web, 5.0)
    node.run(31.0)
    assert not paused(node)
    assert node.ctl.counts == {"pause": 1, "throttle": 0, "evict": 0}
    assert node.train()[0] is Status.RUNNING
