"""An online service's load as the co-location core means it, read from NVML.

The core sizes shares on a *solo* duty cycle (the share of time the service would keep a
whole GPU busy alone). What NVML gives is the SM utilisation of the service's processes (its
leader's and its workers', :func:`~cotenant.agent.backends.base.workload_sm_util`): its busy
time beside whatever runs next to it. Beside an offline client that holds part of the SMs its
kernels run slower, so it is busy longer for the same load; :func:`solo_load_pct` converts
back through the model's Amdahl fit (:func:`cotenant.perf.mps.load_beside`). The peak over
the policy's load window is kept per service in :class:`LoadWindows`.

Under MPS NVML samples no client (it samples them all on the MPS server's pid), so there
the load is read from the service's request rate instead: the requests its latency
histogram counted over the newest closed windows covering
:data:`~cotenant.policies.colocation.RATE_SPAN_S` (:class:`RequestRates`), times its GPU
time per request alone (:class:`RequestCosts`): the spec's ``solo_ms`` where given, else
what was measured while the service ran alone on its GPU (the GPU's utilisation over the
rate), else the performance model's batch time for its model (an A100's, at batch 32: a
rough prior).
"""

from __future__ import annotations

from collections import deque

from cotenant.agent.latency import RequestWindow
from cotenant.agent.spec import WorkloadSpec
from cotenant.perf import mps
from cotenant.policies.colocation.contract import MAX_SHARE_PCT, MIN_SHARE_PCT
from cotenant.policies.colocation.guard import RATE_SPAN_S

SATURATED_PCT = 99.0
"""An online service busy this much of the time is saturated: no load can be read off it."""


def solo_load_pct(busy_pct: float, model: str, offline_pct: int, overlap: float) -> float:
    """The solo load (percent of a whole GPU) of an online service measured busy ``busy_pct``
    of the time beside offline clients that hold ``offline_pct`` of the SMs while they run
    kernels, ``overlap`` of the time. A model the performance model does not know, or a
    saturated service, is taken as measured (the larger, safer figure)."""
    if offline_pct <= 0 or overlap <= 0.0 or busy_pct >= SATURATED_PCT:
        return busy_pct
    try:
        serial = float(mps.ONLINE_SERIAL[mps.model_index(model)])
    except ValueError:
        return busy_pct
    share = max(MIN_SHARE_PCT, MAX_SHARE_PCT - offline_pct) / 100.0
    return 100.0 * mps.load_beside(busy_pct / 100.0, share, serial, min(1.0, overlap))


class LoadWindows:
    """Per online service, its solo load samples (percent) of the last ``window_s`` seconds."""

    def __init__(self, window_s: float) -> None:
        self.window_s = window_s
        self._samples: dict[str, deque[tuple[float, float]]] = {}

    def add(self, name: str, now: float, load_pct: float) -> None:
        window = self._samples.setdefault(name, deque())
        window.append((now, load_pct))
        while window and window[0][0] < now - self.window_s:
            window.popleft()

    def last(self, name: str) -> float | None:
        window = self._samples.get(name)
        return window[-1][1] if window else None

    def peak(self, name: str, now: float) -> float | None:
        """The largest sample within the window before ``now``; None without one."""
        window = self._samples.get(name, ())
        inside = [u for t, u in window if t >= now - self.window_s]
        return max(inside) if inside else None

    def keep(self, names: set[str]) -> None:
        """Forget every service but ``names`` (one that stops starts afresh)."""
        for name in set(self._samples) - names:
            del self._samples[name]

    def clear(self) -> None:
        self._samples.clear()


class RequestRates:
    """Per online service, the request counts of its closed latency windows of the last
    ``keep_s`` seconds."""

    def __init__(self, keep_s: float) -> None:
        self.keep_s = keep_s
        self._windows: dict[str, deque[RequestWindow]] = {}

    def add(self, window: RequestWindow) -> None:
        windows = self._windows.setdefault(window.workload, deque())
        windows.append(window)
        while windows and windows[0].until < window.until - self.keep_s:
            windows.popleft()

    def rate(self, name: str, now: float) -> tuple[float, float] | None:
        """Requests per second over the newest windows that cover :data:`RATE_SPAN_S`
        (fewer where no more are kept), and how many requests that counted; None without a
        window that closed within ``keep_s`` before ``now``."""
        requests = span = 0.0
        for window in reversed(self._windows.get(name, ())):
            if window.until < now - self.keep_s or window.until > now:
                continue  # stale, or from before the wall clock stepped back
            requests += window.requests
            span += window.until - window.since
            if span >= RATE_SPAN_S:
                break
        return (requests / span, requests) if span > 0.0 else None

    def keep(self, names: set[str]) -> None:
        for name in set(self._windows) - names:
            del self._windows[name]

    def clear(self) -> None:
        self._windows.clear()


LEARN_WEIGHT = 0.2
"""The weight of a new measurement of a service's GPU time per request (the older ones'
weight decays by ``1 -`` this per measurement): a utilisation sample and a rate read over
different windows are noisy, so one reading never decides alone."""


class RequestCosts:
    """Per online service, its GPU time per request alone on the whole GPU (ms)."""

    def __init__(self) -> None:
        self._learned: dict[str, float] = {}

    def learn(self, name: str, busy_pct: float, rate: float) -> None:
        """Take in a measurement while the service runs alone on its GPU: ``busy_pct`` of the
        time busy serving ``rate`` requests per second."""
        if rate <= 0.0 or not 0.0 < busy_pct <= 100.0:
            return
        ms = 10.0 * busy_pct / rate
        old = self._learned.get(name)
        self._learned[name] = ms if old is None else old + LEARN_WEIGHT * (ms - old)

    def cost(self, spec: WorkloadSpec) -> tuple[float, str] | None:
        """The GPU time per request (ms) the load is read with, and where it comes from;
        None where nothing gives one."""
        if spec.solo_ms is not None:
            return spec.solo_ms, "the spec's solo_ms"
        learned = self._learned.get(spec.name)
        if learned is not None:
            return learned, "measured while it ran alone"
        model = spec.model or spec.name
        if model in mps.L100_MS:
            return mps.L100_MS[model], f"the performance model's {model} (A100, batch 32)"
        return None

    def keep(self, names: set[str]) -> None:
        self._learned = {n: v for n, v in self._learned.items() if n in names}

    def clear(self) -> None:
        self._learned.clear()
