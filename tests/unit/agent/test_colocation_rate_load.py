"""Under MPS NVML samples no client (it samples them on the MPS server's pid), so the agent
reads an online service's load from its request rate times its GPU time per request: the
spec's ``solo_ms``, else measured while it ran alone on its GPU; with neither, the whole
GPU's utilisation. The fake node samples as NVML does here (``per_client_util=False``)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from cotenant.agent.colocation.rates import (
    FALL_WEIGHT,
    RISE_WEIGHT,
    RequestCosts,
    RequestRates,
    longest_window_s,
)
from cotenant.agent.latency import RequestWindow
from cotenant.agent.spec import WorkloadSpec
from cotenant.errors import InputError
from cotenant.policies.colocation import GuardSettings

from .harness import OFFLINE, WEB, Node, fixed
from .test_latency import METRIC

SERVED = {**WEB, "latency_metric": METRIC}
"""The harness's service (30 % busy alone) with a latency histogram."""


def _served(node: Node, per_s: float, seconds: float = 1.0, name: str = "web") -> None:
    """The latency scraper closed a window of ``seconds`` just now at ``per_s`` requests/s."""
    now = node.agent.clock()
    node.observer.count([RequestWindow(name, per_s * seconds, now - seconds, now)])


def _load_events(node: Node) -> list[tuple[str, str]]:
    return [(e.kind, e.detail) for e in node.agent.store.events("web")
            if e.kind.startswith("load from")]


def _load(node: Node) -> float:
    return float(node.rows().obs.load[0])


def test_the_load_is_the_request_rate_times_the_specs_gpu_time_per_request(
    tmp_path: Path,
) -> None:
    node = Node(tmp_path, fixed(50), {**SERVED, "solo_ms": 12.5}, OFFLINE, per_client_util=False)
    node.run(1.0)
    whole = node.agent.node.gpu(0).utilisation_pct
    assert whole is not None
    assert whole >= 90.0  # what it read before: train's work too
    assert _load(node) == pytest.approx(whole / 100.0)
    _served(node, 24.0)
    node.run(0.5)
    assert _load(node) == pytest.approx(24.0 * 12.5 / 1000.0)  # 0.3, train not counted
    assert node.rows().obs.load_peak[0] == pytest.approx(whole / 100.0)  # the window keeps it
    assert _load_events(node) == [
        ("load from the whole GPU", "NVML samples MPS clients on the MPS server's pid: its load "
         "on GPU 0 is read from the whole GPU: any other work on it included (a high "
         "reading); no request count closed in the last 8.25 s"),
        ("load from request rate", "NVML samples MPS clients on the MPS server's pid: its load "
         "on GPU 0 is read from its request rate: 12.5 ms per request (the spec's solo_ms)"),
    ]
    node.run(0.5)
    assert len(_load_events(node)) == 2  # said when the source changes, not every sample


def test_an_idle_service_reads_no_load_and_a_busy_one_at_most_the_whole_gpu(
    tmp_path: Path,
) -> None:
    node = Node(tmp_path, fixed(50), {**SERVED, "solo_ms": 100.0}, OFFLINE,
                per_client_util=False)
    _served(node, 0.0, seconds=5.0)  # a window dropped for too few requests still counts
    node.run(0.5)
    assert _load(node) == 0.0
    _served(node, 20.0)  # 20 requests of 100 ms a second: twice the GPU
    node.run(0.5)
    assert _load(node) == 1.0


def test_without_a_time_per_request_the_load_stays_the_whole_gpus(tmp_path: Path) -> None:
    """Never alone and no ``solo_ms``: no figure of the service's own to multiply the rate
    by, so the agent keeps the high reading rather than guess one."""
    node = Node(tmp_path, fixed(50), SERVED, OFFLINE, per_client_util=False)
    _served(node, 20.0)
    node.run(0.5)
    whole = node.agent.node.gpu(0).utilisation_pct
    assert whole is not None
    assert _load(node) == pytest.approx(whole / 100.0)
    assert _load_events(node) == [("load from the whole GPU", "NVML samples MPS clients on the "
                                   "MPS server's pid: its load on GPU 0 is read from the whole "
                                   "GPU: any other work on it included (a high reading); no "
                                   "GPU time per request yet: give solo_ms, or it is measured "
                                   "while the service runs alone on its GPU")]


def test_a_service_alone_on_its_gpu_teaches_its_gpu_time_per_request(tmp_path: Path) -> None:
    """Alone, the GPU's utilisation (the MPS server's, 30 %) is the service's: at 25
    requests/s that is 12 ms each. Beside train, its load is read with that."""
    node = Node(tmp_path, fixed(50), SERVED, per_client_util=False)
    node.run(1.0)  # sampled alone for a second: the windows below begin after that
    gpu = node.agent.node.gpu(0)
    assert gpu.utilisation_pct == pytest.approx(30.0)
    assert any(p.mps_server for p in gpu.processes)  # the service is an MPS client
    _served(node, 19.0)  # fewer requests than a p99 needs: too few to learn from
    node.run(0.5)
    assert _load(node) == pytest.approx(0.3)  # the whole GPU's, which is its own here
    assert [kind for kind, _ in _load_events(node)] == ["load from the whole GPU"]
    _served(node, 25.0)
    node.run(0.5)
    assert _load(node) == pytest.approx(25.0 * 12.0 / 1000.0)
    assert "12 ms per request (measured while it ran alone)" in _load_events(node)[-1][1]
    node.agent.submit(OFFLINE)
    node.run(1.0)
    assert node.train()[0].value == "running"
    _served(node, 30.0)  # beside train: nothing more is learned there
    node.run(0.5)
    assert _load(node) == pytest.approx(30.0 * 12.0 / 1000.0)


def test_a_rate_read_before_the_traffic_fell_teaches_nothing_more(tmp_path: Path) -> None:
    """The traffic falls tenfold, and no window closes for seconds: the GPU's utilisation
    now over the last window's rate would read a tenth of the time per request. Each
    window is measured on once, with the utilisation over its own span."""
    node = Node(tmp_path, fixed(50), SERVED, per_client_util=False)
    node.run(1.0)
    _served(node, 25.0)
    node.run(0.5)
    node.agent.node.set_util(node.pid("web"), 3.0)
    node.run(4.0)
    _served(node, 25.0)  # a window of the old rate, but over a span when it was busy 3 %
    node.run(0.5)
    assert node.observer.sampler.costs.cost(node.agent.record("web").spec) == pytest.approx(
        (12.0 + FALL_WEIGHT * (1.2 - 12.0), "measured while it ran alone"))


def test_a_process_the_agent_does_not_run_means_the_service_is_not_alone(
    tmp_path: Path,
) -> None:
    node = Node(tmp_path, fixed(50), SERVED, per_client_util=False)
    node.agent.node.spawn(["fake-workload", "--mem-mib", "100", "--util-pct", "40"], {}, 0)
    node.run(1.0)
    _served(node, 25.0)
    node.run(0.5)
    # the GPU's 70 % is not the service's: nothing learned, the whole GPU read
    assert _load(node) == pytest.approx(0.7)
    assert node.observer.sampler.costs.cost(node.agent.record("web").spec) is None


def test_a_paused_co_runner_leaves_the_service_alone_and_a_pidless_one_is_not(
    tmp_path: Path,
) -> None:
    node = Node(tmp_path, fixed(50, guard=False), SERVED, OFFLINE, per_client_util=False)
    now = node.agent.clock()
    assert node.agent.sup.pause("train", now, now + 60.0)
    node.run(1.5)  # the window below begins after the last sample with train running
    _served(node, 20.0)
    node.run(0.5)
    assert _load(node) == pytest.approx(0.3)  # 15 ms a request, learned
    assert "measured while it ran alone" in _load_events(node)[-1][1]
    sampler, info = node.observer.sampler, node.agent.node.gpu(0)
    records = node.agent.store.all()
    web = node.agent.record("web")
    assert sampler._is_alone(info, web, records)
    assert not sampler._is_alone(info, replace(web, pid=None), records)
    assert not sampler._is_alone(replace(info, processes=()), web, records)  # none listed


def test_a_clock_stepping_back_forgets_the_rates(tmp_path: Path) -> None:
    node = Node(tmp_path, fixed(50), {**SERVED, "solo_ms": 12.5}, OFFLINE, per_client_util=False)
    _served(node, 24.0)
    node.run(0.5)
    assert _load(node) == pytest.approx(0.3)
    node.observer.forget()
    node.run(0.5)
    assert _load(node) > 0.9  # the whole GPU's again, until a window closes


def test_rates_count_the_newest_windows_next_to_each_other_covering_a_second() -> None:
    rates = RequestRates(fresh_s=8.0)
    assert rates.rate("web", 100.0) is None
    for i in range(8):  # 0.25 s windows ending at 98.25 ... 100.0: 10, 20, ... 80 requests
        end = 98.25 + 0.25 * i
        rates.add(RequestWindow("web", 10.0 * (i + 1), end - 0.25, end))
    # the newest four: 260 in 1 s; the newest alone (80 in 0.25 s, 320/s) is higher
    got = rates.rate("web", 100.0)
    assert got is not None
    assert (got.per_s, got.requests, got.since, got.until) == (320.0, 260.0, 99.0, 100.0)
    assert got.mean_per_s == 260.0
    early = rates.rate("web", 98.6)  # the two that had closed: 30 in 0.5 s, 80/s alone
    assert early is not None
    assert (early.per_s, early.requests) == (80.0, 30.0)
    rates.add(RequestWindow("web", 6.0, 100.0, 104.0))  # a slow one: one window is enough
    slow = rates.rate("web", 104.5)
    assert slow is not None
    assert (slow.per_s, slow.requests, slow.since) == (1.5, 6.0, 100.0)
    assert rates.rate("web", 112.1) is None  # the newest closed more than 8 s ago
    assert rates.rate("other", 104.5) is None
    rates.keep({"other"})
    assert rates.rate("web", 104.5) is None


def test_a_burst_after_an_idle_spell_shows_at_once() -> None:
    rates = RequestRates(fresh_s=8.0)
    rates.add(RequestWindow("web", 250.0, 95.0, 100.0))  # idle, then the burst's first 0.25 s
    rates.add(RequestWindow("web", 250.0, 100.0, 100.25))
    got = rates.rate("web", 100.25)
    assert got is not None
    assert got.per_s == 1000.0  # not 500 in 5.25 s
    assert got.mean_per_s == pytest.approx(500.0 / 5.25)


def test_a_gap_a_stepped_clock_or_a_suspended_agent_counts_nothing() -> None:
    rates = RequestRates(fresh_s=8.0)
    rates.add(RequestWindow("web", 100.0, 90.0, 91.0))
    rates.add(RequestWindow("web", 10.0, 95.0, 95.5))  # a failed read between: a gap
    got = rates.rate("web", 95.5)
    assert got is not None
    assert (got.requests, got.since) == (10.0, 95.0)
    rates.add(RequestWindow("web", 30.0, 95.5, 3695.5))  # the wall clock stepped an hour
    rates.add(RequestWindow("web", 5.0, 96.0, 96.0))  # no span
    rates.add(RequestWindow("web", -5.0, 96.0, 96.5))  # a counter reset read as negative
    assert rates.rate("web", 3696.0) is None
    assert rates.rate("web", 95.6) == got
    assert RequestRates(longest_window_s(GuardSettings())).fresh_s == 5.0 + 0.25 + 3.0


def test_a_measured_time_per_request_rises_fast_and_falls_slowly() -> None:
    costs = RequestCosts()
    spec = WorkloadSpec.from_dict({**SERVED, "argv": ["x"]})
    assert costs.cost(spec) is None  # no guess from the model's name
    costs.learn("web", 30.0, 15.0)
    assert costs.cost(spec) == (20.0, "measured while it ran alone")
    costs.learn("web", 60.0, 15.0)  # 40 ms measured: halfway up
    assert costs.cost(spec) == pytest.approx((20.0 + RISE_WEIGHT * 20.0,
                                              "measured while it ran alone"))
    costs.learn("web", 15.0, 15.0)  # 10 ms: a tenth of the way down
    assert costs.cost(spec)[0] == pytest.approx(30.0 - FALL_WEIGHT * 20.0)  # type: ignore[index]
    for busy, rate in ((0.0, 15.0), (50.0, 0.0), (99.0, 15.0), (100.0, 15.0)):
        costs.learn("web", busy, rate)  # idle, nothing served, or saturated: nothing
    assert costs.cost(spec)[0] == pytest.approx(28.0)  # type: ignore[index]
    given = WorkloadSpec.from_dict({**SERVED, "argv": ["x"], "solo_ms": 7})
    assert costs.cost(given) == (7.0, "the spec's solo_ms")  # the operator's figure wins
    costs.keep(set())
    assert costs.cost(spec) is None


@pytest.mark.parametrize(("change", "rule"), [
    ({"solo_ms": 0}, "must be a number of milliseconds"),
    ({"solo_ms": -3.0}, "must be a number of milliseconds"),
    ({"solo_ms": "12"}, "must be a number of milliseconds"),
    ({"solo_ms": float("nan")}, "must be a number of milliseconds"),
    ({"solo_ms": 12.0, "role": "offline", "latency_metric": None},
     "only an online service has one"),
    ({"solo_ms": 12.0, "latency_metric": None}, "needs a latency_metric"),
])
def test_a_bad_solo_ms_is_a_one_line_error_naming_it(change: dict[str, object],
                                                     rule: str) -> None:
    data = {k: v for k, v in {**SERVED, **change}.items() if v is not None}
    with pytest.raises(InputError, match=rule) as err:
        WorkloadSpec.from_dict(data)
    assert err.value.where == "workload.solo_ms"


def test_solo_ms_round_trips_and_is_absent_where_not_given() -> None:
    spec = WorkloadSpec.from_dict({**SERVED, "solo_ms": 12.5})
    assert spec.solo_ms == 12.5
    assert WorkloadSpec.from_dict(spec.to_dict()) == spec
    assert "solo_ms" not in WorkloadSpec.from_dict(SERVED).to_dict()  # an older agent reads it


def test_nothing_is_learned_from_a_window_whose_start_was_not_sampled(tmp_path: Path) -> None:
    """A window that began before the first sample of the GPU (or before the samples kept)
    cannot show the service was alone all through it."""
    node = Node(tmp_path, fixed(50), SERVED, per_client_util=False)
    node.run(1.0)
    _served(node, 25.0, seconds=5.0)  # began 5 s ago, before the agent sampled this GPU
    node.run(0.5)
    assert node.observer.sampler.costs.cost(node.agent.record("web").spec) is None
    _served(node, 25.0, seconds=1.0)  # after a gap: its own run of windows, all sampled
    node.run(0.5)
    assert node.observer.sampler.costs.cost(node.agent.record("web").spec) == pytest.approx(
        (12.0, "measured while it ran alone"))
