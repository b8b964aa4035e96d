"""The latency scraper: p99 from a Prometheus histogram's increase, fed to the compute guard."""

from __future__ import annotations

import math
import re
import socket
import threading
import urllib.error
from collections.abc import Iterator
from concurrent.futures import Executor, Future
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from cotenant.agent.backends import FakeNode, ManualClock
from cotenant.agent.histogram import histogram_quantile, increase, read_series
from cotenant.agent.latency import INLINE, LatencyReport, LatencyScraper, http_get
from cotenant.agent.service import AgentService
from cotenant.agent.spec import LatencyMetric, WorkloadSpec
from cotenant.agent.state import Status
from cotenant.errors import InputError
from cotenant.policies.colocation import GuardSettings

from .harness import OFFLINE, ONLINE, fixed, make_agent

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
    assert histogram_quantile([(math.inf, 100.0)], 0.99) is None  # no finite bound: no p99
    # counts that fall from one bucket to the next are raised to a running maximum first:
    # [100, 100, 105, 105], rank 103.95 lies 3.95 of 5 into the 0.5-1 bucket
    uneven = [(0.1, 100.0), (0.5, 10.0), (1.0, 105.0), (math.inf, 105.0)]
    assert histogram_quantile(uneven, 0.99) == pytest.approx(0.895)


def test_read_series_keeps_each_matching_series_and_names_a_missing_one() -> None:
    text = page({"resnet50": [1, 2, 3, 4, 5, 6], "bert": [10, 20, 30, 40, 50, 60]})
    metric = LatencyMetric.from_dict(METRIC, "m")
    assert read_series(text, metric) == {
        frozenset({("model", "resnet50")}): dict(zip(BOUNDS, [1.0, 2, 3, 4, 5, 6], strict=True))}
    every = LatencyMetric.from_dict({**METRIC, "labels": {}}, "m")
    assert len(read_series(text, every)) == 2
    with pytest.raises(InputError, match=r"no req_seconds_bucket\{le=\"\+Inf\"\} series"):
        read_series(page({"bert": [1, 1, 1, 1, 1, 1]}), metric)


def test_increase_is_per_series_like_prometheus() -> None:
    """A series that restarted counts from zero; one new since the last read waits."""
    a, b, c = (frozenset({("pod", x)}) for x in "abc")
    before = {a: {1.0: 10.0, math.inf: 20.0}, b: {1.0: 50.0, math.inf: 60.0}}
    after = {a: {1.0: 15.0, math.inf: 30.0}, b: {1.0: 2.0, math.inf: 3.0},
             c: {1.0: 100.0, math.inf: 100.0}}
    assert increase(before, after) == {1.0: 5.0 + 2.0, math.inf: 10.0 + 3.0}


@pytest.mark.parametrize(
    ("change", "where"),
    [
        ({"url": "file:///etc/passwd"}, "url"),
        ({"url": "http:///metrics"}, "url"),
        ({"url": 8000}, "url"),
        ({"histogram": "req-seconds"}, "histogram"),
        ({"unit": "min"}, "unit"),
        ({"unit": ["s"]}, "unit"),
        ({"labels": {"model": 1}}, "labels"),
        ({"labels": {"le": "0.1"}}, "labels.le"),
        ({"url": "http://127.0.0.1:abc/metrics"}, "url"),
        ({"url": "http://127.0.0.1:8000/my metrics"}, "url"),
        ({"url": "http://[::1/metrics"}, "url"),
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
    # a spec without one is stored without the key, so an older agent still reads the row
    assert "latency_metric" not in WorkloadSpec.from_dict(ONLINE).to_dict()


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
    scraper = LatencyScraper(agent.store, pages, GuardSettings(scrape_s=5.0, min_requests=20),
                             executor=INLINE)
    pages.serve(fast=1000)
    assert scraper.tick(agent.clock()) == []  # the first read only sets the baseline
    pages.serve(fast=90, slow=10)
    agent.clock.advance(2.0)
    assert scraper.tick(agent.clock()) == []  # not due yet
    assert pages.calls == 1
    agent.clock.advance(3.0)
    [report] = scraper.tick(agent.clock())
    # the window's 100 requests: rank 99 is 9 of the 10 in the 50-100 ms bucket
    assert report.workload == "web"
    assert report.p99_ms == pytest.approx(50 + 50 * 9 / 10)
    assert report.since == agent.clock() - 5.0  # when the read before started
    pages.serve(fast=5)  # 5 requests: too few for a p99
    agent.clock.advance(5.0)
    assert scraper.tick(agent.clock()) == []
    pages.counts = [0] * len(BOUNDS)  # the service restarted: its counts are the increase
    pages.serve(fast=50, slower=50)
    agent.clock.advance(5.0)
    # in +Inf: the largest bound
    assert scraper.tick(agent.clock()) == [LatencyReport("web", 250.0, agent.clock() - 5.0)]


def test_scrape_failures_are_logged_once_until_they_clear(tmp_path: Path) -> None:
    agent = make_agent(tmp_path)
    agent.submit({**ONLINE, "latency_metric": METRIC})
    agent.run(0.5)
    pages = Pages()
    scraper = LatencyScraper(agent.store, pages, GuardSettings(scrape_s=1.0), executor=INLINE)
    pages.error = urllib.error.URLError("connection refused")
    for _ in range(3):
        assert scraper.tick(agent.clock()) == []
        agent.clock.advance(1.0)
    pages.error = ValueError("could not convert string to float: '{{{'")
    scraper.tick(agent.clock())
    agent.clock.advance(1.0)
    pages.error = None
    scraper.tick(agent.clock())  # a baseline: not yet a window, so not yet "ok"
    agent.clock.advance(1.0)
    scraper.tick(agent.clock())
    events = [(e.kind, e.detail) for e in agent.store.events("web") if "scrape" in e.kind]
    assert events == [
        ("latency scrape failed",
         "http://127.0.0.1:9/metrics: URLError: <urlopen error connection refused>"),
        ("latency scrape failed", "http://127.0.0.1:9/metrics: ValueError: could not convert "
                                  "string to float: '{{{'"),
        ("latency scrape ok", "http://127.0.0.1:9/metrics"),
    ]


def test_a_page_that_fails_every_other_read_is_logged_once(tmp_path: Path) -> None:
    agent = make_agent(tmp_path)
    agent.submit({**ONLINE, "latency_metric": METRIC})
    agent.run(0.5)
    pages = Pages()
    scraper = LatencyScraper(agent.store, pages, GuardSettings(scrape_s=1.0), executor=INLINE)
    for i in range(10):
        pages.error = ValueError("bad page") if i % 2 == 0 else None
        scraper.tick(agent.clock())
        agent.clock.advance(1.0)
    kinds = [e.kind for e in agent.store.events("web") if "scrape" in e.kind]
    assert kinds == ["latency scrape failed"]


def test_services_without_a_metric_or_not_running_are_not_read(tmp_path: Path) -> None:
    agent = make_agent(tmp_path)
    agent.submit(ONLINE)
    agent.submit({**ONLINE, "name": "other", "gpu": 1, "latency_metric": METRIC})
    agent.run(0.5)
    agent.sup.stop("other", agent.clock())
    agent.run(0.5)
    pages = Pages()
    assert LatencyScraper(agent.store, pages, executor=INLINE).tick(agent.clock()) == []
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


def test_a_slow_histogram_pauses_the_offline_client_through_the_agent(
    tmp_path: Path, metrics_page: tuple[str, type[_Handler]]
) -> None:
    """End to end over HTTP: the service's own histogram shows a p99 over 95% of its 50 ms
    SLO, and the guard pauses the offline client (no restart, its share unchanged)."""
    url, handler = metrics_page
    clock = ManualClock(1000.0)
    node = FakeNode.build("A100-40GB", 1, clock, per_client_util=True)
    service = AgentService(node, tmp_path, fixed(50, scrape_s=5.0), clock=clock,
                           executor=INLINE)
    try:
        service.submit({**ONLINE, "latency_metric": {**METRIC, "url": url}})
        service.submit(OFFLINE)
        service.tick()  # starts both
        handler.text = page({"resnet50": [500, 500, 500, 500, 500, 500]})
        clock.advance(1.0)
        service.tick()  # the first read: a baseline
        assert service.colocation.counts["pause"] == 0
        # 100 requests, 20 of them 50-100 ms: p99 = 50 + 50 * 19 / 20 = 97.5 ms
        handler.text = page({"resnet50": [580, 580, 580, 600, 600, 600]})
        clock.advance(5.0)
        service.tick()
        assert service.colocation.counts == {"pause": 1, "throttle": 0, "evict": 0}
        train = service.store.get("train")
        assert train is not None
        assert train.pid is not None
        assert node.paused(train.pid)
        assert (train.status, train.share_pct) == (Status.RUNNING, 50)  # not restarted
        assert 'cotenant_online_p99_ms{workload="web"} 97.5' in service.metrics_text().decode()
        clock.advance(11.0)  # no request since: no report, and the last one is stale
        service.tick()
        assert "cotenant_online_p99_ms{" not in service.metrics_text().decode()
    finally:
        service.close()


def test_a_slow_read_never_holds_up_the_tick(tmp_path: Path) -> None:
    """Reads run on the scraper's threads: a tick hands out what is due and takes in what has
    finished, so a stuck endpoint delays only its own reports."""
    agent = make_agent(tmp_path)
    agent.submit({**ONLINE, "latency_metric": METRIC})
    agent.run(0.5)
    release = threading.Event()
    pages = Pages()

    def slow(url: str, timeout_s: float) -> str:
        release.wait(10.0)
        return pages(url, timeout_s)

    scraper = LatencyScraper(agent.store, slow, GuardSettings(scrape_s=1.0))
    try:
        assert scraper.tick(agent.clock()) == []  # handed out, not waited for
        agent.clock.advance(1.0)
        assert scraper.tick(agent.clock()) == []  # still reading: no second read started
        release.set()
        for _ in range(100):  # the read finishes on its thread; a later tick takes it in
            scraper.tick(agent.clock())
            if pages.calls == 2:
                break
            agent.clock.advance(1.0)
            threading.Event().wait(0.01)
        assert pages.calls == 2
    finally:
        scraper.close()


def test_nan_counts_are_a_logged_failure(tmp_path: Path) -> None:
    agent = make_agent(tmp_path)
    agent.submit({**ONLINE, "latency_metric": METRIC})
    agent.run(0.5)
    texts = iter([page({"resnet50": [1, 2, 3, 4, 5, 6]}),
                  page({"resnet50": [1, 2, 3, 4, 5, 6]}).replace(" 6\n", " NaN\n", 1)])
    scraper = LatencyScraper(agent.store, lambda url, t: next(texts), executor=INLINE)
    scraper.tick(agent.clock())
    agent.clock.advance(5.0)
    assert scraper.tick(agent.clock()) == []
    [event] = [e for e in agent.store.events("web") if e.kind == "latency scrape failed"]
    assert event.detail.endswith("a bucket count is not a finite number")


@pytest.mark.parametrize(("interval_s", "tick_s"), [(5.0, 1.0), (10.0, 1.0), (9.5, 1.0),
                                                     (5.0, 6.0)])
def test_no_report_holding_requests_from_before_an_action_acts_again(
    tmp_path: Path, interval_s: float, tick_s: float
) -> None:
    """Requests are slow until the guard's first action and fast after: the guard acts once,
    whatever the read interval and the tick (reads taken in a tick after they start)."""
    counts = [0] * len(BOUNDS)
    clock = ManualClock(1000.0)

    def serve(slow: bool) -> None:
        n = int(100 * tick_s)
        add = [0, 0, 0, 0, n, 0] if slow else [n, 0, 0, 0, 0, 0]  # 100-250 ms, or 10
        total = 0
        for i, x in enumerate(add):
            total += x
            counts[i] += total

    class Later(Executor):
        """Reads at once, but the read is done only after the next tick has begun."""

        def __init__(self) -> None:
            self.waiting: list[tuple[Future[object], object]] = []

        def submit(self, fn, /, *args, **kwargs):  # type: ignore[no-untyped-def]
            future: Future[object] = Future()
            self.waiting.append((future, fn(*args, **kwargs)))
            return future

        def flush(self) -> None:
            for future, result in self.waiting:
                future.set_result(result)
            self.waiting = []

    later = Later()
    service = AgentService(FakeNode.build("A100-40GB", 1, clock, per_client_util=True), tmp_path,
                           fixed(50, scrape_s=interval_s), clock=clock, executor=later,
                           fetch=lambda url, t: page({"resnet50": counts}))
    try:
        service.submit({**ONLINE, "slo_ms": 200, "latency_metric": METRIC})
        service.submit(OFFLINE)
        service.tick()
        for _ in range(60):
            clock.advance(tick_s)
            serve(slow=service.colocation.counts["throttle"] == 0)
            service.tick()
            later.flush()
        assert service.colocation.counts == {"pause": 1, "throttle": 1, "evict": 0}
    finally:
        service.close()


def _raw_server(reply: bytes, drip_s: float = 0.0) -> tuple[str, socket.socket]:
    """A TCP server answering every connection with ``reply`` (byte by byte, ``drip_s``
    apart, when given)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                conn.recv(65536)
                try:
                    if drip_s:
                        for byte in reply:
                            conn.sendall(bytes([byte]))
                            threading.Event().wait(drip_s)
                    else:
                        conn.sendall(reply)
                except OSError:
                    pass

    threading.Thread(target=serve, daemon=True).start()
    return f"http://127.0.0.1:{server.getsockname()[1]}/metrics", server


_OK = b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\n"


@pytest.mark.parametrize(
    ("reply", "drip_s", "error"),
    [
        (b"SSH-2.0-OpenSSH_9.6\r\n", 0.0, "RemoteDisconnected|BadStatusLine"),
        (b"HTTP/1.0 302 Found\r\nLocation: ftp://127.0.0.1/x\r\n\r\n", 0.0,
         "ValueError: HTTP 302 Found"),
        (_OK + b"x" * (3 * 1024 * 1024), 0.0, "ValueError: page larger than"),
        (_OK + b"# " + b"x" * 400, 0.01, "TimeoutError: page not read within 0.5 s"),
        (b"HTTP/1.1 200 OK\r\nX-A: " + b"a" * 400, 0.01, "TimeoutError: page not read"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + b"0" * 400, 0.01,
         "TimeoutError: page not read"),
    ],
    ids=["not-http", "redirect", "huge", "drip", "drip-headers", "drip-chunk-size"],
)
def test_hostile_endpoints_are_a_logged_failure_never_a_crash(
    tmp_path: Path, reply: bytes, drip_s: float, error: str
) -> None:
    url, server = _raw_server(reply, drip_s)
    agent = make_agent(tmp_path)
    agent.submit({**ONLINE, "latency_metric": {**METRIC, "url": url}})
    agent.run(0.5)
    try:
        scraper = LatencyScraper(agent.store, timeout_s=0.5, executor=INLINE)
        assert scraper.tick(agent.clock()) == []
        [event] = [e for e in agent.store.events("web") if e.kind == "latency scrape failed"]
        assert re.search(error, event.detail)
    finally:
        server.close()


def test_proxy_settings_are_ignored(
    monkeypatch: pytest.MonkeyPatch, metrics_page: tuple[str, type[_Handler]]
) -> None:
    url, handler = metrics_page
    handler.text = page({"resnet50": [1, 2, 3, 4, 5, 6]})
    for name in ("http_proxy", "HTTP_PROXY"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")  # nothing listens there
    assert "req_seconds_bucket" in http_get(url, 2.0)


def test_under_mps_the_agent_reads_the_load_from_the_histograms_request_count(
    tmp_path: Path,
) -> None:
    """End to end: NVML samples the MPS clients on their server (as on a GPU), and the
    agent reads the service's load from the requests its histogram counted: 60 requests a
    second at the spec's 5 ms each is 30 %, the offline job's work not counted."""
    clock = ManualClock(1000.0)
    node = FakeNode.build("A100-40GB", 1, clock, per_client_util=False)
    pages = Pages()
    service = AgentService(node, tmp_path, fixed(50, scrape_s=0.5), clock=clock,
                           fetch=pages, executor=INLINE)
    try:
        service.submit({**ONLINE, "slo_ms": 200, "solo_ms": 5.0, "latency_metric": METRIC})
        service.submit(OFFLINE)
        service.tick()  # starts both, and the first read: a baseline
        for _ in range(4):
            pages.serve(fast=30)
            clock.advance(0.5)
            service.tick()
        [row] = service.observer.rows(clock()).obs.load
        assert row == pytest.approx(0.3)
        gpu = node.gpu(0).utilisation_pct
        assert gpu is not None
        assert gpu > 80.0  # what the agent read before: train's work too
        assert "load from request rate" in [e.kind for e in service.store.events("web")]
        service.tick()
        text = service.metrics_text().decode()
        assert 'cotenant_online_load_percent{source="requests",workload="web"} 30.0' in text
    finally:
        service.close()
