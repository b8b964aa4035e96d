"""Training jobs for the MIG simulation: openb's best-effort pods, or a documented synthetic.

**From openb** (:func:`openb_jobs`): every BE pod that asks for one GPU or part of one is a
training job. It asks for ``ceil(7 x gpu_milli / 1000)`` compute slices (the share of a GPU
it was given, rounded up to A100 compute slices: 810 milli is 6 slices, a whole GPU 7), and
its work is its lifetime in the trace (``deletion_time - creation_time``, seconds), taken
as the time it runs at that size. Pods without a GPU (450 of openb's 3,398 BE pods), pods of
several GPUs (none among BE pods in the default list) and pods without a positive lifetime
are counted and left out.

**Synthetic** (:func:`synthetic_jobs`): sizes drawn from openb's BE single-GPU mix (2,947
pods: 1 slice 31, 2: 279, 3: 387, 4: 452, 5: 91, 6: 1,078, 7: 629) and work from a
log-normal with openb's median (266 s) and 90th percentile (5,556 s) BE lifetime, capped at
its longest (521,660 s): for tests and for machines without ``../shared``.

**Arrivals**: ``batch`` (every job at 0: the makespan of a backlog), ``trace`` (openb's own
creation times, from the first) or ``poisson`` at ``load`` times the cluster's slices.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import replace

import numpy as np

from cotenant.errors import InputError
from cotenant.model.training import TrainingJob
from cotenant.model.workload import MILLI_PER_GPU, Pod, Qos

SLICES = 7
OPENB_BE_SIZES = {1: 31, 2: 279, 3: 387, 4: 452, 5: 91, 6: 1078, 7: 629}
OPENB_BE_MEDIAN_S, OPENB_BE_P90_S, OPENB_BE_MAX_S = 266.0, 5556.0, 521_660.0
ARRIVALS = ("batch", "trace", "poisson")


def slices_of(gpu_milli: int) -> int:
    """Compute slices for a share of one GPU, rounded up (at least 1)."""
    return max(1, min(SLICES, math.ceil(SLICES * gpu_milli / MILLI_PER_GPU - 1e-9)))


def openb_jobs(pods: Iterable[Pod]) -> tuple[list[TrainingJob], Counter[str]]:
    """The BE pods of one GPU or less as jobs arriving at their creation time (from 0), and
    how many pods were left out, by reason."""
    jobs: list[TrainingJob] = []
    left: Counter[str] = Counter()
    for pod in pods:
        if pod.qos is not Qos.BE:
            continue
        if pod.shape.num_gpu == 0:
            left["no GPU"] += 1
        elif pod.shape.num_gpu > 1:
            left["several GPUs"] += 1
        elif pod.duration is None or pod.duration <= 0:
            left["no lifetime"] += 1
        else:
            jobs.append(TrainingJob(pod.name, slices_of(pod.shape.gpu_milli),
                                    float(pod.duration), float(pod.creation_time)))
    if jobs:
        first = min(j.arrival_s for j in jobs)
        jobs = [replace(j, arrival_s=j.arrival_s - first) for j in jobs]
    return jobs, left


def synthetic_jobs(count: int, rng: np.random.Generator) -> list[TrainingJob]:
    """``count`` jobs from the module docstring's synthetic, arriving at 0."""
    if count < 1:
        raise InputError("jobs", f"{count} must be at least 1")
    sizes = np.array(list(OPENB_BE_SIZES))
    weights = np.array(list(OPENB_BE_SIZES.values()), dtype=np.float64)
    drawn = rng.choice(sizes, size=count, p=weights / weights.sum())
    sigma = math.log(OPENB_BE_P90_S / OPENB_BE_MEDIAN_S) / 1.2815515655446004  # z(0.9)
    work = np.minimum(rng.lognormal(math.log(OPENB_BE_MEDIAN_S), sigma, count),
                      OPENB_BE_MAX_S)
    return [TrainingJob(f"job-{i:05d}", int(s), float(max(w, 1.0)))
            for i, (s, w) in enumerate(zip(drawn, work, strict=True))]


def arrange(jobs: Sequence[TrainingJob], arrivals: str, rng: np.random.Generator,
            limit: int | None = None, load: float = 1.0,
            cluster_slices: int = 56) -> list[TrainingJob]:
    """At most ``limit`` of ``jobs`` (a seeded sample, kept in arrival order), arriving as
    ``arrivals`` says (module docstring)."""
    if arrivals not in ARRIVALS:
        raise InputError("arrivals", f"{arrivals!r} is not one of {', '.join(ARRIVALS)}")
    if not math.isfinite(load) or load <= 0:
        raise InputError("load", f"{load} must be a number > 0")
    chosen = list(jobs)
    if limit is not None and limit < len(chosen):
        keep = sorted(rng.choice(len(chosen), size=limit, replace=False).tolist())
        chosen = [chosen[i] for i in keep]
    if arrivals == "batch":
        return [replace(j, arrival_s=0.0) for j in chosen]
    if arrivals == "trace":
        first = min((j.arrival_s for j in chosen), default=0.0)
        return [replace(j, arrival_s=j.arrival_s - first) for j in chosen]
    work = sum(j.work_s * j.slices for j in chosen)
    gap = work / (load * cluster_slices) / max(len(chosen), 1)  # mean seconds between jobs
    times = np.cumsum(rng.exponential(gap, len(chosen)))
    order = rng.permutation(len(chosen))
    return [replace(chosen[i], arrival_s=float(times[k])) for k, i in enumerate(order)]
