"""The online services' p99 reports, as the co-location core's guard reads them.

A service (or a sidecar) pushes its measured p99 through the API (``POST
/v1/workloads/<name>/p99``, ``cotenant agent report``), or the agent reads it from the
service's Prometheus latency histogram (:mod:`cotenant.agent.latency`). Each report is kept
with when its window began and when it arrived: the guard acts only on a report whose
requests were all served after its last action, and not on one older than ``stale_s``
(:mod:`cotenant.policies.colocation.guard`). A scraped report knows when its window began; a
pushed one is taken to reach ``settle_s`` back (a p99 measured over a window still holds
requests served before the push).

A p99 the agent cannot check against an SLO is refused with one line: the report must name
a running online workload, and the p99 must be a finite number >= 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from cotenant.agent.records import Status
from cotenant.agent.spec import Role
from cotenant.agent.state import StateStore
from cotenant.errors import InputError


@dataclass(frozen=True)
class Report:
    p99_ms: float
    since: float
    """When the report's window began: the earliest request it may hold."""
    at: float
    """When it arrived."""


class P99Reports:
    """The last p99 report of each online service."""

    def __init__(self, store: StateStore, settle_s: float, stale_s: float) -> None:
        self.store = store
        self.settle_s = settle_s
        self.stale_s = stale_s
        self._last: dict[str, Report] = {}

    def report(self, name: str, p99_ms: object, now: float, since: float | None = None) -> int:
        """Record online workload ``name``'s p99 of the requests served from ``since`` on
        (unknown for a pushed report: taken as ``settle_s`` back); the GPU it runs on."""
        where = f"p99 report for {name!r}"
        if isinstance(p99_ms, bool) or not isinstance(p99_ms, int | float):
            raise InputError(where, f"p99_ms must be a number, got {p99_ms!r:.40}")
        try:
            value = float(p99_ms)
        except OverflowError:
            value = math.inf
        if not (math.isfinite(value) and value >= 0.0):
            raise InputError(where, "p99_ms must be a finite number >= 0")
        record = self.store.get(name)
        if record is None:
            raise InputError(where, "no such workload")
        if record.spec.role is not Role.ONLINE or record.status is not Status.RUNNING:
            raise InputError(where, "only a running online workload reports its latency")
        start = now - self.settle_s if since is None else since
        self._last[name] = Report(value, start, now)
        return record.spec.gpu

    def get(self, name: str) -> Report | None:
        return self._last.get(name)

    def latest(self, now: float) -> dict[str, float]:
        """The last p99 (ms) of each service that reported within ``stale_s`` (metrics)."""
        self._last = {n: r for n, r in self._last.items() if 0.0 <= now - r.at <= self.stale_s}
        return {n: r.p99_ms for n, r in self._last.items()}

    def keep(self, names: set[str]) -> None:
        """Forget the reports of every service but ``names``."""
        self._last = {n: r for n, r in self._last.items() if n in names}

    def clear(self) -> None:
        self._last.clear()
