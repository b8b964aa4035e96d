"""One sub-step of a co-location run: observe, decide with the core, land the actions after
the guard's reaction, and account for late requests, offline work and busy time in the
state before and after them. Internal to :mod:`cotenant.sim.colocation.run`."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from cotenant.perf import mps
from cotenant.policies.colocation import (
    Actions,
    GuardSettings,
    Observation,
    Why,
    report_window_s,
)
from cotenant.sim.colocation.load_signal import LoadSignal, counted_load, peak_of_readings
from cotenant.sim.colocation.state import RunContext, RunState, leave_at, seen_peak, series_load
from cotenant.sim.colocation.world import alone_rates

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
TICK_S = 1.0
"""When an unguarded policy (no p99 reports) sees a sub-step's load: the agent's tick."""


def active(has: BoolArray, up_at: FloatArray, pause_from: FloatArray, pause_to: FloatArray,
            a: FloatArray | float, b: FloatArray | float) -> FloatArray:
    """Seconds of ``[a, b)`` in which the co-runner runs: after ``up_at``, outside its pause."""
    lo = np.maximum(a, up_at)
    span = np.maximum(np.asarray(b) - lo, 0.0)
    overlap = np.maximum(np.minimum(b, pause_to) - np.maximum(lo, pause_from), 0.0)
    return np.asarray(np.where(has, np.maximum(span - overlap, 0.0), 0.0), dtype=np.float64)


def substep(ctx: RunContext, st: RunState, t: int, k: int, down: BoolArray,
            lost: BoolArray) -> None:
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
    with_co = active(has, st.up_at, st.pause_from, st.pause_to, t0, now) > 0.5 * off
    p99 = np.full(st.n, np.nan)
    i = np.flatnonzero(seen)
    p99[i] = phy.p99(w.model[i], load[i], np.where(with_co[i], f_old[i], 1.0))
    paused_now = (st.pause_from <= now) & (now < st.pause_to)
    shown = _shown(ctx, st, t, k, load, off, prof, f_old, with_co)
    obs = Observation(
        now_s=now, model=w.model, slo_ms=w.slo_ms, load=shown,
        load_peak=np.maximum(seen_peak(ctx, st), shown), p99_ms=p99,
        p99_since_s=np.full(st.n, t0), p99_at_s=now, placed=has,
        running=has & (st.up_at <= now) & ~paused_now, share=st.share, stretch=ctx.predicted)
    act, st.core = pol.decide(obs, st.core)
    te = t0 + np.minimum(off + ctx.config.reaction_s, dt)
    jobs_at_start = st.job_on.copy()
    _apply(ctx, st, act, has, te)
    before = active(has, st.up_at_before, st.pause_from_before, st.pause_to_before, t0, te)
    after = active(st.job_on >= 0, st.up_at, st.pause_from, st.pause_to, te, t0 + dt)
    _account(ctx, st, t0 + dt, load, rate, jobs_at_start, prof, true, f_old, before, after,
             down, lost)
    st.hist[:, st.step % ctx.window] = series_load(w, t, k)
    if st.shown is not None:  # what later decisions see of this sub-step
        st.shown[:, st.step % ctx.window] = _peak(ctx, st, load, shown)
    st.step += 1


def _shown(ctx: RunContext, st: RunState, t: int, k: int, load: FloatArray, off: FloatArray,
           prof: IntArray, factor: FloatArray, with_co: BoolArray) -> FloatArray:
    """The load the policy is shown (:mod:`.load_signal`): the service's own, counted from
    its requests, or the GPU's utilisation in the state in force."""
    w = ctx.work
    if ctx.signal is LoadSignal.REQUESTS:
        assert st.past is not None
        assert st.signal_rng is not None
        steps = st.past.shape[1]
        st.past[:, st.step % steps] = series_load(w, t, k)
        back = (st.step - np.arange(steps)) % steps  # 0: this sub-step, 1: the one before...
        return counted_load(ctx.policy.guard or GuardSettings(), w.model,
                            st.past[:, back][w.series], off, ctx.dt, st.signal_rng)
    if ctx.signal is LoadSignal.WHOLE_GPU:
        util, _ = ctx.physics.busy_rates(w.model, prof, load, factor, st.share)
        return np.where(with_co, util, alone_rates(w.model, load)[0])
    return load


def _peak(ctx: RunContext, st: RunState, load: FloatArray, shown: FloatArray) -> FloatArray:
    """The peak of this sub-step's readings, for the load window: counted from requests the
    agent reads at every window that closes, and keeps the highest."""
    if ctx.signal is not LoadSignal.REQUESTS:
        return shown
    assert st.signal_rng is not None
    peak = peak_of_readings(ctx.policy.guard or GuardSettings(), ctx.work.model, load, ctx.dt,
                            st.signal_rng)
    return np.asarray(np.maximum(shown, peak), dtype=np.float64)


def _account(ctx: RunContext, st: RunState, end: float, load: FloatArray, rate: FloatArray,
             jobs_at_start: IntArray, prof: IntArray, true: FloatArray, f_old: FloatArray,
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
    _progress(ctx, st, end, jobs_at_start, before * s_old + after * s_new, lost)
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


def _apply(ctx: RunContext, st: RunState, act: Actions, has: BoolArray, te: FloatArray) -> None:
    """Land the core's actions at ``te``: restarts, pauses, evictions, the new shares. Keeps
    the state before them for the sub-step's first part."""
    st.up_at_before, st.pause_from_before = st.up_at.copy(), st.pause_from.copy()
    st.pause_to_before, st.share_before = st.pause_to.copy(), st.share.copy()
    restart = act.restart & has & (st.up_at <= te)
    pause = np.isfinite(act.pause_until) & has & ~act.evict
    # a pause runs from when it lands until the core's pause_until, as the agent resumes it
    st.pause_from = np.where(pause & (st.pause_to <= te), te, st.pause_from)  # else extended
    until = np.maximum(np.nan_to_num(act.pause_until, nan=-np.inf), te)
    st.pause_to = np.where(pause, until, np.where(restart, np.minimum(st.pause_to, te),
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
        leave_at(ctx, st, evicted, te[evicted])


def _progress(ctx: RunContext, st: RunState, end: float, jobs_at_start: IntArray,
              gain: FloatArray, lost: BoolArray) -> None:
    """Credit the sub-step's offline work to the job each GPU ran at its start (an evicted
    one too, for the part before it left: it finishes on its next GPU, since it is queued
    again); a job whose work runs out finishes (its GPU is free for the next placement)."""
    if ctx.work.jobs == 0:
        return
    idx = np.flatnonzero((jobs_at_start >= 0) & (gain > 0.0))
    jobs = jobs_at_start[idx]
    left = st.remaining[jobs]
    gone = st.job_on[idx] != jobs  # evicted in this sub-step: it may not finish here
    got = np.minimum(gain[idx], np.where(gone, left * (1.0 - 1e-6), left))
    keep = ~lost[idx]
    st.gain[idx] += np.where(keep, got, 0.0)
    st.remaining[jobs] = np.where(keep, left - got, left)
    done = keep & ~gone & (got >= left * (1.0 - 1e-9))
    finished = idx[done]
    st.remaining[st.job_on[finished]] = 0.0
    st.finish_s[st.job_on[finished]] = end
    st.done[finished] = True
    st.job_on[finished] = -1
    st.pause_to[finished] = np.minimum(st.pause_to[finished], end)
