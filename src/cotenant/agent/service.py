"""The agent as one object: backend, state, MPS, supervisor, share controller, compute guard
(fed by pushed reports and by the latency scraper) and metrics, with the thread-safe calls
the API makes and the ``tick`` the run loop makes.

The reconcile core has no threads; the HTTP server's threads and the run loop meet here, under
one lock. Times are wall-clock seconds (``time.time`` by default, injectable) because they are
stored in SQLite and must stay meaningful across agent restarts.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import asdict
from pathlib import Path
from typing import Any

from cotenant.agent.backends.base import GpuInfo, NodeBackend
from cotenant.agent.guard import GuardSettings, LatencyGuard
from cotenant.agent.latency import Fetch, LatencyScraper, http_get
from cotenant.agent.metrics import AgentMetrics
from cotenant.agent.mps import MpsManager
from cotenant.agent.share import ShareController
from cotenant.agent.spec import WorkloadSpec
from cotenant.agent.state import StateStore
from cotenant.agent.supervisor import Supervisor
from cotenant.errors import CotenantError, InputError
from cotenant.policies.colocation.contract import SharePolicy


class AgentService:
    """Everything ``cotenant agent run`` runs, on one node."""

    def __init__(
        self,
        backend: NodeBackend,
        state_dir: Path,
        policy: SharePolicy,
        *,
        clock: Callable[[], float] = time.time,
        share_threshold_pct: int = 10,
        share_window_s: float = 60.0,
        guard: GuardSettings | None = None,
        scrape_interval_s: float = 5.0,
        fetch: Fetch = http_get,
        executor: Executor | None = None,
    ) -> None:
        self.backend = backend
        self.clock = clock
        self.store = StateStore(state_dir / "agent.db")
        self.mps = MpsManager(backend, state_dir)
        self.supervisor = Supervisor(backend, self.store, self.mps)
        self.guard = LatencyGuard(self.supervisor, guard)
        self.latency = LatencyScraper(self.store, fetch, interval_s=scrape_interval_s,
                                      executor=executor)
        self.share = ShareController(self.supervisor, backend, policy,
                                     threshold_pct=share_threshold_pct,
                                     window_s=share_window_s, floor=self.guard.floor)
        self.metrics = AgentMetrics()
        self._lock = threading.RLock()
        self._gpus: list[GpuInfo] = []

    def tick(self) -> None:
        # latency pages are fetched outside the lock: a slow one must not hold up the API
        reports = self.latency.tick(self.clock())
        with self._lock:
            now = self.clock()
            for report in reports:
                try:
                    self.guard.report(report.workload, report.p99_ms, now, report.since)
                except InputError:  # the service stopped since the read
                    continue
            self.guard.tick(now, self.share.shares)
            self.share.tick(now)
            self.supervisor.tick(now)
            gpus: list[GpuInfo] | None
            try:
                gpus = self.backend.gpus()
                self._gpus = gpus
            except CotenantError:
                gpus = None
            self.metrics.update(gpus, self.store.all(), self.store.fault_counts(),
                                self.share.shares, self.mps.restarts,
                                {"pause": self.guard.pauses,
                                 "throttle": self.guard.throttles,
                                 "evict": self.guard.evictions},
                                self.guard.latest(now), self.supervisor.paused())

    def submit(self, data: object) -> dict[str, Any]:
        spec = WorkloadSpec.from_dict(data)
        with self._lock:
            return self.supervisor.submit(spec, self.clock()).to_dict()

    def report_p99(self, name: str, data: object) -> dict[str, Any]:
        """An online service's measured p99 (``{"p99_ms": ...}``) for the compute guard,
        which acts on it at once rather than at the next tick: a pause is a signal, so a
        pushed report frees the SMs within milliseconds of reaching the agent."""
        if not isinstance(data, dict) or set(data) != {"p99_ms"}:
            raise InputError(f"p99 report for {name!r}", 'body must be {"p99_ms": <number>}')
        with self._lock:
            now = self.clock()
            gpu = self.guard.report(name, data["p99_ms"], now)
            self.guard.tick(now, self.share.shares)
            return {"workload": name, "gpu": gpu, "online_share_pct": self.share.shares.get(gpu)}

    def workloads(self) -> list[dict[str, Any]]:
        with self._lock:
            return [r.to_dict() for r in self.store.all()]

    def stop(self, name: str) -> dict[str, Any]:
        with self._lock:
            return self.supervisor.stop(name, self.clock()).to_dict()

    def exists(self, name: str) -> bool:
        with self._lock:
            return self.store.get(name) is not None

    def gpus(self) -> list[dict[str, Any]]:
        with self._lock:
            infos = self.backend.gpus()
            return [{**asdict(g), "online_share_pct": self.share.shares.get(g.index)}
                    for g in infos]

    def metrics_text(self) -> bytes:
        with self._lock:
            return self.metrics.render()

    def close(self) -> None:
        self.latency.close()
        with self._lock:
            self.supervisor.pauses.release_all(self.clock(), "agent stopping")
            self.store.close()

