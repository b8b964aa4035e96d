"""What the node agent sees, as the co-location core's :class:`Observation`.

One row per (GPU, online service) on the GPUs this agent runs online work on (MIG instances
are left out: the hardware isolates them). Per row:

* ``load``: the service's last solo load sample, ``load_peak`` the peak of its samples over
  the policy's ``load_window_s`` (:mod:`.load`; a sample per observation, from NVML's
  per-process SM utilisation; where NVML samples none of its processes (under MPS), from its
  request rate times its GPU time per request; the GPU's utilisation where neither is known);
* ``p99_ms``, ``p99_since_s``, ``p99_at_s``: its last p99 report, when its window began and
  when it came (:mod:`.reports`; NaN where none);
* ``placed``: an offline workload waits or runs on the GPU (not finished, and the GPU not
  held by an eviction or a quarantine); ``running``: one of them runs now, unpaused;
* ``share``: the online share in force, ``100 -`` the largest offline thread cap on the GPU
  (the cap a running client got, else the one it will start with); 100 with nothing placed;
* ``stretch``: the calibration's predicted slowdown for the policy's mechanism
  (:meth:`cotenant.perf.interference.Interference.predicted_stretch`, what the simulator's
  policies see too).

Each row also carries its *pair*: a number that changes when the offline workloads it shares
its GPU with change (a job arrives or leaves); the core's pair state for the row then starts
afresh, as in the simulator when a job is placed or leaves, and a p99 report whose window
began before the new pair did is not shown (it measured another co-runner). A row the policy
cannot judge (no utilisation at
all, or a model the performance model does not know where the policy reads one) is left
out and logged once per GPU; the others still decide.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from dataclasses import dataclass

import numpy as np

from cotenant.agent.backends.base import DeviceInventory
from cotenant.agent.colocation.reports import P99Reports
from cotenant.agent.colocation.sampling import LoadSampler
from cotenant.agent.latency import RequestWindow
from cotenant.agent.records import Status, WorkloadRecord
from cotenant.agent.spec import Role, WorkloadSpec
from cotenant.agent.supervisor import NODE, Supervisor
from cotenant.errors import InputError
from cotenant.perf import mps
from cotenant.perf.interference import Interference
from cotenant.policies.colocation import (
    MAX_SHARE_PCT,
    ColocationPolicy,
    DynamicShare,
    GuardSettings,
    Observation,
)

RowKey = tuple[int, str]
"""(GPU index, online service name)."""


@dataclass(frozen=True)
class Rows:
    """One decision's observation of the node: a row per (GPU, online service)."""

    keys: tuple[RowKey, ...]
    pairs: tuple[int, ...]
    """Per row, which pair it is in: a new value starts the pair state afresh."""
    obs: Observation


def reads_models(policy: ColocationPolicy) -> bool:
    """Whether ``policy``'s decisions use the online service's performance model (dynamic
    share sizing, or the guard's throttle to the need at the measured load)."""
    return policy.shares_gpus and (isinstance(policy.share, DynamicShare)
                                   or policy.guard is not None)


def check_online(policy: ColocationPolicy, spec: WorkloadSpec) -> None:
    """An error unless ``policy`` can judge online service ``spec``: one whose model it could
    not read would be left out of every decision, and its GPU's offline co-runner would keep
    the SMs the service needs."""
    if spec.role is not Role.ONLINE or spec.mig_instance is not None or not reads_models(policy):
        return
    model = spec.model or spec.name
    if model not in mps.ONLINE_MODELS:
        raise InputError(f"workload {spec.name!r}.model", f"the co-location policy "
                         f"{policy.name!r} cannot judge {model!r}: the performance model knows "
                         f"{', '.join(mps.ONLINE_MODELS)}",
                         hint="name one of them in \"model\"")


def guard_settings(policy: ColocationPolicy) -> GuardSettings:
    """The policy's guard settings, or the defaults where it has no guard (the latency reports
    are still read, for the metrics)."""
    return policy.guard or GuardSettings()


class NodeObserver:
    """Samples the loads and builds the :class:`Rows` of each decision."""

    def __init__(self, supervisor: Supervisor, inventory: DeviceInventory,
                 policy: ColocationPolicy, calibration: Interference) -> None:
        self.supervisor = supervisor
        self.inventory = inventory
        self.policy = policy
        self.stretch = calibration.predicted_stretch(policy.mechanism)
        guard = guard_settings(policy)
        self.reports = P99Reports(supervisor.store, guard.settle_s, guard.stale_s)
        self.sampler = LoadSampler(supervisor, inventory, policy.load_window_s, guard)
        self.loads = self.sampler.loads
        self._errors: dict[int, str] = {}
        self._pairs: dict[RowKey, tuple[Hashable, int, float]] = {}
        """Per row, its offline work, that pair's number and since when it is there."""

    def forget(self) -> None:
        """Start afresh (the wall clock stepped back: the windows mean nothing now)."""
        self.sampler.forget()
        self.reports.clear()
        self._pairs.clear()

    def count(self, windows: list[RequestWindow]) -> None:
        """Take in the request counts of closed latency windows."""
        self.sampler.count(windows)

    def _records(self) -> list[WorkloadRecord]:
        return [r for r in self.supervisor.store.all() if r.spec.mig_instance is None]

    def observe(self, now: float) -> Rows:
        """The rows of a decision at ``now``: the loads read from NVML now, the last reports."""
        self.sample(now)
        return self.rows(now)

    def sample(self, now: float) -> None:
        """Read each running online service's load (:class:`LoadSampler`)."""
        records = self._records()
        self.reports.keep({r.spec.name for r in records if r.spec.role is Role.ONLINE
                           and r.status is Status.RUNNING})
        for gpu, text in self.sampler.sample(now, records).items():
            if text is None:
                self._errors.pop(gpu, None)
            else:
                self._error(gpu, now, text)

    def _error(self, gpu: int, now: float, text: str) -> None:
        if self._errors.get(gpu) != text:
            self._errors[gpu] = text
            self.supervisor.store.event(now, NODE, "policy error", detail=text)

    def rows(self, now: float) -> Rows:
        """The rows of a decision at ``now`` from the samples and reports so far."""
        records = self._records()
        paused = self.supervisor.paused()
        keys: list[RowKey] = []
        pairs: list[int] = []
        cols: dict[str, list[float]] = {k: [] for k in (
            "model", "slo", "load", "peak", "p99", "since", "at", "placed", "running", "share")}
        for record in sorted(records, key=lambda r: (r.spec.gpu, r.spec.name)):
            spec = record.spec
            last = self.loads.last(spec.name)
            if spec.role is not Role.ONLINE or record.status is not Status.RUNNING or last is None:
                continue
            model = self._model(record, now)
            if model is None:
                continue
            offline = [r for r in records if r.spec.gpu == spec.gpu
                       and r.spec.role is Role.OFFLINE and not r.status.final]
            placed = bool(offline) and self.supervisor.held_until(spec.gpu) <= now
            running = placed and any(r.status is Status.RUNNING and r.spec.name not in paused
                                     for r in offline)
            peak = self.loads.peak(spec.name, now)
            key = (spec.gpu, spec.name)
            pair, since = self._pair(key, frozenset(r.spec.name for r in offline)
                                     if placed else None, now)
            report = self.reports.get(spec.name)
            if report is not None and report.since < since:  # beside another co-runner
                report = None
            keys.append(key)
            pairs.append(pair)
            for col, value in (
                ("model", model), ("slo", spec.slo_ms), ("load", last / 100.0),
                ("peak", max(last, peak if peak is not None else last) / 100.0),
                ("p99", report.p99_ms if report else math.nan),
                ("since", report.since if report else -math.inf),
                ("at", report.at if report else -math.inf), ("placed", placed),
                ("running", running), ("share", _share_in_force(offline) if placed else 100),
            ):
                cols[col].append(float(value))
        self._pairs = {k: v for k, v in self._pairs.items() if k in keys}
        n = len(keys)
        obs = Observation(
            now_s=now, model=np.asarray(cols["model"], dtype=np.int64),
            slo_ms=np.asarray(cols["slo"]), load=np.asarray(cols["load"]),
            load_peak=np.asarray(cols["peak"]), p99_ms=np.asarray(cols["p99"]),
            p99_since_s=np.asarray(cols["since"]), p99_at_s=np.asarray(cols["at"]),
            placed=np.asarray(cols["placed"], dtype=np.bool_),
            running=np.asarray(cols["running"], dtype=np.bool_),
            share=np.asarray(cols["share"], dtype=np.int64), stretch=np.full(n, self.stretch))
        return Rows(tuple(keys), tuple(pairs), obs)

    def _pair(self, key: RowKey, offline: Hashable, now: float) -> tuple[int, float]:
        """Row ``key``'s pair number and since when it is there (-inf for the pair a row was
        first seen with)."""
        last = self._pairs.get(key)
        if last is None:
            self._pairs[key] = (offline, 0, -math.inf)
        elif last[0] != offline:
            self._pairs[key] = (offline, last[1] + 1, now)
        _, number, since = self._pairs[key]
        return number, since

    def _model(self, record: WorkloadRecord, now: float) -> int | None:
        """The row's model index; None (logged) where the policy reads models and the
        performance model does not know this one. A policy that reads none gets index 0,
        which it never looks at."""
        try:
            return mps.model_index(record.spec.model or record.spec.name)
        except ValueError:
            if not reads_models(self.policy):
                return 0
        self._error(record.spec.gpu, now, f"the co-location policy cannot judge online "
                    f"service {record.spec.name!r}: no performance model of "
                    f"{record.spec.model or record.spec.name!r}")
        return None


def _share_in_force(offline: list[WorkloadRecord]) -> int:
    """The online share the GPU's offline clients leave: ``100 -`` the largest thread cap
    among them (a running client's, else the one it will start with; none is MPS's 100)."""
    caps = []
    for r in offline:
        cap = r.applied_pct if r.status is Status.RUNNING else r.share_pct
        caps.append(MAX_SHARE_PCT if cap is None else cap)
    return MAX_SHARE_PCT - max(caps)
