"""The core's share decisions enforced on the fake node: offline clients restarted with the
new MPS cap, online never restarted, the gains the core allows and no more."""

from __future__ import annotations

import math
from itertools import pairwise
from pathlib import Path

import numpy as np
import pytest

from cotenant.agent.colocation import Enforcer, GpuAction
from cotenant.agent.latency import RequestWindow
from cotenant.agent.state import Status
from cotenant.perf import mps
from cotenant.perf.interference import interference
from cotenant.policies.colocation import COLOCATION, ColocationPolicy, DynamicShare, Mechanism, Why
from cotenant.policies.colocation.contract import MAX_SHARE_PCT

from .harness import OFFLINE, WEB, Node, make_agent
from .test_latency import METRIC

RESNET = mps.model_index("resnet50")
STRETCH = interference().predicted_stretch("mps")


def needed(load: float, slo: float = 200.0, policy: DynamicShare | None = None) -> int:
    """The share the core's DynamicShare sizes for resnet50 at ``load``."""
    sizing = policy or DynamicShare()
    return int(sizing.needed(Mechanism.MPS, np.array([RESNET]), np.array([load]),
                             np.array([slo]), np.array([STRETCH]))[0])


def dynamic(window_s: float = 60.0) -> ColocationPolicy:
    return COLOCATION.create("cotenant-pause", load_window_s=window_s)


def test_the_share_follows_the_load_through_offline_restarts(tmp_path: Path) -> None:
    node = Node(tmp_path, dynamic(), WEB, OFFLINE)  # offline starts at its own 50 %
    web = node.pid("web")
    node.run(58.0)
    assert node.train() == (Status.RUNNING, 50)  # a gain waits for a watched window ...
    node.run(2.0)
    assert node.share() == needed(0.3)  # ... then offline gets what the load leaves
    assert node.train() == (Status.RUNNING, 100 - needed(0.3))
    node.agent.node.set_util(web, 55.0)  # a rise: at once
    node.run(1.0)
    train = node.agent.record("train")
    assert node.share() == needed(0.55)
    assert (train.status, train.applied_pct) == (Status.RUNNING, 100 - needed(0.55))
    assert train.pid is not None
    assert node.agent.node.env_of(train.pid)["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == str(
        100 - needed(0.55))
    assert node.pid("web") == web  # online never restarted
    assert (train.restarts, train.failures) == (0, 0)  # a share change is not a fault
    assert not any(w == "train" for w, _ in node.agent.store.fault_counts())
    assert train.last_exit == "requested: killed by SIGTERM"


def test_a_fall_gives_offline_more_only_once_it_has_lasted_the_window(tmp_path: Path) -> None:
    node = Node(tmp_path, dynamic(), WEB, OFFLINE)
    web = node.pid("web")
    node.agent.node.set_util(web, 55.0)
    node.run(1.0)
    raised = node.pid("train")
    node.agent.node.set_util(web, 10.0)
    node.run(59.0)
    assert node.share() == needed(0.55)  # the 55 % sample is still in the window
    assert node.pid("train") == raised
    node.run(2.0)
    assert node.share() == needed(0.1)
    assert node.train() == (Status.RUNNING, 100 - needed(0.1))
    assert node.pid("train") != raised


def test_a_bursty_load_restarts_offline_once_not_at_every_swing(tmp_path: Path) -> None:
    """Utilisation alternating 0 % / 60 % every 3 s: a short window follows the swings, each
    a restart; the policy's minute-long window sees the peak and restarts once."""
    counts = {}
    for window in (1.0, 60.0):
        node = Node(tmp_path / str(window), dynamic(window), WEB, OFFLINE)
        web = node.pid("web")
        for step in range(60):  # 180 s
            node.agent.node.set_util(web, 60.0 if step % 2 else 0.0)
            node.run(3.0)
        counts[window] = node.share_changes()
    assert counts[1.0] >= 40
    assert counts[60.0] == 1


def gains(node: Node) -> list[float]:
    """When the offline client was restarted for more SMs."""
    out = []
    for e in node.agent.store.events("train"):
        if e.kind == "share change":
            old, new = (int(x) for x in e.detail.split("->"))
            if new > old:
                out.append(e.time)
    return out


def test_a_falling_ramp_gives_offline_more_at_most_once_per_window(tmp_path: Path) -> None:
    node = Node(tmp_path, dynamic(), {**WEB, "slo_ms": 400}, OFFLINE)
    web = node.pid("web")
    node.agent.node.set_util(web, 80.0)
    node.run(70.0)
    for util in range(75, -1, -5):  # down to idle over 80 s, then idle for 4 minutes
        node.agent.node.set_util(web, float(util))
        node.run(5.0)
    node.run(240.0)
    times = gains(node)
    assert len(times) >= 2
    assert all(b - a >= 60.0 for a, b in pairwise(times))
    # idle: within the sizing's hysteresis step of its need at no load
    share = node.share()
    assert share is not None
    assert 0 <= share - needed(0.0, 400.0) < DynamicShare().step


def test_a_steady_load_under_a_busy_co_runner_keeps_a_steady_share(tmp_path: Path) -> None:
    """An online service sharing with a busy offline job is busy longer than its load (its
    kernels get fewer SMs while the offline job runs them); the observer reads the load back
    through the model's speed, so the share settles at the need of the true 7 % load."""
    node = Node(tmp_path, dynamic(), {**WEB, "slo_ms": 60}, OFFLINE)
    node.agent.node.set_util(node.pid("web"), 7.0)  # the GenAI pods' mean duty cycle
    node.run(600.0)
    assert node.share() == needed(0.07, 60.0)
    assert node.share_changes() <= 2  # to the need and, once watched a window, no more


def test_under_nvmls_mps_sampling_the_same_service_gets_every_sm_it_can(
    tmp_path: Path,
) -> None:
    """As NVML does, the node samples the MPS clients' SM use on their server: the service
    has no sample of its own, so its load is read as the whole GPU's utilisation, the
    offline job's work included and uncorrected. The policy then gives it the most it can
    give an online service, and the offline job the least: safe for the service, little
    for the job (a per-client reading under MPS is not done)."""
    node = Node(tmp_path, dynamic(), {**WEB, "slo_ms": 60}, OFFLINE, per_client_util=False)
    node.agent.node.set_util(node.pid("web"), 7.0)
    node.run(600.0)
    info = node.agent.node.gpu(0)
    assert info.utilisation_pct is not None
    assert info.utilisation_pct >= 67.0  # train's 60 and the service's 7, at least
    assert node.share() == MAX_SHARE_PCT > needed(0.07, 60.0)


def test_under_nvmls_mps_sampling_a_request_rate_sizes_the_share_on_the_services_load(
    tmp_path: Path,
) -> None:
    """The same node, the service serving 5 requests a second at 14 ms each alone
    (``solo_ms``): its load is read as 7 %, and the share is sized for that, as with
    per-client samples."""
    node = Node(tmp_path, dynamic(), {**WEB, "slo_ms": 60, "solo_ms": 14.0,
                                      "latency_metric": METRIC}, OFFLINE, per_client_util=False)
    node.agent.node.set_util(node.pid("web"), 7.0)
    for _ in range(1200):
        now = node.agent.clock()
        node.observer.count([RequestWindow("web", 2.5, now - 0.5, now)])
        node.run(0.5)
    assert node.rows().obs.load[0] == pytest.approx(0.07)
    assert node.share() == needed(0.07, 60.0) < MAX_SHARE_PCT
    assert node.train() == (Status.RUNNING, MAX_SHARE_PCT - needed(0.07, 60.0))


def action(gpu: int = 0, share: int = 50, before: int = 50, restart: bool = False,
           why: frozenset[Why] = frozenset()) -> GpuAction:
    return GpuAction(gpu, True, share, before, restart, math.nan, False, -math.inf, why,
                     f"GPU {gpu}")


def test_a_client_over_its_new_cap_restarts_at_once_one_waiting_just_takes_it(
    tmp_path: Path,
) -> None:
    agent = make_agent(tmp_path)
    agent.submit(WEB)
    agent.submit(OFFLINE)  # running at 50 %
    agent.run(0.5)
    agent.sup.hold_offline(0, agent.clock() + 60.0)
    agent.submit({**OFFLINE, "name": "held"})
    enforcer = Enforcer(agent.sup)
    enforcer.apply([action(share=50, before=50)], agent.clock())
    assert "share change" not in agent.kinds("train")  # nothing changed
    enforcer.apply([action(share=55, before=50, restart=True, why=frozenset({Why.SHARE_UP}))],
                   agent.clock())
    assert agent.kinds("train")[-1] == "share change"  # 5 points, but the online needs them
    assert agent.record("held").share_pct == 45  # waiting: it starts with the new cap
    assert "share change" not in agent.kinds("held")
    assert agent.record("web").status is Status.RUNNING
    agent.run(61.0)  # the hold over
    assert agent.record("train").applied_pct == 45
    assert agent.record("held").applied_pct == 45
    assert enforcer.counts == {"pause": 0, "throttle": 0, "evict": 0}


def test_guard_actions_are_enforced_logged_and_counted(tmp_path: Path) -> None:
    agent = make_agent(tmp_path)
    agent.submit(WEB)
    agent.submit(OFFLINE)
    agent.submit({**OFFLINE, "name": "elsewhere", "gpu": 1})
    agent.run(0.5)
    now = agent.clock()
    enforcer = Enforcer(agent.sup)
    pause = GpuAction(0, True, 50, 50, False, now + 30.0, False, -math.inf, frozenset({Why.PAUSE}),
                      "GPU 0: p99 199 ms, SLO 200 ms")
    enforcer.apply([pause], now)
    assert agent.sup.paused() == {"train"}
    [event] = [e for e in agent.store.events("node") if e.kind == "guard pause"]
    assert event.detail == "GPU 0: p99 199 ms, SLO 200 ms: offline paused 30 s"
    evict = GpuAction(0, True, 70, 50, False, math.nan, True, now + 300.0, frozenset({Why.EVICT}),
                      "GPU 0: p99 199 ms, SLO 200 ms")
    enforcer.apply([evict], now)
    assert agent.sup.held_until(0) == now + 300.0
    assert agent.status("train") is Status.RESTARTING  # stopped, to start after the hold
    assert agent.status("elsewhere") is Status.RUNNING
    assert "guard evict" in agent.kinds("train")
    assert enforcer.counts == {"pause": 1, "throttle": 0, "evict": 1}
