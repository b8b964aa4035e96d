"""The compute guard on the node: online services report their p99, the guard protects them.

MuxFlow's second protection level. The share policy sizes the offline share from the online
*load*; the guard watches the online *latency* and acts when the share policy was wrong:

* an online service (or a sidecar scraping it) reports its measured p99 through the API
  (``POST /v1/workloads/<name>/p99``, ``cotenant agent report``), or the agent reads it from
  the service's Prometheus latency histogram (:mod:`cotenant.agent.latency`);
* a report above ``threshold`` x the service's SLO (0.95, the simulator's MuxFlow policy's
  ``guard_threshold``, read from it) on a GPU with a running offline co-runner first
  *pauses* the GPU's offline clients for ``pause_s`` seconds (SIGSTOP to each of their
  processes, or their cgroup frozen, then resumed): the SMs are free as soon as the kernels
  already queued finish, and the job loses no start-up time, so a burst costs no restart.
  This is our form of MuxFlow's launch throttle (xCUDA delays an offline process's kernel
  launches), which an MPS share alone cannot do to a running client. A lasting rise pays
  the pause and then the throttle, so the pause is short by default (10 s, the settle
  time): a bound on that extra cost, not a measured optimum. (The simulator has no pause:
  with one load per minute, a pause there is always followed by a throttle within the same
  minute, so it could only cost);
* a report over the threshold during a pause, or within ``hold_s`` after it (the pause did
  not help, or the cause is lasting), *throttles*: the online share's floor rises by
  ``step_pct`` points, held for ``hold_s`` seconds (the share controller applies
  ``max(policy share, floor)``; MPS fixes a client's share at start, so the offline client
  is restarted with the smaller share, the simulator's ``share_change_s``); ``pause_s = 0``
  throttles at once;
* when the floor would pass ``evict_above`` (95, also the MuxFlow policy's), the guard
  *evicts*: the GPU's offline clients are stopped, and no offline work starts on it for
  ``evict_hold_s``;
* after an action the GPU's reports are dropped, and no action follows for ``settle_s``;
  a report counts only if its requests were all served after the last action: a report
  read from the service's histogram knows when its window began, and a pushed one is taken
  to reach ``settle_s`` back (a p99 measured over a window still holds the requests served
  before the action); reports older than ``stale_s`` are ignored too.

A p99 the agent cannot check against an SLO is refused: the report must name a running online
workload, and the p99 must be a finite number >= 0. Decisions are a pure function of the
reports, the shares in force and the clock, so the tests drive them with a manual clock.
Floors, holds and reports live in memory: an agent restart lifts them, and a wall clock
stepping back starts the guard's floors and reports afresh (the supervisor keeps what an
offline hold had left); the next report over the SLO acts again.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from cotenant.agent.spec import Role
from cotenant.agent.state import Status, WorkloadRecord
from cotenant.agent.supervisor import NODE, Supervisor
from cotenant.errors import InputError, check_seconds
from cotenant.policies.colocation import COLOCATION
from cotenant.policies.colocation.contract import MAX_SHARE_PCT, check_share_pct

_MUXFLOW = COLOCATION.create("muxflow")
"""The simulator's MuxFlow policy: the guard's thresholds are its thresholds."""


@dataclass(frozen=True)
class GuardSettings:
    """The guard's thresholds and timings (see the module docstring)."""

    threshold: float = _MUXFLOW.guard_threshold
    step_pct: int = 20
    evict_above: int = _MUXFLOW.evict_above
    pause_s: float = 10.0
    hold_s: float = 60.0
    evict_hold_s: float = 300.0
    settle_s: float = 10.0
    stale_s: float = 10.0

    def __post_init__(self) -> None:
        if not 0.0 < self.threshold <= 1.0:
            raise InputError("guard threshold", f"{self.threshold} must be in (0, 1]")
        check_share_pct(self.step_pct, "guard step_pct")
        check_share_pct(self.evict_above, "guard evict_above")
        for name in ("pause_s", "hold_s", "evict_hold_s", "settle_s", "stale_s"):
            check_seconds(getattr(self, name), f"guard {name}")


@dataclass(frozen=True)
class _Report:
    p99_ms: float
    slo_ms: float
    at: float
    since: float  # the earliest request the p99 may hold


class LatencyGuard:
    """Throttles, then evicts, a GPU's offline clients when its online p99 nears the SLO."""

    def __init__(self, supervisor: Supervisor, settings: GuardSettings | None = None) -> None:
        self.supervisor = supervisor
        self.settings = settings or GuardSettings()
        self.pauses = 0
        self.throttles = 0
        self.evictions = 0
        self._reports: dict[int, dict[str, _Report]] = {}
        self._floors: dict[int, tuple[int, float]] = {}  # GPU -> (floor %, until)
        self._acted_at: dict[int, float] = {}  # GPU -> time of the guard's last action
        self._paused_at: dict[int, float] = {}  # GPU -> time of the guard's last pause
        self._latest: dict[str, tuple[float, float]] = {}  # name -> (p99 ms, reported at)
        self._last_now = -math.inf

    def report(self, name: str, p99_ms: object, now: float,
               since: float | None = None) -> int:
        """Record online workload ``name``'s measured p99 of the requests served from
        ``since`` on (unknown for a pushed report: taken as ``settle_s`` back); the GPU it
        runs on."""
        where = f"p99 report for {name!r}"
        if isinstance(p99_ms, bool) or not isinstance(p99_ms, int | float):
            raise InputError(where, f"p99_ms must be a number, got {p99_ms!r:.40}")
        try:
            value = float(p99_ms)
        except OverflowError:
            value = math.inf
        if not (math.isfinite(value) and value >= 0.0):
            raise InputError(where, "p99_ms must be a finite number >= 0")
        record = self.supervisor.store.get(name)
        if record is None:
            raise InputError(where, "no such workload")
        if record.spec.role is not Role.ONLINE or record.status is not Status.RUNNING:
            raise InputError(where, "only a running online workload reports its latency")
        gpu = record.spec.gpu
        start = now - self.settings.settle_s if since is None else since
        self._reports.setdefault(gpu, {})[name] = _Report(value, record.spec.slo_ms, now, start)
        self._latest[name] = (value, now)
        return gpu

    def latest(self, now: float) -> dict[str, float]:
        """The last p99 (ms) of each service that reported within ``stale_s`` (metrics)."""
        fresh = {n: v for n, (v, at) in self._latest.items()
                 if 0.0 <= now - at <= self.settings.stale_s}
        self._latest = {n: self._latest[n] for n in fresh}
        return fresh

    def floor(self, gpu: int, now: float) -> int:
        """The online share the guard holds ``gpu`` at (0: none)."""
        floor, until = self._floors.get(gpu, (0, 0.0))
        return floor if now < until else 0

    def tick(self, now: float, shares: dict[int, int]) -> None:
        """Act on fresh reports; ``shares``: the online share in force per GPU."""
        s = self.settings
        if now < self._last_now:  # the wall clock stepped back: start afresh
            self._reports.clear()
            self._floors.clear()
            self._acted_at.clear()
            self._paused_at.clear()
        self._last_now = now
        if not any(self._reports.values()):  # the usual tick: nothing reported, nothing to read
            return
        records = self.supervisor.store.all()
        online = {r.spec.name for r in records
                  if r.spec.role is Role.ONLINE and r.status is Status.RUNNING}
        for gpu, reports in self._reports.items():
            for name in [n for n, r in reports.items()
                         if n not in online or now - r.at > s.stale_s]:
                del reports[name]
            acted = self._acted_at.get(gpu, -math.inf)
            if now < acted + s.settle_s:
                continue
            over = [r for r in reports.values()
                    if r.since >= acted and r.p99_ms > s.threshold * r.slo_ms]
            offline = [r for r in records if r.spec.gpu == gpu and r.spec.role is Role.OFFLINE
                       and r.status is Status.RUNNING and r.spec.mig_instance is None]
            if not over or not offline:
                continue
            current = max(shares.get(gpu, 0), self.floor(gpu, now))
            raised = current + s.step_pct
            self._acted_at[gpu] = now
            reports.clear()
            worst = max(over, key=lambda r: r.p99_ms / r.slo_ms)
            detail = f"GPU {gpu}: p99 {worst.p99_ms:g} ms, SLO {worst.slo_ms:g} ms"
            if s.pause_s > 0 and now > self._paused_at.get(gpu, -math.inf) + s.pause_s + s.hold_s:
                self.pauses += 1
                self._paused_at[gpu] = now
                self.supervisor.store.event(now, NODE, "guard pause",
                                            detail=f"{detail}: offline paused {s.pause_s:g} s")
                for record in offline:
                    self.supervisor.pause(record.spec.name, now, now + s.pause_s)
            elif raised > s.evict_above:
                self.evictions += 1
                self._evict(gpu, offline, now, detail)
            else:
                self.throttles += 1
                self._floors[gpu] = (min(raised, MAX_SHARE_PCT), now + s.hold_s)
                self.supervisor.store.event(now, NODE, "guard throttle",
                                            detail=f"{detail}: online share >= {raised}")

    def _evict(self, gpu: int, offline: list[WorkloadRecord], now: float, detail: str) -> None:
        """Stop the GPU's offline clients; no offline work starts there for ``evict_hold_s``
        (those evicted, those waiting, those submitted meanwhile)."""
        self.supervisor.hold_offline(gpu, now + self.settings.evict_hold_s)
        for record in offline:
            self.supervisor.store.event(now, record.spec.name, "guard evict", detail=detail)
            self.supervisor.evict(record.spec.name, now)
