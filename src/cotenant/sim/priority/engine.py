"""An event-driven GPU running one HP inference job and one BE training job kernel by kernel.

**Contention model.** Each job runs one kernel at a time (one stream). A kernel needs
``sms`` SMs (Orion's occupancy x 108, an A100) and runs at ``held / sms`` of its solo speed
(linear in SMs: a kernel of many waves takes proportionally longer on fewer SMs); memory
bandwidth and caches are not shared out (a stated gap). Under *time slicing* the context
holding the slice runs alone at full speed and the slice passes on when it expires and the
other context has work, or at once when the holder has none. Under *concurrent* sharing a
kernel takes the free SMs when it starts and more as the other kernel gives them up: at its
end of one of its block waves, after which the SMs split in proportion to demand
(``Blocks.SHARED``, MPS) or HP takes all it needs (``Blocks.PRIORITY``), or as the scheduler
preempts it (Tally's drain, REEF's reset).

The scheduler decides from an :class:`~cotenant.policies.priority.Observation` built from
the past only; while HP has no request in flight BE runs alone in one vectorised step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from cotenant.perf.kernels import A100_SMS, UNKNOWN, FloatArray, Units
from cotenant.policies.priority import (
    Blocks,
    Observation,
    Preemption,
    Scheduler,
    Sharing,
    rate_step,
)
from cotenant.sim.priority.stream import BeStream

EPS = 1e-9


@dataclass(frozen=True)
class EngineResult:
    latency_us: FloatArray
    """Each HP request's latency (arrival to its last kernel's end)."""
    end_us: float
    be_work_us: float
    be_lost_us: float
    hp_wait_us: float
    """Longest time an HP kernel that was ready ran at no speed at all."""


class Engine:
    """One run (see the module docstring); :meth:`run` returns the result."""

    def __init__(self, scheduler: Scheduler, hp: Units, hp_sms: float, be: BeStream | None,
                 arrivals_us: FloatArray, rng: np.random.Generator) -> None:
        self.s, self.hp, self.be, self.arr, self.rng = scheduler, hp, be, arrivals_us, rng
        # Python lists: indexing them is several times faster than numpy scalars
        self._arr: list[float] = arrivals_us.tolist()
        self._dur: list[float] = hp.duration_us.tolist()
        self._gap: list[float] = hp.gap_us.tolist()
        self._kind: list[int] = hp.kind.tolist()
        self.m_h = min(hp_sms, A100_SMS)
        self.m_b = min(be.sms, A100_SMS) if be is not None else 0.0
        self.t = 0.0
        self.next_req = 0
        self.cur: float | None = None
        self.k, self.hp_ready_at, self.hp_run, self.hp_rem = 0, math.inf, False, 0.0
        self.hp_idle_since: float | None = 0.0
        self.lat: list[float] = []
        self.be_on, self.a_h, self.a_b = False, 0.0, 0.0
        self.release_at, self.release_mode = math.inf, ""
        self.holder, self.slice_end = "hp", math.inf
        rc = scheduler.rate_control
        self.rate, self.window_end = 1.0, (rc.window_us if rc else math.inf)
        self.blocked, self.ran, self.pause_until, self.be_gate = 0.0, 0.0, 0.0, 0.0
        self.stall_since: float | None = None
        self.max_stall = 0.0

    # -- observation and decisions -------------------------------------------------------
    def observe(self) -> Observation:
        hp_kind = self._kind[self.k] if self.hp_run else UNKNOWN
        return Observation(self.t, self.cur is not None, self.hp_run, self.hp_idle_since,
                           hp_kind, self.be.kind if self.be is not None else UNKNOWN)

    def _admit(self) -> None:
        if self.cur is None and self.next_req < len(self._arr) and \
                self._arr[self.next_req] <= self.t + EPS:
            self.cur = self._arr[self.next_req]
            self.next_req += 1
            self.k, self.hp_ready_at = 0, self.t
            if self.be_on and self.s.preemption is Preemption.RESET:
                self._preempt()

    def _launch_hp(self) -> None:
        if self.cur is None or self.hp_run or self.hp_ready_at > self.t + EPS:
            return
        self.hp_run, self.hp_idle_since = True, None
        self.hp_rem = self._dur[self.k]
        if self.s.sharing is Sharing.CONCURRENT:
            self.a_h = min(self.m_h, A100_SMS - self.a_b)
            if self.be_on and self.release_at == math.inf:
                self._preempt()

    def _preempt(self) -> None:
        """HP needs the GPU: when (and how) the running BE kernel gives up its SMs."""
        be, s = self.be, self.s
        assert be is not None
        left = be.frac * be.duration * be.factor
        if s.preemption is Preemption.RESET:
            self.release_at, self.release_mode = self.t + min(s.preemption_us, left), "kill"
        elif s.preemption is Preemption.DRAIN:
            bound = s.preemption_us if be.factor > 1.0 else left
            self.release_at = self.t + float(self.rng.uniform(0.0, min(bound, left)))
            self.release_mode = "suspend"
        elif self.a_h < self.m_h:
            wave = min(be.block_us(), left)
            self.release_at = self.t + float(self.rng.uniform(0.0, wave))
            self.release_mode = "share" if s.blocks is Blocks.PRIORITY else "split"

    def _launch_be(self) -> None:
        be = self.be
        if be is None or self.be_on or be.ready_at > self.t + EPS or \
                self.pause_until > self.t + EPS:
            return
        if self.s.gated or self.s.transform_overhead > 0:
            obs = self.observe()
            self.be_gate = self.s.be_launch_at(obs)
            if self.be_gate > self.t + EPS:
                return
            if be.frac >= 1.0:
                be.factor = self.s.be_duration_factor(be.duration, obs)
        self.be_on = True
        if self.s.sharing is Sharing.CONCURRENT:
            self.a_b = min(self.m_b, A100_SMS - self.a_h)
            if self.hp_run and self.s.preemption is not Preemption.NONE:
                self._preempt()

    def _slices(self) -> None:
        if self.s.sharing is not Sharing.TIME_SLICED:
            return
        hp_wants, be_wants = self.cur is not None, self.be_on
        mine, other = (hp_wants, be_wants) if self.holder == "hp" else (be_wants, hp_wants)
        if other and (not mine or self.t >= self.slice_end - EPS):
            self.holder = "be" if self.holder == "hp" else "hp"
            self.slice_end = self.t + self.s.timeslice_us
        elif not other:
            self.slice_end = math.inf
        elif self.slice_end == math.inf:
            self.slice_end = self.t + self.s.timeslice_us

    # -- time ----------------------------------------------------------------------------
    def _rates(self) -> tuple[float, float]:
        if self.s.sharing is Sharing.TIME_SLICED:
            return (1.0 if self.hp_run and self.holder == "hp" else 0.0,
                    1.0 if self.be_on and self.holder == "be" else 0.0)
        r_h = min(1.0, self.a_h / self.m_h) if self.hp_run else 0.0
        r_b = min(1.0, self.a_b / self.m_b) if self.be_on and self.m_b > 0 else 0.0
        return r_h, r_b

    def _alone(self, horizon: float) -> bool:
        """BE alone while HP has no request, or holds no time slice: one vectorised step.
        False if not applicable."""
        be, s = self.be, self.s
        if be is None or not self.be_on:
            return False
        if self.cur is not None or self.hp_run:
            return self._slice_alone(be, horizon)
        nxt = self._arr[self.next_req] if self.next_req < len(self._arr) else horizon
        until = min(nxt, horizon, self.window_end)
        idle = self.hp_idle_since if self.hp_idle_since is not None else self.t
        switch = idle + s.untransformed_after_us
        if s.transform_overhead > 0 and self.t < switch < until:
            until = switch
        overhead = s.transform_overhead if self.t < switch else 0.0
        self.be_on = be.run_alone(self.t, until, running=True, rate=self.rate,
                                  limit_us=s.preemption_us, overhead=overhead)
        self.a_b = self.m_b if self.be_on else 0.0
        self.holder, self.slice_end = "be", math.inf
        self.t = until
        return True

    def _slice_alone(self, be: BeStream, horizon: float) -> bool:
        """Time slicing, BE holding the slice: HP waits whatever it does until it ends."""
        if self.s.sharing is not Sharing.TIME_SLICED or self.holder != "be" or \
                self.slice_end == math.inf or self.rate < 1.0:
            return False
        until = min(self.slice_end, horizon, self.window_end, self.t + be.busy_left_us())
        if until <= self.t + EPS:
            return False
        waits_from = self.t if self.hp_run else max(self.t, self.hp_ready_at)
        if waits_from < until:
            self.blocked += until - waits_from
            start = self.stall_since if self.stall_since is not None else waits_from
            self.max_stall = max(self.max_stall, until - start)
            self.stall_since = start
        self.be_on = be.run_alone(self.t, until, running=True)
        self.t = until
        return True

    def _next(self, r_h: float, r_b: float, horizon: float) -> float:
        # the earliest of the candidate times (one running minimum, no list: this is the
        # engine's innermost step)
        m = min(horizon, self.release_at, self.window_end)
        if self.cur is None and self.next_req < len(self._arr):
            m = min(m, self._arr[self.next_req])
        if self.cur is not None and not self.hp_run:
            m = min(m, self.hp_ready_at)
        if r_h > 0:
            m = min(m, self.t + self.hp_rem / r_h)
        be = self.be
        if be is not None and self.be_on and r_b > 0:
            m = min(m, self.t + be.frac * be.duration * be.factor / r_b)
        if be is not None and not self.be_on:
            m = min(m, max(be.ready_at, self.pause_until, self.be_gate))
        if self.s.sharing is Sharing.TIME_SLICED:
            m = min(m, self.slice_end)
        return max(self.t, m)

    def _advance(self, dt: float, r_h: float, r_b: float) -> None:
        self.hp_rem -= r_h * dt
        if self.be is not None and self.be_on:
            self.be.progress(r_b * dt)
        if self.hp_run and r_h == 0.0:
            self.blocked += dt
        elif self.hp_run:
            self.ran += dt
        stalled = self.hp_run and r_h == 0.0
        if stalled and self.stall_since is None:
            self.stall_since = self.t
        elif not stalled and self.stall_since is not None:
            self.max_stall = max(self.max_stall, self.t - self.stall_since)
            self.stall_since = None
        self.t += dt

    def _below_clock(self, left_us: float, rate: float) -> bool:
        """Whether a kernel's remaining time is below the clock's resolution at ``t``: its
        end time would round to ``t`` itself and time would stop (late in a long run, where
        a float's spacing exceeds the fixed tolerances). It ends now."""
        return rate > 0 and left_us > 0 and self.t + left_us / rate <= self.t

    # -- what happened at t ------------------------------------------------------------
    def _hp_done(self) -> None:
        self.hp_run, self.a_h = False, 0.0
        self.k += 1
        self.hp_idle_since = self.t
        if self.release_mode in ("share", "split"):
            self.release_at, self.release_mode = math.inf, ""
        if self.be_on and self.s.sharing is Sharing.CONCURRENT:
            self.a_b = self.m_b
        if self.k == len(self._dur):
            assert self.cur is not None
            self.lat.append(self.t - self.cur)
            self.cur = None
        else:
            self.hp_ready_at = self.t + self._gap[self.k - 1]

    def _be_done(self) -> None:
        be = self.be
        assert be is not None
        dur = be.duration
        be.finish(self.t)
        self.be_on, self.a_b = False, 0.0
        self.release_at, self.release_mode = math.inf, ""
        if self.rate < 1.0:
            self.pause_until = self.t + dur * (1.0 / self.rate - 1.0)
        if self.hp_run:
            self.a_h = self.m_h

    def _release(self) -> None:
        be = self.be
        assert be is not None
        if self.release_mode == "kill":
            be.reset()
        if self.release_mode in ("kill", "suspend"):
            self.be_on, self.a_b = False, 0.0
        if self.hp_run and self.release_mode == "split" and self.be_on:
            self.a_h = A100_SMS * self.m_h / (self.m_h + self.m_b)
            self.a_b = A100_SMS - self.a_h
        elif self.hp_run:
            self.a_h = self.m_h
            self.a_b = min(self.a_b, A100_SMS - self.a_h)
        self.release_at, self.release_mode = math.inf, ""

    def run(self, horizon: float = math.inf) -> EngineResult:
        """Until every request has completed (or ``horizon``)."""
        n = len(self._arr)
        while len(self.lat) < n and self.t < horizon:
            self._admit()
            self._launch_hp()
            self._launch_be()
            self._slices()
            if self._alone(horizon):
                self._window()
                continue
            r_h, r_b = self._rates()
            nxt = self._next(r_h, r_b, horizon)
            self._advance(nxt - self.t, r_h, r_b)
            if self.hp_run and (self.hp_rem <= 1e-7 or self._below_clock(self.hp_rem, r_h)):
                self._hp_done()
            be = self.be
            if be is not None and self.be_on and (
                    be.frac <= EPS or self._below_clock(be.frac * be.duration * be.factor, r_b)):
                self._be_done()
            if self.t >= self.release_at - EPS:
                self._release()
            self._window()
        be = self.be
        return EngineResult(np.asarray(self.lat), self.t, be.work_us if be else 0.0,
                            be.lost_us if be else 0.0, self.max_stall)

    def _window(self) -> None:
        rc = self.s.rate_control
        if rc is not None and self.t >= self.window_end - EPS:
            self.rate = rate_step(self.rate, rc, self.blocked, self.ran)
            self.blocked = self.ran = 0.0
            self.window_end = self.t + rc.window_us
