"""The SM-share controller drives any SharePolicy and restarts only offline clients."""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path

import pytest

from cotenant.agent.share import SHARE_POLICIES, ShareController, solo_load_pct
from cotenant.agent.state import Status
from cotenant.perf import mps
from cotenant.policies.colocation.contract import OnlineObservation
from cotenant.policies.colocation.share import DynamicShare, FixedShare

from .harness import OFFLINE, ONLINE, Agent, make_agent


@dataclass
class LoadShare:
    """Test policy: the online service keeps its load plus 20 points; records what it saw."""

    seen: list[OnlineObservation] = field(default_factory=list)

    def online_share(self, obs: OnlineObservation) -> int:
        self.seen.append(obs)
        return max(1, min(100, round(obs.load * 100) + 20))


def setup(tmp_path: Path, window_s: float = 60.0) -> tuple[Agent, ShareController, LoadShare]:
    agent = make_agent(tmp_path)
    policy = LoadShare()
    controller = ShareController(agent.sup, agent.node, policy, threshold_pct=10,
                                 window_s=window_s)
    agent.submit(ONLINE)  # util 30 %
    agent.submit(OFFLINE)  # starts with sm_share 50
    agent.run(0.5)
    return agent, controller, policy


def tick(agent: Agent, controller: ShareController, seconds: float = 1.0) -> None:
    for _ in range(round(seconds / 0.5)):
        agent.clock.advance(0.5)
        controller.tick(agent.clock())
        agent.sup.tick(agent.clock())


def test_share_follows_the_online_load(tmp_path: Path) -> None:
    agent, controller, policy = setup(tmp_path)
    tick(agent, controller)
    obs = policy.seen[0]
    assert obs.model == "resnet50"
    assert obs.slo_ms == 50
    # its load: the SM utilisation of its processes, 30 % / speed(50 % of the SMs) while
    # train holds the other half, times that speed
    assert obs.load == pytest.approx(0.3)
    assert controller.shares[0] == 50
    train = agent.record("train")
    assert train.status is Status.RUNNING
    assert train.applied_pct == 50  # 100 - 50: within the threshold, no restart
    web_pid = agent.record("web").pid
    assert web_pid is not None
    agent.node.set_util(web_pid, 55.0)  # load rises: online keeps 75, offline gets 25
    tick(agent, controller)
    train = agent.record("train")
    assert train.applied_pct == 25
    assert train.pid is not None
    assert agent.node.env_of(train.pid)["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "25"
    assert agent.record("web").pid == web_pid  # online never restarted
    assert train.restarts == 0  # a share change is not a fault
    assert not any(w == "train" for w, _ in agent.store.fault_counts())
    assert train.last_exit == "requested: killed by SIGTERM"
    assert policy.seen[-1].online_share_pct == 75


def test_small_gains_for_offline_do_not_restart_small_losses_do(tmp_path: Path) -> None:
    agent, controller, _ = setup(tmp_path, window_s=0.0)  # the last sample decides
    tick(agent, controller)
    pid = agent.record("train").pid
    web_pid = agent.record("web").pid
    assert web_pid is not None
    agent.node.set_util(web_pid, 25.0)  # share 45 -> offline 55: within 10 points of 50
    tick(agent, controller, 2.0)
    assert agent.record("train").pid == pid
    assert agent.record("train").applied_pct == 50
    # share 55 -> offline 45: only 5 points, but the online service needs them now
    agent.node.set_util(web_pid, 35.0)
    tick(agent, controller, 2.0)
    train = agent.record("train")
    assert train.pid != pid
    assert train.applied_pct == 45


def test_a_fall_in_load_lowers_the_share_only_once_it_lasts_the_window(tmp_path: Path) -> None:
    agent, controller, policy = setup(tmp_path)
    web_pid = agent.record("web").pid
    assert web_pid is not None
    agent.node.set_util(web_pid, 55.0)
    tick(agent, controller)
    assert controller.shares[0] == 75  # a rise acts at once
    raised = agent.record("train").pid
    agent.node.set_util(web_pid, 10.0)
    tick(agent, controller, 59.0)
    assert controller.shares[0] == 75  # the 55 % sample is still in the window
    assert policy.seen[-1].load == pytest.approx(0.55)
    assert agent.record("train").pid == raised
    tick(agent, controller, 2.0)
    assert controller.shares[0] == 30
    assert agent.record("train").applied_pct == 70
    assert agent.record("train").pid != raised


def share_changes(agent: Agent) -> int:
    return agent.kinds("train").count("share change")


def test_a_bursty_load_restarts_offline_at_most_twice_per_window(tmp_path: Path) -> None:
    """Utilisation alternating 0 % / 60 % every 3 s: deciding on each sample restarts the
    offline job at every swing; deciding on the window's peak restarts it once."""
    counts = {}
    for window in (0.0, 60.0):
        agent, controller, _ = setup(tmp_path / str(window), window_s=window)
        web_pid = agent.record("web").pid
        assert web_pid is not None
        for step in range(60):  # 180 s
            agent.node.set_util(web_pid, 60.0 if step % 2 else 0.0)
            tick(agent, controller, 3.0)
        counts[window] = share_changes(agent)
    assert counts[0.0] >= 50
    assert counts[60.0] == 1  # 50/50 to 80/20 at the first burst, then held
    # (no gain at the first idle sample: the load has not been watched for a window yet)
    # A load that steps down for longer than the window and back up: a gain once the low
    # load has lasted the window, then a raise at once; twice over. (At 60 % the service
    # would saturate on the 20 % of the SMs the gain leaves it: its load could not be read,
    # so the share would go to 100 and come back a window later, two changes more.)
    agent, controller, _ = setup(tmp_path / "steps", window_s=60.0)
    web_pid = agent.record("web").pid
    assert web_pid is not None
    for util in (0.0, 15.0, 0.0, 15.0):
        agent.node.set_util(web_pid, util)
        tick(agent, controller, 90.0)
    assert share_changes(agent) == 4


def gains(agent: Agent) -> list[float]:
    """When the offline client was restarted for more SMs."""
    out = []
    for e in agent.store.events("train"):
        if e.kind == "share change":
            old, new = (int(x) for x in e.detail.split("->"))
            if new > old:
                out.append(e.time)
    return out


def test_a_falling_ramp_gives_offline_more_sms_at_most_once_per_window(tmp_path: Path) -> None:
    agent, controller, _ = setup(tmp_path)
    web_pid = agent.record("web").pid
    assert web_pid is not None
    agent.node.set_util(web_pid, 80.0)
    tick(agent, controller, 70.0)
    for util in range(75, -1, -5):  # down to idle over 80 s, then idle for 4 minutes
        agent.node.set_util(web_pid, float(util))
        tick(agent, controller, 5.0)
    tick(agent, controller, 240.0)
    times = gains(agent)
    assert len(times) >= 2
    assert all(b - a >= 60.0 for a, b in pairwise(times))
    assert controller.shares[0] == 20  # idle: the online side keeps 20 ...
    applied = agent.record("train").applied_pct
    assert applied is not None
    assert applied >= 80 - 10  # ... and offline is within the restart threshold of the rest


@dataclass
class SloShare:
    """Test policy: the share grows with load, faster for a tighter SLO (50 ms: 1:1)."""

    def online_share(self, obs: OnlineObservation) -> int:
        return max(1, min(100, round(obs.load * 100 * 50.0 / obs.slo_ms)))


def test_each_online_service_is_judged_on_its_own_peak_and_slo(tmp_path: Path) -> None:
    agent = make_agent(tmp_path)
    controller = ShareController(agent.sup, agent.node, SloShare())
    agent.submit({**ONLINE, "name": "tight", "slo_ms": 25})
    agent.submit({**ONLINE, "name": "loose", "slo_ms": 200})
    agent.submit(OFFLINE)
    agent.run(0.5)
    tight, loose = agent.record("tight").pid, agent.record("loose").pid
    assert tight is not None
    assert loose is not None
    agent.node.set_util(tight, 40.0)
    agent.node.set_util(loose, 10.0)
    tick(agent, controller)
    assert controller.shares[0] == 80  # tight: 40 % at half the reference SLO
    agent.node.set_util(tight, 5.0)  # tight's burst is still in its window ...
    agent.node.set_util(loose, 75.0)  # ... and the busiest now is the lenient service
    tick(agent, controller)
    assert controller.shares[0] == 80
    assert agent.record("train").applied_pct == 20


def test_a_service_whose_worker_runs_the_kernels_is_judged_on_the_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """vLLM's API server runs no kernel; its engine process, a child, does. The load is the
    workload's processes' (``members``), not the leader's 0 nor the GPU's, which counts the
    offline co-runner too."""
    agent, controller, policy = setup(tmp_path)
    leader = agent.record("web").pid
    assert leader is not None
    agent.node.set_util(leader, 0.0)
    worker = agent.node.spawn(["fake-workload", "--util-pct", "40", "--model", "resnet50"],
                              {}, 0)  # its engine
    monkeypatch.setattr(agent.node, "members",
                        lambda pid: [pid, worker] if pid == leader else [pid])
    tick(agent, controller)
    # not 0 (the leader) nor the GPU's (which counts train too)
    assert policy.seen[-1].load == pytest.approx(0.4)
    assert controller.shares[0] == 60


def test_static_policy_from_the_registry() -> None:
    policy = SHARE_POLICIES.create("static", online_pct=60)
    assert isinstance(policy, FixedShare)
    assert policy.online_share(OnlineObservation("m", 0.5, 10.0)) == 60


def test_the_simulators_dynamic_policy_drives_the_agent(tmp_path: Path) -> None:
    """The registry's default is the DynamicShare object the co-location simulator uses: a
    lightly loaded online service leaves most SMs to offline, a busy one takes them back."""
    policy = SHARE_POLICIES.create("dynamic")
    assert isinstance(policy, DynamicShare)
    agent = make_agent(tmp_path)
    controller = ShareController(agent.sup, agent.node, policy, threshold_pct=10)
    agent.submit(ONLINE)  # resnet50, SLO 50 ms, util 30 %
    agent.submit(OFFLINE)
    agent.run(0.5)
    web_pid = agent.record("web").pid
    assert web_pid is not None
    agent.node.set_util(web_pid, 5.0)
    for _ in range(20):  # a light load: the policy's share (75 %), up from the spec's 50/50
        tick(agent, controller)
    low = controller.shares[0]
    expected = policy.online_share(OnlineObservation("resnet50", 0.05, 50.0, low))
    assert low == expected
    assert agent.record("train").applied_pct == 100 - low
    agent.node.set_util(web_pid, 80.0)
    tick(agent, controller)
    high = controller.shares[0]
    assert high > low  # raised at once when the SLO is at risk
    assert high == policy.online_share(OnlineObservation("resnet50", 0.8, 50.0, low))
    assert agent.record("web").pid == web_pid  # online never restarted


def test_a_model_the_policy_does_not_know_is_logged_not_fatal(tmp_path: Path) -> None:
    """The split in force is kept (and logged once); a guard's floor still applies to it."""
    agent = make_agent(tmp_path)
    floors = {0: 0}
    controller = ShareController(agent.sup, agent.node, SHARE_POLICIES.create("dynamic"),
                                 floor=lambda gpu, now: floors.get(gpu, 0))
    agent.submit({**ONLINE, "model": "no-such-model"})
    agent.submit(OFFLINE)  # sm_share 50
    agent.run(0.5)
    pid = agent.record("train").pid
    tick(agent, controller, 10.0)
    assert agent.record("web").status is Status.RUNNING
    assert controller.shares[0] == 50
    assert agent.record("train").pid == pid
    errors = [e for e in agent.store.events() if e.kind == "share policy error"]
    assert len(errors) == 1  # logged once, not every tick
    assert "no-such-model" in errors[0].detail
    floors[0] = 80
    tick(agent, controller)
    assert controller.shares[0] == 80
    assert agent.record("train").applied_pct == 20


def test_a_service_the_policy_cannot_judge_does_not_block_the_others(tmp_path: Path) -> None:
    agent = make_agent(tmp_path)
    controller = ShareController(agent.sup, agent.node, SHARE_POLICIES.create("dynamic"))
    agent.submit({**ONLINE, "name": "aaa", "model": "no-such-model"})
    agent.submit(ONLINE)  # resnet50, SLO 50 ms
    agent.run(0.5)
    tick(agent, controller)
    agent.submit(OFFLINE)  # arrives with sm_share 50: nothing decided yet forces it to 1 %
    agent.run(0.5)
    assert agent.record("train").applied_pct is not None
    web_pid = agent.record("web").pid
    assert web_pid is not None
    agent.node.set_util(web_pid, 95.0)
    tick(agent, controller)
    assert controller.shares[0] == 100  # web's need decides, though "aaa" cannot be judged
    assert agent.record("train").applied_pct == 1
    assert [e.kind for e in agent.store.events()].count("share policy error") == 1


def test_an_unjudged_service_alone_leaves_a_new_offline_job_its_spec_share(
    tmp_path: Path,
) -> None:
    agent = make_agent(tmp_path)
    controller = ShareController(agent.sup, agent.node, SHARE_POLICIES.create("dynamic"))
    agent.submit({**ONLINE, "model": "no-such-model"})
    agent.run(0.5)
    tick(agent, controller)
    agent.submit(OFFLINE)
    tick(agent, controller, 2.0)
    assert agent.record("train").applied_pct == 50
    assert controller.shares[0] == 50  # the split in force, kept


def test_a_steady_load_under_a_busy_co_runner_keeps_a_steady_share(tmp_path: Path) -> None:
    """An online service sharing with a busy offline job is busy longer than its load (its
    kernels get fewer SMs while the offline job runs them, 60 % of the time here). Read as
    load, that busy time asked for more SMs than the load needs: 76 %, where the policy's
    need at the 7 % load is 68 %. The controller reads the load back through the model's
    speed at the share in force and the co-runner's busy time."""
    policy = SHARE_POLICIES.create("dynamic")
    agent = make_agent(tmp_path)
    controller = ShareController(agent.sup, agent.node, policy, threshold_pct=10)
    agent.submit({**ONLINE, "slo_ms": 60})
    agent.submit(OFFLINE)
    agent.run(0.5)
    web_pid = agent.record("web").pid
    assert web_pid is not None
    agent.node.set_util(web_pid, 7.0)  # the GenAI pods' mean duty cycle, steady
    tick(agent, controller, 600.0)
    need = policy.online_share(OnlineObservation("resnet50", 0.07, 60.0, 100))
    assert controller.shares[0] == need
    assert share_changes(agent) <= 2  # to the need and, once watched a window, no more


def test_solo_load_is_read_through_the_models_speed() -> None:
    serial = float(mps.ONLINE_SERIAL[mps.model_index("resnet50")])
    # 20 % load on the 30 % of the SMs offline leaves it while offline runs kernels
    busy = 20.0 / float(mps.speed(0.3, serial))
    assert solo_load_pct(busy, "resnet50", 70, 1.0) == pytest.approx(20.0)
    # offline runs kernels half the time: the service has the whole GPU the other half
    half = 100.0 * mps.busy_beside(0.2, 0.3, serial, 0.5)
    assert half == pytest.approx(10.0 / float(mps.speed(0.3, serial)) + 10.0)
    assert solo_load_pct(half, "resnet50", 70, 0.5) == pytest.approx(20.0)
    assert solo_load_pct(busy, "resnet50", 0, 0.0) == busy  # alone: busy is its load
    assert solo_load_pct(busy, "my-llm", 70, 1.0) == busy  # a model perf does not know
    assert solo_load_pct(100.0, "resnet50", 70, 1.0) == 100.0  # saturated: no load to read
