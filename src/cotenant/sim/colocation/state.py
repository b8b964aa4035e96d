"""The simulator's run state: the arrays per GPU and per job one co-location run keeps, what
every phase reads (:class:`RunContext`), and the helpers that move a job off a GPU. Internal
to :mod:`cotenant.sim.colocation.run`."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from cotenant.perf.predictor import PairPredictor
from cotenant.policies.colocation import ColocationPolicy, GpuState, GuardSettings
from cotenant.policies.colocation.share import FixedShare
from cotenant.sim.colocation.load_signal import SIGNAL_STREAM, LoadSignal, span_steps
from cotenant.sim.colocation.queue import JobQueue
from cotenant.sim.colocation.records import ColocationConfig
from cotenant.sim.colocation.workload import ColocationWorkload
from cotenant.sim.colocation.world import Physics

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


@dataclass
class RunState:
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
    # a signal other than the service's own load: what each GPU was shown over the load
    # window (n, window); for ``requests`` the true loads the counts reach back over
    # (series, span steps, newest at ``step``) and the counts' own random stream
    shown: FloatArray | None = None
    past: FloatArray | None = None
    signal_rng: np.random.Generator | None = None


@dataclass
class Series:
    """The per-interval metrics being filled."""

    steps: int
    arrays: dict[str, FloatArray] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for key in ("util", "sm", "mem", "req", "late", "minute", "oom", "tput"):
            self.arrays[key] = np.zeros(self.steps)
        self.running = np.zeros(self.steps, dtype=np.int64)
        self.served = np.zeros(self.steps, dtype=np.int64)


@dataclass(frozen=True)
class RunContext:
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
    signal: LoadSignal = LoadSignal.SERVICE
    """The load the policy is shown (resolved: never ``auto``)."""


def start_share(policy: ColocationPolicy) -> int:
    """The share a new pair starts at: a fixed split, else the whole GPU until decided."""
    return policy.share.share if isinstance(policy.share, FixedShare) else 100


def new_state(ctx: RunContext, seed: int = 0) -> RunState:
    w, n = ctx.work, ctx.work.gpus
    never = np.full(n, -np.inf)
    st = RunState(
        n=n, job_on=np.full(n, -1, dtype=np.int64),
        share=np.full(n, start_share(ctx.policy), dtype=np.int64),
        up_at=never.copy(), pause_from=never.copy(), pause_to=never.copy(),
        quarantine_until=never.copy(), core=GpuState.new(n, 0.0),
        hist=np.zeros((w.load.shape[0], ctx.window)), remaining=w.job_work_s.copy(),
        ready=w.job_arrival.copy(), failures=np.zeros(w.jobs, dtype=np.int64),
        finish_s=np.full(w.jobs, np.nan), queue=JobQueue(w.job_memory_mib, w.job_arrival.copy()),
        seen_mem=w.online_memory_at(0), req=np.zeros(n), late=np.zeros(n), util=np.zeros(n),
        sm=np.zeros(n), gain=np.zeros(n), done=np.zeros(n, dtype=np.bool_),
        co=np.zeros(n, dtype=np.bool_),
    )
    if ctx.signal is not LoadSignal.SERVICE:
        st.shown = np.zeros((n, ctx.window))
    if ctx.signal is LoadSignal.REQUESTS:
        steps = span_steps(ctx.policy.guard or GuardSettings(), ctx.dt)
        # before the run, each service ran at its first load
        st.past = np.repeat(series_load(w, 0, 0)[:, None], steps, axis=1)
        st.signal_rng = np.random.default_rng([seed, SIGNAL_STREAM])
    return st


def seen_peak(ctx: RunContext, st: RunState) -> FloatArray:
    """Each GPU's peak load over the last window of sub-steps, as the policy was shown it
    (its own load: kept per load series)."""
    if st.shown is not None:
        return np.asarray(st.shown.max(axis=1), dtype=np.float64)
    return np.asarray(st.hist.max(axis=1)[ctx.work.series], dtype=np.float64)


def series_load(w: ColocationWorkload, t: int, k: int) -> FloatArray:
    if w.fine is None:
        return np.asarray(w.load[:, t], dtype=np.float64)
    return np.asarray(w.fine[:, t, k], dtype=np.float64)


def leave(ctx: RunContext, st: RunState, gpus: IntArray, now: float, requeue: bool, t: int) -> None:
    """Jobs on ``gpus`` leave them (requeued with their progress where ``requeue``)."""
    if len(gpus) == 0:
        return
    jobs = st.job_on[gpus]
    if requeue:
        back = jobs[st.remaining[jobs] > 0.0]
        st.ready[back] = np.maximum(st.ready[back], t + 1)
        st.queue.put_back(back)
    st.job_on[gpus] = -1
    st.share[gpus] = start_share(ctx.policy)
    st.up_at[gpus] = -np.inf
    st.pause_to[gpus] = np.minimum(st.pause_to[gpus], now)
    st.core = st.core.reset(gpus, now)


def leave_at(ctx: RunContext, st: RunState, gpus: IntArray, when: FloatArray) -> None:
    """Evicted jobs stop at ``when`` (requeued at the next interval, progress kept)."""
    jobs = st.job_on[gpus]
    t = int(when.min() // ctx.work.interval_s)
    st.ready[jobs] = np.maximum(st.ready[jobs], t + 1)
    st.queue.put_back(jobs[st.remaining[jobs] > 0.0])
    st.job_on[gpus] = -1
    st.pause_to[gpus] = np.minimum(st.pause_to[gpus], when)
    st.share[gpus] = start_share(ctx.policy)
    st.core = st.core.reset(gpus, float(when.max()))


def admitted(ctx: RunContext, t: int) -> BoolArray:
    if ctx.admitted is None:
        return np.ones(ctx.work.gpus, dtype=np.bool_)
    return np.asarray(ctx.admitted[ctx.work.series, t], dtype=np.bool_)
