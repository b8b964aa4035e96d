"""Interval-stepped simulation of online/offline co-location over all online GPUs at once.

Each interval (the load series' step, 1 minute for the GenAI trace) every GPU's state is a
slot in numpy arrays: online load, online SM share, offline job, its progress and memory.
Per interval, in order:

0. with ``admit_history``, admission is re-read from the load before this interval, and an
   offline job on a GPU that lost it is evicted (requeued, progress kept);
1. free GPUs (no offline job, not quarantined, admitted by the policy's ``max_peak_load``;
   for MuxFlow also with room at the observed load) are matched with the jobs that have
   arrived (:mod:`cotenant.policies.colocation.matching`), a job fitting the GPU's memory
   less the online *peak* under a hard memory limit (MuxFlow), else the memory free in the
   previous interval (in the first interval, the memory free then);
2. shares are decided on the load *observed in the previous interval* (a new pair starts at
   the needed share; the first interval, which has no previous one, is decided on its own);
3. the interval runs at the *current* load: online p99 (``cotenant.perf.mps``) with the true
   interference of the pair (the MPS residual factor scaled by the offline job's memory
   traffic, Tally's ``mem-util``), SLO violations, utilisation, SM activity, memory, offline
   progress;
4. faults are drawn per co-located GPU from the injected Generator and handled as the policy
   says (``sim.colocation_faults``); under MuxFlow the online service is served throughout;
   MuxFlow's compute guard watches the online p99 within the interval: above
   ``guard_threshold * SLO`` it throttles (raises the online share to what the current load
   needs), or evicts the offline job if that share is above ``evict_above``. It reacts within
   ``guard_reaction_s`` (an assumption, 0.5 s): when that is under 1% of the interval the
   interval's p99 (and its violation) is the one after the action, else the one before;
5. an offline process is down for ``ColocationConfig.offline_start_s`` when it is placed,
   and for ``share_change_s`` on every change of its MPS share in force (the dynamic share
   or a guard throttle: MPS reads a client's share only when it creates its context, so the
   job is restarted; a policy change and a throttle in one interval are two restarts); its
   progress and busy time in the interval shrink by that time (carried over when it is
   longer than an interval); a job whose work runs out within the interval runs, and is
   credited, only until it does;
6. without a memory limit, a GPU whose online memory (``ColocationWorkload.online_memory_at``)
   plus its offline job's exceeds the GPU is out of memory: the online service's allocation
   fails and it serves nothing that interval (an SLO violation, counted in ``online_ooms``);
   nothing frees the offline job's memory, so it goes on running.

A service that serves nothing (out of memory, or down with its MPS server) runs no kernel, so
it adds no utilisation; an offline job that crashes or loses its progress in an interval did
run kernels in it, so its busy time counts. A crashed job waits ``policy.restart_delay``
intervals after the next one (0 without backoff). Mean JCT is over each policy's own finished
jobs, so policies that finish different jobs are compared over different sets.

Metrics: GPU utilisation as nvidia-smi reports it (share of time any kernel runs) is
``1 - (1 - online busy) (1 - offline busy)``, online busy being its load over its speed at its
share and offline busy the job's solo utilisation (Tally) while it runs; SM activity weighs
each side's busy time by its SM share (time slicing: by the whole GPU). Offline progress is
``offline_speed(1 - share)`` under MPS and ``ts_offline_speed(load)`` under time slicing (the
online idle time times Tally's BE efficiency), both in whole-GPU seconds per second; a
time-sliced online service's p99 is ``ts_p99_ms`` (batches stretched by ``TS_STRETCH``).

Everything random comes from one ``numpy.random.Generator`` seeded by the caller, so a seeded
run is reproducible bit for bit.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from functools import partial

import numpy as np
import numpy.typing as npt

from cotenant.perf import mps
from cotenant.perf.predictor import PairPredictor, default_predictor
from cotenant.policies.colocation import COLOCATION, ColocationPolicy, Matching, Sharing
from cotenant.policies.colocation.matching import match_max_weight
from cotenant.sim.colocation_faults import FAULTS, handle_faults
from cotenant.sim.colocation_predict import pair_weights
from cotenant.sim.colocation_queue import JobQueue
from cotenant.sim.colocation_records import (
    DEFAULT_CONFIG,
    ColocationConfig,
    ColocationRun,
    IntervalState,
)
from cotenant.sim.colocation_workload import ColocationWorkload

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
_MEM_UTIL = np.asarray(mps.TRAINING_MEM_UTIL)
_OFF_UTIL = np.asarray(mps.TRAINING_GPU_UTIL)


P99_TAIL = 0.01
"""The share of an interval's requests above its p99: a guard slower than this share of the
interval leaves the interval's p99 at the level before it acted."""


def guard_in_time(reaction_s: float, interval_s: float) -> bool:
    """Whether a guard acting ``reaction_s`` after a p99 rise saves the interval's p99."""
    return reaction_s / interval_s < P99_TAIL


def _uniform(gpus: IntArray, jobs: IntArray) -> FloatArray:
    """Equal weights: the baselines take any memory-feasible pairing (maximum cardinality)."""
    return np.ones((len(gpus), len(jobs)))


def run_colocation(
    work: ColocationWorkload,
    policy: ColocationPolicy | str,
    seed: int,
    config: ColocationConfig = DEFAULT_CONFIG,
    predictor: PairPredictor | None = None,
    on_interval: Callable[[IntervalState], None] | None = None,
) -> ColocationRun:
    """Simulate ``work`` under ``policy``; all randomness from ``default_rng(seed)``."""
    pol = COLOCATION.create(policy) if isinstance(policy, str) else policy
    chosen = predictor if predictor is not None else default_predictor()
    rng = np.random.default_rng(seed)
    n, steps = work.gpus, work.intervals
    room_peak = work.gpu_memory_mib - work.online_memory_mib
    seen_mem = work.online_memory_at(0)
    serial, l100 = mps.ONLINE_SERIAL[work.model], mps.ONLINE_L100[work.model]
    share = np.full(n, 100, dtype=np.int64)
    job_on = np.full(n, -1, dtype=np.int64)
    quarantine = np.zeros(n, dtype=np.int64)
    remaining = work.job_work_s.copy()
    ready = work.job_arrival.copy()
    failures = np.zeros(work.jobs, dtype=np.int64)
    finish = np.full(work.jobs, -1, dtype=np.int64)
    queue = JobQueue(work.job_memory_mib, ready)
    out = {k: np.zeros(steps) for k in ("util", "sm", "mem", "viol", "ratio", "oom", "tput")}
    running = np.zeros(steps, dtype=np.int64)
    served = np.zeros(steps, dtype=np.int64)
    faults: Counter[str] = Counter()
    throttles = evictions = ooms = starts = restarts = 0
    starting = np.zeros(n)  # seconds the offline process on each GPU still needs to start
    prev_load = work.load[work.series, 0]
    history = (work.admitted_from_history(pol.admit_quantile, pol.max_peak_load)
               if pol.admit_history else None)
    admitted = work.load_quantile(pol.admit_quantile) <= pol.max_peak_load
    for t in range(steps):
        if history is not None:  # admission from the load before t; a lost one evicts
            admitted = history[work.series, t]
            revoked = np.flatnonzero((job_on >= 0) & ~admitted)
            if len(revoked):
                back = job_on[revoked]
                ready[back] = t
                queue.put_back(back[remaining[back] > 0.0])
                job_on[revoked], share[revoked], starting[revoked] = -1, 100, 0.0
                evictions += len(revoked)
        load = work.load[work.series, t]
        on_mem = work.online_memory_at(t)
        room = room_peak if pol.memory_limit else work.gpu_memory_mib - seen_mem
        before, kept = share.copy(), job_on >= 0
        if pol.shares_gpus:
            gpus = np.flatnonzero((job_on < 0) & (quarantine <= t) & admitted)
            if pol.guard:  # not where the guard would evict at once
                need = (
                    pol.share.needed(work.model[gpus], prev_load[gpus], work.slo_ms[gpus])
                    if pol.share is not None else share[gpus]
                )
                gpus = gpus[need <= pol.evict_above]
            if len(gpus):
                weights = (
                    partial(pair_weights, work, prev_load, predictor=chosen)
                    if pol.matching is Matching.MAX_WEIGHT else _uniform
                )
                mg, mj, unused = match_max_weight(
                    gpus, room, work.job_memory_mib, partial(queue.take, t=t), weights,
                    block=config.block, slack=config.slack,
                )
                queue.put_back(unused)
                job_on[mg] = mj
                starting[mg] = config.offline_start_s
                starts += len(mg)
        has = job_on >= 0
        prof = work.job_profile[np.maximum(job_on, 0)] if work.jobs else np.zeros(n, np.int64)
        inter = np.where(
            has & (pol.sharing is Sharing.MPS),
            1.0 + (mps.MPS_LIMITED_INTERFERENCE - 1.0) * _MEM_UTIL[prof] / _MEM_UTIL.mean(),
            1.0,
        )
        if pol.sharing is Sharing.MPS and pol.share is not None:
            # a pair's share is sized with its own interference, as the guard sizes a throttle;
            # a new pair starts at its need, a kept one moves by the policy's hysteresis
            idx = np.flatnonzero(has)
            need_pair = pol.share.needed(
                work.model[idx], prev_load[idx], work.slo_ms[idx], inter[idx]
            )
            current = np.where(kept[idx], share[idx], np.minimum(need_pair, 100))
            share = np.full(n, 100, dtype=np.int64)
            share[idx] = pol.share.hold(need_pair, current)
        decided = share.copy()  # the share policy's decision, before the guard acts
        p99 = mps.p99_ms(load, share / 100.0, serial, l100, inter)
        over = p99 > work.slo_ms
        evict = np.zeros(n, dtype=bool)
        if pol.guard:
            # the guard sees the p99 rise within seconds: throttle, or evict past evict_above
            risk = has & (p99 > pol.guard_threshold * work.slo_ms)
            need = np.zeros(n, dtype=np.int64)
            r = np.flatnonzero(risk)
            need[r] = mps.min_share(
                load[r], pol.guard_threshold * work.slo_ms[r], serial[r], l100[r], inter[r]
            )
            evict = risk & (need > pol.evict_above)
            throttle = risk & ~evict
            throttles += int(throttle.sum())
            evictions += int(evict.sum())
            share = np.where(throttle, need, share).astype(np.int64)
            share[evict] = 100
            inter = np.where(evict, 1.0, inter)
            after = mps.p99_ms(load, share / 100.0, serial, l100, inter)
            # the interval misses its p99 only if the late reaction alone spoils 1% of it
            if guard_in_time(pol.guard_reaction_s, work.interval_s):
                over = np.where(risk, after > work.slo_ms, over)
                p99 = np.where(risk, after, p99)  # a late guard leaves the p99 it found
        on = has & ~evict
        # MPS fixes a client's share when it starts: a new share is a restart of the client,
        # once for the share policy's change and once more for a guard throttle after it
        mps_kept = kept & on & (pol.sharing is Sharing.MPS)
        moved = (mps_kept & (decided != before)).astype(np.int64) + (
            mps_kept & (share != decided)
        )
        restarts += int(moved.sum())
        starting = np.where(
            moved > 0, np.maximum(starting, config.share_change_s * moved), starting
        )
        up = 1.0 - np.minimum(starting, work.interval_s) / work.interval_s
        p = share / 100.0
        if pol.sharing is Sharing.TIME_SLICING:
            p99 = np.where(on, mps.ts_p99_ms(load, serial, l100), p99)
            over = p99 > work.slo_ms
            speed = np.where(on, mps.ts_offline_speed(load), 0.0)
            on_busy = np.minimum(load, 1.0)
        else:
            speed = np.where(on, mps.offline_speed(1.0 - p), 0.0)
            on_busy = mps.busy_fraction(load, p, serial)
        # the share of the interval the offline job runs: not while it starts, and not after
        # it finishes (its last interval is cut where its work runs out)
        left = remaining[np.maximum(job_on, 0)] if work.jobs else np.zeros(n)
        full = speed * up * work.interval_s
        finishing = on & (full > 0.0) & (left <= full * (1.0 + 1e-9))  # rounding: not 1 ulp
        run = np.where(finishing, np.minimum(up, up * left / np.where(full > 0.0, full, 1.0)), up)
        rate = speed * run
        job_mem = work.job_memory_mib[job_on] if work.jobs else np.zeros(n)
        used = on_mem + np.where(on, job_mem, 0.0)
        oom = used > work.gpu_memory_mib  # never under a memory limit (tests hold it to 0)
        ooms += int(oom.sum())
        out["oom"][t] = np.mean(oom)
        used = np.minimum(used, work.gpu_memory_mib)
        out["mem"][t] = float(used.sum() / work.gpu_memory_mib.sum())
        # faults: outcome per GPU, progress lost where the job died without a checkpoint
        result = handle_faults(pol, rng, config.faults, on, t, job_on, failures, ready)
        for key, count in result.counts.items():
            faults[key] += count
        down = result.online_down | oom
        over = over | down
        # utilisation as nvidia-smi shows it: a service that serves nothing runs no kernel
        on_busy = np.where(down, 0.0, on_busy)
        off_busy = np.where(on & (speed > 0), _OFF_UTIL[prof] * run, 0.0)
        out["util"][t] = np.mean(1.0 - (1.0 - on_busy) * (1.0 - off_busy))
        if pol.sharing is Sharing.TIME_SLICING:
            sm = on_busy + (1.0 - on_busy) * off_busy
        else:
            sm = on_busy * p + off_busy * (1.0 - p)
        out["sm"][t] = np.mean(np.minimum(sm, 1.0))
        out["viol"][t] = np.mean(over)
        out["ratio"][t] = np.median(np.where(down, 10.0, np.minimum(p99 / work.slo_ms, 10.0)))
        rate = np.where(result.lost, 0.0, rate)
        out["tput"][t] = float(rate.sum() / n)
        running[t] = int(on.sum())
        served[t] = n - int(down.sum())
        idx = np.flatnonzero(on)
        remaining[job_on[idx]] -= rate[idx] * work.interval_s
        done = np.flatnonzero(finishing & ~result.lost)
        remaining[job_on[done]] = 0.0
        finish[job_on[done]] = t + 1
        quarantine = np.where(result.quarantine, t + 1 + pol.quarantine, quarantine)
        ready[job_on[evict]] = t + 1
        stopped = result.stopped | evict
        back = job_on[stopped & has]
        queue.put_back(back[remaining[back] > 0.0])
        job_on[stopped] = -1
        job_on[done] = -1
        share = np.where(job_on >= 0, share, 100).astype(np.int64)
        starting = np.where(job_on >= 0, np.maximum(starting - work.interval_s, 0.0), 0.0)
        lo = max(0, t + 1 - pol.load_window)
        prev_load = work.load[work.series, lo:t + 1].max(axis=1)
        seen_mem = on_mem
        if on_interval is not None:
            on_interval(IntervalState(t, share.copy(), job_on.copy(), used, served[t]))
    ended = finish >= 0
    wait = np.where(ended, (finish - work.job_arrival) * work.interval_s / 60.0, np.nan)
    jct = float(wait[ended].mean()) if ended.any() else float("nan")
    for name in FAULTS:
        faults.setdefault(f"{name}:injected", 0)
    return ColocationRun(
        policy=pol.name, seed=seed, interval_s=work.interval_s, utilisation=out["util"],
        sm_activity=out["sm"], memory_used=out["mem"], violation_rate=out["viol"],
        p99_over_slo=out["ratio"], oom_rate=out["oom"], offline_throughput=out["tput"],
        running=running,
        online_served=served, gpus=n, jobs_completed=int(ended.sum()), jct_mean_min=jct,
        throttles=throttles, evictions=evictions, faults=dict(faults), online_ooms=ooms,
        offline_starts=starts, share_changes=restarts, job_wait_min=wait,
    )
