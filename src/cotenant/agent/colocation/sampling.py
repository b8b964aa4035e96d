"""An online service's load sample at each decision, from the best reading the node has.

Where NVML samples the service's processes, their utilisation (read back to a solo duty
through the model's speed beside the co-runner, :func:`~.load.solo_load_pct`); where it
samples none of them (under MPS: NVML samples MPS clients on the MPS server's pid), its
request rate times its GPU time per request (:mod:`.rates`), the GPU's utilisation while it
runs alone teaching that time; where neither is known, the whole GPU's utilisation (a high
reading). Where the load is read from is logged when it changes. Internal to
:mod:`.observe`.
"""

from __future__ import annotations

from collections import deque

from cotenant.agent.backends.base import DeviceInventory, GpuInfo, workload_sm_util
from cotenant.agent.colocation.load import LoadWindows, solo_load_pct
from cotenant.agent.colocation.rates import Rate, RequestCosts, RequestRates, longest_window_s
from cotenant.agent.latency import RequestWindow
from cotenant.agent.records import Status, WorkloadRecord
from cotenant.agent.spec import Role
from cotenant.agent.supervisor import NODE, Supervisor
from cotenant.errors import CotenantError
from cotenant.policies.colocation import MAX_SHARE_PCT, RATE_SPAN_S, GuardSettings

SOURCES = {"processes": "its processes' utilisation", "requests": "its request rate",
           "gpu": "the whole GPU"}
"""What a load sample is read from: its metric label, and how the agent's log says it."""


class LoadSampler:
    """Each running online service's load samples, kept over the policy's load window."""

    def __init__(self, supervisor: Supervisor, inventory: DeviceInventory, window_s: float,
                 guard: GuardSettings) -> None:
        self.supervisor = supervisor
        self.inventory = inventory
        self.loads = LoadWindows(window_s)
        self.rates = RequestRates(longest_window_s(guard))
        self.costs = RequestCosts()
        self._min_requests = guard.min_requests
        self._alone: dict[int, deque[tuple[float, float | None, str | None]]] = {}
        """Per GPU, its utilisation at each sample and the online service alone on it then
        (None: not alone), over the last longest window and second."""
        self._learned_until: dict[str, float] = {}
        """Per service, the end of the newest window a time per request was measured on."""
        self._source: dict[str, tuple[str, str]] = {}
        """Per online service, what its load was last read from (a key of :data:`SOURCES`)
        and on what basis: logged when either changes."""

    def count(self, windows: list[RequestWindow]) -> None:
        """Take in the request counts of closed latency windows."""
        for window in windows:
            self.rates.add(window)

    def latest(self) -> dict[str, tuple[float, str]]:
        """Per online service, its last load sample (percent) and what it was read from
        (``processes``, ``requests`` or ``gpu``), for the metrics."""
        out = {}
        for name, (kind, _) in self._source.items():
            last = self.loads.last(name)
            if last is not None:
                out[name] = (last, kind)
        return out

    def forget(self) -> None:
        """Start afresh (the wall clock stepped back: the windows mean nothing now)."""
        self.loads.clear()
        self.rates.clear()
        self._alone.clear()
        self._learned_until.clear()

    def sample(self, now: float, records: list[WorkloadRecord]) -> dict[int, str | None]:
        """Read the load of each running online service of ``records``. Per GPU, why a load
        could not be read, or None for a GPU with no online service (GPUs whose loads were
        all read are left out)."""
        try:
            gpus = self.inventory.gpus()
        except CotenantError as exc:
            self.supervisor.store.event(now, NODE, "nvml error", detail=exc.one_line())
            return {}
        online = [r for r in records if r.spec.role is Role.ONLINE and r.status is Status.RUNNING]
        names = {r.spec.name for r in online}
        for part in (self.loads, self.rates, self.costs):
            part.keep(names)
        self._source = {n: v for n, v in self._source.items() if n in names}
        self._learned_until = {n: v for n, v in self._learned_until.items() if n in names}
        out: dict[int, str | None] = {}
        for info in gpus:
            here = [r for r in online if r.spec.gpu == info.index]
            if not here:
                out[info.index] = None
                continue
            co_runner = self._co_runner(info, records)
            alone = here[0].spec.name if len(here) == 1 and self._is_alone(
                info, here[0], records) else None
            history = self._alone.setdefault(info.index, deque())
            history.append((now, info.utilisation_pct, alone))
            while history and history[0][0] < now - 2.0 * self.rates.fresh_s - RATE_SPAN_S:
                history.popleft()
            unknown = [r.spec.name for r in here if not self._sample(info, r, now, co_runner)]
            if unknown:
                out[info.index] = (f"GPU {info.index} reports no utilisation for "
                                   f"{unknown[0]!r} (MIG mode?): its load is unknown")
        return out

    def _learn(self, gpu: int, name: str, rate: Rate) -> None:
        """Measure ``name``'s GPU time per request on a window not measured on yet, where it
        ran alone on its GPU at every sample over the covering windows (and the samples reach
        back to their start): the GPU's mean utilisation then over the windows' mean rate.
        Windows of fewer requests than a p99 needs are too noisy."""
        if rate.until <= self._learned_until.get(name, -float("inf")) \
                or rate.requests < self._min_requests:
            return
        history = self._alone.get(gpu, ())
        if not history or history[0][0] > rate.since:
            return  # the samples do not cover the windows' start
        seen = [(alone, util) for t, util, alone in history if rate.since <= t <= rate.until]
        if not seen or any(alone != name or util is None for alone, util in seen):
            return
        self._learned_until[name] = rate.until
        busy = sum(util for _, util in seen if util is not None) / len(seen)
        self.costs.learn(name, busy, rate.mean_per_s)

    def _sample(self, info: GpuInfo, record: WorkloadRecord, now: float,
                co_runner: tuple[int, float]) -> bool:
        """Add online service ``record``'s load sample on ``info``; False where none can be
        read. Alone on the GPU, the GPU's utilisation teaches its GPU time per request."""
        spec = record.spec
        rate = self.rates.rate(spec.name, now)
        if rate is not None:
            self._learn(info.index, spec.name, rate)
        per_pid = {p.pid: p.sm_util_pct for p in info.processes}
        util = None if record.pid is None else workload_sm_util(
            record.pid, per_pid, self.supervisor.backend.members)
        if util is not None:
            self._note_source(info, spec.name, now, "processes", "")
            self.loads.add(spec.name, now, solo_load_pct(util, spec.model or spec.name,
                                                         *co_runner))
            return True
        cost = self.costs.cost(spec)
        if rate is not None and cost is not None:
            self._note_source(info, spec.name, now, "requests",
                              f"{cost[0]:.4g} ms per request ({cost[1]})", basis=cost[1])
            self.loads.add(spec.name, now, min(MAX_SHARE_PCT, rate.per_s * cost[0] / 10.0))
            return True
        if info.utilisation_pct is None:
            return False
        if spec.latency_metric is None:
            why = "a latency_metric would let the agent read its request rate"
        elif cost is None:
            why = ("no GPU time per request yet: give solo_ms, or it is measured while the "
                   "service runs alone on its GPU")
        else:
            why = f"no request count closed in the last {self.rates.fresh_s:g} s"
        self._note_source(info, spec.name, now, "gpu", "any other work on it "
                          f"included (a high reading); {why}", basis=why)
        self.loads.add(spec.name, now, solo_load_pct(info.utilisation_pct,
                                                     spec.model or spec.name, *co_runner))
        return True

    def _is_alone(self, info: GpuInfo, record: WorkloadRecord,
                  records: list[WorkloadRecord]) -> bool:
        """Whether ``record`` is on GPU ``info`` with nothing else that runs kernels: a
        process of its own is listed, and every other is a paused workload's or an MPS
        server. Then the GPU's utilisation is ``record``'s."""
        if record.pid is None:
            return False
        members = self.supervisor.backend.members
        paused = self.supervisor.paused()
        mine = set(members(record.pid))
        others = set()
        for r in records:
            if r.spec.gpu == info.index and r.spec.name in paused and r.pid is not None:
                others.update(members(r.pid))
        listed = {p.pid for p in info.processes if not p.mps_server}
        return bool(listed & mine) and listed <= mine | others

    def _co_runner(self, info: GpuInfo, records: list[WorkloadRecord]) -> tuple[int, float]:
        """The SM share the GPU's running offline clients hold while they run kernels, and
        how much of the time they do. With several, the largest of each: their MPS shares are
        caps, not reservations, and their busy times overlap by an unknown amount, so this
        slows the online service least (its load read highest, the safe side)."""
        per_pid = {p.pid: p.sm_util_pct for p in info.processes}
        paused = self.supervisor.paused()
        held, overlap = 0, 0.0
        for r in records:
            if (r.spec.gpu != info.index or r.spec.role is not Role.OFFLINE
                    or r.status is not Status.RUNNING or r.applied_pct is None
                    or r.pid is None or r.spec.name in paused):
                continue
            util = workload_sm_util(r.pid, per_pid, self.supervisor.backend.members)
            if util is not None and util > 0.0:
                held = max(held, r.applied_pct)
                overlap = max(overlap, min(1.0, util / 100.0))
        return held, overlap

    def _note_source(self, info: GpuInfo, name: str, now: float, kind: str,
                     detail: str, basis: str = "") -> None:
        """Keep what a service's load is read from (``kind``, a key of :data:`SOURCES`) and
        log it, with its ``basis``, when that changes (the first time too where it is not its
        own processes' utilisation)."""
        last = self._source.get(name)
        self._source[name] = (kind, basis)
        if last == (kind, basis) or (last is None and kind == "processes"):
            return
        source = SOURCES[kind]
        why = ("NVML samples MPS clients on the MPS server's pid" if any(
            p.mps_client for p in info.processes) else "NVML has no sample of its processes")
        text = f"its load on GPU {info.index} is read from {source}"
        if kind != "processes":
            text = f"{why}: {text}"
        self.supervisor.store.event(now, name, f"load from {source.removeprefix('its ')}",
                                    detail=text + (f": {detail}" if detail else ""))
