"""The co-location policies and their registry ``COLOCATION``.

A policy is a frozen description the simulator interprets each interval; every decision it
holds (shares, matching, guard thresholds, restart delays) is a pure function of arrays:

* ``dedicated``: online GPUs run online work only (the baseline);
* ``mps-fixed``: offline jobs join online GPUs as the queue offers them (largest first among
  those that have arrived) where the memory free in the last interval fits them (no memory
  limit: the online service can run out of memory later), MPS with a fixed online share
  (default 50%);
* ``time-slicing``: the same placement, the GPU's default time slicing between the two;
  both baselines take ``max_peak_load``, a static admission rule (share only the GPUs whose
  online service never exceeds that load, or, with ``admit_quantile`` below 1, stays at or
  below it for that fraction of the run), their knob for fewer SLO violations, and
  ``memory_limit`` (off by default: time slicing isolates no memory, and a plain MPS split
  sets no pinned-memory limit), the knob against out-of-memory;
* ``muxflow``: maximum-weight matching on predicted speeds, :class:`DynamicShare`, the
  two-level protection (a hard offline memory limit below the online peak; a compute guard
  that throttles, then evicts) and MuxFlow's mixed error handling (graceful exit on
  signals, MPS restarted with the online service first, offline restarts with exponential
  backoff).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

import numpy as np
import numpy.typing as npt

from cotenant.errors import InputError
from cotenant.policies.colocation.contract import check_share_pct
from cotenant.policies.colocation.share import DynamicShare, FixedShare
from cotenant.registry import Registry

IntArray = npt.NDArray[np.int64]


class Sharing(StrEnum):
    """How an online GPU is shared with an offline co-runner."""

    NONE = "none"
    MPS = "mps"
    TIME_SLICING = "time-slicing"


class Matching(StrEnum):
    NONE = "none"
    GREEDY = "greedy"
    MAX_WEIGHT = "max-weight"


@dataclass(frozen=True)
class ColocationPolicy:
    """What a co-location policy does; see the module docstring for the four built in."""

    name: str
    sharing: Sharing
    matching: Matching
    share: DynamicShare | FixedShare | None = None
    guard: bool = False
    guard_threshold: float = 0.95
    """The guard acts when the predicted p99 exceeds this fraction of the SLO."""
    load_window: int = 1
    """Shares and matching act on the peak load observed over this many past intervals."""
    guard_reaction_s: float = 0.5
    """Seconds the guard takes to act on a p99 rise (an assumption, see sim.colocation)."""
    evict_above: int = 95
    """The guard evicts when keeping the SLO needs more online share than this."""
    online_first: bool = False
    """After an MPS failure the online service is restarted first, outside MPS."""
    graceful_signals: bool = False
    """Signals trigger a checkpoint-and-exit (no progress lost) instead of a kill."""
    backoff_base: int = 0
    """Intervals a crashed job waits before it may run again: ``backoff_base *
    2**(failures-1)``, at most ``backoff_cap``; 0 = it may run from the next interval."""
    backoff_cap: int = 32
    quarantine: int = 30
    """Intervals a GPU takes no offline work after an XID error."""
    memory_limit: bool = False
    """The hard offline memory limit: an offline job gets at most the GPU's memory less the
    online service's *peak*, so online memory growth always finds room. Without it a job is
    placed by the memory free *now* (what nvidia-smi shows), and when the online service grows
    into memory the job holds, the online allocation fails (an out-of-memory interval)."""
    max_peak_load: float = 1.0
    """Static admission: offline work joins only GPUs whose online service's peak load is at
    most this; 1.0 admits every GPU. The knob a static baseline has to trade offline work for
    fewer SLO violations. The simulator takes the peak over the whole run, future included:
    foresight an operator would not have, which favours the baselines."""
    admit_quantile: float = 1.0
    """Which quantile of the online load the admission compares with ``max_peak_load``: 1.0
    its peak; 0.99 the load it stays at or below 99% of the time. Where loads are high
    enough that nearly every service peaks at 1 (duty cycles scaled up), the peak admits
    all or nothing and a lower quantile is the lever left."""
    admit_history: bool = False
    """Admission from the load seen so far instead of the whole run: a GPU is admitted at an
    interval while the ``admit_quantile`` of its service's load *before* it is at most
    ``max_peak_load``, none in the first hour (no history yet), and an offline job on a GPU
    that loses admission is evicted (requeued, progress kept). What an operator can run,
    without the foresight of the default."""
    notes: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        if not 0.0 < self.guard_threshold <= 1.0:
            raise InputError(f"policy {self.name}", "guard_threshold must be in (0, 1]")
        check_share_pct(self.evict_above, f"policy {self.name}: evict_above")
        if self.load_window < 1:
            raise InputError(f"policy {self.name}", "load_window must be >= 1")
        if self.backoff_base < 0 or self.backoff_cap < 0 or self.quarantine < 0:
            raise InputError(f"policy {self.name}", "delays must be >= 0")
        if not 0.0 <= self.max_peak_load <= 1.0:
            raise InputError(f"policy {self.name}", "max_peak_load must be in [0, 1]")
        if not 0.0 < self.admit_quantile <= 1.0:
            raise InputError(f"policy {self.name}", "admit_quantile must be in (0, 1]")
        if not 0.0 <= self.guard_reaction_s < float("inf"):
            raise InputError(f"policy {self.name}",
                             f"guard_reaction_s {self.guard_reaction_s} must be a finite "
                             "number of seconds >= 0")

    @property
    def shares_gpus(self) -> bool:
        return self.sharing is not Sharing.NONE

    def restart_delay(self, failures: IntArray) -> IntArray:
        """Intervals to wait before a job that failed ``failures`` times runs again."""
        if self.backoff_base == 0:
            return np.zeros_like(failures)
        exp = np.minimum(np.maximum(failures - 1, 0), 30)
        delay: IntArray = np.minimum(self.backoff_base * (2**exp), self.backoff_cap).astype(
            np.int64
        )
        return delay


COLOCATION: Registry[ColocationPolicy] = Registry("co-location policy")


@COLOCATION.register("dedicated", aliases=("none", "exclusive"))
def dedicated() -> ColocationPolicy:
    return ColocationPolicy("dedicated", Sharing.NONE, Matching.NONE)


@COLOCATION.register("mps-fixed", aliases=("mps",))
def mps_fixed(
    share: int = 50, max_peak_load: float = 1.0, memory_limit: bool = False,
    admit_quantile: float = 1.0, admit_history: bool = False,
) -> ColocationPolicy:
    return ColocationPolicy(
        "mps-fixed", Sharing.MPS, Matching.GREEDY, share=FixedShare(share),
        max_peak_load=max_peak_load, memory_limit=memory_limit, admit_quantile=admit_quantile,
        admit_history=admit_history,
    )


@COLOCATION.register("time-slicing", aliases=("ts", "timeslicing"))
def time_slicing(
    max_peak_load: float = 1.0, memory_limit: bool = False, admit_quantile: float = 1.0,
    admit_history: bool = False,
) -> ColocationPolicy:
    return ColocationPolicy(
        "time-slicing", Sharing.TIME_SLICING, Matching.GREEDY, max_peak_load=max_peak_load,
        memory_limit=memory_limit, admit_quantile=admit_quantile, admit_history=admit_history,
    )


@COLOCATION.register("muxflow")
def muxflow(
    share: DynamicShare | None = None, guard_threshold: float = 0.95, evict_above: int = 95,
    guard_reaction_s: float = 0.5, load_window: int = 1,
) -> ColocationPolicy:
    """MuxFlow; ``share`` defaults to :class:`DynamicShare`'s restart-aware defaults.
    ``guard_reaction_s`` is the assumption its SLO result rests on (``sim.colocation``)."""
    return ColocationPolicy(
        "muxflow",
        Sharing.MPS,
        Matching.MAX_WEIGHT,
        share=share if share is not None else DynamicShare(),
        guard=True,
        memory_limit=True,
        guard_threshold=guard_threshold,
        evict_above=evict_above,
        guard_reaction_s=guard_reaction_s,
        load_window=load_window,
        online_first=True,
        graceful_signals=True,
        backoff_base=1,
    )
