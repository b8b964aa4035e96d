"""How much an offline co-runner slows an online service, per sharing mechanism, calibrated
from one source with one statistic for every mechanism.

Three mechanisms, one parameter pair each per offline job profile ``j`` (the training jobs of
:data:`cotenant.perf.mps.TRAINING_MEMORY_MB`, Tally's six, in file order):

* **time slicing**: while the co-runner has work, every online batch is stretched by
  ``ts_stretch[j]`` (it waits for the co-runner's slices at the whole GPU); the offline job
  runs at ``1 - ts_cost[j] * load``;
* **MPS, offline capped** (MuxFlow, and what the node agent runs): the online service keeps
  ``share`` of the SMs (``perf.mps.speed``) and, while the co-runner runs, its batches are
  slowed further by ``mps_residual[j]`` (memory bandwidth and L2, which a thread cap does not
  divide); the offline job runs at its own speed at its cap (:mod:`cotenant.perf.jobs`);
* **priority** (Tally, REEF: high-priority kernels first, best-effort kernels preempted):
  online batches stretched by ``priority_stretch[j]`` (the preemption latency), the offline job
  at ``1 - priority_cost[j] * load``.

**Sources.** ``tally`` (published: ``perf/data/tally_pairs.csv``, 12 pairs on an A100-40GB, an
inference server at duty 0.447 beside each of six training jobs): a p99 ratio becomes a
stretch by solving :func:`cotenant.perf.mps.p99_ms` at Tally's server duty, the same way for
every mechanism (time slicing from its ``time_slicing`` column, priority from ``tally``); a
cost is ``(1 - BE throughput) / 0.447``. Tally measured MPS without a cap, so the capped
residual is its ``mps_priority`` stretch times the online speed at half the SMs (two busy
uncapped clients taken to split them evenly), at least 1. ``h200`` (measured here,
``perf/data/h200_colocation.csv``: ResNet-50 serving beside ResNet-50 training, the very pair
Tally's ``resnet50_train_128`` is): the stretches are batch times beside the co-runner over
the batch time at the same SM allowance alone (time slicing 2.37; capped MPS 1.05 at a 50%
share and 1.10 at 70%); other jobs are scaled by their Tally factor relative to ResNet-50's;
priority, which the run did not measure, is Tally's.

**Statistic.** Tally has two servers per training job: ``mean`` (default), ``min`` or ``max``
of the two ratios, taken alike for every mechanism (the H200 residual likewise over its two
shares). ``docs`` report how the comparison moves with source and statistic.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

import numpy as np
import numpy.typing as npt
from scipy.optimize import brentq

from cotenant.errors import UnknownNameError
from cotenant.perf import mps, published

FloatArray = npt.NDArray[np.float64]
SOURCES = ("tally", "h200")
STATISTICS = ("mean", "min", "max")
_STAT: dict[str, Callable[[list[float]], float]] = {
    "mean": lambda v: float(np.mean(v)), "min": min, "max": max}
_STRETCH = {"mps": "mps_residual", "time-slicing": "ts_stretch", "priority": "priority_stretch"}


@dataclass(frozen=True)
class Interference:
    """Per offline job profile, each mechanism's online stretch and offline cost."""

    source: str
    statistic: str
    ts_stretch: FloatArray
    ts_cost: FloatArray
    mps_residual: FloatArray
    priority_stretch: FloatArray
    priority_cost: FloatArray

    def stretch(self, mechanism: str) -> FloatArray:
        """Per offline job profile, the online batch-time stretch a running co-runner causes
        under ``mechanism`` (``mps``, ``time-slicing`` or ``priority``, the values of
        :class:`cotenant.policies.colocation.Mechanism`); ones for any other (none shares)."""
        name = _STRETCH.get(str(mechanism))
        if name is None:
            return np.ones(len(self.mps_residual))
        return np.asarray(getattr(self, name), dtype=np.float64)

    def predicted_stretch(self, mechanism: str) -> float:
        """What a policy can know of a pair's stretch before it runs: the mean over the
        profiles (it is not told which job will interfere how). The simulator's policies and
        the node agent both see this."""
        return float(np.mean(self.stretch(mechanism)))

    def summary(self) -> dict[str, object]:
        """Each parameter's mean over the profiles, for reports."""
        return {"source": self.source, "statistic": self.statistic,
                **{k: round(float(np.mean(getattr(self, k))), 3) for k in
                   ("ts_stretch", "ts_cost", "mps_residual", "priority_stretch",
                    "priority_cost")}}


def stretch_from_p99_ratio(ratio: float, load: float = mps.TALLY_HP_LOAD) -> float:
    """The batch-time stretch whose p99 at duty ``load`` is ``ratio`` times the p99 alone
    (:func:`cotenant.perf.mps.p99_ms`); 1 for a ratio at or below 1."""
    one = np.ones(1)
    solo = float(mps.p99_ms(np.array([load]), one, 0.0, 1.0)[0])
    if ratio <= 1.0:
        return 1.0

    def excess(stretch: float) -> float:
        return float(mps.p99_ms(np.array([load]), one, 0.0, 1.0, stretch)[0]) / solo - ratio

    return float(brentq(excess, 1.0, (1.0 - 1e-9) / load))


def _per_job(column: str, statistic: str, table: str = "p99") -> FloatArray:
    """The statistic over Tally's servers of one column, per training job (file order)."""
    pairs = published.tally_pairs()
    out = []
    for job in (j.name for j in published.tally_jobs() if j.kind == "training"):
        rows = [p for p in pairs if p.be_job == job]
        values = [p.hp_p99_ratio[column] if table == "p99" else p.be_norm_tput[column]
                  for p in rows]
        out.append(float(_STAT[statistic](values)))
    return np.asarray(out, dtype=np.float64)


HALF_SHARE_SPEED = float(np.median([float(mps.speed(0.5, a)) for a in mps.ONLINE_SERIAL]))
"""An online service's speed at half the SMs, median over the MIGER models (about 0.63)."""


def _tally(statistic: str) -> Interference:
    load = mps.TALLY_HP_LOAD
    stretch = {m: np.array([stretch_from_p99_ratio(r) for r in _per_job(m, statistic)])
               for m in ("time_slicing", "mps_priority", "tally")}
    cost = {m: (1.0 - _per_job(m, statistic, "tput")) / load
            for m in ("time_slicing", "tally")}
    return Interference(
        "tally", statistic, stretch["time_slicing"], cost["time_slicing"],
        np.maximum(1.0, stretch["mps_priority"] * HALF_SHARE_SPEED),
        stretch["tally"], cost["tally"],
    )


@cache
def h200_rows() -> dict[str, dict[str, float]]:
    """``perf/data/h200_colocation.csv`` by mechanism (empty cells are NaN)."""
    name = "h200_colocation.csv"
    return {
        row["mechanism"]: {
            k: published.number(name, line, row, k) if row[k] else float("nan")
            for k in ("online_share_pct", "service_ms", "p50_ms", "p99_ms", "offline_norm_tput")
        }
        for line, row in published.table(name)
    }


H200_LOAD = 0.45
"""The online duty of the H200 rows."""
RESNET50_TRAIN = next(i for i, j in enumerate(
    j for j in published.tally_jobs() if j.kind == "training") if "resnet50" in j.name)


def _h200(statistic: str) -> Interference:
    rows, tally = h200_rows(), _tally(statistic)
    ts = rows["time-slicing"]["service_ms"] / rows["solo"]["service_ms"]
    residual = float(_STAT[statistic]([
        rows[f"mps-{p}"]["service_ms"] / rows[f"mps-cap-{p}"]["service_ms"] for p in (50, 70)]))
    cost = (1.0 - rows["time-slicing"]["offline_norm_tput"]) / H200_LOAD
    ref = RESNET50_TRAIN
    return Interference(
        "h200", statistic,
        ts_stretch=np.maximum(1.0, ts * tally.ts_stretch / tally.ts_stretch[ref]),
        ts_cost=cost * tally.ts_cost / tally.ts_cost[ref],
        mps_residual=np.maximum(1.0, residual * _mps_stretch(statistic)
                                / _mps_stretch(statistic)[ref]),
        priority_stretch=tally.priority_stretch, priority_cost=tally.priority_cost,
    )


def _mps_stretch(statistic: str) -> FloatArray:
    return np.array([stretch_from_p99_ratio(r) for r in _per_job("mps_priority", statistic)])


@cache
def interference(source: str = "tally", statistic: str = "mean") -> Interference:
    """The calibration from ``source`` with ``statistic`` (see the module docstring)."""
    if source not in SOURCES:
        raise UnknownNameError("interference source", source, SOURCES)
    if statistic not in STATISTICS:
        raise UnknownNameError("interference statistic", statistic, STATISTICS)
    return _tally(statistic) if source == "tally" else _h200(statistic)
