"""The latency scraper: p99 from a Prometheus histogram's increase, fed to the compute guard."""

from __future__ import annotations

import math
import threading
import urllib.error
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from cotenant.agent.backends import FakeNode, ManualClock
from cotenant.agent.latency import LatencyScraper, histogram_quantile, read_buckets
from cotenant.agent.service import AgentService
from cotenant.agent.spec import LatencyMetric, WorkloadSpec
from cotenant.errors import InputError
from cotenant.policies.colocation.share import FixedShare

from .harness import OFFLINE, ONLINE, make_agent

BOUNDS = (0.01, 0.025, 0.05, 0.1, 0.25, math.inf)
METRIC = {"url": "http://127.0.0.1:9/metrics", "histogram": "req_seconds",
          "labels": {"model": "resnet50"}}


def page(counts: dict[str, list[int]], name: str = "req_seconds") -> str:
    """An exposition page: per model label, cumulative counts per bound of BOUNDS."""
    lines = [f"# TYPE {name} histogram"]
    for model, cum in counts.items():
        for bound, count in zip(BOUNDS, cum, strict=True):
            le = "+Inf" if math.isinf(bound) else repr(bound)
            lines.append(f'{name}_bucket{{model="{model}",le="{le}"}} {count}')
        lines.append(f'{name}_count{{model="{model}"}} {cum[-1]}')
    return "\n".join(lines) + "\n"


def test_histogram_quantile_interpolates_like_prometheus() -> None:
    buckets = [(0.01, 5.0), (0.05, 90.0), (0.1, 99.0), (math.inf, 100.0)]
    # rank 99 is the top of the 0.05-0.1 bucket
    assert histogram_quantile(buckets, 0.99) == pytest.approx(0.1)
    # rank 50 lies 45 of 85 into the 0.01-0.05 bucket
    assert histogram_quantile(buckets, 0.5) == pytest.approx(0.01 + 0.04 * 45 / 85)
    # in the +Inf bucket: the largest finite bound
    assert histogram_quantile([(0.1, 50.0), (math.inf, 100.0)], 0.99) == 0.1
    assert histogram_quantile([(0.1, 0.0), (math.inf, 0.0)], 0.99) is None


def test_read_buckets_sums_matching_series_and_names_a_missing_one() -> None:
    text = page({"resnet50": [1, 2, 3, 4, 5, 6], "bert": [10, 20, 30, 40, 50, 60]})
    metric = LatencyMetric.from_dict(METRIC, "m")
    assert read_buckets(text, metric) == dict(zip(BOUNDS, [1.0, 2, 3, 4, 5, 6], strict=True))
    every = LatencyMetric.from_dict({**METRIC, "labels": {}}, "m")
    assert read_buckets(text, every)[math.inf] == 66.0
    with pytest.raises(InputError, match=r"no req_seconds_bucket\{le=\"\+Inf\"\} series"):
        read_buckets(page({"bert": [1, 1, 1, 1, 1, 1]}), metric)


@pytest.mark.parametrize(
    ("change", "where"),
    [
        ({"url": "file:///etc/passwd"}, "url"),
        ({"url": "http:///metrics"}, "url"),
        ({"url": 8000}, "url"),
        ({"histogram": "req-seconds"}, "histogram"),
        ({"unit": "min"}, "unit"),
        ({"labels": {"model": 1}}, "labels"),
        ({"labels": {"le": "0.1"}}, "labels.le"),
        ({"port": 8000}, "port"),
    ],
)
def test_bad_latency_metrics_name_the_field(change: dict[str, object], where: str) -> None:
    with pytest.raises(InputError, match=f"workload.latency_metric.{where}"):
        WorkloadSpec.from_dict({**ONLINE, "latency_metric": {**METRIC, **change}})


def test_only_online_services_have_a_latency_metric_and_it_round_trips() -> None:
    with pytest.raises(InputError, match="only an online service"):
        WorkloadSpec.from_dict({**OFFLINE, "latency_metric": METRIC})
    spec = WorkloadSpec.from_dict({**ONLINE, "latency_metric": {**METRIC, "unit": "ms"}})
    assert WorkloadSpec.from_dict(spec.to_dict()) == spec
    assert spec.latency_metric is not None
    assert spec.latency_metric.unit == "ms"


class Pages:
    """The fetch the scraper is given: the current page, or an error; counts its calls."""

    def __init__(self) -> None:
        self.counts = [0] * len(BOUNDS)
        self.error: Exception | None = None
        self.calls = 0

    def serve(self, fast: int = 0, slow: int = 0, slower: int = 0) -> None:
        """``fast`` requests under 10 ms, ``slow`` between 50 and 100 ms, ``slower`` over
        250 ms."""
        add = [fast, 0, 0, slow, 0, slower]
        total = 0
        for i, n in enumerate(add):
            total += n
            self.counts[i] += total

    def __call__(self, url: str, timeout_s: float) -> str:
        self.calls += 1
        if self.error is not None:
            raise self.error
        return page({"resnet50": self.counts})


def test_scraper_reports_the_p99_of_each_window(tmp_path: Path) -> None:
    agent = make_agent(tmp_path)
    agent.submit({**ONLINE, "latency_metric": METRIC})
    agent.run(0.5)
    pages = Pages()
    scraper = LatencyScraper(agent.store, pages, interval_s=5.0, min_requests=20)
    pages.serve(fast=1000)
    assert scraper.tick(agent.clock()) == []  # the first read only sets the baseline
    pages.serve(fast=90, slow=10)
    agent.clock.advance(2.0)
    assert scraper.tick(agent.clock()) == []  # not due yet
    assert pages.calls == 1
    agent.clock.advance(3.0)
    [(name, p99)] = scraper.tick(agent.clock())
    # the window's 100 requests: rank 99 is 9 of the 10 in the 50-100 ms bucket
    assert name == "web"
    assert p99 == pytest.approx(50 + 50 * 9 / 10)
    pages.serve(fast=5)  # 5 requests: too few for a p99
    agent.clock.advance(5.0)
    assert scraper.tick(agent.clock()) == []
    pages.counts = [0] * len(BOUNDS)  # the service restarted: counts start again
    pages.serve(fast=50, slower=50)
    agent.clock.advance(5.0)
    assert scraper.tick(agent.clock()) == []
    pages.serve(fast=50, slower=50)
    agent.clock.advance(5.0)
    assert scraper.tick(agent.clock()) == [("web", 250.0)]  # in +Inf: the largest bound


def test_scrape_failures_are_logged_once_until_they_clear(tmp_path: Path) -> None:
    agent = make_agent(tmp_path)
    agent.submit({**ONLINE, "latency_metric": METRIC})
    agent.run(0.5)
    pages = Pages()
    scraper = LatencyScraper(agent.store, pages, interval_s=1.0)
    pages.error = urllib.error.URLError("connection refused")
    for _ in range(3):
        assert scraper.tick(agent.clock()) == []
        agent.clock.advance(1.0)
    pages.error = ValueError("could not convert string to float: '{{{'")
    scraper.tick(agent.clock())
    agent.clock.advance(1.0)
    pages.error = None
    scraper.tick(agent.clock())
    events = [(e.kind, e.detail) for e in agent.store.events("web") if "scrape" in e.kind]
    assert events == [
        ("latency scrape failed", "http://127.0.0.1:9/metrics: <urlopen error connection refused>"),
        ("latency scrape failed", "http://127.0.0.1:9/metrics: could not convert string to "
                                  "float: '{{{'"),
        ("latency scrape ok", "http://127.0.0.1:9/metrics"),
    ]


def test_services_without_a_metric_or_not_running_are_not_read(tmp_path: Path) -> None:
    agent = make_agent(tmp_path)
    agent.submit(ONLINE)
    agent.submit({**ONLINE, "name": "other", "gpu": 1, "latency_metric": METRIC})
    agent.run(0.5)
    agent.sup.stop("other", agent.clock())
    agent.run(0.5)
    pages = Pages()
    assert LatencyScraper(agent.store, pages).tick(agent.clock()) == []
    assert pages.calls == 0


class _Handler(BaseHTTPRequestHandler):
    text = ""

    def do_GET(self) -> None:
        body = type(self).text.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def metrics_page() -> Iterator[tuple[str, type[_Handler]]]:
    handler = type("Handler", (_Handler,), {"text": ""})
    server = HTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/metrics", handler
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_a_slow_histogram_throttles_the_offline_client_through_the_agent(
    tmp_path: Path, metrics_page: tuple[str, type[_Handler]]
) -> None:
    """End to end over HTTP: the service's own histogram shows a p99 over 95% of its 50 ms
    SLO, and the guard raises the online share (the offline client restarts with less)."""
    url, handler = metrics_page
    clock = ManualClock(1000.0)
    service = AgentService(FakeNode.build("A100-40GB", 1, clock), tmp_path, FixedShare(50),
                           clock=clock, scrape_interval_s=5.0)
    try:
        service.submit({**ONLINE, "latency_metric": {**METRIC, "url": url}})
        service.submit(OFFLINE)
        service.tick()  # starts both
        handler.text = page({"resnet50": [500, 500, 500, 500, 500, 500]})
        clock.advance(1.0)
        service.tick()  # the first read: a baseline
        assert service.guard.throttles == 0
        # 100 requests, 20 of them 50-100 ms: p99 = 50 + 50 * 19 / 20 = 97.5 ms
        handler.text = page({"resnet50": [580, 580, 580, 600, 600, 600]})
        clock.advance(5.0)
        service.tick()
        assert service.guard.throttles == 1
        assert service.guard.floor(0, clock()) == 70
        train = service.store.get("train")
        assert train is not None
        assert train.share_pct == 30  # restarting with the 30% the online service leaves
        assert 'cotenant_online_p99_ms{workload="web"} 97.5' in service.metrics_text().decode()
        clock.advance(11.0)  # no request since: no report, and the last one is stale
        service.tick()
        assert "cotenant_online_p99_ms{" not in service.metrics_text().decode()
    finally:
        service.close()
