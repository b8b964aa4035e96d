"""The compute guard: act on a measured online p99 when the share sizing was wrong.

MuxFlow's second protection level. The share sizing works from the *load*; the guard watches
the *latency* an online service reports (a p99 over a window that has passed) and acts on a
report above ``threshold`` x its SLO, on a GPU whose offline co-runner is running:

* **pause** (``pause_s`` > 0, at most once per ``pause_s + hold_s``): the co-runner is stopped
  for ``pause_s`` (SIGSTOP, or its cgroup frozen): its SMs are free once its queued kernels
  drain, and it loses no start-up time, so a burst costs no restart;
* **throttle**: otherwise the online share's floor rises to ``max(current + step_pct, the need
  at the measured load)`` for ``hold_s`` (under MPS a restart of the co-runner with its new cap;
  under time slicing its duty cap, in place);
* **evict**: where that floor would pass ``evict_above``, the co-runner is stopped and no
  offline work starts on the GPU for ``evict_hold_s``.

With ``adaptive``, a pause lasts as long as the burst: at every decision during a pause the
load the service is measured at (alone) is checked against the model, and while the
co-runner would push its p99 over the threshold at that load the pause is extended by
``pause_s``; with ``hold_s`` 0 a new pause may follow at once, so the guard pauses through
bursts instead of throttling (a restart under MPS) or evicting.

After an action no other follows for ``settle_s``, and only reports whose window began after
it count. Reports older than ``stale_s`` are ignored. How a p99 is measured is part of the
guard too, since what it can see bounds what it can do: a report covers the requests since
the previous read, every ``scrape_s``, and needs ``min_requests`` of them, growing up to
``max_window_s``; a service too slow to fill that window is never reported on, and the guard
cannot protect it (:func:`report_window_s`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from cotenant.errors import InputError, check_seconds
from cotenant.policies.colocation.contract import check_share_pct

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class GuardSettings:
    """The guard's thresholds, timings and p99 reading (see the module docstring)."""

    threshold: float = 0.95
    step_pct: int = 20
    evict_above: int = 95
    pause_s: float = 10.0
    hold_s: float = 60.0
    evict_hold_s: float = 300.0
    settle_s: float = 10.0
    stale_s: float = 10.0
    scrape_s: float = 0.25
    min_requests: int = 20
    max_window_s: float = 5.0
    adaptive: bool = False

    def __post_init__(self) -> None:
        if not 0.0 < self.threshold <= 1.0:
            raise InputError("guard.threshold", f"{self.threshold} must be in (0, 1]")
        check_share_pct(self.step_pct, "guard.step_pct", lowest=0)
        check_share_pct(self.evict_above, "guard.evict_above")
        for name in ("pause_s", "hold_s", "evict_hold_s", "settle_s", "stale_s"):
            check_seconds(getattr(self, name), f"guard.{name}")
        check_seconds(self.scrape_s, "guard.scrape_s", positive=True)
        check_seconds(self.max_window_s, "guard.max_window_s", positive=True)
        if isinstance(self.min_requests, bool) or not isinstance(self.min_requests, int) or \
                self.min_requests < 1:
            raise InputError("guard.min_requests", f"{self.min_requests!r} must be an "
                             "integer >= 1")


def report_window_s(settings: GuardSettings, requests_per_s: FloatArray) -> FloatArray:
    """How long after a change the first p99 report that covers only the new state ends: one
    scrape interval, or as long as ``min_requests`` take to arrive, rounded up to whole scrape
    intervals; ``inf`` where that passes ``max_window_s`` (no report: the window is dropped)."""
    rate = np.asarray(requests_per_s, dtype=np.float64)
    with np.errstate(divide="ignore"):
        fill = np.where(rate > 0.0, settings.min_requests / np.maximum(rate, 1e-300), math.inf)
    window = np.maximum(settings.scrape_s, np.ceil(fill / settings.scrape_s) * settings.scrape_s)
    return np.asarray(np.where(window <= settings.max_window_s, window, math.inf),
                      dtype=np.float64)


RATE_SPAN_S = 1.0
"""The least time a load read from an online service's request rate counts requests over (the
node agent's reading where NVML samples no process of the service: under MPS)."""


def closed_window_s(settings: GuardSettings, requests_per_s: FloatArray) -> FloatArray:
    """How long each closed report window spans: :func:`report_window_s`, or
    ``max_window_s`` for one dropped for too few requests (its count still counts)."""
    window = report_window_s(settings, requests_per_s)
    return np.asarray(np.where(np.isfinite(window), window, settings.max_window_s),
                      dtype=np.float64)


def covering_span_s(closed_s: FloatArray) -> FloatArray:
    """The span of the newest windows of ``closed_s`` seconds each that cover
    :data:`RATE_SPAN_S`."""
    return np.asarray(np.ceil(RATE_SPAN_S / closed_s - 1e-9) * closed_s, dtype=np.float64)


def rate_span_s(settings: GuardSettings, requests_per_s: FloatArray) -> FloatArray:
    """How many seconds of requests a load read from the request rate counts: the newest
    closed report windows (:func:`closed_window_s`) until they cover :data:`RATE_SPAN_S`."""
    return covering_span_s(closed_window_s(settings, requests_per_s))
