"""Co-location simulated causally over all online GPUs at once, one function per phase.

Every GPU's state is a slot in numpy arrays. Each interval (the load series' step, a minute for
the GenAI trace):

1. **admit** (:func:`_admit`): the policy's admission, from the load seen *before* the
   interval; a job on a GPU that loses admission is evicted (requeued, progress kept);
2. **place** (:func:`_place`): free, admitted GPUs (not quarantined, not held by an eviction,
   and for a guarded policy not where the guard would evict at once) are paired with the jobs
   that have arrived (:mod:`cotenant.policies.colocation.matching`); a job must fit the
   memory left beside the online service's *peak* under a memory limit, else beside what it
   used in the last interval; its process is down for ``offline_start_s``;
3. **faults and memory** (:func:`_faults`): injected faults (:mod:`.faults`), and without a
   memory limit an online service out of memory where its current use and its co-runner's
   pass the GPU (it serves nothing that interval);
4. **sub-steps** (:func:`_substep`, ``workload.substeps`` per interval, the load inside the
   minute from :mod:`cotenant.traces.bursts`): the decision core
   (:meth:`ColocationPolicy.decide`) is called when the sub-step's first p99 report could
   exist: one report window after the load changed (:func:`report_window_s`: a slow service
   needs longer to collect its requests, and one too slow to fill a window by
   ``max_window_s`` is never reported). It sees the load as the node agent could read it
   (:mod:`.load_signal`: under MPS counted from the request rate), the peak of those readings
   over its load window, that report (the p99 of the state in force during the window), and
   a predicted stretch for the pair (the calibration's mean: it is not told the true one).
   Its actions land ``reaction_s`` later. Requests before that are served in the old state,
   after it in the new one; requests while the co-runner does not run (starting, paused,
   restarting, evicted) are served alone. A share change under MPS restarts the co-runner
   (down ``share_change_s``), a pause stops it for ``pause_s``. Late requests are counted per
   request; offline work, utilisation and SM activity per second of each state;
5. **close** (:func:`_close`): per GPU-minute misses, finished and stopped jobs, metrics.

So no decision reads a load, latency or memory that has not happened yet, and the guard's
reaction time enters the late requests in proportion. Everything random comes from the
workload (drawn once, the same for every policy) and from one ``default_rng(seed)`` that
draws one fault uniform per GPU per interval, also the same for every policy; a load
counted from requests draws from its own stream (:mod:`.load_signal`).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import numpy as np
import numpy.typing as npt

from cotenant.perf.interference import interference
from cotenant.perf.jobs import job_profiles
from cotenant.perf.predictor import PairPredictor, predictor_for
from cotenant.policies.colocation import COLOCATION, ColocationPolicy, Matching, Mechanism, need
from cotenant.policies.colocation.matching import match_max_weight
from cotenant.sim.colocation.faults import FAULTS, FaultResult, handle_faults
from cotenant.sim.colocation.load_signal import LoadSignal
from cotenant.sim.colocation.predict import pair_weights
from cotenant.sim.colocation.records import (
    DEFAULT_CONFIG,
    ColocationConfig,
    ColocationRun,
    IntervalState,
)
from cotenant.sim.colocation.state import (
    RunContext,
    RunState,
    Series,
    admitted,
    leave,
    new_state,
    seen_peak,
    start_share,
)
from cotenant.sim.colocation.substep import substep
from cotenant.sim.colocation.workload import ColocationWorkload
from cotenant.sim.colocation.world import Physics

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
_TALLY_COLUMN = {Mechanism.TIME_SLICING: "time_slicing", Mechanism.PRIORITY: "tally"}
"""The matching's predictor is trained on Tally's pairs under the policy's own mechanism."""


def run_colocation(
    work: ColocationWorkload,
    policy: ColocationPolicy | str,
    seed: int,
    config: ColocationConfig = DEFAULT_CONFIG,
    predictor: PairPredictor | None = None,
    on_interval: Callable[[IntervalState], None] | None = None,
) -> ColocationRun:
    """Simulate ``work`` under ``policy``; all randomness of the run from ``default_rng(seed)``."""
    pol = COLOCATION.create(policy) if isinstance(policy, str) else policy
    physics = Physics(pol.mechanism, interference(config.calibration, config.statistic),
                      job_profiles())
    n = work.gpus
    dt = work.interval_s / work.substeps
    ctx = RunContext(work, pol, physics, config, predictor or predictor_for(_TALLY_COLUMN.get(
        pol.mechanism, "mps")),
               physics.predicted_stretch(n), max(1, int(np.ceil(pol.load_window_s / dt))), dt,
               _admission(work, pol),
               LoadSignal.parse(config.load_signal).resolve(pol.mechanism))
    rng = np.random.default_rng(seed)
    st = new_state(ctx, seed)
    out = Series(work.intervals)
    for t in range(work.intervals):
        _admit(ctx, st, t)
        _place(ctx, st, t)
        result, down, mem = _faults(ctx, st, t, rng.random(n))
        for k in range(work.substeps):
            substep(ctx, st, t, k, down, result.lost)
        _close(ctx, st, t, result, down, mem, out)
        if on_interval is not None:
            on_interval(IntervalState(t, st.share.copy(), st.job_on.copy(), mem,
                                      int(out.served[t])))
    return _result(ctx, st, out, seed)


def _admit(ctx: RunContext, st: RunState, t: int) -> None:
    """Admission from the load before ``t``; a GPU that lost it loses its job."""
    adm = ctx.policy.admission
    if adm.admits_all or not ctx.policy.shares_gpus:
        return
    ok = admitted(ctx, t)
    revoked = np.flatnonzero((st.job_on >= 0) & ~ok)
    st.counts["evictions"] += len(revoked)
    leave(ctx, st, revoked, t * ctx.work.interval_s, True, t - 1)


def _admission(w: ColocationWorkload, pol: ColocationPolicy) -> npt.NDArray[np.bool_] | None:
    adm = pol.admission
    if adm.admits_all or not pol.shares_gpus:
        return None
    warm = max(1, int(np.ceil(adm.warmup_s / w.interval_s)))
    return w.admitted_from_history(adm.quantile, adm.max_load, warm)


def _place(ctx: RunContext, st: RunState, t: int) -> None:
    """Pair free, admitted GPUs with arrived jobs (the policy's matching)."""
    w, pol = ctx.work, ctx.policy
    if not pol.shares_gpus or w.jobs == 0:
        return
    now = t * w.interval_s
    free = (st.job_on < 0) & (st.quarantine_until <= now) & (st.core.held_until <= now)
    if not pol.admission.admits_all:
        free &= admitted(ctx, t)
    gpus = np.flatnonzero(free)
    if pol.guard is not None and len(gpus):  # not where the guard would evict at once
        peak = seen_peak(ctx, st)[gpus]
        at_once = need(pol.mechanism, w.model[gpus], peak,
                       pol.guard.threshold * w.slo_ms[gpus], ctx.predicted[gpus])
        gpus = gpus[at_once <= pol.guard.evict_above]
    if len(gpus) == 0:
        return
    room = (w.gpu_memory_mib - w.online_memory_mib if pol.memory_limit
            else w.gpu_memory_mib - st.seen_mem)
    weights = _weights(ctx, st)
    mg, mj, unused = match_max_weight(
        gpus, room, w.job_memory_mib, partial(st.queue.take, t=t), weights,
        block=ctx.config.block, slack=ctx.config.slack)
    st.queue.put_back(unused)
    st.job_on[mg] = mj
    st.share[mg] = start_share(pol)
    st.up_at[mg] = now + ctx.config.offline_start_s
    st.core = st.core.reset(mg, now)
    st.counts["offline_starts"] += len(mg)


def _weights(ctx: RunContext, st: RunState) -> Callable[[IntArray, IntArray], FloatArray]:
    """The matching's pair weights: predicted speed sums (MuxFlow), equal (queue order), or
    seeded noise (random pairing among those that fit)."""
    m = ctx.policy.matching
    if m is Matching.MAX_WEIGHT:
        load = seen_peak(ctx, st)
        return partial(pair_weights, ctx.work, load, predictor=ctx.predictor)
    if m is Matching.RANDOM:
        rng = np.random.default_rng(st.step)
        return lambda g, j: rng.random((len(g), len(j)))
    return lambda g, j: np.ones((len(g), len(j)))


def _faults(ctx: RunContext, st: RunState, t: int,
            draw: FloatArray) -> tuple[FaultResult, BoolArray, FloatArray]:
    """This interval's faults, and the online services down (an MPS failure without the
    online service first, or out of memory)."""
    w, pol = ctx.work, ctx.policy
    has = st.job_on >= 0
    result = handle_faults(pol, draw, ctx.config.faults, has, t, w.interval_s, st.job_on,
                           st.failures, st.ready)
    st.faults.update(result.counts)
    on_mem = w.online_memory_at(t)
    job_mem = np.where(has, w.job_memory_mib[np.maximum(st.job_on, 0)], 0.0) if w.jobs else 0.0
    used = on_mem + job_mem
    oom = used > w.gpu_memory_mib  # never under a memory limit (the tests hold it to 0)
    st.counts["online_oom_intervals"] += int(oom.sum())
    st.seen_mem = on_mem
    return result, result.online_down | oom, np.minimum(used, w.gpu_memory_mib)


def _close(ctx: RunContext, st: RunState, t: int, result: FaultResult, down: BoolArray,
           mem: FloatArray, out: Series) -> None:
    """Per-interval metrics; stopped jobs leave; the accumulators start afresh."""
    w, a = ctx.work, out.arrays
    span = float(w.interval_s)
    a["util"][t] = float(st.util.mean() / span)
    a["sm"][t] = float(st.sm.mean() / span)
    a["mem"][t] = float(mem.sum() / w.gpu_memory_mib.sum())
    a["req"][t] = float(st.req.sum())
    a["late"][t] = float(st.late.sum())
    a["minute"][t] = float(np.mean(down | (st.late > 0.01 * st.req)))
    a["oom"][t] = float(np.mean(down & ~result.online_down))
    a["tput"][t] = float(st.gain.sum() / span / st.n)
    out.running[t] = int(st.co.sum())
    out.served[t] = st.n - int(down.sum())
    stopped = np.flatnonzero(result.stopped & (st.job_on >= 0))
    gone = np.flatnonzero(result.given_up & (st.job_on >= 0))
    st.counts["jobs_given_up"] += len(gone)
    if len(gone):
        st.remaining[st.job_on[gone]] = -1.0  # never requeued
    st.quarantine_until = np.where(result.quarantine, (t + 1) * span
                                   + ctx.policy.recovery.quarantine_s, st.quarantine_until)
    leave(ctx, st, stopped, (t + 1) * span, True, t)
    for name in ("req", "late", "util", "sm", "gain"):
        setattr(st, name, np.zeros(st.n))
    st.done = np.zeros(st.n, dtype=np.bool_)
    st.co = np.zeros(st.n, dtype=np.bool_)


def _result(ctx: RunContext, st: RunState, out: Series, seed: int) -> ColocationRun:
    w = ctx.work
    arrival_s = w.job_arrival * w.interval_s
    ended = np.isfinite(st.finish_s)
    wait = np.where(ended, (st.finish_s - arrival_s) / 60.0, np.nan)
    jct = float(wait[ended].mean()) if ended.any() else float("nan")
    faults = dict(st.faults)
    for name in FAULTS:
        faults.setdefault(f"{name}:injected", 0)
    counts = {k: int(st.counts.get(k, 0)) for k in (
        "pauses", "throttles", "evictions", "share_changes", "offline_starts",
        "online_oom_intervals", "jobs_given_up")}
    a = out.arrays
    return ColocationRun(
        policy=ctx.policy.name, seed=seed, interval_s=w.interval_s, utilisation=a["util"],
        sm_activity=a["sm"], memory_used=a["mem"], requests=a["req"], late_requests=a["late"],
        minute_violation=a["minute"], oom_rate=a["oom"], offline_throughput=a["tput"],
        running=out.running, online_served=out.served, gpus=w.gpus,
        jobs_completed=int(ended.sum()), jct_mean_min=jct, counts=counts, faults=faults,
        job_wait_min=wait,
    )
