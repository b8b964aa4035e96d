"""Interval-stepped simulation of online/offline co-location over all online GPUs at once.

Each interval (the load series' step, 1 minute for the GenAI trace) every GPU's state is a
slot in numpy arrays: online load, online SM share, offline job, its progress and memory.
Per interval, in order:

1. free GPUs (no offline job, not quarantined; for MuxFlow also with room at the observed
   load) are matched with pending jobs (:mod:`cotenant.policies.colocation.matching`);
2. shares are decided on the load *observed in the previous interval* (a new pair starts at
   the needed share); a guard floor set in the previous interval is applied;
3. the interval runs at the *current* load: online p99 (``cotenant.perf.mps``) with the true
   interference of the pair (the MPS residual factor scaled by the offline job's memory
   traffic, Tally's ``mem-util``), SLO violations, utilisation, SM activity, memory, offline
   progress;
4. faults are drawn per co-located GPU from the injected Generator and handled as the policy
   says; the online service is brought back first in every case, so it is served throughout;
5. MuxFlow's compute guard looks at the p99 just measured: above ``guard_threshold * SLO`` it
   throttles (a share floor for the next interval), or evicts if the needed share is above
   ``evict_above``.

Everything random comes from one ``numpy.random.Generator`` seeded by the caller, so a seeded
run is reproducible bit for bit.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from cotenant.perf import mps
from cotenant.policies.colocation import COLOCATION, ColocationPolicy, Matching, Sharing
from cotenant.policies.colocation.matching import match_max_weight
from cotenant.sim.colocation_faults import FAULTS, FaultRates, handle_faults
from cotenant.sim.colocation_predict import PairPredictor, pair_weights
from cotenant.sim.colocation_workload import ColocationWorkload

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
_MEM_UTIL = np.asarray(mps.TRAINING_MEM_UTIL)
_OFF_UTIL = np.asarray(mps.TRAINING_GPU_UTIL)
_TS_OFFLINE_EFFICIENCY = mps.BE_NORMALISED_TPUT["time-slicing"] / 0.5  # Tally, HP load 0.5


def _uniform(gpus: IntArray, jobs: IntArray) -> FloatArray:
    """Equal weights: the baselines take any memory-feasible pairing (maximum cardinality)."""
    return np.ones((len(gpus), len(jobs)))


@dataclass(frozen=True)
class ColocationRun:
    """Metrics over time (one value per interval) and totals of one policy's run."""

    policy: str
    seed: int
    interval_s: int
    utilisation: FloatArray
    sm_activity: FloatArray
    memory_used: FloatArray
    violation_rate: FloatArray
    p99_over_slo: FloatArray
    offline_throughput: FloatArray
    running: IntArray
    online_served: IntArray
    gpus: int
    jobs_completed: int
    jct_mean_min: float
    throttles: int
    evictions: int
    faults: dict[str, int]

    def summary(self) -> dict[str, object]:
        """Totals and means over the run, JSON-ready."""
        return {
            "policy": self.policy,
            "seed": self.seed,
            "gpus": self.gpus,
            "utilisation_pct": round(100 * float(self.utilisation.mean()), 2),
            "sm_activity_pct": round(100 * float(self.sm_activity.mean()), 2),
            "memory_used_pct": round(100 * float(self.memory_used.mean()), 2),
            "slo_violation_pct": round(100 * float(self.violation_rate.mean()), 3),
            "offline_throughput": round(float(self.offline_throughput.mean()), 4),
            "jobs_completed": self.jobs_completed,
            "jct_mean_min": round(self.jct_mean_min, 1),
            "throttles": self.throttles,
            "evictions": self.evictions,
            "faults": dict(sorted(self.faults.items())),
        }


@dataclass(frozen=True)
class ColocationConfig:
    faults: FaultRates = FaultRates()
    block: int = 256
    slack: int = 64


def run_colocation(
    work: ColocationWorkload,
    policy: ColocationPolicy | str,
    seed: int,
    config: ColocationConfig = ColocationConfig(),
    predictor: PairPredictor | None = None,
    on_interval: Callable[[int], None] | None = None,
) -> ColocationRun:
    """Simulate ``work`` under ``policy``; all randomness from ``default_rng(seed)``."""
    pol = COLOCATION.create(policy) if isinstance(policy, str) else policy
    rng = np.random.default_rng(seed)
    n, steps = work.gpus, work.intervals
    room = work.gpu_memory_mib - work.online_memory_mib
    serial, l100 = mps.ONLINE_SERIAL[work.model], mps.ONLINE_L100[work.model]
    share = np.full(n, 100, dtype=np.int64)
    floor = np.zeros(n, dtype=np.int64)
    job_on = np.full(n, -1, dtype=np.int64)
    quarantine = np.zeros(n, dtype=np.int64)
    remaining = work.job_work_s.copy()
    ready = np.zeros(work.jobs, dtype=np.int64)
    failures = np.zeros(work.jobs, dtype=np.int64)
    finish = np.full(work.jobs, -1, dtype=np.int64)
    requeue = np.empty(0, dtype=np.int64)
    head = 0
    out = {k: np.zeros(steps) for k in ("util", "sm", "mem", "viol", "ratio", "tput")}
    running = np.zeros(steps, dtype=np.int64)
    served = np.zeros(steps, dtype=np.int64)
    faults: Counter[str] = Counter()
    throttles = evictions = 0
    prev_load = work.load[work.series, 0]
    for t in range(steps):
        load = work.load[work.series, t]
        if pol.shares_gpus:
            free = (job_on < 0) & (quarantine <= t)
            if pol.share is not None and pol.guard:
                need_obs = pol.share.needed(work.model, prev_load, work.slo_ms)
                free &= need_obs <= pol.evict_above
            gpus = np.flatnonzero(free)
            if len(gpus):
                want = len(gpus) + config.slack
                eligible = requeue[ready[requeue] <= t][: max(1, want // 2)]
                k = max(0, min(want - len(eligible), work.jobs - head))
                fresh = np.arange(head, head + k, dtype=np.int64)
                head += k
                cand = np.concatenate([eligible, fresh])
                if pol.matching is Matching.MAX_WEIGHT:
                    mg, mj = match_max_weight(
                        gpus, room, cand, work.job_memory_mib,
                        lambda g, j: pair_weights(work, prev_load, g, j, predictor),
                        block=config.block,
                    )
                else:
                    mg, mj = match_max_weight(
                        gpus, room, cand, work.job_memory_mib, _uniform, block=config.block
                    )
                job_on[mg] = mj
                requeue = np.setdiff1d(np.concatenate([requeue, fresh]), mj, assume_unique=True)
                requeue = requeue[np.argsort(requeue, kind="stable")]
                if pol.share is not None:
                    start = np.minimum(
                        pol.share.needed(work.model[mg], prev_load[mg], work.slo_ms[mg]), 100
                    )
                    share[mg] = start
        has = job_on >= 0
        prof = work.job_profile[np.maximum(job_on, 0)] if work.jobs else np.zeros(n, np.int64)
        job_mem = work.job_memory_mib[job_on] if work.jobs else np.zeros(n)
        if pol.sharing is Sharing.MPS and pol.share is not None:
            decided = pol.share.shares(work.model, prev_load, work.slo_ms, share)
            share = np.where(has, np.maximum(decided, floor), 100).astype(np.int64)
        floor[:] = 0
        p = share / 100.0
        inter = np.where(
            has & (pol.sharing is Sharing.MPS),
            1.0 + (mps.MPS_LIMITED_INTERFERENCE - 1.0) * _MEM_UTIL[prof] / _MEM_UTIL.mean(),
            1.0,
        )
        p99 = mps.p99_ms(load, p, serial, l100, inter)
        if pol.sharing is Sharing.TIME_SLICING:
            p99 = np.where(has, p99 * mps.P99_RATIO["time-slicing"], p99)
            rate = np.where(has, np.clip(_TS_OFFLINE_EFFICIENCY * (1.0 - load), 0.0, 1.0), 0.0)
            on_busy = np.minimum(load, 1.0)
            sm = on_busy + (1.0 - on_busy) * np.where(has, _OFF_UTIL[prof], 0.0)
        else:
            rate = np.where(has, mps.offline_speed(1.0 - p), 0.0)
            on_busy = mps.busy_fraction(load, p, serial)
            sm = on_busy * p + np.where(has, _OFF_UTIL[prof] * (1.0 - p), 0.0)
        off_busy = np.where(has & (rate > 0), _OFF_UTIL[prof], 0.0)
        over = p99 > work.slo_ms
        out["util"][t] = np.mean(1.0 - (1.0 - on_busy) * (1.0 - off_busy))
        out["sm"][t] = np.mean(np.minimum(sm, 1.0))
        used = work.online_memory_mib + np.where(has, job_mem, 0.0)
        out["mem"][t] = float(used.sum() / work.gpu_memory_mib.sum())
        out["viol"][t] = np.mean(over)
        out["ratio"][t] = np.median(np.minimum(p99 / work.slo_ms, 10.0))
        # faults: outcome per GPU, progress lost where the job died without a checkpoint
        result = handle_faults(pol, rng, config.faults, has, t, job_on, failures, ready)
        for key, count in result.counts.items():
            faults[key] += count
        rate = np.where(result.lost, 0.0, rate)
        out["tput"][t] = float(rate.sum() / n)
        running[t] = int(has.sum())
        served[t] = n - int(result.online_down.sum())
        idx = np.flatnonzero(has)
        remaining[job_on[idx]] -= rate[idx] * work.interval_s
        done = idx[remaining[job_on[idx]] <= 0.0]
        finish[job_on[done]] = t + 1
        stopped = result.stopped
        quarantine = np.where(result.quarantine, t + 1 + pol.quarantine, quarantine)
        if pol.guard and pol.share is not None:
            risk = has & ~stopped & (p99 > pol.guard_threshold * work.slo_ms)
            risk[done] = False
            need = mps.min_share(load, pol.guard_threshold * work.slo_ms, serial, l100, inter)
            evict = risk & (need > pol.evict_above)
            throttle = risk & ~evict
            floor = np.where(throttle, need, 0).astype(np.int64)
            throttles += int(throttle.sum())
            evictions += int(evict.sum())
            ready[job_on[evict]] = t + 1
            stopped = stopped | evict
        back = job_on[stopped & has]
        requeue = np.union1d(requeue, back[remaining[back] > 0.0])
        job_on[stopped] = -1
        job_on[done] = -1
        share = np.where(job_on >= 0, share, 100).astype(np.int64)
        prev_load = load
        if on_interval is not None:
            on_interval(t)
    ended = finish >= 0
    jct = float((finish[ended] * work.interval_s / 60.0).mean()) if ended.any() else 0.0
    for name in FAULTS:
        faults.setdefault(f"{name}:injected", 0)
    return ColocationRun(
        policy=pol.name, seed=seed, interval_s=work.interval_s, utilisation=out["util"],
        sm_activity=out["sm"], memory_used=out["mem"], violation_rate=out["viol"],
        p99_over_slo=out["ratio"], offline_throughput=out["tput"], running=running,
        online_served=served, gpus=n, jobs_completed=int(ended.sum()), jct_mean_min=jct,
        throttles=throttles, evictions=evictions, faults=dict(faults),
    )
