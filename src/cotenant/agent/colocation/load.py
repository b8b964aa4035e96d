"""An online service's load as the co-location core means it, read from NVML.

The core sizes shares on a *solo* duty cycle (the share of time the service would keep a
whole GPU busy alone). What NVML gives is the SM utilisation of the service's processes (its
leader's and its workers', :func:`~cotenant.agent.backends.base.workload_sm_util`): its busy
time beside whatever runs next to it. Beside an offline client that holds part of the SMs its
kernels run slower, so it is busy longer for the same load; :func:`solo_load_pct` converts
back through the model's Amdahl fit (:func:`cotenant.perf.mps.load_beside`). The peak over
the policy's load window is kept per service in :class:`LoadWindows`.

Under MPS NVML samples no client (it samples them all on the MPS server's pid), so there the
load is read from the service's request rate instead (:mod:`.rates`).
"""

from __future__ import annotations

from collections import deque

from cotenant.perf import mps
from cotenant.policies.colocation.contract import MAX_SHARE_PCT, MIN_SHARE_PCT

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
