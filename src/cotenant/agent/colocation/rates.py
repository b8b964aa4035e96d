"""An online service's load read from its request rate, where NVML samples none of its
processes (under MPS NVML samples every client on the MPS server's pid).

The load is the rate times the service's GPU time per request alone on the whole GPU. The
rate (:class:`RequestRates`) is counted by the service's latency histogram over the newest
closed windows covering :data:`~cotenant.policies.colocation.RATE_SPAN_S`, or the newest
window's own where that is higher (a burst after an idle spell shows at once, not diluted
by the long window the idle spell left). The time per request (:class:`RequestCosts`) is the
spec's ``solo_ms`` where given, else measured while the service ran alone on its GPU (the
GPU's utilisation over the rate); with neither the agent keeps the whole GPU's utilisation
(a high reading, the safe side) rather than guess one. A measurement rises fast and falls
slowly, so a burst or a batching server's cheaper requests at a high load cannot talk it
down at once: the reading errs high.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from cotenant.agent.colocation.load import SATURATED_PCT
from cotenant.agent.latency import RequestWindow
from cotenant.agent.spec import WorkloadSpec
from cotenant.policies.colocation.guard import RATE_SPAN_S, GuardSettings

READ_SLACK_S = 3.0
"""Past ``max_window_s + scrape_s``, how late a latency window may still close: its read's
own time (the scraper gives up after 2 s) and the agent's tick (1 s)."""
RISE_WEIGHT = 0.5
FALL_WEIGHT = 0.1
"""How far a new measurement of the time per request moves the estimate, up and down."""


def longest_window_s(guard: GuardSettings) -> float:
    """The longest a latency window can span; a longer one spans a wall clock that stepped
    forward or an agent that was suspended, and counts nothing."""
    return guard.max_window_s + guard.scrape_s + READ_SLACK_S


@dataclass(frozen=True)
class Rate:
    """A service's request rate: ``per_s`` to read its load with, and the ``requests``
    counted over the covering windows from ``since`` to ``until``."""

    per_s: float
    requests: float
    since: float
    until: float

    @property
    def mean_per_s(self) -> float:
        """The mean rate over the covering windows (what a measurement is taken with)."""
        return self.requests / (self.until - self.since)


class RequestRates:
    """Per online service, the request counts of its closed latency windows. A rate is read
    only from windows next to each other (a failed read leaves a gap) and only while the
    newest closed at most ``fresh_s`` ago, which is no shorter than a window can take."""

    def __init__(self, fresh_s: float) -> None:
        self.fresh_s = fresh_s
        self._windows: dict[str, deque[RequestWindow]] = {}

    def add(self, window: RequestWindow) -> None:
        span = window.until - window.since
        if not 0.0 < span <= self.fresh_s or window.requests < 0.0:
            return  # a stopped clock, a suspended agent: it says nothing about the rate
        windows = self._windows.setdefault(window.workload, deque())
        windows.append(window)
        while windows and windows[0].until < window.until - self.fresh_s - RATE_SPAN_S:
            windows.popleft()

    def rate(self, name: str, now: float) -> Rate | None:
        """The rate over the newest windows that cover :data:`RATE_SPAN_S` (fewer where no
        more are kept), or the newest window's where higher; None where the newest closed
        more than ``fresh_s`` before ``now``."""
        windows = [w for w in self._windows.get(name, ()) if w.until <= now]
        if not windows or windows[-1].until < now - self.fresh_s:
            return None
        newest = windows[-1]
        requests, since = 0.0, newest.until
        for window in reversed(windows):
            if window.until != since:
                break  # a gap: the windows before it are another run of reads
            requests += window.requests
            since = window.since
            if newest.until - since >= RATE_SPAN_S:
                break
        mean = requests / (newest.until - since)
        own = newest.requests / (newest.until - newest.since)
        return Rate(max(mean, own), requests, since, newest.until)

    def keep(self, names: set[str]) -> None:
        for name in set(self._windows) - names:
            del self._windows[name]

    def clear(self) -> None:
        self._windows.clear()


class RequestCosts:
    """Per online service, its GPU time per request alone on the whole GPU (ms)."""

    def __init__(self) -> None:
        self._learned: dict[str, float] = {}

    def learn(self, name: str, busy_pct: float, per_s: float) -> None:
        """Take in a measurement made while the service ran alone on its GPU: ``busy_pct``
        of the time busy serving ``per_s`` requests a second (nothing from a saturated or
        an idle one)."""
        if per_s <= 0.0 or not 0.0 < busy_pct < SATURATED_PCT:
            return
        ms = 10.0 * busy_pct / per_s
        old = self._learned.get(name)
        if old is None:
            self._learned[name] = ms
        else:
            self._learned[name] = old + (RISE_WEIGHT if ms > old else FALL_WEIGHT) * (ms - old)

    def cost(self, spec: WorkloadSpec) -> tuple[float, str] | None:
        """The GPU time per request (ms) the load is read with, and where it comes from;
        None where neither the spec nor a measurement gives one."""
        if spec.solo_ms is not None:
            return spec.solo_ms, "the spec's solo_ms"
        learned = self._learned.get(spec.name)
        if learned is not None:
            return learned, "measured while it ran alone"
        return None

    def keep(self, names: set[str]) -> None:
        self._learned = {n: v for n, v in self._learned.items() if n in names}

    def clear(self) -> None:
        self._learned.clear()
