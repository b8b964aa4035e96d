"""What the agent observes for the co-location core, on the fake node: one row per (GPU,
online service) with its solo load, windowed peak, p99 report, placement and share in force."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from cotenant.agent.colocation import check_online, solo_load_pct
from cotenant.agent.spec import WorkloadSpec
from cotenant.errors import InputError
from cotenant.perf import mps
from cotenant.perf.interference import interference
from cotenant.policies.colocation import COLOCATION

from .harness import OFFLINE, WEB, Node, fixed

RESNET = mps.model_index("resnet50")


def test_a_row_shows_what_the_node_sees(tmp_path: Path) -> None:
    node = Node(tmp_path, fixed(50), WEB, OFFLINE)
    node.run(1.0)
    rows = node.rows()
    obs = rows.obs
    assert rows.keys == ((0, "web"),)
    assert rows.pairs == (0,)
    assert (obs.model[0], obs.slo_ms[0]) == (RESNET, 200.0)
    # the fake service is busy 30 % / speed(50 % of the SMs) while train runs kernels beside
    # it: read back through the model's speed, its solo load is 30 %
    assert obs.load[0] == pytest.approx(0.3)
    assert obs.load_peak[0] == pytest.approx(0.3)
    assert (obs.placed[0], obs.running[0], obs.share[0]) == (True, True, 50)
    assert obs.stretch[0] == interference().predicted_stretch("mps")
    assert math.isnan(obs.p99_ms[0])
    node.report(120.0)
    obs = node.rows().obs
    now = node.agent.clock()
    assert (obs.p99_ms[0], obs.p99_at_s[0]) == (120.0, now)
    assert obs.p99_since_s[0] == now - 10.0  # a pushed report reaches settle_s back


def test_a_paused_co_runner_is_placed_not_running_and_a_held_gpu_has_none_placed(
    tmp_path: Path,
) -> None:
    node = Node(tmp_path, fixed(50), WEB, OFFLINE)
    sup, now = node.agent.sup, node.agent.clock()
    assert sup.pause("train", now, now + 30.0)
    obs = node.rows().obs
    assert (obs.placed[0], obs.running[0]) == (True, False)
    sup.hold_offline(0, now + 60.0)
    rows = node.rows()
    assert (rows.obs.placed[0], rows.obs.running[0], rows.obs.share[0]) == (False, False, 100)
    assert rows.pairs == (1,)  # no offline work there now: a pair that has changed


def test_the_share_in_force_is_what_the_largest_offline_cap_leaves(tmp_path: Path) -> None:
    node = Node(tmp_path, fixed(50, guard=False), WEB,
                {**OFFLINE, "sm_share": 30}, {**OFFLINE, "name": "late", "sm_share": 40})
    assert node.rows().obs.share[0] == 60  # more for offline waits for a watched window
    node.agent.submit({**OFFLINE, "name": "capless", "sm_share": None})
    assert node.rows().obs.share[0] == 0  # no cap yet: MPS would give it every SM


def test_the_peak_is_the_policys_load_window(tmp_path: Path) -> None:
    node = Node(tmp_path, fixed(50, guard=False).with_(load_window_s=30.0), WEB, OFFLINE)
    node.agent.node.set_util(node.pid("web"), 55.0)
    node.run(1.0)
    node.agent.node.set_util(node.pid("web"), 10.0)
    node.run(29.0)
    obs = node.rows().obs
    assert obs.load[0] == pytest.approx(0.1)
    assert obs.load_peak[0] == pytest.approx(0.55)  # still in the window
    node.run(1.5)
    assert node.rows().obs.load_peak[0] == pytest.approx(0.1)


def test_a_service_whose_worker_runs_the_kernels_is_judged_on_the_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """vLLM's API server runs no kernel; its engine process, a child, does. The load is the
    workload's processes' (``members``), not the leader's 0 nor the GPU's, which counts the
    offline co-runner too."""
    node = Node(tmp_path, fixed(50), WEB)
    fake = node.agent.node
    leader = node.pid("web")
    fake.set_util(leader, 0.0)
    worker = fake.spawn(["fake-workload", "--util-pct", "40", "--model", "resnet50"], {}, 0)
    monkeypatch.setattr(fake, "members", lambda pid: [pid, worker] if pid == leader else [pid])
    node.run(1.0)
    assert node.rows().obs.load[0] == pytest.approx(0.4)


def test_several_online_services_are_a_row_each_and_the_gpu_takes_the_largest_share(
    tmp_path: Path,
) -> None:
    policy = COLOCATION.create("cotenant-pause")
    node = Node(tmp_path, policy, {**WEB, "name": "tight", "slo_ms": 100},
                {**WEB, "name": "loose", "slo_ms": 400}, OFFLINE)
    node.agent.node.set_util(node.pid("tight"), 10.0)
    node.agent.node.set_util(node.pid("loose"), 55.0)
    node.run(1.0)
    rows = node.rows()
    assert rows.keys == ((0, "loose"), (0, "tight"))
    obs = rows.obs
    needs = policy.share.needed(policy.mechanism, obs.model, obs.load_peak,  # type: ignore[union-attr]
                                obs.slo_ms, obs.stretch)
    assert needs[0] != needs[1]
    assert node.share() == max(needs)
    assert node.train()[1] == 100 - max(needs)


def test_a_model_the_policy_cannot_judge_is_left_out_and_logged_once(tmp_path: Path) -> None:
    node = Node(tmp_path, COLOCATION.create("cotenant-pause"),
                {**WEB, "name": "aaa", "model": "no-such-model"}, WEB, OFFLINE)
    node.run(5.0)
    assert node.rows().keys == ((0, "web"),)  # the other still decides
    errors = [e.detail for e in node.agent.store.events() if e.kind == "policy error"]
    assert errors == ["the co-location policy cannot judge online service 'aaa': no "
                      "performance model of 'no-such-model'"]
    # a fixed split without a guard reads no model: every service is a row
    plain = Node(tmp_path / "plain", fixed(50, guard=False),
                 {**WEB, "name": "aaa", "model": "no-such-model"})
    assert plain.rows().keys == ((0, "aaa"),)


def test_an_online_service_the_policy_cannot_judge_is_refused_at_submit() -> None:
    spec = WorkloadSpec.from_dict({**WEB, "model": "resnet-50"})
    with pytest.raises(InputError, match="cannot judge 'resnet-50'") as info:
        check_online(COLOCATION.create("cotenant-pause"), spec)
    assert "resnet50" in info.value.one_line()
    check_online(fixed(50, guard=False), spec)  # reads no model
    check_online(COLOCATION.create("cotenant-pause"),
                 WorkloadSpec.from_dict({**OFFLINE, "model": "anything"}))


def test_a_new_offline_job_is_a_new_pair(tmp_path: Path) -> None:
    """The guard's floor belongs to the pair: a job that arrives after the one it throttled
    starts at the policy's split, as in the simulator."""
    node = Node(tmp_path, fixed(50, pause_s=0.0), WEB, OFFLINE)
    node.report(199.0)
    node.run(1.0)
    assert node.share() == 70
    node.agent.sup.stop("train", node.agent.clock())
    node.run(1.0)
    node.agent.submit({**OFFLINE, "name": "next"})
    node.run(1.0)
    assert node.share() == 50
    assert node.train("next")[1] == 50
    obs = node.rows().obs
    assert math.isnan(obs.p99_ms[0])  # the report measured the pair before


def test_solo_load_is_read_through_the_models_speed() -> None:
    serial = float(mps.ONLINE_SERIAL[RESNET])
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


def test_a_clock_stepping_back_starts_the_windows_afresh(tmp_path: Path) -> None:
    node = Node(tmp_path, fixed(50, guard=False), WEB, OFFLINE)
    node.agent.node.set_util(node.pid("web"), 55.0)
    node.run(1.0)
    node.agent.node.set_util(node.pid("web"), 10.0)
    node.agent.clock.step(-3600.0)  # the wall clock alone
    node.run(0.5)
    assert node.rows().obs.load_peak[0] < 0.5  # the burst before the step is forgotten


def test_under_nvmls_mps_sampling_the_load_is_the_whole_gpus_and_the_agent_says_so(
    tmp_path: Path,
) -> None:
    """As NVML does, the node samples MPS clients' SM use on their server: the service has no
    sample of its own and no request rate, so its load is the GPU's utilisation, train's 60 %
    included, read with no correction for the co-runner; the agent says so once."""
    node = Node(tmp_path, fixed(50), WEB, OFFLINE, per_client_util=False)
    node.run(2.0)
    info = node.agent.node.gpu(0)
    assert info.utilisation_pct is not None
    assert info.utilisation_pct >= 90.0  # train's 60 and the service's 30, slowed
    assert node.rows().obs.load[0] == pytest.approx(info.utilisation_pct / 100.0)
    notes = [e.detail for e in node.agent.store.events("web")
             if e.kind == "load from the whole GPU"]
    assert notes == ["NVML samples MPS clients on the MPS server's pid: its load on GPU 0 is "
                     "read from the whole GPU: any other work on it included (a high "
                     "reading); a latency_metric would let the agent read its request rate"]
