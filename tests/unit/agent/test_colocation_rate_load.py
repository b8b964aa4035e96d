"""Under MPS NVML samples no client (it samples them on the MPS server's pid), so the agent
reads an online service's load from its request rate times its GPU time per request: the
spec's ``solo_ms``, else measured while it ran alone on its GPU, else the performance
model's batch time. The fake node samples as NVML does here (``per_client_util=False``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cotenant.agent.colocation.load import LEARN_WEIGHT, RequestCosts, RequestRates
from cotenant.agent.latency import RequestWindow
from cotenant.agent.spec import WorkloadSpec
from cotenant.errors import InputError
from cotenant.perf import mps

from .harness import OFFLINE, WEB, Node, fixed


def _served(node: Node, per_s: float, seconds: float = 1.0, name: str = "web") -> None:
    """The latency scraper closed a window of ``seconds`` just now at ``per_s`` requests/s."""
    now = node.agent.clock()
    node.observer.count([RequestWindow(name, per_s * seconds, now - seconds, now)])


def _load_events(node: Node) -> list[tuple[str, str]]:
    return [(e.kind, e.detail) for e in node.agent.store.events("web")
            if e.kind.startswith("load from")]


def test_the_load_is_the_request_rate_times_the_specs_gpu_time_per_request(
    tmp_path: Path,
) -> None:
    node = Node(tmp_path, fixed(50), {**WEB, "solo_ms": 12.5}, OFFLINE, per_client_util=False)
    node.run(1.0)
    whole = node.agent.node.gpu(0).utilisation_pct
    assert whole is not None
    assert whole >= 90.0  # what it read before: train's work too
    assert node.rows().obs.load[0] == pytest.approx(whole / 100.0)
    _served(node, 24.0)
    node.run(0.5)
    obs = node.rows().obs
    assert obs.load[0] == pytest.approx(24.0 * 12.5 / 1000.0)  # 0.3, train not counted
    assert obs.load_peak[0] == pytest.approx(whole / 100.0)  # the window keeps the earlier
    assert _load_events(node) == [
        ("load from the whole GPU", "NVML samples MPS clients on the MPS server's pid: its load "
         "on GPU 0 is read from the whole GPU: any other work on it included (a high "
         "reading); a latency_metric would let the agent read its request rate"),
        ("load from request rate", "NVML samples MPS clients on the MPS server's pid: its load "
         "on GPU 0 is read from its request rate: 12.5 ms per request (the spec's solo_ms)"),
    ]
    node.run(0.5)
    assert len(_load_events(node)) == 2  # said when the source changes, not every sample


def test_without_solo_ms_the_performance_models_batch_time_is_the_prior(tmp_path: Path) -> None:
    node = Node(tmp_path, fixed(50), WEB, OFFLINE, per_client_util=False)
    _served(node, 20.0)
    node.run(0.5)
    assert node.rows().obs.load[0] == pytest.approx(20.0 * mps.L100_MS["resnet50"] / 1000.0)
    assert "(the performance model's resnet50 (A100, batch 32))" in _load_events(node)[-1][1]


def test_a_service_alone_on_its_gpu_teaches_its_gpu_time_per_request(tmp_path: Path) -> None:
    """Alone, the GPU's utilisation (the MPS server's, 30 %) is the service's: at 25
    requests/s that is 12 ms each. Beside train, its load is read with that."""
    node = Node(tmp_path, fixed(50), WEB, per_client_util=False)
    gpu = node.agent.node.gpu(0)
    assert gpu.utilisation_pct == pytest.approx(30.0)
    assert any(p.mps_server for p in gpu.processes)  # the service is an MPS client
    _served(node, 19.0)  # fewer requests than a p99 needs: too few to learn from
    node.run(0.5)
    assert node.rows().obs.load[0] == pytest.approx(19.0 * mps.L100_MS["resnet50"] / 1000.0)
    _served(node, 25.0)
    node.run(0.5)
    assert node.rows().obs.load[0] == pytest.approx(25.0 * 12.0 / 1000.0)
    assert "12 ms per request (measured while it ran alone)" in _load_events(node)[-1][1]
    node.agent.submit(OFFLINE)
    node.run(1.0)
    assert node.train()[0].value == "running"
    _served(node, 30.0)  # beside train: nothing more is learned there
    node.run(0.5)
    assert node.rows().obs.load[0] == pytest.approx(30.0 * 12.0 / 1000.0)


def test_a_process_the_agent_does_not_run_means_the_service_is_not_alone(
    tmp_path: Path,
) -> None:
    node = Node(tmp_path, fixed(50), WEB, per_client_util=False)
    node.agent.node.spawn(["fake-workload", "--mem-mib", "100", "--util-pct", "40"], {}, 0)
    _served(node, 25.0)
    node.run(0.5)
    # the GPU's 70 % is not the service's: nothing learned, the model's prior is used
    assert node.rows().obs.load[0] == pytest.approx(25.0 * mps.L100_MS["resnet50"] / 1000.0)


def test_a_paused_co_runner_leaves_the_service_alone(tmp_path: Path) -> None:
    node = Node(tmp_path, fixed(50, guard=False), WEB, OFFLINE, per_client_util=False)
    now = node.agent.clock()
    assert node.agent.sup.pause("train", now, now + 60.0)
    node.run(1.0)
    _served(node, 20.0)
    node.run(0.5)
    assert node.rows().obs.load[0] == pytest.approx(0.3)  # 15 ms a request, learned
    assert "measured while it ran alone" in _load_events(node)[-1][1]


def test_rates_count_the_newest_windows_covering_a_second() -> None:
    rates = RequestRates(keep_s=10.0)
    assert rates.rate("web", 100.0) is None
    for i in range(8):  # 0.25 s windows ending at 98.25 ... 100.0: 10, 20, ... requests
        end = 98.25 + 0.25 * i
        rates.add(RequestWindow("web", 10.0 * (i + 1), end - 0.25, end))
    # the newest four: 80 + 70 + 60 + 50 requests in 1 s
    assert rates.rate("web", 100.0) == (260.0, 260.0)
    assert rates.rate("web", 99.0) == (100.0, 100.0)  # the four ending by then
    assert rates.rate("web", 98.6) == pytest.approx((60.0, 30.0))  # only two: half a second
    assert rates.rate("web", 109.0) == (260.0, 260.0)
    rates.add(RequestWindow("web", 6.0, 100.0, 104.0))  # a slow one: one window is enough
    assert rates.rate("web", 104.5) == (1.5, 6.0)
    assert rates.rate("web", 114.5) is None  # ended more than keep_s ago
    assert rates.rate("other", 104.5) is None
    rates.keep({"other"})
    assert rates.rate("web", 104.5) is None


def test_a_learned_time_per_request_moves_a_fifth_of_the_way_each_time() -> None:
    costs = RequestCosts()
    spec = WorkloadSpec.from_dict({**WEB, "argv": ["x"], "name": "web"})
    costs.learn("web", 30.0, 15.0)
    assert costs.cost(spec) == (20.0, "measured while it ran alone")
    costs.learn("web", 60.0, 15.0)  # 40 ms measured
    assert costs.cost(spec) == pytest.approx((20.0 + LEARN_WEIGHT * 20.0,
                                              "measured while it ran alone"))
    costs.learn("web", 0.0, 15.0)  # nothing busy, or nothing served: nothing to learn
    costs.learn("web", 50.0, 0.0)
    assert costs.cost(spec)[0] == pytest.approx(24.0)
    given = WorkloadSpec.from_dict({**WEB, "argv": ["x"], "solo_ms": 7})
    assert costs.cost(given) == (7.0, "the spec's solo_ms")  # the operator's figure wins
    unknown = WorkloadSpec.from_dict({**WEB, "argv": ["x"], "name": "llm", "model": "llm"})
    assert costs.cost(unknown) is None
    costs.keep(set())
    assert costs.cost(spec) == (mps.L100_MS["resnet50"],
                                "the performance model's resnet50 (A100, batch 32)")


@pytest.mark.parametrize(("value", "role", "rule"), [
    (0, "online", "must be a number of milliseconds"),
    (-3.0, "online", "must be a number of milliseconds"),
    ("12", "online", "must be a number of milliseconds"),
    (float("nan"), "online", "must be a number of milliseconds"),
    (12.0, "offline", "only an online service has one"),
])
def test_a_bad_solo_ms_is_a_one_line_error_naming_it(value: object, role: str,
                                                     rule: str) -> None:
    with pytest.raises(InputError, match=rule) as err:
        WorkloadSpec.from_dict({**WEB, "role": role, "solo_ms": value})
    assert err.value.where == "workload.solo_ms"


def test_solo_ms_round_trips_and_is_absent_where_not_given() -> None:
    spec = WorkloadSpec.from_dict({**WEB, "solo_ms": 12.5})
    assert spec.solo_ms == 12.5
    assert WorkloadSpec.from_dict(spec.to_dict()) == spec
    assert "solo_ms" not in WorkloadSpec.from_dict(WEB).to_dict()  # an older agent reads it
