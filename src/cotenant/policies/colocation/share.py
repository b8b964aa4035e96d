"""SM-share policies: how much of a GPU's SMs the online service keeps each interval.

:class:`DynamicShare` is MuxFlow's dynamic SM allocation: the smallest share whose predicted
online p99 (``cotenant.perf.mps``: Amdahl-style latency fitted to MIGER's MPS rows, an M/D/1
tail, the residual MPS interference factor) stays within ``(1 - margin) * SLO`` at the
observed load; the offline co-runner gets the rest. Hysteresis: a share rises at once when
the SLO is at risk, and falls only when the needed share is at least ``step`` points lower,
by at most ``max_drop`` points per decision. :class:`FixedShare` is a constant split.

The defaults (5% margin, 30-point step, no cap on a drop) are restart-aware: MPS fixes an
offline client's share when it starts, so every change restarts the job (``sim.colocation``
charges ``share_change_s`` for it, 30 s by default). They were chosen on the synthetic
workload (400 GPUs x 12 h, seed 1), not on the trace the benchmark reports
(``docs/benchmarks.md`` gives both). The 5% margin equals the guard's trigger (95% of the
SLO): sized with the same interference, a decided share sits below it.

Both implement :class:`~cotenant.policies.colocation.contract.SharePolicy` for one
observation, and ``shares`` for arrays of services, which the simulator calls each interval;
the scalar path is the array path on one element, so agent and simulator decide alike.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from cotenant.errors import InputError, UnknownNameError
from cotenant.perf import mps
from cotenant.policies.colocation.contract import (
    MAX_SHARE_PCT,
    OnlineObservation,
    check_share_pct,
)

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


def _model_index(model: str) -> int:
    try:
        return mps.model_index(model)
    except ValueError:
        raise UnknownNameError("online model", model, mps.ONLINE_MODELS) from None


@dataclass(frozen=True)
class DynamicShare:
    """Smallest SLO-keeping online share, with hysteresis (raise now, lower slowly)."""

    margin: float = 0.05
    step: int = 30
    max_drop: int = 100
    min_share: int = 10
    interference: float = mps.MPS_LIMITED_INTERFERENCE

    def __post_init__(self) -> None:
        if not 0.0 <= self.margin < 1.0:
            raise InputError("DynamicShare.margin", f"{self.margin} is outside [0, 1)")
        check_share_pct(self.step, "DynamicShare.step")
        check_share_pct(self.max_drop, "DynamicShare.max_drop")
        check_share_pct(self.min_share, "DynamicShare.min_share")
        if self.interference < 1.0:
            raise InputError("DynamicShare.interference", "a slowdown factor is >= 1")

    def needed(
        self, model: IntArray, load: FloatArray, slo_ms: FloatArray,
        interference: FloatArray | None = None,
    ) -> IntArray:
        """The smallest share (percent) meeting the SLO with margin; 101 where none does.
        ``interference``: the co-runner's slowdown per service where known (the simulator
        knows each pair's), else :attr:`interference`."""
        need = mps.min_share(
            load, slo_ms * (1.0 - self.margin), mps.ONLINE_SERIAL[model],
            mps.ONLINE_L100[model], self.interference if interference is None else interference,
        )
        return np.where(need <= MAX_SHARE_PCT, np.maximum(need, self.min_share), need)

    def shares(
        self, model: IntArray, load: FloatArray, slo_ms: FloatArray, current: IntArray
    ) -> IntArray:
        """Online shares (percent, 1-100) for arrays of services, given the shares in force."""
        return self.hold(self.needed(model, load, slo_ms), current)

    def hold(self, needed: IntArray, current: IntArray) -> IntArray:
        """Hysteresis: the share to apply given the needed one (from :meth:`needed`)."""
        need = np.minimum(needed, MAX_SHARE_PCT)
        lower = (current - need) >= self.step
        out = np.where(need > current, need, current)
        return np.where(lower, np.maximum(need, current - self.max_drop), out).astype(np.int64)

    def online_share(self, obs: OnlineObservation) -> int:
        idx = np.array([_model_index(obs.model)], dtype=np.int64)
        out = self.shares(
            idx, np.array([obs.load]), np.array([obs.slo_ms]),
            np.array([obs.online_share_pct], dtype=np.int64),
        )
        return int(out[0])


@dataclass(frozen=True)
class FixedShare:
    """A constant online share (MPS with a fixed split)."""

    share: int = 50

    def __post_init__(self) -> None:
        check_share_pct(self.share, "FixedShare.share")

    def needed(
        self, model: IntArray, load: FloatArray, slo_ms: FloatArray,
        interference: FloatArray | None = None,
    ) -> IntArray:
        return np.full(np.shape(load), self.share, dtype=np.int64)

    def shares(
        self, model: IntArray, load: FloatArray, slo_ms: FloatArray, current: IntArray
    ) -> IntArray:
        return np.full(np.shape(load), self.share, dtype=np.int64)

    def hold(self, needed: IntArray, current: IntArray) -> IntArray:
        return np.full(np.shape(current), self.share, dtype=np.int64)

    def online_share(self, obs: OnlineObservation) -> int:
        return self.share
