"""What a co-location run takes besides the workload and the policy, and what it gives.

:class:`ColocationConfig` is the environment a run assumes (fault rates, restart costs, the
matching's block size); :class:`IntervalState` is what an observer sees after each interval;
:class:`ColocationRun` holds the metrics over time and the totals, with a JSON-ready summary.
Kept apart from the stepping loop (:mod:`cotenant.sim.colocation`) so that reports and
benchmarks read results without the engine.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from cotenant.errors import check_seconds
from cotenant.sim.colocation_faults import FaultRates

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class ColocationRun:
    """Metrics over time (one value per interval) and totals of one policy's run.

    ``offline_throughput`` is offline work done per interval in whole-GPU equivalents per
    online GPU; ``jct_mean_min`` is the mean completion time of the jobs that finished, from
    their arrival (NaN, and None in :meth:`summary`, when none did); ``faults`` counts
    ``<class>:injected`` and each outcome."""

    policy: str
    seed: int
    interval_s: int
    utilisation: FloatArray
    sm_activity: FloatArray
    memory_used: FloatArray
    violation_rate: FloatArray
    p99_over_slo: FloatArray  # median p99 / SLO, capped at 10 (a service down counts at 10)
    oom_rate: FloatArray  # share of online services out of memory
    offline_throughput: FloatArray
    running: IntArray
    online_served: IntArray
    gpus: int
    jobs_completed: int
    jct_mean_min: float
    throttles: int
    evictions: int
    faults: dict[str, int]
    online_ooms: int = 0
    """GPU-intervals in which the online service ran out of memory."""
    offline_starts: int = 0
    """Offline processes started on a GPU (placements)."""
    share_changes: int = 0
    """Changes of a running offline client's MPS share (the share policy's, and the guard's
    throttles of jobs placed before this interval; both in one interval count twice); each
    is a restart unless ``ColocationConfig.share_change_s`` is 0."""
    job_wait_min: FloatArray | None = None
    """Per offline job, minutes from its arrival to its completion; NaN where it did not
    finish (for :func:`common_jct`)."""

    def summary(self) -> dict[str, object]:
        """Totals and means over the run, JSON-ready."""
        return {
            "policy": self.policy,
            "seed": self.seed,
            "gpus": self.gpus,
            "utilisation_pct": round(100 * float(self.utilisation.mean()), 2),
            "sm_activity_pct": round(100 * float(self.sm_activity.mean()), 2),
            "memory_used_pct": round(100 * float(self.memory_used.mean()), 2),
            "slo_violation_pct": round(100 * float(self.violation_rate.mean()), 3),
            "p99_over_slo_median": round(float(np.median(self.p99_over_slo)), 3),
            "offline_throughput": round(float(self.offline_throughput.mean()), 4),
            "jobs_completed": self.jobs_completed,
            "jct_mean_min": (round(self.jct_mean_min, 1) if self.jobs_completed else None),
            "throttles": self.throttles,
            "evictions": self.evictions,
            "online_oom_intervals": self.online_ooms,
            "colocated_gpu_intervals": int(self.running.sum()),
            "offline_starts": self.offline_starts,
            "share_changes": self.share_changes,
            "faults": dict(sorted(self.faults.items())),
        }


@dataclass(frozen=True)
class IntervalState:
    """What an observer (progress bar, test) sees after each interval."""

    t: int
    online_share: IntArray  # percent; the offline co-runner has 100 - share
    offline_job: IntArray  # -1 where none runs now
    memory_used_mib: FloatArray  # online + offline during the interval
    online_served: int


@dataclass(frozen=True)
class ColocationConfig:
    """The environment a run assumes (not the policy's choices)."""

    faults: FaultRates = field(default_factory=FaultRates)
    block: int = 64
    slack: int = 16
    offline_start_s: float = 30.0
    """Seconds an offline process is down each time it starts on a GPU (placement). An
    assumption, not a measurement; ``benchmarks/colocation.py --only restart`` sweeps it."""
    share_change_s: float = 30.0
    """Seconds a running offline job is down when its MPS share changes (the dynamic share
    or a guard throttle). MPS reads a client's share only when it creates its context, so
    the agent restarts the job (checkpoint on SIGTERM, start again): by default the same as
    a start. 0 models an enforcement layer that changes shares in place (MuxFlow's xCUDA
    throttles kernel launches inside the offline process)."""

    def __post_init__(self) -> None:
        for name in ("offline_start_s", "share_change_s"):
            check_seconds(getattr(self, name), f"ColocationConfig.{name}")


DEFAULT_CONFIG = ColocationConfig()
"""The defaults above: what a run assumes unless told otherwise."""


def common_finished(runs: Sequence[ColocationRun]) -> npt.NDArray[np.bool_] | None:
    """Per job, whether every run that finished any job finished it; None if none did."""
    waits = [r.job_wait_min for r in runs if r.job_wait_min is not None and r.jobs_completed]
    if not waits:
        return None
    return np.asarray(np.logical_and.reduce([~np.isnan(w) for w in waits]), dtype=np.bool_)


def common_jct(runs: Sequence[ColocationRun]) -> dict[str, float | None]:
    """Per run (by policy), the mean completion time (minutes) of the jobs that *every* run
    finishing any job finished: each run's own mean is over its own finished jobs, and
    policies that finish different jobs (a policy that starts big, long jobs finishes fewer)
    are not compared on one set by it. Runs that finished no job (dedicated) are left out
    of the set and get None, as all do when the set is empty."""
    common = common_finished(runs)
    if common is None:
        return {r.policy: None for r in runs}
    out: dict[str, float | None] = {}
    for r in runs:
        wait = r.job_wait_min
        out[r.policy] = (round(float(wait[common].mean()), 1)
                         if wait is not None and r.jobs_completed and common.any() else None)
    return out
