"""The contract between the co-location decision core and whoever drives it.

The simulator and the node agent both hand the core an :class:`Observation` (what a node can
see at one decision point, one entry per GPU that runs an online service) and the core's own
:class:`GpuState` from the previous call, and get :class:`Actions` and the next state back.
Everything is an array over GPUs, so the simulator decides for 20,000 GPUs in one call and the
agent for its node's few with the same code. Nothing here reads a clock or holds state
between calls (STYLE.md, practice 3): time comes in ``Observation.now_s``, memory in
``GpuState``.

Shares: ``share`` is the part of the GPU the online service keeps, in percent; the offline
co-runner may use the rest. Under MPS that is the offline client's thread cap ``100 - share``
(the online client runs uncapped), under time slicing the offline job's duty cap, and under
priority sharing it is not used (the online service preempts). 0 leaves the co-runner
unlimited; 100 leaves it nothing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from enum import IntEnum, StrEnum

import numpy as np
import numpy.typing as npt

from cotenant.errors import InputError
from cotenant.model.workload import MILLI_PER_GPU

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

MIN_SHARE_PCT = 1
MAX_SHARE_PCT = 100


def offline_thread_pct(share: int) -> int:
    """The offline co-runner's MPS thread cap beside an online service keeping ``share``%
    (at least 1, MPS's minimum): what the node agent and the Ray helper set."""
    return max(MIN_SHARE_PCT, MAX_SHARE_PCT - share)


def milli_limits(milli: int, gpu_memory_mib: int) -> tuple[int, int | None]:
    """A part of ``milli`` thousandths of a GPU of ``gpu_memory_mib`` as MPS limits: that
    share of the SMs (the thread %, at least 1) and of the memory (MiB; None where it
    rounds to nothing): what the device plugin and the Ray helper set."""
    pct = max(MIN_SHARE_PCT, math.ceil(milli / 10))
    memory = gpu_memory_mib * milli // MILLI_PER_GPU
    return pct, memory if memory > 0 else None


def check_share_pct(value: object, where: str, lowest: int = MIN_SHARE_PCT) -> int:
    """``value`` as a share in percent (``lowest``-100), or an :class:`InputError` at ``where``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(where, f"SM share must be an integer percentage, got {value!r}")
    if not lowest <= value <= MAX_SHARE_PCT:
        raise InputError(
            where, f"SM share {value} is outside {lowest}-{MAX_SHARE_PCT}",
            hint="MPS active-thread percentages run from 1 to 100",
        )
    return value


class Mechanism(StrEnum):
    """How an online GPU is shared with an offline co-runner."""

    NONE = "none"
    MPS = "mps"
    TIME_SLICING = "time-slicing"
    PRIORITY = "priority"

    @property
    def restarts_on_share_change(self) -> bool:
        """MPS reads a client's thread cap only when it creates its context."""
        return self is Mechanism.MPS


class Why(IntEnum):
    """Why a GPU's share or offline job changed in a decision (per GPU, for logs and counts)."""

    NONE = 0
    SHARE_UP = 1
    SHARE_DOWN = 2
    PAUSE = 3
    THROTTLE = 4
    EVICT = 5


@dataclass(frozen=True)
class Observation:
    """What a node can see at one decision point, per GPU (arrays of one length).

    ``load`` is the online service's solo duty cycle measured over the last observation window
    (a busy time read beside a co-runner converted back to solo duty); ``load_peak`` its peak
    over the policy's load window. ``p99_ms`` is the last latency report (NaN: none),
    ``p99_since_s`` when that report's window began, ``p99_at_s`` when it came. ``placed``: an
    offline job is on the GPU (running, starting or paused); ``running``: it runs kernels now.
    ``share`` is the share in force. ``stretch`` is the slowdown the co-runner's profile is
    predicted to cause under the policy's mechanism (1 where none or unknown).
    """

    now_s: float | FloatArray
    """The decision's time (seconds), one for all GPUs or one per GPU."""
    model: IntArray
    slo_ms: FloatArray
    load: FloatArray
    load_peak: FloatArray
    p99_ms: FloatArray
    p99_since_s: FloatArray
    p99_at_s: FloatArray
    placed: BoolArray
    running: BoolArray
    share: IntArray
    stretch: FloatArray

    def __post_init__(self) -> None:
        n = len(self.model)
        for name in ("slo_ms", "load", "load_peak", "p99_ms", "p99_since_s", "p99_at_s", "placed",
                     "running", "share", "stretch"):
            if len(getattr(self, name)) != n:
                raise InputError(f"observation.{name}", f"has {len(getattr(self, name))} "
                                 f"entries for {n} GPUs")
        if n and (not np.all(self.load >= 0.0) or not np.all(self.slo_ms > 0.0)):
            raise InputError("observation", "loads must be >= 0 and SLOs > 0")


@dataclass(frozen=True)
class GpuState:
    """The core's memory per GPU between decisions (arrays of one length)."""

    decided: IntArray
    """The share policy's own last share, what it sees as current; -1: none yet."""
    floor: IntArray
    floor_until: FloatArray
    acted_at: FloatArray
    """When the guard last acted (its settle time and report freshness count from here)."""
    paused_at: FloatArray
    paused_until: FloatArray
    held_until: FloatArray
    """No offline work starts on the GPU before this (an eviction's hold)."""
    watched_since: FloatArray
    """Since when the GPU's load has been watched (a gain waits for a whole window)."""
    gained_at: FloatArray
    """When the offline co-runner was last given more of the GPU."""

    @classmethod
    def new(cls, n: int, now_s: float | FloatArray) -> GpuState:
        never = np.full(n, -np.inf)
        return cls(np.full(n, -1, dtype=np.int64), np.zeros(n, dtype=np.int64), never.copy(),
                   never.copy(), never.copy(), never.copy(), never.copy(),
                   np.broadcast_to(np.asarray(now_s, dtype=np.float64), (n,)).copy(),
                   never.copy())

    def reset(self, gpus: IntArray, now_s: float) -> GpuState:
        """Forget ``gpus``' pair state (its offline job left): a new pair starts afresh. The
        eviction hold and the watch window stay (they belong to the GPU)."""
        fresh = GpuState.new(len(gpus), now_s)
        out = {}
        for name in ("decided", "floor", "floor_until", "acted_at", "paused_at",
                     "paused_until", "gained_at"):
            arr = getattr(self, name).copy()
            arr[gpus] = getattr(fresh, name)
            out[name] = arr
        return replace(self, **out)


@dataclass(frozen=True)
class Actions:
    """What to do on each GPU from now on.

    ``share``: the share to enforce (differs from ``Observation.share`` where it changes; under
    MPS the running offline client is restarted with its new cap, ``restart``); ``pause_until``
    (> now: pause the offline job until then); ``evict``: stop the offline job and start no
    offline work before ``hold_until``; ``why``: the cause per GPU (:class:`Why`).
    """

    share: IntArray
    restart: BoolArray
    pause_until: FloatArray
    evict: BoolArray
    hold_until: FloatArray
    why: IntArray

    def changed(self, before: IntArray) -> BoolArray:
        return np.asarray(self.share != before, dtype=np.bool_)
