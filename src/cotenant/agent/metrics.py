"""Prometheus metrics of the agent, in a registry of its own (never the process-global one).

Per GPU: utilisation, memory used and total, the online SM share in force, MPS daemon restarts.
Per node: the compute guard's pauses, throttles and evictions; per online service, the last
p99 the guard got (reported, or read from the service's latency histogram) and its last solo
load sample with what it was read from (:mod:`.colocation.sampling`); a histogram of
how long offline jobs are down per start and per share change (:mod:`.downtime`, observed as
each is measured, so it restarts with the agent as Prometheus counters do).
Per workload: up (1 while running), paused (1 while the guard pauses it), the SM share its
client got, restarts, and exits by fault class (from the SQLite event log, so the counts
survive agent restarts; exported as gauges for that reason). Served on ``GET /metrics`` by
:mod:`cotenant.agent.api`, behind the same bearer token as the rest of the API (Prometheus
sends it with ``authorization: {credentials_file: ...}``).
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Mapping, Sequence

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Gauge,
    Histogram,
    generate_latest,
)

from cotenant.agent.backends.base import GpuInfo
from cotenant.agent.records import Status, WorkloadRecord

CONTENT_TYPE = CONTENT_TYPE_LATEST
DOWNTIME_BUCKETS_S = (1.0, 2.0, 5.0, 10.0, 15.0, 20.0, 25.0, 30.0, 45.0, 60.0, 120.0, 300.0,
                      float("inf"))
"""Around the simulator's 30 s default, and the 10-25 s where MuxFlow breaks even."""


class AgentMetrics:
    """Gauges refreshed from a snapshot on every :meth:`update`."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self._lock = threading.Lock()  # a render never sees an update half done
        r = self.registry
        self.gpu_util = Gauge("cotenant_gpu_utilisation_percent", "GPU utilisation", ["gpu"],
                              registry=r)
        self.gpu_mem = Gauge("cotenant_gpu_memory_used_mib", "GPU memory used", ["gpu"],
                             registry=r)
        self.gpu_mem_total = Gauge("cotenant_gpu_memory_total_mib", "GPU memory", ["gpu"],
                                   registry=r)
        self.gpu_share = Gauge("cotenant_gpu_online_sm_share_percent",
                               "SM share the online service keeps (offline gets the rest)",
                               ["gpu"], registry=r)
        self.mps_restarts = Gauge("cotenant_mps_daemon_restarts", "MPS daemon restarts", ["gpu"],
                                  registry=r)
        self.up = Gauge("cotenant_workload_up", "1 while the workload runs", ["workload", "role"],
                        registry=r)
        self.paused = Gauge("cotenant_workload_paused", "1 while the compute guard pauses the "
                            "running workload (SIGSTOP)", ["workload"], registry=r)
        self.share = Gauge("cotenant_workload_sm_share_percent",
                           "MPS active-thread percentage of the running client", ["workload"],
                           registry=r)
        self.restarts = Gauge("cotenant_workload_restarts", "Restarts after faults",
                              ["workload"], registry=r)
        self.faults = Gauge("cotenant_workload_faults",
                            "Exits by fault class (not the exits the agent asked for)",
                            ["workload", "fault"], registry=r)
        self.p99 = Gauge("cotenant_online_p99_ms", "Last p99 an online service reported or "
                         "the agent read from its latency histogram (fresh ones only)",
                         ["workload"], registry=r)
        self.load = Gauge("cotenant_online_load_percent", "An online service's last solo load "
                          "sample, percent of a whole GPU, and what it was read from: its "
                          "processes' utilisation, its request rate, or the whole GPU's "
                          "utilisation", ["workload", "source"], registry=r)
        self.downtime = Histogram(
            "cotenant_offline_downtime_seconds", "Seconds an offline job was down, from its "
            "spawn (kind=start) or the SIGTERM of a share change (kind=share change) until "
            "the GPU showed it busy (agent.downtime); bound=lower where read on its MPS "
            "daemon", ["kind", "bound"], registry=r,
            buckets=DOWNTIME_BUCKETS_S)
        self.guard = Gauge("cotenant_guard_actions", "Compute guard actions since the agent "
                           "started (pause, throttle, evict)", ["action"], registry=r)
        self._state_gauges()

    def _state_gauges(self) -> None:
        self.storage_errors = Gauge("cotenant_agent_storage_errors", "State writes that "
                                    "failed since the agent started (kept in memory, retried)",
                                    registry=self.registry)
        self.storage_degraded = Gauge("cotenant_agent_storage_degraded", "1 while state "
                                      "writes fail (the agent supervises from memory)",
                                      registry=self.registry)
        self.quarantined = Gauge("cotenant_agent_quarantined_rows", "State rows this agent "
                                 "could not read, set aside", registry=self.registry)
        self.events_dropped = Gauge("cotenant_agent_events_dropped", "Events dropped while "
                                    "state writes failed", registry=self.registry)

    def update(
        self,
        gpus: Sequence[GpuInfo] | None,
        records: Sequence[WorkloadRecord],
        faults: Mapping[tuple[str, str], int],
        shares: Mapping[int, int],
        mps_restarts: Mapping[int, int],
        guard_actions: Mapping[str, int] | None = None,
        p99_ms: Mapping[str, float] | None = None,
        paused: Collection[str] = (),
        loads: Mapping[str, tuple[float, str]] | None = None,
    ) -> None:
        """Replace every value by the snapshot's (``gpus=None``: keep the last GPU values)."""
        with self._lock:
            self._update(gpus, records, faults, shares, mps_restarts, guard_actions, p99_ms,
                         paused, loads or {})

    def _update(
        self,
        gpus: Sequence[GpuInfo] | None,
        records: Sequence[WorkloadRecord],
        faults: Mapping[tuple[str, str], int],
        shares: Mapping[int, int],
        mps_restarts: Mapping[int, int],
        guard_actions: Mapping[str, int] | None,
        p99_ms: Mapping[str, float] | None,
        paused: Collection[str],
        loads: Mapping[str, tuple[float, str]],
    ) -> None:
        if gpus is not None:
            for gauge in (self.gpu_util, self.gpu_mem, self.gpu_mem_total):
                gauge.clear()
            for info in gpus:
                label = str(info.index)
                if info.utilisation_pct is not None:  # none in MIG mode: no sample, not 0
                    self.gpu_util.labels(label).set(info.utilisation_pct)
                self.gpu_mem.labels(label).set(info.memory_used_mib)
                self.gpu_mem_total.labels(label).set(info.memory_total_mib)
        for gauge in (self.gpu_share, self.mps_restarts, self.up, self.paused, self.share,
                      self.restarts, self.faults, self.p99, self.load):
            gauge.clear()
        for gpu, share in shares.items():
            self.gpu_share.labels(str(gpu)).set(share)
        for gpu, count in mps_restarts.items():
            self.mps_restarts.labels(str(gpu)).set(count)
        for record in records:
            name = record.spec.name
            running = record.status is Status.RUNNING
            self.up.labels(name, record.spec.role.value).set(1 if running else 0)
            self.restarts.labels(name).set(record.restarts)
            if running:
                self.paused.labels(name).set(1 if name in paused else 0)
            if running and record.applied_pct is not None:
                self.share.labels(name).set(record.applied_pct)
        for (name, fault), count in faults.items():
            self.faults.labels(name, fault).set(count)
        for name, value in (p99_ms or {}).items():
            self.p99.labels(name).set(value)
        for name, (pct, source) in loads.items():
            self.load.labels(name, source).set(pct)
        for action, count in (guard_actions or {}).items():
            self.guard.labels(action).set(count)

    def update_state(self, errors: int, degraded: bool, quarantined: int,
                     dropped: int) -> None:
        """The state store's health: failed writes, whether writes fail now, rows
        quarantined, events dropped while writes failed."""
        with self._lock:
            self._update_state(errors, degraded, quarantined, dropped)

    def _update_state(self, errors: int, degraded: bool, quarantined: int,
                      dropped: int) -> None:
        self.storage_errors.set(errors)
        self.storage_degraded.set(1 if degraded else 0)
        self.quarantined.set(quarantined)
        self.events_dropped.set(dropped)

    def render(self) -> bytes:
        with self._lock:
            return generate_latest(self.registry)
