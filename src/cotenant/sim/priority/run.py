"""One HP/BE pair under one scheduler: HP latency overhead against HP alone, BE throughput
against BE alone.

HP alone is the same request stream with no BE: each request takes its kernels and launch
gaps, queued first come first served (Lindley's recursion, which the engine reproduces
with no co-runner). BE alone runs its iterations back to back over the same span of time
from the same start; BE's normalised throughput is its useful kernel work beside HP over its
work alone (the same window, so a run shorter than an iteration is not misread). Work a
REEF reset throws away does not count.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from cotenant.errors import InputError, UnknownNameError
from cotenant.perf.kernels import DEFAULT_MAX_KERNELS, FloatArray, Units, kernel_profile
from cotenant.policies.priority import Scheduler
from cotenant.sim.priority.engine import Engine
from cotenant.sim.priority.stream import BeStream

ARRIVALS = ("periodic", "poisson")


@dataclass(frozen=True)
class Pair:
    """An HP job and a BE job, as Tally job names (or unique prefixes), or HP/BE kernels."""

    hp: str
    be: str | None
    load: float = 0.5
    """HP arrival rate as a share of its single-stream capacity (Tally's 0.5)."""
    requests: int = 200
    arrivals: str = "periodic"
    max_kernels: int = DEFAULT_MAX_KERNELS

    def __post_init__(self) -> None:
        if not (0.0 < self.load < 1.0):
            raise InputError("load", f"{self.load:g} must be in (0, 1)")
        if self.requests < 1:
            raise InputError("requests", f"{self.requests} must be >= 1")
        if self.arrivals not in ARRIVALS:
            raise UnknownNameError("arrival process", self.arrivals, ARRIVALS)


@dataclass(frozen=True)
class PairResult:
    scheduler: str
    hp: str
    be: str | None
    p99_alone_ms: float
    mean_alone_ms: float
    p99_ms: float
    mean_ms: float
    be_norm_tput: float
    hp_max_stall_us: float
    be_lost_share: float

    @property
    def p99_ratio(self) -> float:
        return self.p99_ms / self.p99_alone_ms

    @property
    def mean_ratio(self) -> float:
        return self.mean_ms / self.mean_alone_ms

    def as_dict(self) -> dict[str, object]:
        return {"scheduler": self.scheduler, "hp": self.hp, "be": self.be,
                "p99_alone_ms": round(self.p99_alone_ms, 4),
                "mean_alone_ms": round(self.mean_alone_ms, 4),
                "p99_ms": round(self.p99_ms, 4), "mean_ms": round(self.mean_ms, 4),
                "p99_overhead_pct": round(100 * (self.p99_ratio - 1), 2),
                "mean_overhead_pct": round(100 * (self.mean_ratio - 1), 2),
                "be_norm_tput": round(self.be_norm_tput, 4),
                "hp_max_stall_us": round(self.hp_max_stall_us, 2),
                "be_lost_share": round(self.be_lost_share, 4)}


def arrivals(n: int, interval_us: float, kind: str, rng: np.random.Generator) -> FloatArray:
    """``n`` arrival times: evenly spaced from a random phase, or a Poisson process."""
    if kind == "periodic":
        return np.asarray((np.arange(n) + rng.random()) * interval_us, dtype=np.float64)
    return np.asarray(np.cumsum(rng.exponential(interval_us, size=n)), dtype=np.float64)


def alone_latency_us(arrivals_us: FloatArray, service_us: float) -> FloatArray:
    """First-come first-served latencies of fixed-length requests (Lindley)."""
    out, free = np.empty(len(arrivals_us)), -math.inf
    for i, a in enumerate(arrivals_us):
        free = max(free, float(a)) + service_us
        out[i] = free - a
    return out


def run_pair(scheduler: Scheduler, pair: Pair, seed: int = 0, *,
             hp_units: Units | None = None, be_units: Units | None = None) -> PairResult:
    """Run ``pair`` under ``scheduler`` (the same draws for every scheduler at one seed)."""
    hp_rng, be_rng, arr_rng, gpu_rng = (np.random.default_rng(s) for s in
                                        np.random.SeedSequence(seed).spawn(4))
    hp_prof = kernel_profile(pair.hp)
    hp = hp_units or hp_prof.sample(hp_rng, pair.max_kernels)
    arr = arrivals(pair.requests, hp.length_us / pair.load, pair.arrivals, arr_rng)
    stream, alone_work = None, 0.0
    if pair.be is not None:
        be_prof = kernel_profile(pair.be)
        units = be_units or be_prof.sample(be_rng, max_kernels=10**9)
        stream = BeStream(units, be_prof.sms, be_prof.orion.waves)
    result = Engine(scheduler, hp, hp_prof.sms, stream, arr, gpu_rng).run()
    if stream is not None:
        solo = BeStream(stream.units, stream.sms, stream.waves)
        solo.run_alone(0.0, result.end_us, running=False)
        alone_work = solo.work_us
    alone = alone_latency_us(arr, hp.length_us)
    work = result.be_work_us
    return PairResult(
        scheduler.name, hp_prof.job, kernel_profile(pair.be).job if pair.be else None,
        float(np.percentile(alone, 99)) / 1e3, float(alone.mean()) / 1e3,
        float(np.percentile(result.latency_us, 99)) / 1e3,
        float(result.latency_us.mean()) / 1e3,
        work / alone_work if alone_work > 0 else 0.0,
        result.hp_wait_us,
        result.be_lost_us / (work + result.be_lost_us) if work + result.be_lost_us > 0 else 0.0,
    )
