"""Read an online service's p99 from its Prometheus latency histogram, for the compute guard.

The guard acts on a measured p99 (:mod:`cotenant.agent.guard`). A service can push one
(``cotenant agent report``), but most inference servers already export a latency histogram
on a Prometheus ``/metrics`` page. A spec's ``latency_metric`` names it
(:class:`~cotenant.agent.spec.LatencyMetric`); every ``interval_s`` the scraper fetches the
page of each running online service that has one, sums the histogram's ``_bucket`` series
that match the spec's labels, and takes the p99 of the requests served *since the previous
scrape* (the bucket counts' increase) as Prometheus's ``histogram_quantile`` does: linear
within the bucket holding the 99th percentile, the largest finite bound when it falls in the
``+Inf`` bucket. A window holding fewer than ``min_requests`` requests gives no report (a
p99 of a handful of requests says little), and a count that fell (the service restarted)
starts the window afresh.

A window is ``interval_s`` (5 s) long, shorter than the guard's ``settle_s`` (10 s), so the
first report the guard takes after an action holds only requests served after it.

Fetching happens outside the agent's lock (a slow endpoint delays only the next scrape, by at
most ``timeout_s``); a failure (unreachable, HTTP error, unparsable page, no such histogram)
is logged once per workload until it changes or clears, and never stops the agent.
"""

from __future__ import annotations

import math
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

from cotenant.agent.spec import UNIT_MS, LatencyMetric, Role
from cotenant.agent.state import StateStore, Status
from cotenant.errors import InputError

Fetch = Callable[[str, float], str]
MAX_PAGE_BYTES = 16 * 1024 * 1024


def http_get(url: str, timeout_s: float) -> str:
    """The text at ``url`` (a Prometheus exposition page)."""
    with urllib.request.urlopen(url, timeout=timeout_s) as response:  # spec: http(s) only
        body: bytes = response.read(MAX_PAGE_BYTES + 1)
    if len(body) > MAX_PAGE_BYTES:
        raise ValueError(f"page larger than {MAX_PAGE_BYTES} bytes")
    return body.decode("utf-8")


def read_buckets(text: str, metric: LatencyMetric) -> dict[float, float]:
    """Cumulative count per bucket bound of ``metric``'s histogram, summed over the series
    matching its labels; ``InputError`` when the page has no such series."""
    name = metric.histogram + "_bucket"
    want = dict(metric.labels)
    out: dict[float, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name != name or "le" not in sample.labels:
                continue
            if any(sample.labels.get(k) != v for k, v in want.items()):
                continue
            bound = float(sample.labels["le"])
            out[bound] = out.get(bound, 0.0) + float(sample.value)
    if math.inf not in out:
        raise InputError(f"latency histogram {metric.histogram}",
                         f"no {name}{{le=\"+Inf\"}} series matching {want or 'any labels'}")
    return out


def histogram_quantile(buckets: Sequence[tuple[float, float]], q: float) -> float | None:
    """The ``q`` quantile of sorted ``(bound, cumulative count)`` pairs, the last ``+Inf``
    (Prometheus's interpolation); None when the histogram is empty."""
    total = buckets[-1][1]
    if total <= 0:
        return None
    rank = q * total
    lower, below = 0.0, 0.0
    for bound, count in buckets:
        if count >= rank:
            if math.isinf(bound):
                return lower  # the largest finite bound
            if count == below:
                return bound
            return lower + (bound - lower) * (rank - below) / (count - below)
        lower, below = bound, count
    return lower


@dataclass
class _Target:
    last: dict[float, float] | None = None
    due: float = -math.inf
    error: str = ""


class LatencyScraper:
    """Turns each online service's latency histogram into p99 reports for the guard."""

    def __init__(
        self,
        store: StateStore,
        fetch: Fetch = http_get,
        *,
        interval_s: float = 5.0,
        min_requests: int = 20,
        timeout_s: float = 1.0,
    ) -> None:
        for where, value in (("interval", interval_s), ("timeout", timeout_s)):
            if not (math.isfinite(value) and value > 0):
                raise InputError(f"latency scrape {where}",
                                 f"{value} s must be a finite number > 0")
        if min_requests < 1:
            raise InputError("latency scrape min_requests", f"{min_requests} must be >= 1")
        self.store = store
        self.fetch = fetch
        self.interval_s = interval_s
        self.min_requests = min_requests
        self.timeout_s = timeout_s
        self._targets: dict[str, _Target] = {}

    def tick(self, now: float) -> list[tuple[str, float]]:
        """Scrape what is due; ``(workload, p99 in ms)`` for each window with enough
        requests. Call it outside the agent's lock, and hand the reports to the guard."""
        running = {r.spec.name: r.spec.latency_metric for r in self.store.all()
                   if r.spec.role is Role.ONLINE and r.status is Status.RUNNING
                   and r.spec.latency_metric is not None}
        for name in set(self._targets) - set(running):
            del self._targets[name]  # a stopped service starts afresh
        reports = []
        for name, metric in sorted(running.items()):
            assert metric is not None
            target = self._targets.setdefault(name, _Target())
            if now < target.due:
                continue
            target.due = now + self.interval_s
            p99 = self._scrape(name, metric, target, now)
            if p99 is not None:
                reports.append((name, p99))
        return reports

    def _scrape(self, name: str, metric: LatencyMetric, target: _Target,
                now: float) -> float | None:
        try:
            buckets = read_buckets(self.fetch(metric.url, self.timeout_s), metric)
        except InputError as exc:
            self._failed(name, target, now, exc.one_line())
            return None
        except (OSError, ValueError, UnicodeDecodeError) as exc:  # URLError is an OSError
            self._failed(name, target, now, f"{metric.url}: {exc}".splitlines()[0][:200])
            return None
        if target.error:
            self.store.event(now, name, "latency scrape ok", detail=metric.url)
            target.error = ""
        last, target.last = target.last, buckets
        if last is None or set(last) != set(buckets):
            return None
        window = sorted((b, buckets[b] - last[b]) for b in buckets)
        if any(count < 0 for _, count in window):
            return None  # a counter fell: the service restarted, the next window counts
        if window[-1][1] < self.min_requests:
            return None
        p99 = histogram_quantile(window, 0.99)
        return None if p99 is None else p99 * UNIT_MS[metric.unit]

    def _failed(self, name: str, target: _Target, now: float, error: str) -> None:
        target.last = None
        if error != target.error:
            self.store.event(now, name, "latency scrape failed", detail=error)
            target.error = error

