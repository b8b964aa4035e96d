"""The guard's fast path: scrape windows that grow until they hold enough requests, and a
scraped p99 acted on by ``watch`` (its own thread) rather than at the next reconcile tick."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from cotenant.agent.backends import FakeNode, ManualClock
from cotenant.agent.latency import INLINE, LatencyReport, LatencyScraper, RequestWindow
from cotenant.agent.service import AgentService
from cotenant.errors import InputError
from cotenant.policies.colocation import GuardSettings

from .harness import OFFLINE, ONLINE, Agent, fixed, make_agent
from .test_latency import METRIC, Pages


def _served_and_scraped(tmp_path: Path) -> tuple[Agent, Pages, LatencyScraper]:
    """A running service with a histogram page, and a scraper of 0.25 s reads, windows of
    20 requests or at most 1 s."""
    agent = make_agent(tmp_path)
    agent.submit({**ONLINE, "latency_metric": METRIC})
    agent.run(0.5)
    pages = Pages()
    scraper = LatencyScraper(agent.store, pages, GuardSettings(scrape_s=0.25, min_requests=20,
                                                               max_window_s=1.0),
                             executor=INLINE)
    return agent, pages, scraper


def test_a_window_with_too_few_requests_grows_into_the_next(tmp_path: Path) -> None:
    """Every 0.25 s, 10 requests: too few for a p99 alone, so each window spans two reads; at
    2 requests a read the window gives up at ``max_window_s`` and starts afresh."""
    agent, pages, scraper = _served_and_scraped(tmp_path)
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
        LatencyScraper(agent.store, pages, GuardSettings(max_window_s=-1.0))


def test_every_closed_window_gives_its_request_count_once(tmp_path: Path) -> None:
    """The windows of the test above, as request counts: a growing window gives none until
    it closes; one dropped for too few requests at ``max_window_s`` still gives its count."""
    agent, pages, scraper = _served_and_scraped(tmp_path)
    pages.serve(fast=100)
    scraper.tick(agent.clock())
    assert scraper.take_windows() == []  # the baseline: no window yet
    start = agent.clock()
    for fast, slow in ((10, 0), (9, 1)):
        pages.serve(fast=fast, slow=slow)
        agent.clock.advance(0.25)
        scraper.tick(agent.clock())
    assert scraper.take_windows() == [RequestWindow("web", 20.0, start, agent.clock())]
    assert scraper.take_windows() == []  # handed out once
    start = agent.clock()
    for _ in range(4):  # 2 requests a read: dropped for the p99 after 1 s
        pages.serve(fast=2)
        agent.clock.advance(0.25)
        assert scraper.tick(agent.clock()) == []
    assert scraper.take_windows() == [RequestWindow("web", 8.0, start, agent.clock())]
    scraper.close()
    pages.serve(fast=2)
    agent.clock.advance(0.25)
    scraper.tick(agent.clock())
    assert scraper.take_windows() == []  # closed: afresh, from a baseline


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
    service = AgentService(node, tmp_path, fixed(50, scrape_s=0.25), clock=clock,
                           fetch=pages, executor=INLINE)
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
    assert pair.service.colocation.counts["pause"] == 1


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


class UnprintableError(Exception):
    def __str__(self) -> str:
        raise ValueError("no text")


@pytest.mark.parametrize(
    ("error", "can_log", "logged"),
    [
        # logged once, though it fails on every call
        (lambda n: RuntimeError("scraper broke"), True, ["RuntimeError: scraper broke"]),
        # a new message every time, to a store that cannot log any of them
        (lambda n: RuntimeError(f"scraper broke {n}"), False, []),
        # an exception whose text cannot be read: its type is
        (lambda n: UnprintableError(), True, ["UnprintableError"]),
    ],
    ids=["once", "store-cannot-log", "unprintable"],
)
def test_a_failing_watch_never_ends_the_watcher(
    tmp_path: Path, error: Callable[[int], Exception], can_log: bool, logged: list[str],
) -> None:
    clock = ManualClock(1000.0)
    service = AgentService(FakeNode.build("A100-40GB", 1, clock), tmp_path, fixed(50),
                           clock=clock, executor=INLINE)
    calls = []

    def broken(now: float) -> list[LatencyReport]:
        calls.append(now)
        raise error(len(calls))

    def no_log(*_: object, **__: object) -> None:
        raise OSError("disk full")

    service.latency.tick = broken  # type: ignore[method-assign]
    if not can_log:
        service.store.event = no_log  # type: ignore[method-assign]
    try:
        service.start_watching(0.01)
        deadline = time.monotonic() + 5.0
        while len(calls) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(calls) >= 3  # still running after the first failures
        failed = [e for e in service.store.events("agent") if e.kind == "guard watch failed"]
        assert [e.detail for e in failed] == logged
    finally:
        service.close()


def test_a_clock_stepping_back_starts_the_windows_afresh(tmp_path: Path) -> None:
    """After a 60 s step back, reads go on every interval (not once the clock passes the old
    schedule), and the next report's window starts after the step, so the guard's rule
    "requests all served after my last action" still holds."""
    agent = make_agent(tmp_path)
    agent.submit({**ONLINE, "latency_metric": METRIC})
    agent.run(0.5)
    pages = Pages()
    scraper = LatencyScraper(agent.store, pages, GuardSettings(scrape_s=0.25), executor=INLINE)
    pages.serve(fast=100)
    scraper.tick(agent.clock())  # the baseline
    agent.clock.advance(0.25)
    pages.serve(fast=5)
    scraper.tick(agent.clock())  # too few: the window grows
    agent.clock.now -= 60.0
    stepped = agent.clock()
    calls = pages.calls
    reports = []
    for _ in range(4):
        agent.clock.advance(0.25)
        pages.serve(fast=30)
        reports += scraper.tick(agent.clock())
    assert pages.calls == calls + 4  # one read per interval through the step
    assert reports
    assert all(r.since >= stepped for r in reports)
    assert [e.kind for e in agent.store.events("web")].count("latency window restarted") == 1


def test_one_service_that_cannot_be_logged_costs_the_others_nothing(tmp_path: Path) -> None:
    """A store that cannot log (database locked, disk full) while one service's read fails
    and another's shows a p99 rise: the rise still reaches the guard."""
    agent = make_agent(tmp_path)
    agent.submit({**ONLINE, "name": "a-web", "latency_metric": METRIC})
    agent.submit({**ONLINE, "name": "b-web", "gpu": 1, "latency_metric": METRIC})
    agent.run(0.5)
    good, bad = Pages(), Pages()
    served = {"a-web": good, "b-web": bad}
    names: Iterator[str] = iter(())

    def fetch(url: str, timeout_s: float) -> str:
        return served[next(names)](url, timeout_s)

    scraper = LatencyScraper(agent.store, fetch, GuardSettings(scrape_s=0.25), executor=INLINE)
    good.serve(fast=100)
    bad.serve(fast=100)
    names = iter(["a-web", "b-web"])  # read in name order
    scraper.tick(agent.clock())
    bad.error = OSError("connection refused")

    def no_log(*_: object, **__: object) -> None:
        raise OSError("database is locked")

    agent.store.event = no_log  # type: ignore[method-assign]
    good.serve(fast=80, slow=20)
    agent.clock.advance(0.25)
    names = iter(["a-web", "b-web"])
    [report] = scraper.tick(agent.clock())
    assert report.workload == "a-web"
    assert report.p99_ms > 50


def test_dropped_windows_are_logged_once(tmp_path: Path) -> None:
    """A quiet service (too few requests in ``max_window_s``) and a histogram with no finite
    bucket give the guard nothing: each says so once, not on every read, and not silently."""
    agent = make_agent(tmp_path)
    agent.submit({**ONLINE, "latency_metric": METRIC})
    agent.run(0.5)
    pages = Pages()
    scraper = LatencyScraper(agent.store, pages, GuardSettings(scrape_s=0.25, max_window_s=1.0),
                             executor=INLINE)
    for _ in range(20):  # 5 s at 2 requests a read
        pages.serve(fast=2)
        assert scraper.tick(agent.clock()) == []
        agent.clock.advance(0.25)
    [dropped] = [e for e in agent.store.events("web") if e.kind == "latency window dropped"]
    assert "fewer than 20" in dropped.detail
    pages.serve(fast=100)
    assert scraper.tick(agent.clock())  # enough again: a report, and the note is reset

    total = [0]

    def inf_only(url: str, timeout_s: float) -> str:
        total[0] += 100
        return ('# TYPE req_seconds histogram\n'
                f'req_seconds_bucket{{model="resnet50",le="+Inf"}} {total[0]}\n'
                f'req_seconds_count{{model="resnet50"}} {total[0]}\n')

    other = make_agent(tmp_path / "other")
    other.submit({**ONLINE, "latency_metric": METRIC})
    other.run(0.5)
    scraper = LatencyScraper(other.store, inf_only, GuardSettings(scrape_s=0.25),
                             executor=INLINE)
    for _ in range(10):
        assert scraper.tick(other.clock()) == []
        other.clock.advance(0.25)
    [dropped] = [e for e in other.store.events("web") if e.kind == "latency window dropped"]
    assert "no finite bucket" in dropped.detail


def test_reports_reach_the_guard_under_the_scrapers_lock(pair: Pair) -> None:
    """The scraper's lock is held until the guard has the reports: a report read later can
    never be overtaken by one read before it and handed over by another thread."""
    held = []
    report = pair.service.observer.reports.report

    def checked(*args: object, **kwargs: object) -> object:
        held.append(pair.service._scrape_lock.locked())
        return report(*args, **kwargs)  # type: ignore[arg-type]

    pair.service.observer.reports.report = checked  # type: ignore[method-assign,assignment]
    pair.pages.serve(fast=500)
    pair.clock.advance(0.5)
    pair.service.watch()
    pair.pages.serve(fast=100)
    pair.clock.advance(0.25)
    pair.service.watch()
    assert held == [True]


def test_the_watcher_is_started_once_with_a_positive_period_and_not_after_close(
    pair: Pair,
) -> None:
    with pytest.raises(InputError, match="guard watch period"):
        pair.service.start_watching(0.0)
    pair.service.close()
    with pytest.raises(InputError, match="closed"):
        pair.service.start_watching(0.01)
