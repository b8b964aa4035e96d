"""Read an online service's p99 from its Prometheus latency histogram, for the compute guard.

The guard acts on a measured p99 (:mod:`cotenant.policies.colocation.guard`, the reports
kept by :mod:`cotenant.agent.colocation.reports`). A service can push one (``cotenant agent
report``), but most inference servers already export a latency histogram on a Prometheus
``/metrics`` page. A spec's ``latency_metric`` names it
(:class:`~cotenant.agent.spec.LatencyMetric`). How a p99 is read is part of the guard's
settings (:class:`~cotenant.policies.colocation.GuardSettings`, what the simulator models as
the report window too): every ``scrape_s`` the scraper reads the page of each running online
service that has one and takes the p99 of the requests served *since the previous read*, as
Prometheus's ``increase`` and ``histogram_quantile`` would (:mod:`cotenant.agent.histogram`).
A window with fewer than ``min_requests`` requests gives no report (a p99 of a handful of
requests says little): it grows into the next read's window until it spans
``max_window_s``, so a short ``scrape_s`` (a fast guard) still reports on a service with few
requests, as often as it has enough. A window with a count that is not
a finite number gives no report either. A dropped window (too few requests in
``max_window_s``, or no finite bucket bound) is logged once, until a window gives a p99 again.
A wall clock that steps back starts every window afresh.

Each report says when its window began (when the read before it was started), and the guard
takes only reports whose window began after its last action on the GPU. Every closed window
also gives its request count (:class:`RequestWindow`, :meth:`LatencyScraper.take_windows`),
one dropped for too few requests included: where NVML samples no process of a service (under
MPS), the agent reads its load from that rate (:mod:`cotenant.agent.colocation.rates`).

Reads run on daemon threads, one per service at a time, never on the reconcile loop: a tick
takes in the reads that have finished and hands out those due, so a slow, unreachable or
hostile endpoint delays only its own reports. A read gives up after ``timeout_s`` in all (a
timer shuts the socket down at the deadline, whatever the read waits for; name resolution is
not bounded), follows no redirect, ignores proxy settings and refuses a page over
:data:`MAX_PAGE_BYTES`. Any failure is logged once per workload (again only when its kind
changes, and "ok" when it clears) and never stops the agent.
"""

from __future__ import annotations

import contextlib
import http.client
import math
import socket
import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from typing import ParamSpec, TypeVar
from urllib.parse import urlsplit

from cotenant.agent.histogram import Series, histogram_quantile, increase, read_series
from cotenant.agent.records import Status
from cotenant.agent.spec import UNIT_MS, LatencyMetric, Role
from cotenant.agent.state import StateStore
from cotenant.errors import CotenantError, check_seconds
from cotenant.policies.colocation import GuardSettings

Fetch = Callable[[str, float], str]
P = ParamSpec("P")
T = TypeVar("T")
MAX_PAGE_BYTES = 2 * 1024 * 1024


def http_get(url: str, timeout_s: float) -> str:
    """The text at ``url``, read within ``timeout_s`` in all: at the deadline a timer shuts
    the socket down, whatever the read is waiting for (status line, headers, a chunk).
    No proxy, no redirect (only a 200 is a page). Name resolution is not bounded."""
    parts = urlsplit(url)
    connection = (http.client.HTTPSConnection if parts.scheme == "https"
                  else http.client.HTTPConnection)
    conn = connection(parts.hostname or "", parts.port, timeout=timeout_s)
    fired = threading.Event()
    sockets: list[socket.socket] = []  # the response may own it once headers are read

    def abort() -> None:
        fired.set()
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    timer = threading.Timer(timeout_s, abort)
    timer.daemon = True
    timer.start()
    response: http.client.HTTPResponse | None = None
    try:
        conn.connect()  # each socket operation has its own timeout_s
        if conn.sock is not None:
            sockets.append(conn.sock)
        if fired.is_set():
            abort()
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        conn.request("GET", target, headers={"Accept": "text/plain"})
        response = conn.getresponse()
        if response.status != 200:
            raise ValueError(f"HTTP {response.status} {response.reason}")
        body = response.read(MAX_PAGE_BYTES + 1)
        if fired.is_set():  # the shutdown may read as the end of the page
            raise TimeoutError(f"page not read within {timeout_s:g} s")
    except Exception as exc:
        if fired.is_set() and not isinstance(exc, TimeoutError):
            raise TimeoutError(f"page not read within {timeout_s:g} s") from exc
        raise
    finally:
        timer.cancel()
        if response is not None:
            response.close()
        conn.close()
        for sock in sockets:
            sock.close()
    if len(body) > MAX_PAGE_BYTES:
        raise ValueError(f"page larger than {MAX_PAGE_BYTES} bytes")
    return body.decode("utf-8")


@dataclass
class _Target:
    last: Series | None = None
    last_at: float = -math.inf  # when the read that gave ``last`` was started
    due: float = -math.inf
    pending: Future[Series] | None = None
    pending_at: float = -math.inf
    error: str = ""
    quiet: str = ""  # why windows are being dropped, once logged


@dataclass(frozen=True)
class LatencyReport:
    """The p99 (ms) of the requests ``workload`` served from ``since`` on (when the read
    before was started), for the guard."""

    workload: str
    p99_ms: float
    since: float


@dataclass(frozen=True)
class RequestWindow:
    """``requests`` served by ``workload`` from ``since`` to ``until`` (when the reads that
    bound the window were started): a closed window, each request counted in one only."""

    workload: str
    requests: float
    since: float
    until: float


class _Inline(Executor):
    """Runs each read at once, on the caller's thread (tests)."""

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        future: Future[T] = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except Exception as exc:  # handed back to the caller through the future
            future.set_exception(exc)
        return future


INLINE: Executor = _Inline()


class _ThreadPerRead(Executor):
    """Each read on a daemon thread of its own (at most one per service at a time), so a
    read stuck in name resolution holds up neither the others nor the agent's exit."""

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        future: Future[T] = Future()

        def run() -> None:
            try:
                future.set_result(fn(*args, **kwargs))
            except Exception as exc:
                future.set_exception(exc)

        threading.Thread(target=run, name="latency-read", daemon=True).start()
        return future


class LatencyScraper:
    """Turns each online service's latency histogram into p99 reports for the guard."""

    def __init__(
        self,
        store: StateStore,
        fetch: Fetch = http_get,
        settings: GuardSettings | None = None,
        *,
        timeout_s: float = 2.0,
        executor: Executor | None = None,
    ) -> None:
        check_seconds(timeout_s, "latency scrape timeout", positive=True)
        settings = settings or GuardSettings()  # checked where it was made
        self.store = store
        self.fetch = fetch
        self.interval_s = settings.scrape_s
        self.min_requests = settings.min_requests
        self.max_window_s = settings.max_window_s
        self.timeout_s = timeout_s
        self.executor = executor or _ThreadPerRead()
        self._targets: dict[str, _Target] = {}
        self._windows: list[RequestWindow] = []

    def take_windows(self) -> list[RequestWindow]:
        """The windows closed since the last call (every service's, oldest first)."""
        windows, self._windows = self._windows, []
        return windows

    def tick(self, now: float) -> list[LatencyReport]:
        """Take in the reads that have finished, start those due: a report for each window
        with enough requests, for the guard."""
        running = {r.spec.name: r.spec.latency_metric for r in self.store.all()
                   if r.spec.role is Role.ONLINE and r.status is Status.RUNNING
                   and r.spec.latency_metric is not None}
        for name in set(self._targets) - set(running):
            del self._targets[name]  # a stopped service starts afresh
        reports: list[LatencyReport] = []
        for name, metric in sorted(running.items()):
            assert metric is not None
            target = self._targets.get(name)
            latest = max(target.last_at, target.pending_at) if target else -math.inf
            if now < latest:
                # the wall clock stepped back: a window would span the step, and its start
                # would come after the guard's next action; start afresh
                self._event(now, name, "latency window restarted",
                            f"the clock stepped back {latest - now:.3g} s")
                target = None
            if target is None:
                target = self._targets[name] = _Target()
            try:
                self._collect(name, metric, target, now, reports)
                if target.pending is None and now >= target.due:
                    target.due = now + self.interval_s
                    target.pending_at = now
                    target.pending = self.executor.submit(self._read, metric)
                    self._collect(name, metric, target, now, reports)  # done already (inline)
            except Exception as exc:  # one service's trouble costs the others nothing
                self._targets[name] = _Target()
                self._event(now, name, "latency scrape failed", f"{type(exc).__name__}")
        return reports

    def _collect(self, name: str, metric: LatencyMetric, target: _Target, now: float,
                 reports: list[LatencyReport]) -> None:
        if target.pending is None or not target.pending.done():
            return
        future, target.pending = target.pending, None
        since = target.last_at
        p99 = self._take(name, metric, target, future, now)
        if p99 is not None:
            reports.append(LatencyReport(name, p99, since))

    def close(self) -> None:
        """Forget every target; reads still running end by their deadline on their own
        daemon threads."""
        self._targets.clear()
        self._windows.clear()

    def _read(self, metric: LatencyMetric) -> Series:
        return read_series(self.fetch(metric.url, self.timeout_s), metric)

    def _take(self, name: str, metric: LatencyMetric, target: _Target,
              future: Future[Series], now: float) -> float | None:
        try:
            series = future.result()
        except CotenantError as exc:
            self._failed(name, target, now, exc.one_line(), exc.one_line())
            return None
        except Exception as exc:  # anything a page or a socket can throw: log, carry on
            text = str(exc).splitlines()[0][:160] if str(exc).strip() else ""
            detail = f"{metric.url}: {type(exc).__name__}" + (f": {text}" if text else "")
            self._failed(name, target, now, type(exc).__name__, detail)
            return None
        last, last_at = target.last, target.last_at
        target.last, target.last_at = series, target.pending_at
        counts = sorted(increase(last, series).items()) if last is not None else []
        if not all(math.isfinite(c) for _, c in counts):
            self._failed(name, target, now, "not finite",
                         f"{metric.url}: a bucket count is not a finite number")
            return None
        if last is None:
            return None  # the first read: a baseline
        if target.error:  # only now: a page that fails every other read would flap the log
            target.error = ""
            self._event(now, name, "latency scrape ok", metric.url)
        requests = counts[-1][1] if counts else 0.0
        span = target.pending_at - last_at
        if requests < self.min_requests and 0.0 <= span < self.max_window_s:
            target.last, target.last_at = last, last_at  # too few yet: the window grows
            return None
        if span > 0.0 and requests >= 0.0:  # closed: its count is a request rate
            self._windows.append(RequestWindow(name, requests, last_at, target.pending_at))
        if requests < self.min_requests:
            self._quiet(name, target, now, f"{requests:g} requests in {span:.3g} s, fewer "
                        f"than {self.min_requests}: no p99 for the guard")
            return None
        p99 = histogram_quantile(counts, 0.99)
        if p99 is None:
            self._quiet(name, target, now, "no finite bucket bound: no p99 for the guard")
            return None
        target.quiet = ""
        return p99 * UNIT_MS[metric.unit]

    def _failed(self, name: str, target: _Target, now: float, kind: str, detail: str) -> None:
        target.last = None
        if kind != target.error:
            target.error = kind
            self._event(now, name, "latency scrape failed", detail)

    def _quiet(self, name: str, target: _Target, now: float, detail: str) -> None:
        """A window dropped without a p99: logged once until a window gives one again."""
        if not target.quiet:
            target.quiet = detail
            self._event(now, name, "latency window dropped", detail)

    def _event(self, now: float, name: str, what: str, detail: str) -> None:
        # best effort: a store that cannot log must not cost the guard its reports
        with contextlib.suppress(Exception):
            self.store.event(now, name, what, detail=detail)
