"""Offline jobs of the co-location workload: one per GPU of each openb ``BE`` pod, resampled.

A job's work is its pod's lifetime in GPU-seconds (times ``gpu_milli / 1000`` for a
fractional pod); its memory is ``gpu_milli``'s share of a 16 GiB GPU, or a Tally training
footprint (seeded) for a whole-GPU pod. The trace's BE work is far less than the online GPUs'
idle time, so :func:`resample_jobs` draws jobs with replacement until the work that can run
within the horizon reaches the demand (see :mod:`cotenant.sim.colocation.workload`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from cotenant.model.workload import MILLI_PER_GPU, Pod, Qos
from cotenant.perf import mps

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
REFERENCE_GPU_MIB = 16384
"""Memory of the GPU a fractional BE pod's ``gpu_milli`` is a share of."""


def offline_jobs(
    pods: Sequence[Pod], rng: np.random.Generator, max_gpu_mib: float, rejected: Counter[str]
) -> tuple[FloatArray, FloatArray, IntArray]:
    """Work (GPU-seconds), memory (MiB) and solo profile index of one job per GPU of each BE
    pod; pods without a lifetime and jobs bigger than ``max_gpu_mib`` are counted in
    ``rejected``."""
    work, mem = [], []
    for pod in pods:
        if pod.qos is not Qos.BE or pod.shape.num_gpu == 0:
            continue
        life = pod.duration
        if life is None or life <= 0:
            rejected["offline pod without a lifetime"] += 1
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


def resample_jobs(
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
