"""The SM-share controller: the co-location policy's decision, enforced through MPS.

Each tick, for every GPU that runs an online service, it observes the online load (the online
process's SM utilisation where the backend reports it per process, else the GPU's
utilisation, as a fraction), asks the :class:`~cotenant.policies.colocation.SharePolicy` - the
same object the simulator drives - for the online share, and gives the GPU's offline workloads
``100 - share`` percent of the SMs (at least 1, MPS's minimum).

MPS reads ``CUDA_MPS_ACTIVE_THREAD_PERCENTAGE`` only when a client creates its context, and
``set_active_thread_percentage <server PID> <pct>`` in ``nvidia-cuda-mps-control`` changes it
only for clients that connect to that server later. So a running offline client gets a new
share by being restarted (offline jobs are expected to checkpoint on SIGTERM). A client whose
share is above its target is restarted at once, however small the excess, since the online
service needs those SMs now; one below its target only when the gap exceeds ``threshold_pct``
(a restart costs the job its start-up time; ``sim.colocation`` charges the same cost as
``share_change_s``). Online clients are never restarted for a share change. With several
online services on one GPU, the busiest one decides. Where the compute guard
(:mod:`cotenant.agent.guard`) holds a GPU's online share at a floor, the share is at least
that floor.

The load the policy sees is the peak of the samples of the last ``window_s`` seconds (60 by
default, the simulator's one-minute interval), not the last sample: a utilisation reading
covers a fraction of a second, so a per-tick decision would follow every burst, and each
change is a restart. With the peak, a rise is acted on at the tick it is seen, but a fall
only once it has lasted ``window_s``; so between two lowerings of the online share there are
at least ``window_s`` seconds, and an offline client is restarted at most twice per window
(a lowering, then a raise), however the load moves; the guard's throttles come on top, at
most one per GPU every ``settle_s`` (10 s). A running offline client is not given
more SMs before the GPU's load has been watched for a whole window (after the agent starts,
or an online service arrives). The peak is more cautious than the
simulator, whose policy sees each minute's mean duty cycle and whose compute guard covers
bursts within the minute; the agent's guard (:mod:`cotenant.agent.guard`) acts on measured
latency instead, seconds later.

:data:`SHARE_POLICIES` names the policies ``cotenant agent run --share-policy`` can use.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from cotenant.agent.backends.base import DeviceInventory, GpuInfo
from cotenant.agent.spec import Role
from cotenant.agent.state import Status, WorkloadRecord
from cotenant.agent.supervisor import NODE, Supervisor
from cotenant.errors import CotenantError, InputError
from cotenant.policies.colocation.contract import (
    MAX_SHARE_PCT,
    MIN_SHARE_PCT,
    OnlineObservation,
    SharePolicy,
    check_share_pct,
)
from cotenant.policies.colocation.share import DynamicShare
from cotenant.registry import Registry

SHARE_POLICIES: Registry[SharePolicy] = Registry("share policy")


@SHARE_POLICIES.register("static", aliases=("fixed-online",))
@dataclass(frozen=True)
class StaticShare:
    """The online service keeps ``online_pct`` of the SMs whatever its load (a baseline; the
    load-driven policies live in :mod:`cotenant.policies.colocation`)."""

    online_pct: int = 70

    def online_share(self, obs: OnlineObservation) -> int:
        return check_share_pct(self.online_pct, "static share policy online_pct")


SHARE_POLICIES.register("dynamic", aliases=("muxflow",))(DynamicShare)
"""MuxFlow's dynamic SM allocation: the very object ``cotenant simulate colocation`` drives."""


class ShareController:
    """Applies a share policy to every GPU with an online workload."""

    def __init__(
        self,
        supervisor: Supervisor,
        inventory: DeviceInventory,
        policy: SharePolicy,
        *,
        threshold_pct: int = 10,
        window_s: float = 60.0,
        floor: Callable[[int, float], int] | None = None,
    ) -> None:
        if not window_s >= 0.0:
            raise InputError("share window", f"{window_s} s must be a number >= 0")
        self.supervisor = supervisor
        self.inventory = inventory
        self.policy = policy
        self.threshold_pct = threshold_pct
        self.window_s = window_s
        self.floor = floor
        """Per GPU and time, the least online share (the compute guard's, ``agent.guard``)."""
        self.shares: dict[int, int] = {}
        """The online share in force per GPU."""
        self._samples: dict[int, deque[tuple[float, float]]] = {}
        """Per GPU, (time, busiest online utilisation %) of the last ``window_s`` seconds."""
        self._observed_since: dict[int, float] = {}
        """Per GPU, when its online load was first sampled."""
        self._errors: dict[int, str] = {}
        """Per GPU, the policy error last logged (logged again only when it changes)."""

    def tick(self, now: float) -> None:
        store = self.supervisor.store
        try:
            gpus = {g.index: g for g in self.inventory.gpus()}
        except CotenantError as exc:
            store.event(now, NODE, "nvml error", detail=exc.one_line())
            return
        records = store.all()
        for index, info in gpus.items():
            online = [r for r in records if r.spec.gpu == index and r.spec.role is Role.ONLINE
                      and r.status is Status.RUNNING]
            if not online:
                self.shares.pop(index, None)
                self._samples.pop(index, None)
                self._observed_since.pop(index, None)
                continue
            offline = [r for r in records if r.spec.gpu == index
                       and r.spec.role is Role.OFFLINE and not r.status.final]
            try:
                share = self._decide(info, online, offline, now)
            except CotenantError as exc:  # e.g. a model the policy does not know: keep the share
                if self._errors.get(index) != exc.one_line():
                    self._errors[index] = exc.one_line()
                    store.event(now, NODE, "share policy error", detail=exc.one_line())
                continue
            self._errors.pop(index, None)
            if self.floor is not None:
                share = max(share, self.floor(index, now))
            self.shares[index] = share
            target = max(MIN_SHARE_PCT, MAX_SHARE_PCT - share)
            # a gain for offline needs a whole window of low load, also after the agent starts
            settled = self._observed_since[index] <= now - self.window_s
            for record in offline:
                if record.status is Status.RUNNING:
                    applied = MAX_SHARE_PCT if record.applied_pct is None else record.applied_pct
                    change = applied > target or (
                        settled and target - applied > self.threshold_pct
                    )
                else:  # not running: the new share applies when it starts
                    change = record.share_pct != target
                if change:
                    self.supervisor.restart_for_share(record.spec.name, target, now)

    def _peak(self, gpu: int, util: float, now: float) -> float:
        """Record ``util`` at ``now``; the peak over the last ``window_s`` seconds."""
        self._observed_since.setdefault(gpu, now)
        window = self._samples.setdefault(gpu, deque())
        window.append((now, util))
        while window and window[0][0] < now - self.window_s:
            window.popleft()
        return max(u for _, u in window)

    def _decide(self, info: GpuInfo, online: list[WorkloadRecord],
                offline: list[WorkloadRecord], now: float) -> int:
        per_pid = {p.pid: p.sm_util_pct for p in info.processes}
        loads = []
        for record in online:
            util = per_pid.get(record.pid) if record.pid is not None else None
            loads.append((info.utilisation_pct if util is None else util, record))
        util, busiest = max(loads, key=lambda item: (item[0], item[1].spec.name))
        util = self._peak(info.index, util, now)
        current = self.shares.get(info.index)
        if current is None:
            applied = [r.applied_pct for r in offline if r.applied_pct is not None]
            current = MAX_SHARE_PCT - applied[0] if applied else MAX_SHARE_PCT
        current = min(MAX_SHARE_PCT, max(MIN_SHARE_PCT, current))
        obs = OnlineObservation(busiest.spec.model or busiest.spec.name, util / 100.0,
                                busiest.spec.slo_ms, current)
        return check_share_pct(self.policy.online_share(obs), "share policy result")
