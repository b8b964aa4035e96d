"""The SM-share controller: the co-location policy's decision, enforced through MPS.

Each tick, for every GPU that runs an online service, it observes the online load (the SM
utilisation of the service's processes on that GPU where the backend reports it per process:
its leader's and its workers', found as signals find them, since servers such as vLLM run
their GPU work in a child; else the GPU's utilisation, as a fraction), asks the
:class:`~cotenant.policies.colocation.SharePolicy` - the same object the simulator drives -
for the online share, and gives the GPU's offline workloads ``100 - share`` percent of the
SMs (at least 1, MPS's minimum).

MPS reads ``CUDA_MPS_ACTIVE_THREAD_PERCENTAGE`` only when a client creates its context, and
``set_active_thread_percentage <server PID> <pct>`` in ``nvidia-cuda-mps-control`` changes it
only for clients that connect to that server later. So a running offline client gets a new
share by being restarted (offline jobs are expected to checkpoint on SIGTERM). A client whose
share is above its target is restarted at once, however small the excess, since the online
service needs those SMs now; one below its target only when the gap exceeds ``threshold_pct``
(a restart costs the job its start-up time; ``sim.colocation`` charges the same cost as
``share_change_s``). Online clients are never restarted for a share change. Where the
compute guard (:mod:`cotenant.agent.guard`) holds a GPU's online share at a floor, the share
in force is at least that floor; the policy still sees its own last share as the current one,
so the floor ends when the guard's hold does.

Each online service's load is the peak of its samples of the last ``window_s`` seconds (60
by default, the simulator's one-minute interval), not its last sample: a utilisation reading
covers a fraction of a second, so a per-tick decision would follow every burst, and each
change is a restart. With several online services on one GPU, each is judged on its own peak,
model and SLO, and the one that needs most decides. A rise is acted on at the tick it is
seen (on a rising ramp, at every tick that raises the need; a client still restarting simply
starts with the newest share). A fall acts only once it has lasted the window, and an offline
client is given more SMs at most once per window, and not before its GPU's load has been
watched for a whole window (after the agent starts, or an online service arrives). So each
new peak costs one restart, and a load that swings between the same levels costs at most two
a window (a gain, then a raise), plus the guard's throttles (at most one per GPU every
``settle_s``). A service the policy cannot judge (say, a model it does not know) is logged
once and left out; the others decide, and where none can, the split in force is kept.
The peak is more cautious than the simulator, whose policy sees each minute's mean duty
cycle and whose compute guard covers bursts within the minute; the agent's guard acts on
measured latency instead, seconds later. The windows live in memory and restart empty with
the agent, or when the wall clock steps back.

:data:`SHARE_POLICIES` names the policies ``cotenant agent run --share-policy`` can use.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable

from cotenant.agent.backends.base import DeviceInventory, GpuInfo, workload_sm_util
from cotenant.agent.spec import Role, WorkloadSpec
from cotenant.agent.state import Status, WorkloadRecord
from cotenant.agent.supervisor import NODE, Supervisor
from cotenant.errors import CotenantError, InputError, check_seconds
from cotenant.perf import mps
from cotenant.policies.colocation.contract import (
    MAX_SHARE_PCT,
    MIN_SHARE_PCT,
    OnlineObservation,
    SharePolicy,
    check_share_pct,
)
from cotenant.policies.colocation.share import DynamicShare, FixedShare
from cotenant.registry import Registry

SHARE_POLICIES: Registry[SharePolicy] = Registry("share policy")
SATURATED_PCT = 99.0
"""An online service busy this much of the time is saturated: no load can be read off it."""


def solo_load_pct(busy_pct: float, model: str, offline_pct: int, overlap: float) -> float:
    """The load (percent of a whole GPU, as the policy and the simulator mean it) of an
    online service measured busy ``busy_pct`` of the time beside offline clients that hold
    ``offline_pct`` of the SMs while they run kernels, ``overlap`` of the time: then its
    kernels run slower (``perf.mps.load_beside``, the Amdahl fit for ``model``), so it is
    busy longer for the same load. A model the performance model does not know, or a
    saturated service, is taken as measured (the larger, safer figure)."""
    if offline_pct <= 0 or overlap <= 0.0 or busy_pct >= SATURATED_PCT:
        return busy_pct
    try:
        serial = float(mps.ONLINE_SERIAL[mps.model_index(model)])
    except ValueError:
        return busy_pct
    share = max(MIN_SHARE_PCT, MAX_SHARE_PCT - offline_pct) / 100.0
    return 100.0 * mps.load_beside(busy_pct / 100.0, share, serial, min(1.0, overlap))


@SHARE_POLICIES.register("static", aliases=("fixed-online",))
def static_share(online_pct: int = 70) -> SharePolicy:
    """The online service keeps ``online_pct`` of the SMs whatever its load: the simulator's
    fixed split (:class:`~cotenant.policies.colocation.share.FixedShare`), a baseline."""
    return FixedShare(online_pct)


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
        check_seconds(window_s, "share window")
        self.supervisor = supervisor
        self.inventory = inventory
        self.policy = policy
        self.threshold_pct = threshold_pct
        self.window_s = window_s
        self.floor = floor
        """Per GPU and time, the least online share (the compute guard's, ``agent.guard``)."""
        self.shares: dict[int, int] = {}
        """The online share in force per GPU (the policy's, raised to the guard's floor)."""
        self._decided: dict[int, int] = {}
        """Per GPU, the policy's own last share: what it sees as current (not the floor)."""
        self._samples: dict[str, deque[tuple[float, float]]] = {}
        """Per online workload, (time, utilisation %) of the last ``window_s`` seconds."""
        self._observed_since: dict[int, float] = {}
        self._last_gain: dict[int, float] = {}
        """Per GPU, when an offline client was last restarted to get more SMs."""
        self._errors: dict[int, str] = {}
        """Per GPU, the policy error last logged (logged again only when it changes)."""
        self._last_now = -math.inf

    def check(self, spec: WorkloadSpec) -> None:
        """An error unless the policy can judge online service ``spec`` (say, it knows its
        model): one it could not would be left out of every decision, and its GPU's offline
        co-runner would keep the SMs the service needs."""
        if spec.role is not Role.ONLINE or spec.mig_instance is not None:
            return
        probe = OnlineObservation(spec.model or spec.name, 0.0, spec.slo_ms)
        try:
            check_share_pct(self.policy.online_share(probe), "share policy result")
        except CotenantError as exc:
            raise InputError(f"workload {spec.name!r}.model", f"the share policy cannot judge "
                             f"{probe.model!r}: {exc.one_line()}",
                             hint="name a model the policy knows in \"model\"") from exc

    def tick(self, now: float) -> None:
        store = self.supervisor.store
        if now < self._last_now:  # the wall clock stepped back: the windows mean nothing now
            self._samples.clear()
            self._observed_since.clear()
            self._last_gain.clear()
        self._last_now = now
        try:
            gpus = {g.index: g for g in self.inventory.gpus()}
        except CotenantError as exc:
            store.event(now, NODE, "nvml error", detail=exc.one_line())
            return
        records = store.all()
        records = [r for r in records if r.spec.mig_instance is None]  # MIG isolates the rest
        running = {r.spec.name for r in records
                   if r.spec.role is Role.ONLINE and r.status is Status.RUNNING}
        for name in set(self._samples) - running:
            del self._samples[name]
        for index, info in gpus.items():
            online = [r for r in records if r.spec.gpu == index and r.spec.name in running]
            if not online:
                for state in (self.shares, self._decided, self._observed_since,
                              self._last_gain, self._errors):
                    state.pop(index, None)
                continue
            offline = [r for r in records if r.spec.gpu == index
                       and r.spec.role is Role.OFFLINE and not r.status.final]
            share = self._share(info, online, offline, now)
            if share is not None:
                self._apply(index, share, offline, now)

    def _share(self, info: GpuInfo, online: list[WorkloadRecord],
               offline: list[WorkloadRecord], now: float) -> int | None:
        """The online share to enforce on one GPU: the most any service needs by the policy,
        at least the guard's floor; None where nothing is known yet (the policy failed for
        every service and no split is in force), so nothing is changed."""
        index = info.index
        self._observed_since.setdefault(index, now)
        current = self._decided.get(index)
        if current is None:
            applied = [r.applied_pct for r in offline if r.applied_pct is not None]
            current = MAX_SHARE_PCT - applied[0] if applied else None
        if current is not None:
            current = min(MAX_SHARE_PCT, max(MIN_SHARE_PCT, current))
        shares, errors = self._decide(info, online, self._co_runner(info, offline),
                                      current, now)
        if errors:  # e.g. a model the policy does not know: the others still decide
            if self._errors.get(index) != errors[0]:
                self._errors[index] = errors[0]
                self.supervisor.store.event(now, NODE, "share policy error", detail=errors[0])
        else:
            self._errors.pop(index, None)
        share = max(shares) if shares else current
        floor = self.floor(index, now) if self.floor is not None else 0
        if share is None:
            return floor or None
        self._decided[index] = share
        return max(share, floor)

    def _apply(self, index: int, share: int, offline: list[WorkloadRecord], now: float) -> None:
        self.shares[index] = share
        target = max(MIN_SHARE_PCT, MAX_SHARE_PCT - share)
        # more SMs for offline only after a whole window of watching (also after the agent
        # starts) and a whole window after the last such restart
        may_gain = (self._observed_since[index] <= now - self.window_s
                    and self._last_gain.get(index, -math.inf) <= now - self.window_s)
        paused = self.supervisor.paused()  # the guard's: no more SMs while it lasts
        for record in offline:
            if record.status is Status.RUNNING:
                applied = MAX_SHARE_PCT if record.applied_pct is None else record.applied_pct
                gain = target - applied > self.threshold_pct and record.spec.name not in paused
                change = applied > target or (may_gain and gain)
                if change and gain:
                    self._last_gain[index] = now
            else:  # not running: the new share applies when it starts
                change = record.share_pct != target
            if change:
                self.supervisor.restart_for_share(record.spec.name, target, now)

    def _own_util(self, pid: int | None, per_pid: dict[int, float | None]) -> float | None:
        """The SM utilisation of workload ``pid``'s processes (leader and workers) that have
        a sample; None if none has."""
        if pid is None:
            return None
        return workload_sm_util(pid, per_pid, self.supervisor.backend.members)

    def _peak(self, name: str, util: float, now: float) -> float:
        """Record workload ``name``'s ``util`` at ``now``; its peak over the window."""
        window = self._samples.setdefault(name, deque())
        window.append((now, util))
        while window and window[0][0] < now - self.window_s:
            window.popleft()
        return max(u for _, u in window)

    def _co_runner(self, info: GpuInfo, offline: list[WorkloadRecord]) -> tuple[int, float]:
        """The SM share the GPU's running offline clients hold while they run kernels, and
        how much of the time they do (their processes' utilisation). With several, the
        largest of each: their MPS shares are caps, not reservations, and their busy times
        overlap by an unknown amount, so this slows the online service least (its load read
        highest, the safe side)."""
        per_pid = {p.pid: p.sm_util_pct for p in info.processes}
        paused = self.supervisor.paused()
        held, overlap = 0, 0.0
        for record in offline:
            if (record.status is not Status.RUNNING or record.applied_pct is None
                    or record.spec.name in paused):
                continue
            util = self._own_util(record.pid, per_pid)
            if util is not None and util > 0.0:
                held = max(held, record.applied_pct)
                overlap = max(overlap, min(1.0, util / 100.0))
        return held, overlap

    def _decide(self, info: GpuInfo, online: list[WorkloadRecord], co_runner: tuple[int, float],
                current: int | None, now: float) -> tuple[list[int], list[str]]:
        """Each online service's share by the policy, on its own peak load, model and SLO;
        and the one-line errors of those the policy could not judge."""
        per_pid = {p.pid: p.sm_util_pct for p in info.processes}
        shares: list[int] = []
        errors: list[str] = []
        for record in online:
            util = self._own_util(record.pid, per_pid)
            util = info.utilisation_pct if util is None else util
            if util is None:
                errors.append(f"GPU {info.index} reports no utilisation for "
                              f"{record.spec.name!r} (MIG mode?): its load is unknown")
                continue
            util = solo_load_pct(util, record.spec.model or record.spec.name, *co_runner)
            peak = self._peak(record.spec.name, util, now)
            obs = OnlineObservation(record.spec.model or record.spec.name, peak / 100.0,
                                    record.spec.slo_ms,
                                    MAX_SHARE_PCT if current is None else current)
            try:
                shares.append(
                    check_share_pct(self.policy.online_share(obs), "share policy result"))
            except CotenantError as exc:
                errors.append(exc.one_line())
        return shares, errors
