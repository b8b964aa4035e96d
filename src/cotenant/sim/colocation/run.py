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
   ``max_window_s`` is never reported). It sees the load measured over that window, the peak
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
draws one fault uniform per GPU per interval, also the same for every policy.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

import numpy as np
import numpy.typing as npt

from cotenant.perf import mps
from cotenant.perf.interference import interference
from cotenant.perf.jobs import job_profiles
from cotenant.perf.predictor import PairPredictor, predictor_for
from cotenant.policies.colocation import (
    COLOCATION,
    Actions,
    ColocationPolicy,
    GpuState,
    Matching,
    Mechanism,
    Observation,
    Why,
    need,
    report_window_s,
)
from cotenant.policies.colocation.matching import match_max_weight
from cotenant.policies.colocation.share import FixedShare
from cotenant.sim.colocation.faults import FAULTS, FaultResult, handle_faults
from cotenant.sim.colocation.predict import pair_weights
from cotenant.sim.colocation.queue import JobQueue
from cotenant.sim.colocation.records import (
    DEFAULT_CONFIG,
    ColocationConfig,
    ColocationRun,
    IntervalState,
)
from cotenant.sim.colocation.workload import ColocationWorkload
from cotenant.sim.colocation.world import Physics, alone_rates

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
_TALLY_COLUMN = {Mechanism.TIME_SLICING: "time_slicing", Mechanism.PRIORITY: "tally"}
"""The matching's predictor is trained on Tally's pairs under the policy's own mechanism."""
TICK_S = 1.0
"""When an unguarded policy (no p99 reports) sees a sub-step's load: the agent's tick."""


@dataclass
class _State:
    """One run's mutable state, per GPU and per job (internal to this module)."""

    n: int
    job_on: IntArray
    share: IntArray
    up_at: FloatArray  # the offline process runs kernels from here (start, restart)
    pause_from: FloatArray
    pause_to: FloatArray
    quarantine_until: FloatArray
    core: GpuState
    hist: FloatArray  # (series, window) the last sub-steps' loads of each load series
    remaining: FloatArray
    ready: IntArray
    failures: IntArray
    finish_s: FloatArray
    queue: JobQueue
    seen_mem: FloatArray
    counts: Counter[str] = field(default_factory=Counter)
    faults: Counter[str] = field(default_factory=Counter)
    step: int = 0
    # per interval, per GPU
    req: FloatArray = field(default_factory=lambda: np.zeros(0))
    late: FloatArray = field(default_factory=lambda: np.zeros(0))
    util: FloatArray = field(default_factory=lambda: np.zeros(0))
    sm: FloatArray = field(default_factory=lambda: np.zeros(0))
    gain: FloatArray = field(default_factory=lambda: np.zeros(0))
    done: BoolArray = field(default_factory=lambda: np.zeros(0, dtype=np.bool_))
    co: BoolArray = field(default_factory=lambda: np.zeros(0, dtype=np.bool_))
    # the sub-step's state before the core's actions land
    up_at_before: FloatArray = field(default_factory=lambda: np.zeros(0))
    pause_from_before: FloatArray = field(default_factory=lambda: np.zeros(0))
    pause_to_before: FloatArray = field(default_factory=lambda: np.zeros(0))
    share_before: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))


@dataclass
class _Series:
    """The per-interval metrics being filled."""

    steps: int
    arrays: dict[str, FloatArray] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for key in ("util", "sm", "mem", "req", "late", "minute", "oom", "tput"):
            self.arrays[key] = np.zeros(self.steps)
        self.running = np.zeros(self.steps, dtype=np.int64)
        self.served = np.zeros(self.steps, dtype=np.int64)


@dataclass(frozen=True)
class _Ctx:
    """What every phase reads and none changes."""

    work: ColocationWorkload
    policy: ColocationPolicy
    physics: Physics
    config: ColocationConfig
    predictor: PairPredictor
    predicted: FloatArray
    window: int
    dt: float
    admitted: npt.NDArray[np.bool_] | None
    """(series, interval): admission from the load before each interval; None: admit all."""


def _start_share(policy: ColocationPolicy) -> int:
    """The share a new pair starts at: a fixed split, else the whole GPU until decided."""
    return policy.share.share if isinstance(policy.share, FixedShare) else 100


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
    ctx = _Ctx(work, pol, physics, config, predictor or predictor_for(_TALLY_COLUMN.get(
        pol.mechanism, "mps")),
               physics.predicted_stretch(n), max(1, int(np.ceil(pol.load_window_s / dt))), dt,
               _admission(work, pol))
    rng = np.random.default_rng(seed)
    st = _new_state(ctx)
    out = _Series(work.intervals)
    for t in range(work.intervals):
        _admit(ctx, st, t)
        _place(ctx, st, t)
        result, down, mem = _faults(ctx, st, t, rng.random(n))
        for k in range(work.substeps):
            _substep(ctx, st, t, k, down, result.lost)
        _close(ctx, st, t, result, down, mem, out)
        if on_interval is not None:
            on_interval(IntervalState(t, st.share.copy(), st.job_on.copy(), mem,
                                      int(out.served[t])))
    return _result(ctx, st, out, seed)


def _new_state(ctx: _Ctx) -> _State:
    w, n = ctx.work, ctx.work.gpus
    never = np.full(n, -np.inf)
    return _State(
        n=n, job_on=np.full(n, -1, dtype=np.int64),
        share=np.full(n, _start_share(ctx.policy), dtype=np.int64),
        up_at=never.copy(), pause_from=never.copy(), pause_to=never.copy(),
        quarantine_until=never.copy(), core=GpuState.new(n, 0.0),
        hist=np.zeros((w.load.shape[0], ctx.window)), remaining=w.job_work_s.copy(),
        ready=w.job_arrival.copy(), failures=np.zeros(w.jobs, dtype=np.int64),
        finish_s=np.full(w.jobs, np.nan), queue=JobQueue(w.job_memory_mib, w.job_arrival.copy()),
        seen_mem=w.online_memory_at(0), req=np.zeros(n), late=np.zeros(n), util=np.zeros(n),
        sm=np.zeros(n), gain=np.zeros(n), done=np.zeros(n, dtype=np.bool_),
        co=np.zeros(n, dtype=np.bool_),
    )


def _seen_peak(ctx: _Ctx, st: _State) -> FloatArray:
    """Each GPU's peak load over the last window of sub-steps (kept per load series)."""
    return np.asarray(st.hist.max(axis=1)[ctx.work.series], dtype=np.float64)


def _series_load(w: ColocationWorkload, t: int, k: int) -> FloatArray:
    if w.fine is None:
        return np.asarray(w.load[:, t], dtype=np.float64)
    return np.asarray(w.fine[:, t, k], dtype=np.float64)


def _leave(ctx: _Ctx, st: _State, gpus: IntArray, now: float, requeue: bool, t: int) -> None:
    """Jobs on ``gpus`` leave them (requeued with their progress where ``requeue``)."""
    if len(gpus) == 0:
        return
    jobs = st.job_on[gpus]
    if requeue:
        back = jobs[st.remaining[jobs] > 0.0]
        st.ready[back] = np.maximum(st.ready[back], t + 1)
        st.queue.put_back(back)
    st.job_on[gpus] = -1
    st.share[gpus] = _start_share(ctx.policy)
    st.up_at[gpus] = -np.inf
    st.pause_to[gpus] = np.minimum(st.pause_to[gpus], now)
    st.core = st.core.reset(gpus, now)


def _admit(ctx: _Ctx, st: _State, t: int) -> None:
    """Admission from the load before ``t``; a GPU that lost it loses its job."""
    adm = ctx.policy.admission
    if adm.admits_all or not ctx.policy.shares_gpus:
        return
    ok = _admitted(ctx, t)
    revoked = np.flatnonzero((st.job_on >= 0) & ~ok)
    st.counts["evictions"] += len(revoked)
    _leave(ctx, st, revoked, t * ctx.work.interval_s, True, t - 1)


def _admitted(ctx: _Ctx, t: int) -> BoolArray:
    if ctx.admitted is None:
        return np.ones(ctx.work.gpus, dtype=np.bool_)
    return np.asarray(ctx.admitted[ctx.work.series, t], dtype=np.bool_)


def _admission(w: ColocationWorkload, pol: ColocationPolicy) -> npt.NDArray[np.bool_] | None:
    adm = pol.admission
    if adm.admits_all or not pol.shares_gpus:
        return None
    warm = max(1, int(np.ceil(adm.warmup_s / w.interval_s)))
    return w.admitted_from_history(adm.quantile, adm.max_load, warm)


def _place(ctx: _Ctx, st: _State, t: int) -> None:
    """Pair free, admitted GPUs with arrived jobs (the policy's matching)."""
    w, pol = ctx.work, ctx.policy
    if not pol.shares_gpus or w.jobs == 0:
        return
    now = t * w.interval_s
    free = (st.job_on < 0) & (st.quarantine_until <= now) & (st.core.held_until <= now)
    if not pol.admission.admits_all:
        free &= _admitted(ctx, t)
    gpus = np.flatnonzero(free)
    if pol.guard is not None and len(gpus):  # not where the guard would evict at once
        peak = _seen_peak(ctx, st)[gpus]
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
    st.share[mg] = _start_share(pol)
    st.up_at[mg] = now + ctx.config.offline_start_s
    st.core = st.core.reset(mg, now)
    st.counts["offline_starts"] += len(mg)


def _weights(ctx: _Ctx, st: _State) -> Callable[[IntArray, IntArray], FloatArray]:
    """The matching's pair weights: predicted speed sums (MuxFlow), equal (queue order), or
    seeded noise (random pairing among those that fit)."""
    m = ctx.policy.matching
    if m is Matching.MAX_WEIGHT:
        load = _seen_peak(ctx, st)
        return partial(pair_weights, ctx.work, load, predictor=ctx.predictor)
    if m is Matching.RANDOM:
        rng = np.random.default_rng(st.step)
        return lambda g, j: rng.random((len(g), len(j)))
    return lambda g, j: np.ones((len(g), len(j)))


def _faults(ctx: _Ctx, st: _State, t: int,
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


def _active(has: BoolArray, up_at: FloatArray, pause_from: FloatArray, pause_to: FloatArray,
            a: FloatArray | float, b: FloatArray | float) -> FloatArray:
    """Seconds of ``[a, b)`` in which the co-runner runs: after ``up_at``, outside its pause."""
    lo = np.maximum(a, up_at)
    span = np.maximum(np.asarray(b) - lo, 0.0)
    overlap = np.maximum(np.minimum(b, pause_to) - np.maximum(lo, pause_from), 0.0)
    return np.asarray(np.where(has, np.maximum(span - overlap, 0.0), 0.0), dtype=np.float64)


def _substep(ctx: _Ctx, st: _State, t: int, k: int, down: BoolArray, lost: BoolArray) -> None:
    """One sub-step: observe, decide, apply after the reaction, account."""
    w, pol, phy, dt = ctx.work, ctx.policy, ctx.physics, ctx.dt
    t0 = t * w.interval_s + k * dt
    load = w.load_at(t, k)
    has = st.job_on >= 0
    st.co |= has
    prof = w.job_profile[np.maximum(st.job_on, 0)] if w.jobs else np.zeros(st.n, np.int64)
    rate = load * 1000.0 / mps.ONLINE_L100[w.model]
    if pol.guard is not None:
        window = report_window_s(pol.guard, rate)
        seen = np.isfinite(window) & (window < dt)
        off = np.where(seen, window, min(pol.guard.scrape_s, dt))
    else:
        seen = np.zeros(st.n, dtype=np.bool_)
        off = np.full(st.n, min(TICK_S, dt))
    now = t0 + off
    true = phy.stretch(prof)
    f_old = phy.batch_factor(w.model, st.share, true)
    with_co = _active(has, st.up_at, st.pause_from, st.pause_to, t0, now) > 0.5 * off
    p99 = np.full(st.n, np.nan)
    i = np.flatnonzero(seen)
    p99[i] = phy.p99(w.model[i], load[i], np.where(with_co[i], f_old[i], 1.0))
    paused_now = (st.pause_from <= now) & (now < st.pause_to)
    obs = Observation(
        now_s=now, model=w.model, slo_ms=w.slo_ms, load=load,
        load_peak=np.maximum(_seen_peak(ctx, st), load), p99_ms=p99,
        p99_since_s=np.full(st.n, t0), p99_at_s=now, placed=has,
        running=has & (st.up_at <= now) & ~paused_now, share=st.share, stretch=ctx.predicted)
    act, st.core = pol.decide(obs, st.core)
    te = t0 + np.minimum(off + ctx.config.reaction_s, dt)
    _apply(ctx, st, act, has, te)
    before = _active(has, st.up_at_before, st.pause_from_before, st.pause_to_before, t0, te)
    after = _active(st.job_on >= 0, st.up_at, st.pause_from, st.pause_to, te, t0 + dt)
    _account(ctx, st, t0 + dt, load, rate, has, prof, true, f_old, before, after, down, lost)
    st.hist[:, st.step % ctx.window] = _series_load(w, t, k)
    st.step += 1


def _account(ctx: _Ctx, st: _State, end: float, load: FloatArray, rate: FloatArray,
             has: BoolArray, prof: IntArray, true: FloatArray, f_old: FloatArray,
             before: FloatArray, after: FloatArray, down: BoolArray, lost: BoolArray) -> None:
    """Late requests, offline work, utilisation and SM activity of the sub-step: ``before``
    seconds with the co-runner in the old state, ``after`` in the new one, the rest alone. The
    new state is evaluated only on the GPUs whose share moved."""
    w, phy, dt = ctx.work, ctx.physics, ctx.dt
    moved = np.flatnonzero(st.share != st.share_before)

    def both(fn: Callable[..., FloatArray], old_share: IntArray, *args: FloatArray,
             ) -> tuple[FloatArray, FloatArray]:
        old = fn(old_share, *args)
        new = old.copy()
        if len(moved):
            new[moved] = fn(st.share[moved], *(a[moved] for a in args))
        return old, new

    f_new = f_old.copy()
    f_new[moved] = phy.batch_factor(w.model[moved], st.share[moved], true[moved])
    v_old = phy.violations(w.model, load, f_old, w.slo_ms)
    v_new = v_old.copy()
    v_new[moved] = phy.violations(w.model[moved], load[moved], f_new[moved], w.slo_ms[moved])
    alone = dt - before - after
    lone = np.flatnonzero(alone > 0.0)
    v_one = np.zeros(st.n)
    v_one[lone] = phy.violations(w.model[lone], load[lone], np.ones(len(lone)), w.slo_ms[lone])
    late = before * v_old + after * v_new + alone * v_one
    st.req += rate * dt
    st.late += rate * np.where(down, dt, late)
    s_old, s_new = both(lambda sh, p, ld: phy.offline_speed(p.astype(np.int64), sh, ld),
                        st.share_before, prof.astype(np.float64), load)
    _progress(ctx, st, end, has, before * s_old + after * s_new, lost)
    u_old, b_old = phy.busy_rates(w.model, prof, load, f_old, st.share_before)
    u_new, b_new = u_old.copy(), b_old.copy()
    if len(moved):
        u_new[moved], b_new[moved] = phy.busy_rates(w.model[moved], prof[moved], load[moved],
                                                    f_new[moved], st.share[moved])
    u_one, b_one = alone_rates(w.model, load)
    # a service that is down runs no kernel; its co-runner's kernels still count
    off_u, off_s = phy.offline_rates(prof, st.share)
    st.util += np.where(down, (before + after) * off_u,
                        before * u_old + after * u_new + alone * u_one)
    st.sm += np.where(down, (before + after) * off_s,
                      before * b_old + after * b_new + alone * b_one)


def _apply(ctx: _Ctx, st: _State, act: Actions, has: BoolArray, te: FloatArray) -> None:
    """Land the core's actions at ``te``: restarts, pauses, evictions, the new shares. Keeps
    the state before them for the sub-step's first part."""
    st.up_at_before, st.pause_from_before = st.up_at.copy(), st.pause_from.copy()
    st.pause_to_before, st.share_before = st.pause_to.copy(), st.share.copy()
    restart = act.restart & has & (st.up_at <= te)
    pause = np.isfinite(act.pause_until) & has & ~act.evict
    g = ctx.policy.guard
    pause_s = g.pause_s if g is not None else 0.0
    st.pause_from = np.where(pause & (st.pause_to <= te), te, st.pause_from)  # else extended
    st.pause_to = np.where(pause, te + pause_s, np.where(restart, np.minimum(st.pause_to, te),
                                                         st.pause_to))
    st.up_at = np.where(restart, te + ctx.config.share_change_s, st.up_at)
    st.share = np.where(has, act.share, st.share).astype(np.int64)
    why = np.where(has, act.why, Why.NONE)
    st.counts["pauses"] += int((why == Why.PAUSE).sum())
    st.counts["throttles"] += int((why == Why.THROTTLE).sum())
    st.counts["share_changes"] += int(restart.sum())
    evicted = np.flatnonzero(act.evict & has)
    st.counts["evictions"] += len(evicted)
    if len(evicted):
        _leave_at(ctx, st, evicted, te[evicted])


def _leave_at(ctx: _Ctx, st: _State, gpus: IntArray, when: FloatArray) -> None:
    """Evicted jobs stop at ``when`` (requeued at the next interval, progress kept)."""
    jobs = st.job_on[gpus]
    t = int(when.min() // ctx.work.interval_s)
    st.ready[jobs] = np.maximum(st.ready[jobs], t + 1)
    st.queue.put_back(jobs[st.remaining[jobs] > 0.0])
    st.job_on[gpus] = -1
    st.pause_to[gpus] = np.minimum(st.pause_to[gpus], when)
    st.share[gpus] = _start_share(ctx.policy)
    st.core = st.core.reset(gpus, float(when.max()))


def _progress(ctx: _Ctx, st: _State, end: float, has: BoolArray, gain: FloatArray,
              lost: BoolArray) -> None:
    """Credit the sub-step's offline work; a job whose work runs out finishes (its GPU is
    free for the next interval's placement)."""
    if ctx.work.jobs == 0:
        return
    idx = np.flatnonzero(has & (gain > 0.0))
    jobs = st.job_on[idx]
    left = st.remaining[jobs]
    got = np.minimum(gain[idx], left)
    keep = ~lost[idx]
    st.gain[idx] += np.where(keep, got, 0.0)
    st.remaining[jobs] = np.where(keep, left - got, left)
    done = keep & (got >= left * (1.0 - 1e-9))
    finished = idx[done]
    st.remaining[st.job_on[finished]] = 0.0
    st.finish_s[st.job_on[finished]] = end
    st.done[finished] = True
    st.job_on[finished] = -1
    st.pause_to[finished] = np.minimum(st.pause_to[finished], end)


def _close(ctx: _Ctx, st: _State, t: int, result: FaultResult, down: BoolArray,
           mem: FloatArray, out: _Series) -> None:
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
    _leave(ctx, st, stopped, (t + 1) * span, True, t)
    for name in ("req", "late", "util", "sm", "gain"):
        setattr(st, name, np.zeros(st.n))
    st.done = np.zeros(st.n, dtype=np.bool_)
    st.co = np.zeros(st.n, dtype=np.bool_)


def _result(ctx: _Ctx, st: _State, out: _Series, seed: int) -> ColocationRun:
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
