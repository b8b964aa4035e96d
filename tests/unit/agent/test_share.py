"""The SM-share controller drives any SharePolicy and restarts only offline clients."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from cotenant.agent.share import SHARE_POLICIES, ShareController, StaticShare
from cotenant.agent.state import Status
from cotenant.policies.colocation.contract import OnlineObservation
from cotenant.policies.colocation.share import DynamicShare

from .harness import OFFLINE, ONLINE, Agent, make_agent


@dataclass
class LoadShare:
    """Test policy: the online service keeps its load plus 20 points; records what it saw."""

    seen: list[OnlineObservation] = field(default_factory=list)

    def online_share(self, obs: OnlineObservation) -> int:
        self.seen.append(obs)
        return max(1, min(100, round(obs.load * 100) + 20))


def setup(tmp_path: Path) -> tuple[Agent, ShareController, LoadShare]:
    agent = make_agent(tmp_path)
    policy = LoadShare()
    controller = ShareController(agent.sup, agent.node, policy, threshold_pct=10)
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
    assert obs.load == 0.3  # the online process's own SM utilisation
    assert controller.shares[0] == 50
    train = agent.record("train")
    assert train.status is Status.RUNNING
    assert train.applied_pct == 50  # 100 - 50: within the threshold, no restart
    web_pid = agent.record("web").pid
    assert web_pid is not None
    agent.node.set_util(web_pid, 70.0)  # load rises: online keeps 90, offline gets 10
    tick(agent, controller)
    train = agent.record("train")
    assert train.applied_pct == 10
    assert train.pid is not None
    assert agent.node.env_of(train.pid)["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "10"
    assert agent.record("web").pid == web_pid  # online never restarted
    assert train.restarts == 0  # a share change is not a fault
    assert policy.seen[-1].online_share_pct == 90


def test_small_gains_for_offline_do_not_restart_small_losses_do(tmp_path: Path) -> None:
    agent, controller, _ = setup(tmp_path)
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


def test_static_policy_from_the_registry() -> None:
    policy = SHARE_POLICIES.create("static", online_pct=60)
    assert isinstance(policy, StaticShare)
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
    for _ in range(20):  # hysteresis lowers the online share step by step
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
    agent = make_agent(tmp_path)
    controller = ShareController(agent.sup, agent.node, SHARE_POLICIES.create("dynamic"))
    agent.submit({**ONLINE, "model": "no-such-model"})
    agent.run(0.5)
    tick(agent, controller)
    assert agent.record("web").status is Status.RUNNING
    assert 0 not in controller.shares
