"""The guard's fast path: scrape windows that grow until they hold enough requests, and a
scraped p99 acted on by ``watch`` (its own thread) rather than at the next reconcile tick."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from cotenant.agent.backends import FakeNode, ManualClock
from cotenant.agent.latency import INLINE, LatencyReport, LatencyScraper
from cotenant.agent.service import AgentService
from cotenant.errors import InputError
from cotenant.policies.colocation.share import FixedShare

from .harness import OFFLINE, ONLINE, make_agent
from .test_latency import METRIC, Pages


def test_a_window_with_too_few_requests_grows_into_the_next(tmp_path: Path) -> None:
    """Every 0.25 s, 10 requests: too few for a p99 alone, so each window spans two reads; at
    2 requests a read the window gives up at ``max_window_s`` and starts afresh."""
    agent = make_agent(tmp_path)
    agent.submit({**ONLINE, "latency_metric": METRIC})
    agent.run(0.5)
    pages = Pages()
    scraper = LatencyScraper(agent.store, pages, interval_s=0.25, min_requests=20,
                             max_window_s=1.0, executor=INLINE)
    pages.serve(fast=100)
    assert scraper.tick(agent.clock()) == []  # the baseline
    start = agent.clock()
    pages.serve(fast=10)
    agent.clock.advance(0.25)
    assert scraper.tick(agent.clock()) == []  # 10 requests: the window grows
    pages.serve(fast=9, slow=1)
    agent.clock.advance(0.25)
    [report] = scraper.tick(agent.clock())  # 20 requests since ``start``
    assert report.since == start
    assert report.p99_ms == pytest.approx(50 + 50 * 0.8)  # rank 19.8 of 20: in the slow one
    starts = []
    for _ in range(5):  # 2 requests a read: 8 after 1 s, never 20
        starts.append(agent.clock())
        pages.serve(fast=2)
        agent.clock.advance(0.25)
        assert scraper.tick(agent.clock()) == []
    pages.serve(fast=20, slow=1)
    agent.clock.advance(0.25)
    [late] = scraper.tick(agent.clock())
    # the window restarted when it reached 1 s (the read started 1 s after the last report)
    assert late == LatencyReport("web", late.p99_ms, starts[4])
    with pytest.raises(InputError, match="max_window_s"):
        LatencyScraper(agent.store, pages, max_window_s=-1.0)


@dataclass
class Pair:
    """An agent on a fake node with a started online service (scraped from ``pages``) and
    its offline co-runner."""

    clock: ManualClock
    node: FakeNode
    pages: Pages
    service: AgentService
    train_pid: int


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[Pair]:
    clock = ManualClock(1000.0)
    node = FakeNode.build("A100-40GB", 1, clock)
    pages = Pages()
    service = AgentService(node, tmp_path, FixedShare(50), clock=clock,
                           scrape_interval_s=0.25, fetch=pages, executor=INLINE)
    try:
        service.submit({**ONLINE, "latency_metric": METRIC})
        service.submit(OFFLINE)
        service.tick()  # starts both
        train = service.store.get("train")
        assert train is not None
        assert train.pid is not None
        yield Pair(clock, node, pages, service, train.pid)
    finally:
        service.close()


def test_watch_acts_on_a_scraped_p99_without_a_tick(pair: Pair) -> None:
    pair.pages.serve(fast=500)
    pair.clock.advance(0.5)
    pair.service.watch()  # the baseline
    pair.pages.serve(fast=80, slow=20)  # p99 97.5 ms against a 50 ms SLO
    pair.clock.advance(0.25)
    pair.service.watch()
    assert pair.node.paused(pair.train_pid)
    assert pair.service.guard.pauses == 1


def test_the_watcher_thread_pauses_the_co_runner_between_ticks(pair: Pair) -> None:
    """With the watcher running, nothing calls ``tick`` after the start, and the guard still
    pauses the offline client once the page shows the rise; ``close`` stops the thread."""
    pages = pair.pages
    pages.serve(fast=500)
    pair.clock.advance(0.5)
    pair.service.start_watching(0.01)
    pair.service.start_watching(0.01)  # once is enough: a second call does nothing
    deadline = time.monotonic() + 5.0
    while pages.calls < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    pages.serve(fast=80, slow=20)
    pair.clock.advance(0.25)
    while not pair.node.paused(pair.train_pid) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert pair.node.paused(pair.train_pid)
    pair.service.close()
    calls = pages.calls
    time.sleep(0.05)
    assert pages.calls == calls  # the watcher has stopped


def test_a_failing_watch_is_recorded_once_and_the_watcher_carries_on(tmp_path: Path) -> None:
    clock = ManualClock(1000.0)
    node = FakeNode.build("A100-40GB", 1, clock)
    service = AgentService(node, tmp_path, FixedShare(50), clock=clock, executor=INLINE)
    calls = []

    def broken(now: float) -> list[LatencyReport]:
        calls.append(now)
        raise RuntimeError("scraper broke")

    service.latency.tick = broken  # type: ignore[method-assign]
    try:
        service.start_watching(0.01)
        deadline = time.monotonic() + 5.0
        while len(calls) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(calls) >= 3  # still running after the first failure
        failed = [e for e in service.store.events("agent") if e.kind == "guard watch failed"]
        assert [e.detail for e in failed] == ["RuntimeError: scraper broke"]
    finally:
        service.close()


def test_the_watcher_outlives_a_store_that_cannot_log(tmp_path: Path) -> None:
    clock = ManualClock(1000.0)
    service = AgentService(FakeNode.build("A100-40GB", 1, clock), tmp_path, FixedShare(50),
                           clock=clock, executor=INLINE)
    calls = []

    def broken(now: float) -> list[LatencyReport]:
        calls.append(now)
        raise RuntimeError(f"scraper broke {len(calls)}")  # a new message every time

    def no_log(*_: object, **__: object) -> None:
        raise OSError("disk full")

    service.latency.tick = broken  # type: ignore[method-assign]
    service.store.event = no_log  # type: ignore[method-assign]
    try:
        service.start_watching(0.01)
        deadline = time.monotonic() + 5.0
        while len(calls) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(calls) >= 3
    finally:
        service.close()
