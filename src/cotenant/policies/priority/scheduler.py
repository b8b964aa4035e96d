"""Kernel schedulers for one GPU shared by a high-priority (HP) inference job and a
best-effort (BE) training job, as pure policies over what a real scheduler observes.

A :class:`Scheduler` declares how the GPU is shared (time slices or concurrent kernels), how
HP's thread blocks and BE's meet on the SMs, how a running BE kernel gives way (it does not,
it drains to a block boundary, or it is reset and loses its work), and when BE may launch a
kernel (:meth:`Scheduler.be_launch_at`). TGS's rate control is a pure step
(:func:`rate_step`): its state and one window's observation in, the next state out. No
method sees the future: an :class:`Observation` holds only what has happened.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

UNKNOWN_KIND = -1


class Sharing(StrEnum):
    TIME_SLICED = "time-sliced"
    """The GPU runs one context at a time, switching every time slice (CUDA's default)."""
    CONCURRENT = "concurrent"
    """Kernels of both jobs share the SMs (MPS, streams in one context, Tally's server)."""


class Blocks(StrEnum):
    SHARED = "shared"
    """As BE's blocks end, the freed SMs go to both kernels' pending blocks in proportion
    to their demand (MPS without priority)."""
    PRIORITY = "priority"
    """HP's pending blocks go first: BE gives up the SMs HP needs after one block (one wave
    of the BE kernel) ends (MPS client priority, CUDA stream priority)."""


class Preemption(StrEnum):
    NONE = "none"
    DRAIN = "drain"
    """BE is told to stop: it leaves the SMs within the kernel's preemption latency and keeps
    its progress (Tally's sliced and preemptive persistent-block kernels)."""
    RESET = "reset"
    """BE is killed after the reset latency and loses the kernel's progress (REEF)."""


@dataclass(frozen=True)
class Observation:
    """What the scheduler has seen by ``now_us``: nothing of what comes later."""

    now_us: float
    hp_request_active: bool
    """An HP request is in flight (a serving system knows; a kernel interposer does not)."""
    hp_kernel_running: bool
    hp_idle_since_us: float | None
    """When HP's last kernel ended, if none is queued or running since; else None."""
    hp_kernel_kind: int = UNKNOWN_KIND
    be_kernel_kind: int = UNKNOWN_KIND


@dataclass(frozen=True)
class RateControl:
    """TGS-style adaptive rate control of the BE job: additive increase while HP is not held
    up, multiplicative decrease when it is. The interposer observes how long HP had a kernel
    ready that did not run (it sees launches and completions, not requests)."""

    window_us: float = 10_000.0
    increase: float = 0.05
    decrease: float = 0.5
    tolerance: float = 1.0
    """HP may be held up this many times as long as it ran in a window before the rate is
    cut (1: HP keeps at least half the GPU while it has work, time slicing's fair share)."""
    floor: float = 0.05


def rate_step(rate: float, control: RateControl, blocked_us: float, ran_us: float) -> float:
    """The BE launch rate for the next window, from how long HP was held up and how long it
    ran in this window."""
    if blocked_us > control.tolerance * ran_us:
        return max(control.floor, rate * control.decrease)
    return min(1.0, rate + control.increase)


@dataclass(frozen=True)
class Scheduler:
    """One scheduler's rules (see the module docstring); built by :data:`PRIORITY`."""

    name: str
    sharing: Sharing
    blocks: Blocks = Blocks.SHARED
    preemption: Preemption = Preemption.NONE
    preemption_us: float = 0.0
    """Tally: the preemption-latency limit of transformed kernels; REEF: the reset latency."""
    idle_wait_us: float = 0.0
    """BE launches only after HP has been idle this long (Tally's 0.1 ms)."""
    be_in_requests: bool = True
    """BE may launch while an HP request is in flight (subject to the kind rule)."""
    kind_rule: bool = False
    """Orion: during an HP request, BE launches only if its kernel's kind (compute- or
    memory-bound) differs from the running HP kernel's, or either is unknown."""
    transform_overhead: float = 0.0
    """Tally: BE kernels longer than ``preemption_us`` run this much slower once sliced."""
    untransformed_after_us: float = math.inf
    """Tally: after HP has been idle this long, BE kernels run untransformed."""
    timeslice_us: float = 0.0
    rate_control: RateControl | None = None
    gated: bool = False
    """BE waits while HP is busy (the priority family); False: BE always may launch."""

    def be_launch_at(self, obs: Observation) -> float:
        """The earliest time BE may launch its next kernel if nothing else happens: now,
        later (HP's idle wait), or never (``inf``) until HP's state changes."""
        if not self.gated:
            return obs.now_us
        if obs.hp_request_active and not self.be_in_requests:
            return math.inf
        if obs.hp_kernel_running:
            if not self.kind_rule:
                return math.inf
            differs = UNKNOWN_KIND in (obs.hp_kernel_kind, obs.be_kernel_kind) or \
                obs.hp_kernel_kind != obs.be_kernel_kind
            return obs.now_us if differs else math.inf
        if obs.hp_idle_since_us is None:
            return obs.now_us if self.kind_rule and obs.hp_request_active else math.inf
        return max(obs.now_us, obs.hp_idle_since_us + self.idle_wait_us)

    def transformed(self, kernel_us: float, obs: Observation) -> bool:
        """Whether a BE kernel launched now runs in its preemptible (slower) form."""
        if self.transform_overhead <= 0.0 or kernel_us <= self.preemption_us:
            return False
        idle = obs.hp_idle_since_us
        return idle is None or obs.now_us - idle < self.untransformed_after_us

    def be_duration_factor(self, kernel_us: float, obs: Observation) -> float:
        return 1.0 + self.transform_overhead if self.transformed(kernel_us, obs) else 1.0
