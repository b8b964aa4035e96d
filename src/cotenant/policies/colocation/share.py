"""Share sizing: how much of a GPU the online service keeps, from the load it is seen to carry.

:class:`DynamicShare` is MuxFlow's dynamic SM allocation: the smallest share whose predicted
online p99 (:mod:`cotenant.perf.mps`: Amdahl-style latency fitted to MIGER's MPS rows, an M/D/1
tail, the co-runner's predicted stretch) stays within ``(1 - margin) * SLO`` at the observed
peak load; hysteresis: a share rises at once when the SLO is at risk and falls only when the
need is at least ``step`` points lower, by at most ``max_drop`` points, never under
``min_share``. :class:`FixedShare` is a constant split. Both size for any mechanism
(:func:`need`): under MPS the share is the online SMs, under time slicing the time the offline
job is held back, under priority sharing there is nothing to size (0, or 101 where even a whole
GPU would miss).

The defaults (5% margin, 30-point step, no cap on a drop) are restart-aware: under MPS every
change restarts the offline job (``share_change_s`` in the simulator).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from cotenant.errors import InputError
from cotenant.perf import mps
from cotenant.policies.colocation.contract import (
    MAX_SHARE_PCT,
    Mechanism,
    check_share_pct,
)

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
NEVER = MAX_SHARE_PCT + 1
"""The need where no share keeps the SLO (the guard evicts there)."""


def p99_at(mechanism: Mechanism, model: IntArray, load: FloatArray, share_pct: FloatArray,
           stretch: FloatArray) -> FloatArray:
    """The online p99 (ms) at ``share_pct`` under ``mechanism`` with the co-runner running."""
    serial, l100 = mps.ONLINE_SERIAL[model], mps.ONLINE_L100[model]
    p = np.asarray(share_pct, dtype=np.float64) / 100.0
    if mechanism is Mechanism.MPS:
        return mps.p99_ms(load, np.maximum(p, 1e-6), serial, l100, stretch)
    if mechanism is Mechanism.TIME_SLICING:  # the co-runner's duty cap is 1 - p
        return mps.p99_ms(load, np.ones_like(p), serial, l100, 1.0 + (stretch - 1.0) * (1 - p))
    return mps.p99_ms(load, np.ones_like(p), serial, l100, stretch)


GRID = 1000
"""Loads are sized on a grid of 1/GRID, rounded up (never under-sized), where a table helps."""


def need(mechanism: Mechanism, model: IntArray, load: FloatArray, target_ms: FloatArray,
         stretch: FloatArray) -> IntArray:
    """The smallest share (percent, 0-100) whose p99 at ``load`` is within ``target_ms`` beside
    the co-runner; :data:`NEVER` where even 100 misses. Where every GPU has one stretch and one
    target per model (as with SLOs set per model), the answer is read from a per-model table
    over loads rounded up to 1/:data:`GRID` (a load over 1 is bisected); else bisection,
    vectorised over GPUs. A GPU's answer never depends on the other GPUs' loads."""
    load = np.asarray(load, dtype=np.float64)
    model = np.asarray(model, dtype=np.int64)
    if len(load) == 0:
        return np.zeros(0, dtype=np.int64)
    target = np.asarray(target_ms, dtype=np.float64) * np.ones(len(load))
    ratio = target / mps.ONLINE_L100[model]
    st = np.asarray(stretch, dtype=np.float64) * np.ones(len(load))
    if np.ptp(st) > 0.0 or np.ptp(ratio) > 1e-9 * ratio[0]:
        return _bisect(mechanism, model, load, target, st)
    # a load over a whole GPU is bisected alone: the others keep their table answers
    table = _table(mechanism, round(float(ratio[0]), 9), float(st[0]))
    inside = load <= 1.0
    out = np.empty(len(load), dtype=np.int64)
    out[inside] = table[model[inside], np.ceil(load[inside] * GRID - 1e-9).astype(np.int64)]
    over = ~inside
    if over.any():
        out[over] = _bisect(mechanism, model[over], load[over], target[over], st[over])
    return out


_TABLES: dict[tuple[Mechanism, float, float], IntArray] = {}


def _table(mechanism: Mechanism, ratio: float, stretch: float) -> IntArray:
    """(models, GRID + 1): the need of each model at load j / GRID."""
    key = (mechanism, ratio, stretch)
    if key not in _TABLES:
        if len(_TABLES) > 256:
            _TABLES.clear()
        models = len(mps.ONLINE_MODELS)
        m = np.repeat(np.arange(models), GRID + 1)
        loads = np.tile(np.arange(GRID + 1) / GRID, models)
        got = _bisect(mechanism, m, loads, ratio * mps.ONLINE_L100[m], np.full(len(m), stretch))
        _TABLES[key] = got.reshape(models, GRID + 1)
    return _TABLES[key]


def _bisect(mechanism: Mechanism, model: IntArray, load: FloatArray, target_ms: FloatArray,
            stretch: FloatArray) -> IntArray:
    full = p99_at(mechanism, model, load, np.full(load.shape, 100.0), stretch)
    ok_none = p99_at(mechanism, model, load, np.zeros(load.shape), stretch) <= target_ms
    if mechanism is Mechanism.PRIORITY:
        return np.where(ok_none, 0, NEVER).astype(np.int64)
    lo = np.zeros(load.shape, dtype=np.int64)
    hi = np.full(load.shape, MAX_SHARE_PCT, dtype=np.int64)
    while True:
        open_ = hi - lo > 1
        if not open_.any():
            break
        mid = (lo + hi) // 2
        fits = p99_at(mechanism, model, load, mid.astype(np.float64), stretch) <= target_ms
        hi = np.where(open_ & fits, mid, hi)
        lo = np.where(open_ & ~fits, mid, lo)
    out = np.where(ok_none, 0, np.where(full <= target_ms, hi, NEVER))
    return out.astype(np.int64)


@dataclass(frozen=True)
class DynamicShare:
    """Smallest SLO-keeping online share, with hysteresis (raise now, lower slowly)."""

    margin: float = 0.05
    step: int = 30
    max_drop: int = 100
    min_share: int = 10

    def __post_init__(self) -> None:
        if not 0.0 <= self.margin < 1.0:
            raise InputError("DynamicShare.margin", f"{self.margin} is outside [0, 1)")
        check_share_pct(self.step, "DynamicShare.step")
        check_share_pct(self.max_drop, "DynamicShare.max_drop")
        check_share_pct(self.min_share, "DynamicShare.min_share", lowest=0)

    def needed(self, mechanism: Mechanism, model: IntArray, load: FloatArray,
               slo_ms: FloatArray, stretch: FloatArray) -> IntArray:
        """The share (percent) meeting the SLO with margin; :data:`NEVER` where none does."""
        got = need(mechanism, model, load, slo_ms * (1.0 - self.margin), stretch)
        return np.where(got <= MAX_SHARE_PCT, np.maximum(got, self.min_share), got)

    def hold(self, needed: IntArray, current: IntArray) -> IntArray:
        """Hysteresis: the share to apply given the needed one; ``current`` -1 is none yet
        (a new pair starts at its need)."""
        want = np.minimum(needed, MAX_SHARE_PCT)
        cur = np.where(current < 0, want, current)
        lower = (cur - want) >= self.step
        out = np.where(want > cur, want, cur)
        return np.where(lower, np.maximum(want, cur - self.max_drop), out).astype(np.int64)


@dataclass(frozen=True)
class FixedShare:
    """A constant online share (a fixed split)."""

    share: int = 50

    def __post_init__(self) -> None:
        check_share_pct(self.share, "FixedShare.share", lowest=0)

    def needed(self, mechanism: Mechanism, model: IntArray, load: FloatArray,
               slo_ms: FloatArray, stretch: FloatArray) -> IntArray:
        return np.full(np.shape(load), self.share, dtype=np.int64)

    def hold(self, needed: IntArray, current: IntArray) -> IntArray:
        return np.full(np.shape(current), self.share, dtype=np.int64)


ShareSizing = DynamicShare | FixedShare
