"""The BE side's gate: wait at an operator boundary while HP works, bounded, with a rate floor.

A best-effort (BE) process calls :meth:`Gate.check` before each operator. The gate reads its
GPU's board (:mod:`.lease`): while an HP lease is live the operator waits, looking again
every ``poll_s``; the wait ends as soon as every lease has run out or been released, or when
it has lasted ``max_hold_s``, whichever comes first. Two rules keep BE moving:

* **the bound**: HP holds one operator of BE for at most ``max_hold_s`` (plus one poll and
  the sleep's own overshoot);
* **the rate floor**: a wait of ``w`` seconds earns BE ``w * floor / (1 - floor)`` seconds in
  which it runs without looking at the HP leases. From the start of one wait to the start of
  the next, BE runs at least ``floor`` of the time, however busy HP is.

The agent's *hold* (the co-location guard's pause, carried by the board) is the other reason
to wait: it is honoured to its end, floor or not (it is finite, and its length is the guard's
decision), and its time earns no floor credit. Nothing here knows PyTorch or a device: the
clock, the sleep and the board come in, so the rules are tested with a manual clock.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

_NS = 1_000_000_000
BEAT_S = 0.5
"""How often a gated process tells the board it is there (the agent's sign of a live gate)."""
MAX_LEASE_S = 60.0
"""The longest lease the settings allow: an expiry further ahead than this is not a lease but
a time from before the machine's monotonic clock restarted (a reboot), and holds nothing."""


@dataclass(frozen=True)
class GateSettings:
    """The runtime's knobs, the same for the HP and the BE side of a GPU."""

    lease_s: float = 0.02
    """HP side: BE stays held this long after HP's last module call on the host. A lease
    covers kernels launched, not finished: it should last at least as long as HP's GPU work
    runs on after its last module call, or BE launches again under it. Also how long a
    crashed HP process can hold BE."""
    max_hold_s: float = 0.1
    """BE side: the longest one wait for HP lasts."""
    floor: float = 0.1
    """BE side: the least part of the time BE runs however busy HP is (0 <= floor < 1)."""
    poll_s: float = 0.0005
    """BE side: how often a waiting operator looks at the board again."""

    def __post_init__(self) -> None:
        for name in ("lease_s", "max_hold_s", "poll_s"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and 0.0 < value <= MAX_LEASE_S):
                raise ValueError(f"{name} must be seconds in (0, {MAX_LEASE_S:g}], got "
                                 f"{value!r}")
        if not (isinstance(self.floor, int | float) and 0.0 <= self.floor < 1.0):
            raise ValueError(f"floor must be a fraction in [0, 1), got {self.floor!r}")


class Source(Protocol):
    """What the gate reads (and where it beats): a GPU's :class:`~.lease.Board`."""

    def hp_until_ns(self, before_ns: int | None = None) -> int: ...

    def hold_until_ns(self) -> int: ...

    def beat(self, pid: int, now_ns: int) -> None: ...


@dataclass
class GateStats:
    checks: int = 0
    waits: int = 0
    waited_s: float = 0.0
    """For HP (the agent's holds are in ``held_s``)."""
    bounded: int = 0
    """Waits for HP that ended at ``max_hold_s`` with HP still busy."""
    held_s: float = 0.0


class Gate:
    """The BE side of one GPU's board."""

    def __init__(self, source: Source, settings: GateSettings, *,
                 clock_ns: Callable[[], int] = time.monotonic_ns,
                 sleep: Callable[[float], None] = time.sleep, pid: int | None = None) -> None:
        self.source = source
        self.settings = settings
        self.clock_ns = clock_ns
        self.sleep = sleep
        self.pid = os.getpid() if pid is None else pid
        self.stats = GateStats()
        self._free_until = 0
        self._next_beat = 0
        self._max_hold_ns = int(settings.max_hold_s * _NS)
        self._poll_ns = max(1, int(settings.poll_s * _NS))
        self._credit = settings.floor / (1.0 - settings.floor)
        self._max_lease_ns = int(MAX_LEASE_S * _NS)

    def check(self) -> float:
        """Before an operator: wait while the board says so; the seconds waited."""
        now = self.clock_ns()
        self.stats.checks += 1
        self._beat(now)
        start = now
        now, _ = self._wait_hold(now)
        if now < self._free_until or self._hp_until(now) <= now:
            return (now - start) / _NS
        begin, deadline = now, now + self._max_hold_ns
        while True:
            hp = self._hp_until(now)
            if hp <= now or now >= deadline:
                break
            self.sleep(min(self._poll_ns, hp - now, deadline - now) / _NS)
            self._beat(self.clock_ns())
            now, held = self._wait_hold(self.clock_ns())
            begin, deadline = begin + held, deadline + held  # the agent's, not HP's
        waited = now - begin
        self.stats.waits += 1
        self.stats.waited_s += waited / _NS
        self.stats.bounded += int(now >= deadline and self._hp_until(now) > now)
        self._free_until = now + int(waited * self._credit)
        return (now - start) / _NS

    def _beat(self, now: int) -> None:
        """Tell the board this gate is live, every :data:`BEAT_S` - waiting too: a hold longer
        than the agent's staleness bound must not look like a gate that went away."""
        if now >= self._next_beat:
            self.source.beat(self.pid, now)
            self._next_beat = now + int(BEAT_S * _NS)

    def _hp_until(self, now: int) -> int:
        """The latest HP lease expiry of those within :data:`MAX_LEASE_S` of ``now`` (one
        further ahead is from before a reboot and holds nothing, nor hides the others)."""
        return self.source.hp_until_ns(now + self._max_lease_ns)

    def _wait_hold(self, now: int) -> tuple[int, int]:
        """Wait out the agent's hold, if any: the time after it, and how long it was (ns)."""
        start = now
        while (until := self.source.hold_until_ns()) > now:
            self.sleep(min(self._poll_ns * 20, until - now) / _NS)
            now = self.clock_ns()
            self._beat(now)
        self.stats.held_s += (now - start) / _NS
        return now, now - start
