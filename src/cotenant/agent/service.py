"""The agent as one object: backend, state, MPS, supervisor, the co-location controller
(:mod:`cotenant.agent.colocation`: observe, the core's decision, enforce; fed p99 reports
pushed and read by the latency scraper) and metrics, with the thread-safe calls the API makes,
the ``tick`` the run loop makes, and ``watch``, the guard's fast path.

The reconcile core has no threads; the HTTP server's threads, the run loop and the watcher
meet here, under one lock, which the API's reads never take: the workloads come from the
state's memory, the GPUs, downtimes and metrics from the last tick's snapshot, so a flood of
reads delays neither the tick nor a pushed p99 report. The watcher
(:meth:`AgentService.start_watching`) runs ``watch`` every ``WATCH_S``: a p99 the agent
scrapes is decided on when its read finishes, not at the next reconcile tick, so the guard's
reaction is the scrape interval plus tens of milliseconds (``benchmarks/guard_reaction.py``),
as with a pushed report. Times are wall-clock seconds (``time.time`` by default, injectable)
because they are stored in SQLite and must stay meaningful across agent restarts; every
timeout runs on ``monotonic``.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import asdict
from pathlib import Path
from typing import Any

from cotenant.agent.backends.base import GpuInfo, NodeBackend
from cotenant.agent.colocation import (
    ColocationController,
    Enforcer,
    NodeObserver,
    check_enforceable,
    check_online,
    guard_settings,
    priority_runtime,
)
from cotenant.agent.faultpoints import FaultPoints
from cotenant.agent.latency import Fetch, LatencyScraper, http_get
from cotenant.agent.metrics import AgentMetrics
from cotenant.agent.mps import MpsManager
from cotenant.agent.scrapehosts import ScrapeHosts
from cotenant.agent.spec import Role, WorkloadSpec
from cotenant.agent.state import StateStore
from cotenant.agent.supervisor import Supervisor
from cotenant.errors import CotenantError, InputError, check_seconds
from cotenant.perf.interference import Interference, interference
from cotenant.policies.colocation import ColocationPolicy
from cotenant.runtime import GateSettings

WATCH_S = 0.05
"""Seconds between the watcher's calls: a finished latency read waits at most this long."""


class AgentService:
    """Everything ``cotenant agent run`` runs, on one node."""

    def __init__(
        self,
        backend: NodeBackend,
        state_dir: Path,
        policy: ColocationPolicy,
        *,
        clock: Callable[[], float] = time.time,
        calibration: Interference | None = None,
        fetch: Fetch = http_get,
        executor: Executor | None = None,
        runtime_settings: GateSettings | None = None,
        monotonic: Callable[[], float] | None = None,
        points: FaultPoints | None = None,
        scrape_hosts: ScrapeHosts | None = None,
    ) -> None:
        check_enforceable(policy)
        self.backend = backend
        self.clock = clock
        # a test's manual clock is its monotonic clock too
        mono = monotonic or (time.monotonic if clock is time.time else clock)
        self.store = StateStore(state_dir / "agent.db", points=points, monotonic=mono)
        self.mps = MpsManager(backend, state_dir)
        self.supervisor = Supervisor(backend, self.store, self.mps, recovery=policy.recovery,
                                     monotonic=mono)
        self.observer = NodeObserver(self.supervisor, backend, policy,
                                     calibration or interference())
        self.runtime = priority_runtime(policy, state_dir, runtime_settings)
        """The priority runtime's boards (a priority policy only)."""
        if self.runtime is not None:
            self.supervisor.start_env = self.runtime.env_for
        self.colocation = ColocationController(
            policy, self.observer, Enforcer(self.supervisor, self.runtime), start_s=clock())
        self.scrape_hosts = scrape_hosts or ScrapeHosts()
        """Where a latency histogram may be read (:mod:`.scrapehosts`)."""
        self.latency = LatencyScraper(self.store, self.scrape_hosts.guard(fetch),
                                      guard_settings(policy), executor=executor)
        self.metrics = AgentMetrics()
        self._lock = threading.RLock()
        self._scrape_lock = threading.Lock()  # the scraper serves one caller at a time
        self._gpus: list[GpuInfo] = []
        self._gpu_view: list[dict[str, Any]] | None = None  # the last tick's, for the API
        self._downtime_view: dict[str, Any] | None = None
        self._views: dict[str, tuple[object, bytes]] = {}  # path -> (key, body)
        self._metrics_body: bytes | None = None
        self._watching: tuple[threading.Thread, threading.Event] | None = None
        self._watch_lock = threading.Lock()  # start_watching against itself and close
        self._closed = False

    def watch(self) -> None:
        """The compute guard's fast path: take in the latency reads that have finished,
        start those due, and decide on their reports now. :meth:`tick` calls it first."""
        # latency pages are fetched outside both locks (on the reads' own threads): a slow
        # one holds up neither the API nor this call. The scraper's lock is held until the
        # guard has the reports, so two callers' reports reach it in the order they were read
        # (always _scrape_lock, then _lock: nothing takes them the other way round)
        with self._scrape_lock:
            reports = self.latency.tick(self.clock())
            windows = self.latency.take_windows()
            if not reports and not windows:
                return
            with self._lock:
                self.observer.count(windows)
                if not reports:
                    return
                now = self.clock()
                for report in reports:
                    try:
                        self.observer.reports.report(report.workload, report.p99_ms, now,
                                                     report.since)
                    except InputError:  # the service stopped since the read
                        continue
                self.colocation.decide(now)

    def start_watching(self, period_s: float = WATCH_S) -> None:
        """Run :meth:`watch` every ``period_s`` (> 0) on a thread of its own until
        :meth:`close`; a second call while it runs does nothing."""
        check_seconds(period_s, "guard watch period", positive=True)
        with self._watch_lock:
            if self._closed:
                raise InputError("guard watcher", "the agent service is closed",
                                 hint="start watching before close()")
            if self._watching is not None:
                return
            stop = threading.Event()
            thread = threading.Thread(target=self._watch_loop, args=(stop, period_s),
                                      name="cotenant-guard-watch", daemon=True)
            self._watching = (thread, stop)
            thread.start()

    def _watch_loop(self, stop: threading.Event, period_s: float) -> None:
        last = ""
        while not stop.wait(period_s):
            try:
                self.watch()
                last = ""
            except Exception as exc:  # the tick's own call meets it too; carry on
                # nothing here may end the thread: not the exception's own text, not a
                # broken store
                text = type(exc).__name__
                with contextlib.suppress(Exception):
                    text = f"{text}: {exc!s:.160}"
                with contextlib.suppress(Exception):
                    if text != last:
                        last = text
                        self.store.event(self.clock(), "agent", "guard watch failed",
                                         detail=text)

    def tick(self) -> None:
        self.watch()
        with self._lock:
            now = self.clock()
            self.colocation.decide(now)
            self.supervisor.tick(now)
            gpus: list[GpuInfo] | None
            try:
                gpus = self.backend.gpus()
                self._gpus = gpus
            except CotenantError:
                gpus = None
            if gpus is not None:
                self._measure_downtime(gpus, now)
            self.metrics.update(gpus, self.store.all(), self.store.fault_counts(),
                                self.colocation.shares, self.mps.restarts,
                                self.colocation.counts, self.observer.reports.latest(now),
                                self.supervisor.paused(), self.observer.sampler.latest())
            self.metrics.update_state(self.store.errors, bool(self.store.degraded),
                                      len(self.store.quarantined), self.store.events_dropped)
            self._gpu_view = self._gpu_dicts(self._gpus)
            self._downtime_view = self._downtime_dict()
            self._metrics_body = self.metrics.render()

    def _measure_downtime(self, gpus: list[GpuInfo], now: float) -> None:
        """Close the offline downtimes the GPUs show over (:mod:`.downtime`)."""
        live = {r.spec.name for r in self.store.all()
                if r.spec.role is Role.OFFLINE and not r.status.final}
        meter = self.supervisor.downtime
        done, gave_up = meter.observe(gpus, live, self.supervisor.paused(), now,
                                      self.backend.members)
        for d in done:
            self.store.event(now, d.workload, "up again", detail=d.describe())
            self.metrics.downtime.labels(d.kind, "lower" if d.lower_bound else "exact").observe(
                d.seconds)
        for name in gave_up:
            self.store.event(now, name, "downtime unmeasured",
                             detail=f"no SM utilisation >= {meter.busy_pct:g}% of its own "
                             f"within {meter.timeout_s:g} s")

    def downtime(self) -> dict[str, Any]:
        """The offline downtimes measured since the agent started, per kind (as of the last
        tick; before the first, now)."""
        view = self._downtime_view
        if view is not None:
            return view
        with self._lock:
            return self._downtime_dict()

    def _downtime_dict(self) -> dict[str, Any]:
        meter = self.supervisor.downtime
        return {"busy_pct": meter.busy_pct, "kinds": meter.summary(),
                "lower_bounds": meter.summary(lower_bounds=True)}

    def submit(self, data: object) -> dict[str, Any]:
        spec = WorkloadSpec.from_dict(data)
        if spec.latency_metric is not None:
            self.scrape_hosts.check(spec.latency_metric.url,
                                    f"workload {spec.name!r}.latency_metric.url")
        with self._lock:
            check_online(self.colocation.policy, spec)
            return self.supervisor.submit(spec, self.clock()).to_dict()

    def report_p99(self, name: str, data: object) -> dict[str, Any]:
        """An online service's measured p99 (``{"p99_ms": ...}``) for the compute guard,
        decided on at once rather than at the next tick: a pause is a signal, so a pushed
        report frees the SMs within milliseconds of reaching the agent."""
        if not isinstance(data, dict) or set(data) != {"p99_ms"}:
            raise InputError(f"p99 report for {name!r}", 'body must be {"p99_ms": <number>}')
        with self._lock:
            now = self.clock()
            gpu = self.observer.reports.report(name, data["p99_ms"], now)
            self.colocation.decide(now)
            return {"workload": name, "gpu": gpu,
                    "online_share_pct": self.colocation.shares.get(gpu)}

    def workloads(self) -> list[dict[str, Any]]:
        """Every workload, from the state's memory (no wait for a tick)."""
        return [r.to_dict() for r in self.store.all()]

    def view(self, path: str) -> bytes:
        """The JSON body of a read route (``/v1/workloads``, ``/v1/gpus``, ``/v1/downtime``,
        ``/v1/health``), serialised once per change of what it shows: a flood of reads costs
        the CPU, and so a pushed report, little."""
        if path == "/v1/workloads":
            key: object = self.store.version
        elif path in ("/v1/gpus", "/v1/downtime"):
            key = (id(self._gpu_view), id(self._downtime_view))
        else:
            key = None  # not cached
        cached = self._views.get(path)
        if key is not None and cached is not None and cached[0] == key:
            return cached[1]
        payload = {"/v1/workloads": self.workloads, "/v1/gpus": self.gpus,
                   "/v1/downtime": self.downtime, "/v1/health": self.health}[path]()
        body = json.dumps(payload).encode() + b"\n"
        if key is not None and (path != "/v1/gpus" or self._gpu_view is not None):
            self._views[path] = (key, body)
        return body

    def health(self) -> dict[str, Any]:
        """The state store's health, the rows set aside, the processes left unadopted."""
        store = self.store
        return {"storage": {"degraded": store.degraded, "errors": store.errors,
                            "events_dropped": store.events_dropped},
                "quarantined": dict(store.quarantined),
                "orphans": {str(pid): why for pid, why in self.supervisor.orphans.items()}}

    def stop(self, name: str) -> dict[str, Any]:
        with self._lock:
            return self.supervisor.stop(name, self.clock()).to_dict()

    def exists(self, name: str) -> bool:
        return self.store.get(name) is not None

    def gpus(self) -> list[dict[str, Any]]:
        """The inventory as of the last tick (before the first, read now)."""
        view = self._gpu_view
        if view is not None:
            return view
        with self._lock:
            return self._gpu_dicts(self.backend.gpus())

    def _gpu_dicts(self, infos: list[GpuInfo]) -> list[dict[str, Any]]:
        return [{**asdict(g), "online_share_pct": self.colocation.shares.get(g.index)}
                for g in infos]

    def metrics_text(self) -> bytes:
        """The metrics as of the last tick (rendered once per tick)."""
        body = self._metrics_body
        return body if body is not None else self.metrics.render()

    def close(self) -> None:
        """Stop the watcher, then resume every paused offline client and close the store.
        The resume runs whatever cuts the first part short (an interrupt while the watcher
        is joined): a client left stopped would hold its GPU memory until the next run."""
        try:
            with self._watch_lock:
                self._closed = True
                watching, self._watching = self._watching, None
            if watching is not None:
                thread, stop = watching
                stop.set()
                thread.join()
            with self._scrape_lock:
                self.latency.close()
        except BaseException:
            with contextlib.suppress(Exception):  # the interrupt is what the caller gets
                self._resume_and_close()
            raise
        self._resume_and_close()

    def _resume_and_close(self) -> None:
        with self._lock:
            try:
                self.supervisor.pauses.release_all(self.clock(), "agent stopping")
                if self.runtime is not None:
                    self.runtime.close()
            finally:
                self.store.close()

