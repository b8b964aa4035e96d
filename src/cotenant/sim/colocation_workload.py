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
  GPUs hold), and an
  SLO: ``slo_headroom`` times its p99 alone on the whole GPU at its peak load (capped at 0.9),
  so the dedicated deployment meets it.
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
from cotenant.traces.genai import synthetic_duty_cycles
from cotenant.traces.synthetic import default_params, generate_nodes, generate_pods

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
OPAQUE_GPU_MIB = 16384
REFERENCE_GPU_MIB = 16384
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

    @property
    def gpus(self) -> int:
        return len(self.gpu_memory_mib)

    @property
    def jobs(self) -> int:
        return len(self.job_work_s)

    @property
    def intervals(self) -> int:
        return int(self.load.shape[1])

    @property
    def peak_load(self) -> FloatArray:
        """Each online service's highest duty cycle over the horizon."""
        return np.asarray(self.load.max(axis=1)[self.series], dtype=np.float64)


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


def build_workload(
    cluster: Cluster,
    pods: Sequence[Pod],
    load: DutyCycles,
    rng: np.random.Generator,
    *,
    intervals: int | None = None,
    offline_demand: float = 2.0,
    slo_headroom: float = 1.5,
    use_load_memory: bool = False,
    arrivals: str = "spread",
    load_scale: float = 1.0,
    description: str = "",
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
    if intervals is not None:
        if intervals < 1:
            raise InputError("--hours", "the horizon must hold at least one interval")
        reps = -(-intervals // values.shape[1])
        values = np.tile(values, (1, reps))[:, :intervals]
    if offline_demand < 0 or slo_headroom <= 1.0:
        raise InputError("workload", "offline_demand must be >= 0 and slo_headroom > 1")
    if arrivals not in ARRIVALS:
        raise InputError("--arrivals", f"{arrivals!r}; expected one of {', '.join(ARRIVALS)}")
    rejected: Counter[str] = Counter()
    gpu_mem_all = _gpu_memory(cluster)
    order = rng.permutation(len(gpu_mem_all))
    online = [p for p in pods if p.qos is Qos.LS and p.shape.num_gpu > 0]
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
    peak = np.minimum(values.max(axis=1)[series], PEAK_LOAD_CAP)
    slo = slo_headroom * mps.p99_ms(
        peak, np.ones(n), mps.ONLINE_SERIAL[model], mps.ONLINE_L100[model]
    )
    jobs = _offline_jobs(pods, rng, float((gpu_mem - on_mem).max()), rejected)
    horizon_s = values.shape[1] * load.interval_s
    work, mem, prof, arrival = _resample(
        jobs, rng, offline_demand * n * horizon_s, values.shape[1], int(load.interval_s),
        arrivals == "spread", float(np.median(gpu_mem - on_mem)), rejected,
    )
    return ColocationWorkload(
        gpu_memory_mib=gpu_mem, model=model, online_memory_mib=on_mem, slo_ms=slo,
        series=series, load=values, interval_s=int(load.interval_s),
        job_memory_mib=mem, job_work_s=work, job_profile=prof, job_arrival=arrival,
        description=description, rejected=dict(rejected),
    )


def _offline_jobs(
    pods: Sequence[Pod], rng: np.random.Generator, max_gpu_mib: float, rejected: Counter[str]
) -> tuple[FloatArray, FloatArray, IntArray]:
    work, mem = [], []
    for pod in pods:
        if pod.qos is not Qos.BE or pod.shape.num_gpu == 0:
            continue
        life = pod.duration
        if life is None or life <= 0:
            rejected["offline pod without a lifetime"] += pod.shape.num_gpu
            continue
        share = pod.shape.gpu_milli / MILLI_PER_GPU if pod.shape.fractional else 1.0
        for _ in range(pod.shape.num_gpu):
            work.append(life * share)
            mem.append(share * REFERENCE_GPU_MIB if share < 1.0 else np.nan)
    mem_arr = np.array(mem, dtype=np.float64)
    prof = rng.integers(0, len(mps.TRAINING_MEMORY_MB), len(mem_arr)).astype(np.int64)
    mem_arr = np.where(np.isnan(mem_arr), np.asarray(mps.TRAINING_MEMORY_MB)[prof], mem_arr)
    fits = mem_arr <= max_gpu_mib
    if (~fits).any():
        rejected["offline job: memory exceeds the room of every GPU"] += int((~fits).sum())
    return np.array(work, dtype=np.float64)[fits], mem_arr[fits], prof[fits]


def _resample(
    jobs: tuple[FloatArray, FloatArray, IntArray],
    rng: np.random.Generator,
    target_s: float,
    intervals: int,
    interval_s: int,
    spread: bool,
    typical_room_mib: float,
    rejected: Counter[str],
) -> tuple[FloatArray, FloatArray, IntArray, IntArray]:
    """Every job once (shuffled), then draws with replacement until the work that can run
    within the horizon (each job's work capped at the time from its arrival to the end, and
    counted only if it fits ``typical_room_mib``) reaches ``target_s``; in arrival order."""
    work, mem, prof = jobs
    fits = (mem <= typical_room_mib).astype(np.float64)
    horizon_s = float(intervals * interval_s)

    def arrive(k: int) -> IntArray:
        if not spread:
            return np.zeros(k, dtype=np.int64)
        return rng.integers(0, intervals, k).astype(np.int64)

    idx = rng.permutation(len(work)).astype(np.int64)
    arrival = arrive(len(idx))
    done = float((fits[idx] * np.minimum(work[idx], horizon_s - arrival * interval_s)).sum())
    parts, times = [idx], [arrival]
    per_draw = float(np.mean(fits * np.minimum(work, horizon_s))) if len(work) else 0.0
    if target_s > done and per_draw <= 0.0:
        rejected["offline demand unmet: no BE job fits the median GPU's room"] += 1
    while target_s > done and per_draw > 0.0:
        k = max(1024, int(np.ceil((target_s - done) / per_draw)))
        more = rng.integers(0, len(work), k).astype(np.int64)
        at = arrive(k)
        capped = fits[more] * np.minimum(work[more], horizon_s - at * interval_s)
        take = int(np.searchsorted(np.cumsum(capped), target_s - done)) + 1
        parts.append(more[:take])
        times.append(at[:take])
        done += float(capped[:take].sum())
    idx, arrival = np.concatenate(parts), np.concatenate(times)
    order = np.argsort(arrival, kind="stable")
    idx, arrival = idx[order], arrival[order]
    return work[idx], mem[idx], prof[idx], arrival


def synthetic_workload(
    rng: np.random.Generator,
    *,
    gpus: int,
    intervals: int,
    interval_s: int = 60,
    series: int = 143,
    offline_demand: float = 2.0,
    slo_headroom: float = 1.5,
    load: DutyCycles | None = None,
    arrivals: str = "spread",
    load_scale: float = 1.0,
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
                if online >= gpus:
                    continue
                online += pod.shape.num_gpu
            pods.append(pod)
    source = "synthetic duty cycles" if load is None else f"{len(load.names)} given series"
    if load is None:
        load = synthetic_duty_cycles(series, intervals, rng, interval_s=interval_s)
    return build_workload(
        cluster, pods, load, rng, intervals=intervals, offline_demand=offline_demand,
        slo_headroom=slo_headroom, arrivals=arrivals, load_scale=load_scale,
        description=f"synthetic: {gpus} online GPUs fitted to {params.source}, "
        f"{intervals} x {load.interval_s}s intervals, {source}",
    )
