"""A co-location policy: small pure parts composed, one :meth:`ColocationPolicy.decide`.

The parts: a mechanism (MPS, time slicing, priority), share sizing (:mod:`.share`), the
compute guard (:mod:`.guard`), admission (:mod:`.admission`), recovery (:mod:`.recovery`),
the pairing of offline jobs with GPUs (:class:`Matching`, :mod:`.matching`) and a memory
limit. ``decide`` is the whole per-tick decision for the GPUs of an :class:`Observation`: the
simulator calls it for every GPU of the fleet, the node agent for the GPUs of its node.

Per GPU it (1) sizes the share on the peak load of the last ``load_window_s`` seconds and
applies the sizing's hysteresis; (2) keeps the guard's floor while it holds; (3) raises a share
at once, but gives the co-runner more of the GPU only after the GPU has been watched for a
whole window, at most once a window, not while it is paused nor where the guard sees the SLO
at risk, and only for a gain of more than ``gain_threshold_pct`` points (each gain under MPS
is a restart); (4) runs the guard on a fresh p99 report (pause, throttle to the need at the
measured load, or evict).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import StrEnum

import numpy as np

from cotenant.errors import InputError, check_seconds
from cotenant.policies.colocation.admission import Admission
from cotenant.policies.colocation.contract import (
    MAX_SHARE_PCT,
    Actions,
    GpuState,
    Mechanism,
    Observation,
    Why,
    check_share_pct,
)
from cotenant.policies.colocation.guard import GuardSettings
from cotenant.policies.colocation.recovery import Recovery
from cotenant.policies.colocation.share import NEVER, ShareSizing, need, p99_at


class Matching(StrEnum):
    """How pending offline jobs are paired with online GPUs that have room."""

    NONE = "none"
    GREEDY = "greedy"
    """The queue's order (largest job that fits first), any GPU with room."""
    RANDOM = "random"
    MAX_WEIGHT = "max-weight"
    """MuxFlow: the pairing of most predicted speed (:mod:`.matching`)."""


@dataclass(frozen=True)
class ColocationPolicy:
    """What a co-location policy does; its parts are documented in their modules."""

    name: str
    mechanism: Mechanism
    share: ShareSizing | None = None
    guard: GuardSettings | None = None
    admission: Admission = field(default_factory=Admission)
    recovery: Recovery = field(default_factory=Recovery)
    matching: Matching = Matching.GREEDY
    memory_limit: bool = False
    """Offline jobs get at most the GPU's memory less the online service's peak (MPS pins it;
    elsewhere the agent's limit), so online memory growth always finds room. Without it a job
    is placed by the memory free now, and online growth into it is an out-of-memory."""
    load_window_s: float = 60.0
    gain_threshold_pct: int = 10
    notes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        check_seconds(self.load_window_s, f"policy {self.name}: load_window_s", positive=True)
        check_share_pct(self.gain_threshold_pct, f"policy {self.name}: gain_threshold_pct",
                        lowest=0)
        if self.mechanism is Mechanism.NONE and (self.share or self.guard):
            raise InputError(f"policy {self.name}", "a policy that shares nothing has no "
                             "share sizing or guard")

    @property
    def shares_gpus(self) -> bool:
        return self.mechanism is not Mechanism.NONE

    def with_(self, **changes: object) -> ColocationPolicy:
        """A copy with ``changes`` (the frontier's settings)."""
        return replace(self, **changes)  # type: ignore[arg-type]

    def decide(self, obs: Observation, state: GpuState) -> tuple[Actions, GpuState]:
        """The actions for every GPU of ``obs`` and the state for the next call."""
        now, n = obs.now_s, len(obs.model)
        current = obs.share.astype(np.int64)
        decided = state.decided
        if self.share is not None and self.shares_gpus:  # sized where a co-runner is placed
            idx = np.flatnonzero(obs.placed)
            needed = self.share.needed(self.mechanism, obs.model[idx], obs.load_peak[idx],
                                       obs.slo_ms[idx], obs.stretch[idx])
            decided = state.decided.copy()
            decided[idx] = self.share.hold(needed, state.decided[idx])
        floor = np.where(state.floor_until > now, state.floor, 0)
        want = np.clip(np.maximum(np.where(decided < 0, current, decided), floor), 0,
                       MAX_SHARE_PCT)
        paused = state.paused_until > now
        risk = self._at_risk(obs, state)
        window = self.load_window_s
        may_gain = ((state.watched_since <= now - window) & (state.gained_at <= now - window)
                    & ~paused & ~risk)
        up = want > current
        down = (want < current) & may_gain & (current - want > self.gain_threshold_pct)
        share = np.where(up | down, want, current).astype(np.int64)
        why = np.where(up, Why.SHARE_UP, np.where(down, Why.SHARE_DOWN, Why.NONE))
        gained_at = np.where(down & obs.placed, now, state.gained_at)
        nxt = replace(state, decided=np.asarray(decided, dtype=np.int64), gained_at=gained_at)
        pause_until = np.full(n, np.nan)
        evict = np.zeros(n, dtype=np.bool_)
        if self.guard is not None and self.shares_gpus:
            share, why, pause_until, evict, nxt = self._guard(obs, nxt, share, why, floor, risk)
        restart = ((share != current) & obs.placed & ~evict
                   & self.mechanism.restarts_on_share_change)
        actions = Actions(share=share, restart=np.asarray(restart, dtype=np.bool_),
                          pause_until=pause_until, evict=evict, hold_until=nxt.held_until,
                          why=np.asarray(why, dtype=np.int64))
        return actions, nxt

    def _at_risk(self, obs: Observation, state: GpuState) -> np.ndarray:
        """Where the guard acts: a fresh p99 report over its threshold, the co-runner running
        and not paused."""
        g, now = self.guard, obs.now_s
        if g is None or not self.shares_gpus:
            return np.zeros(len(obs.model), dtype=np.bool_)
        paused = state.paused_until > now
        with np.errstate(invalid="ignore"):
            fresh = (np.isfinite(obs.p99_ms) & (obs.p99_since_s >= state.acted_at)
                     & (now >= state.acted_at + g.settle_s) & (now - obs.p99_at_s <= g.stale_s))
            return np.asarray(fresh & obs.running & ~paused
                              & (obs.p99_ms > g.threshold * obs.slo_ms), dtype=np.bool_)

    def _guard(self, obs: Observation, state: GpuState, share: np.ndarray, why: np.ndarray,
               floor: np.ndarray, risk: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                           np.ndarray, GpuState]:
        """Pause, throttle or evict where the SLO is at risk (:meth:`_at_risk`)."""
        g, now = self.guard, obs.now_s
        assert g is not None
        paused = state.paused_until > now
        pause = risk & (g.pause_s > 0.0) & (now >= state.paused_at + g.pause_s + g.hold_s)
        act = risk & ~pause
        target = np.maximum(share, floor) + g.step_pct
        i = np.flatnonzero(act)  # the need at the measured load, where the guard acts
        target[i] = np.maximum(target[i], need(self.mechanism, obs.model[i], obs.load[i],
                                               g.threshold * obs.slo_ms[i], obs.stretch[i]))
        evict = act & ((target > g.evict_above) | (target >= NEVER)
                       | (self.mechanism is Mechanism.PRIORITY))
        throttle = act & ~evict
        target = np.minimum(target, MAX_SHARE_PCT)
        share = np.where(throttle, np.maximum(share, target), share).astype(np.int64)
        why = np.where(pause, Why.PAUSE, np.where(evict, Why.EVICT,
                                                  np.where(throttle, Why.THROTTLE, why)))
        extend = np.zeros(len(pause), dtype=np.bool_)
        if g.adaptive:  # a pause lasts while the co-runner would push the service over
            i = np.flatnonzero(paused & obs.placed)
            over = p99_at(self.mechanism, obs.model[i], obs.load[i], share[i].astype(float),
                          obs.stretch[i]) > g.threshold * obs.slo_ms[i]
            extend[i[over]] = True
        pause_until = np.where(pause | extend, now + g.pause_s, np.nan)
        nxt = replace(
            state,
            floor=np.where(throttle, target, state.floor).astype(np.int64),
            floor_until=np.where(throttle, now + g.hold_s, state.floor_until),
            acted_at=np.where(risk, now, state.acted_at),
            paused_at=np.where(pause, now, state.paused_at),
            paused_until=np.where(pause | extend, now + g.pause_s, state.paused_until),
            held_until=np.where(evict, now + g.evict_hold_s, state.held_until),
        )
        return share, why, pause_until, evict, nxt
