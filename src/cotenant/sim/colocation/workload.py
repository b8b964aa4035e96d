"""The co-location workload: online services on GPUs with a load over time, and offline jobs.

* **Load**: the duty-cycle series, times ``load_scale`` (capped at 1) for what-if runs at a
  busier online fleet (the GenAI pods average 7% duty; MuxFlow's online GPUs averaged 26%).
* **GPUs**: every GPU of the cluster's nodes; the trace's opaque models (G2, G3) have no
  published memory and are taken as 16 GiB (``OPAQUE_GPU_MIB``, an assumption).
* **Online services**: one per GPU of each openb ``LS`` pod, placed on the GPUs in a seeded
  order; more instances than GPUs are rejected and counted. Each gets a duty-cycle series
  (seeded permutation, round-robin), an online model from MIGER's MPS table (seeded), a GPU
  memory footprint (``gpu_milli``'s share of the GPU for a fractional pod, else Tally's mean
  inference-server fraction; the load's own peak memory only with ``use_load_memory``: the
  GenAI pods ran on GPUs the trace does not name and peak near 40 GiB, more than most openb
  GPUs hold). That footprint is the service's *peak*; with a memory profile on the load
  (``memory_over_time``, the GenAI memory series as a fraction of each pod's own peak, or its
  synthetic twin) the memory it uses at ``t`` is the footprint times the profile of its
  series (a series without memory samples stays at its peak). Its SLO is ``slo_multiple``
  times its model's solo batch time (:mod:`cotenant.perf.slo`): nothing about its load or
  any policy enters it.
* **Load inside the minute**: each interval of each series is split into ``substeps`` loads
  that average to it (:mod:`cotenant.traces.bursts`, ``burst_alpha`` fitted to the GenAI
  trace), drawn once per workload, so every policy meets the same bursts.
* **Offline jobs**: one per GPU of each openb ``BE`` pod with a lifetime; work is the lifetime
  in GPU-seconds (times ``gpu_milli / 1000`` for a fractional pod). Memory: ``gpu_milli``'s
  share of a 16 GiB GPU, or a Tally training footprint (seeded) for a whole-GPU pod. The
  trace's BE work is far less than the online GPUs' idle time, so, as the ATC'23 protocol does
  for arrivals, jobs are sampled with replacement from the BE pods until the work that can
  run within the horizon reaches ``offline_demand`` times the online GPU-seconds of the
  horizon. A job counts toward it with its work capped at the time from its arrival to the
  end (a week-long job adds one horizon at most), and only if it fits the median GPU's room
  (jobs that fit only the few large GPUs would otherwise fill the quota and leave most GPUs
  short of work). Arrivals (``arrivals``):
  ``spread`` (default) draws each job's arrival uniformly over the horizon, sorted, so job
  order is arrival order and the offline backlog builds up as in a cluster where BE work keeps
  coming; ``start`` queues every job at time 0 (a drain experiment: once the jobs that fit
  are done, throughput measures the queue, not the sharing policy).

Anything left out is counted in ``rejected`` by reason, never dropped silently.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import numpy.typing as npt

from cotenant.errors import InputError
from cotenant.model.cluster import Cluster
from cotenant.model.workload import MILLI_PER_GPU, Pod, Qos
from cotenant.perf import mps
from cotenant.perf.slo import DEFAULT_MULTIPLE, slo_ms
from cotenant.sim.colocation.jobs import offline_jobs, resample_jobs
from cotenant.traces.bursts import DEFAULT_ALPHA, DEFAULT_SUBSTEPS, sub_steps
from cotenant.traces.genai import synthetic_duty_cycles
from cotenant.traces.synthetic import default_params, generate_nodes, generate_pods

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
OPAQUE_GPU_MIB = 16384
PEAK_LOAD_CAP = 0.9
ARRIVALS = ("spread", "start")
"""When offline jobs join the queue: uniformly over the horizon, or all at time 0."""


class DutyCycles(Protocol):
    """What the simulation needs of a load series (``cotenant.traces.genai.LoadSeries``)."""

    @property
    def names(self) -> tuple[str, ...]: ...
    @property
    def interval_s(self) -> int: ...
    @property
    def values(self) -> npt.NDArray[np.float64]: ...
    @property
    def memory_mib(self) -> npt.NDArray[np.float64] | None: ...
    @property
    def memory_profile(self) -> npt.NDArray[np.float64] | None: ...


ADMIT_WARMUP = 60
"""Intervals of history before history-based admission admits anything (an hour at one
minute), and how often it recomputes a quantile below the peak."""


@dataclass(frozen=True)
class ColocationWorkload:
    """Per online GPU and per offline job arrays, plus the load matrix they index."""

    gpu_memory_mib: FloatArray
    model: IntArray
    online_memory_mib: FloatArray
    slo_ms: FloatArray
    series: IntArray
    load: FloatArray  # (n_series, n_intervals), solo duty fraction
    interval_s: int
    job_memory_mib: FloatArray
    job_work_s: FloatArray
    job_profile: IntArray  # index into mps.TRAINING_* solo profiles
    job_arrival: IntArray  # interval at which each job joins the queue (non-decreasing)
    description: str
    rejected: dict[str, int] = field(default_factory=dict)
    memory_profile: FloatArray | None = None
    """(n_series, n_intervals) online memory used as a fraction of its peak; None: constant."""
    fine: npt.NDArray[np.float32] | None = None
    """(n_series, n_intervals, substeps) load inside each interval; None: flat intervals."""
    slo_multiple: float = DEFAULT_MULTIPLE

    @property
    def substeps(self) -> int:
        return 1 if self.fine is None else int(self.fine.shape[2])

    def load_at(self, t: int, k: int) -> FloatArray:
        """Each online GPU's load in sub-step ``k`` of interval ``t``."""
        if self.fine is None:
            return np.asarray(self.load[self.series, t], dtype=np.float64)
        return np.asarray(self.fine[self.series, t, k], dtype=np.float64)

    @property
    def gpus(self) -> int:
        return len(self.gpu_memory_mib)

    @property
    def jobs(self) -> int:
        return len(self.job_work_s)

    @property
    def intervals(self) -> int:
        return int(self.load.shape[1])

    def online_memory_at(self, t: int) -> FloatArray:
        """Memory (MiB) each online service uses in interval ``t``; at most its peak."""
        if self.memory_profile is None:
            return self.online_memory_mib
        return np.asarray(
            self.online_memory_mib * self.memory_profile[self.series, t], dtype=np.float64
        )

    @property
    def peak_load(self) -> FloatArray:
        """Each online service's highest duty cycle over the horizon."""
        return np.asarray(self.load.max(axis=1)[self.series], dtype=np.float64)

    def load_quantile(self, q: float) -> FloatArray:
        """Each online service's duty cycle that ``q`` of the horizon stays at or below (the
        peak at 1.0)."""
        if q >= 1.0:
            return self.peak_load
        per_series = np.quantile(self.load, q, axis=1, method="inverted_cdf")
        return np.asarray(per_series[self.series], dtype=np.float64)

    def admitted_from_history(
        self, q: float, threshold: float, warmup: int = ADMIT_WARMUP
    ) -> npt.NDArray[np.bool_]:
        """(series, interval): whether the ``q`` quantile of a load series over the intervals
        *before* each one is at most ``threshold``; False for the first ``warmup``. The peak
        (``q`` = 1) is a running maximum, current at every interval; a lower quantile is
        recomputed every ``warmup`` intervals."""
        series, steps = self.load.shape
        out = np.zeros((series, steps), dtype=bool)
        if q >= 1.0:
            out[:, 1:] = np.maximum.accumulate(self.load, axis=1)[:, :-1] <= threshold
        else:
            for start in range(warmup, steps, warmup):
                stat = np.quantile(self.load[:, :start], q, axis=1, method="inverted_cdf")
                out[:, start:start + warmup] = (stat <= threshold)[:, None]
        out[:, :warmup] = False
        return out


def _gpu_memory(cluster: Cluster) -> FloatArray:
    mem = []
    for node in cluster.nodes:
        size = node.gpu_model.memory_mib if node.gpu_model is not None else None
        mem.extend([float(size or OPAQUE_GPU_MIB)] * node.gpu_count)
    return np.array(mem, dtype=np.float64)


def _series_memory(load: DutyCycles) -> FloatArray | None:
    if load.memory_mib is None:
        return None
    m = np.asarray(load.memory_mib, dtype=np.float64)
    return np.nanmax(m, axis=1) if m.ndim == 2 else m


def _memory_profile(load: DutyCycles, shape: tuple[int, ...]) -> FloatArray | None:
    """The load's memory profile, checked; a row without samples (NaN) stays at its peak."""
    if load.memory_profile is None:
        return None
    prof = np.asarray(load.memory_profile, dtype=np.float64)
    if prof.shape != shape:
        raise InputError("load memory profile", f"shape {prof.shape}; the load has {shape}")
    prof = np.where(np.isnan(prof).all(axis=1, keepdims=True), 1.0, prof)
    if not np.all(np.isfinite(prof)) or prof.min() < 0.0 or prof.max() > 1.0:
        raise InputError("load memory profile", "must be finite fractions of the peak in [0, 1]")
    return prof


def build_workload(
    cluster: Cluster,
    pods: Sequence[Pod],
    load: DutyCycles,
    rng: np.random.Generator,
    *,
    intervals: int | None = None,
    offline_demand: float = 2.0,
    slo_multiple: float = DEFAULT_MULTIPLE,
    use_load_memory: bool = False,
    memory_over_time: bool = True,
    arrivals: str = "spread",
    load_scale: float = 1.0,
    description: str = "",
    substeps: int = DEFAULT_SUBSTEPS,
    burst_alpha: float = DEFAULT_ALPHA,
) -> ColocationWorkload:
    """Online services from the LS pods, offline jobs from the BE pods, load from ``load``."""
    values = np.asarray(load.values, dtype=np.float64)
    if values.ndim != 2 or values.shape[0] == 0 or values.shape[1] == 0:
        raise InputError("load", "needs at least one series with at least one interval")
    if not np.all(np.isfinite(values)) or values.min() < 0.0 or values.max() > 1.0:
        raise InputError("load", "duty cycles must be finite fractions in [0, 1]")
    if not (np.isfinite(load_scale) and load_scale > 0.0):
        raise InputError("--load-scale", f"{load_scale}; must be a number > 0")
    values = np.minimum(values * load_scale, 1.0)
    profile = _memory_profile(load, values.shape) if memory_over_time else None
    if intervals is not None:
        if intervals < 1:
            raise InputError("--hours", "the horizon must hold at least one interval")
        reps = -(-intervals // values.shape[1])
        values = np.tile(values, (1, reps))[:, :intervals]
        if profile is not None:
            profile = np.tile(profile, (1, reps))[:, :intervals]
    if offline_demand < 0:
        raise InputError("workload", "offline_demand must be >= 0")
    if arrivals not in ARRIVALS:
        raise InputError("--arrivals", f"{arrivals!r}; expected one of {', '.join(ARRIVALS)}")
    rejected: Counter[str] = Counter()
    gpu_mem_all = _gpu_memory(cluster)
    order = rng.permutation(len(gpu_mem_all))
    online = [p for p in pods if p.qos is Qos.LS and p.shape.num_gpu > 0]
    other = sum(1 for p in pods if p.shape.num_gpu > 0 and p.qos not in (Qos.LS, Qos.BE))
    if other:  # MuxFlow's online services are LS, its offline jobs BE: these are neither
        rejected["GPU pod neither LS nor BE (Burstable, Guaranteed)"] = other
    inst_milli = np.array(
        [p.shape.gpu_milli if p.shape.fractional else MILLI_PER_GPU
         for p in online for _ in range(p.shape.num_gpu)], dtype=np.float64,
    )
    n = min(len(inst_milli), len(order))
    if len(inst_milli) > n:
        rejected["online instance: no GPU left"] = len(inst_milli) - n
    if n == 0:
        raise InputError("pods", "no LS pod with a GPU to serve online work")
    gpu_mem = gpu_mem_all[order[:n]]
    inst_milli = inst_milli[:n]
    n_series = values.shape[0]
    series = np.resize(rng.permutation(n_series), n).astype(np.int64)
    model = rng.integers(0, len(mps.ONLINE_MODELS), n).astype(np.int64)
    frac = np.where(inst_milli < MILLI_PER_GPU, inst_milli / MILLI_PER_GPU,
                    mps.SERVER_MEMORY_FRACTION)
    on_mem = frac * gpu_mem
    peak_mem = _series_memory(load) if use_load_memory else None
    if peak_mem is not None:
        from_series = peak_mem[series]
        over = from_series > gpu_mem
        if over.any():
            rejected["online memory above its GPU (capped at the GPU)"] = int(over.sum())
        on_mem = np.where(np.isfinite(from_series), np.minimum(from_series, gpu_mem), on_mem)
    slo = slo_ms(model, slo_multiple)
    jobs = offline_jobs(pods, rng, float((gpu_mem - on_mem).max()), rejected)
    horizon_s = values.shape[1] * load.interval_s
    work, mem, prof, arrival = resample_jobs(
        jobs, rng, offline_demand * n * horizon_s, values.shape[1], int(load.interval_s),
        arrivals == "spread", float(np.median(gpu_mem - on_mem)), rejected,
    )
    burst_rng = np.random.default_rng(int(rng.integers(2**63)))
    fine = sub_steps(values, substeps, burst_alpha, burst_rng).astype(np.float32)
    return ColocationWorkload(
        gpu_memory_mib=gpu_mem, model=model, online_memory_mib=on_mem, slo_ms=slo,
        series=series, load=values, interval_s=int(load.interval_s),
        job_memory_mib=mem, job_work_s=work, job_profile=prof, job_arrival=arrival,
        description=description, rejected=dict(rejected), memory_profile=profile,
        fine=fine, slo_multiple=slo_multiple,
    )


def synthetic_workload(
    rng: np.random.Generator,
    *,
    gpus: int,
    intervals: int,
    interval_s: int = 60,
    series: int = 143,
    offline_demand: float = 2.0,
    slo_multiple: float = DEFAULT_MULTIPLE,
    load: DutyCycles | None = None,
    arrivals: str = "spread",
    load_scale: float = 1.0,
    substeps: int = DEFAULT_SUBSTEPS,
    burst_alpha: float = DEFAULT_ALPHA,
) -> ColocationWorkload:
    """``gpus`` online GPUs from nodes and pods drawn from the openb-fitted parameters, LS
    pods serving, BE pods as offline jobs, and ``load`` (default: ``series`` synthetic
    duty-cycle series)."""
    if gpus < 1 or intervals < 1:
        raise InputError("synthetic", "need at least one GPU and one interval")
    params = default_params()
    per_node = float(np.dot(params.node_weights, [t[1] for t in params.node_types]))
    nodes = generate_nodes(params, max(1, int(np.ceil(gpus / per_node * 1.1))), rng)
    cluster = Cluster(nodes)
    pods: list[Pod] = []
    online = 0
    while online < min(gpus, cluster.total_gpus):
        for pod in generate_pods(params, max(256, 2 * gpus), rng):
            if pod.qos is Qos.LS and pod.shape.num_gpu > 0:
                if online + pod.shape.num_gpu > gpus:  # exactly ``gpus``: no overshoot
                    continue
                online += pod.shape.num_gpu
            pods.append(pod)
    source = "synthetic duty cycles" if load is None else f"{len(load.names)} given series"
    if load is None:
        load = synthetic_duty_cycles(series, intervals, rng, interval_s=interval_s)
    return build_workload(
        cluster, pods, load, rng, intervals=intervals, offline_demand=offline_demand,
        slo_multiple=slo_multiple, arrivals=arrivals, load_scale=load_scale,
        substeps=substeps, burst_alpha=burst_alpha,
        description=f"synthetic: {gpus} online GPUs fitted to {params.source}, "
        f"{intervals} x {load.interval_s}s intervals, {source}",
    )
