"""What a co-location run takes besides the workload and the policy, and what it gives.

:class:`ColocationConfig` is the world a run assumes (fault rates, start and restart costs,
how long the guard's action takes to land, the calibration, the load the policies are
shown); :class:`IntervalState` is what an
observer sees after each interval; :class:`ColocationRun` holds the metrics over time and the
totals, with a JSON-ready summary. SLO misses are counted two ways: per request (the headline:
the share of all requests slower than their SLO) and per GPU-minute (a minute in which more
than 1% of a service's requests missed, i.e. its p99 was over the SLO, or it served nothing).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from cotenant.errors import InputError, check_seconds
from cotenant.perf.interference import SOURCES, STATISTICS
from cotenant.policies.colocation import GuardSettings
from cotenant.sim.colocation.faults import FaultRates
from cotenant.sim.colocation.load_signal import LoadSignal

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

GUARD_PATH_S = 0.186
"""The node agent's guard path, from a p99 rise in a service's histogram until the offline
co-runner is paused: median of ``benchmarks/guard_reaction.py`` at its defaults (0.25 s scrape,
watcher on; 2026-11-24, docs/results/agent). It includes the report window; the simulator
models that window itself (``guard.scrape_s``), so the action's own part is the rest."""
DRAIN_S = 0.028
"""The GPU draining the kernels a paused training job had queued: median of five SIGSTOPs of
ResNet-50 training beside ResNet-50 serving on an H200 (``benchmarks/gpu_colocation.py``,
2026-11-26, ``perf/data/h200_colocation.csv``'s run: 0.026-0.044 s, one outlier of 2.5 s)."""
REACTION_S = round(GUARD_PATH_S - GuardSettings().scrape_s / 2 + DRAIN_S, 3)
"""From the end of the report window until the action lands: the agent's path less the mean
wait for the report window (half the 0.25 s scrape, which the simulator counts itself), plus
the drain: about 0.09 s."""


@dataclass(frozen=True)
class ColocationConfig:
    """The world a run assumes (not the policy's choices)."""

    faults: FaultRates = field(default_factory=FaultRates)
    block: int = 64
    slack: int = 16
    offline_start_s: float = 30.0
    """Seconds an offline process is down each time it starts on a GPU. Measured for a bare
    ResNet-50 training loop on an H200: 8.0-9.0 s from spawn to its first step
    (``perf/data``'s run); a real job adds its checkpoint and data loader, so 30 s."""
    share_change_s: float = 30.0
    """Seconds a running offline job is down when its MPS cap changes (a checkpoint-and-restart:
    MPS reads the cap when the client starts); 0 models a cap changed in place."""
    reaction_s: float = REACTION_S
    """Seconds from the end of the guard's report window until its action lands."""
    calibration: str = "tally"
    statistic: str = "mean"
    load_signal: str = "auto"
    """The load the policies are shown (:class:`~cotenant.sim.colocation.load_signal.
    LoadSignal`): ``auto`` (counted from the request rate under MPS, the service's own
    otherwise), ``service``, ``requests`` or ``whole-gpu``."""

    def __post_init__(self) -> None:
        for name in ("offline_start_s", "share_change_s", "reaction_s"):
            check_seconds(getattr(self, name), f"ColocationConfig.{name}")
        if self.calibration not in SOURCES:
            raise InputError("calibration", f"{self.calibration!r}; one of "
                             f"{', '.join(SOURCES)}")
        if self.statistic not in STATISTICS:
            raise InputError("statistic", f"{self.statistic!r}; one of {', '.join(STATISTICS)}")
        LoadSignal.parse(self.load_signal)


DEFAULT_CONFIG = ColocationConfig()


@dataclass(frozen=True)
class ColocationRun:
    """Metrics over time (one value per interval) and totals of one policy's run.

    ``offline_throughput`` is offline work per interval in whole-GPU equivalents per online GPU;
    ``requests``/``late_requests`` the online requests served and those over their SLO."""

    policy: str
    seed: int
    interval_s: int
    utilisation: FloatArray
    sm_activity: FloatArray
    memory_used: FloatArray
    requests: FloatArray
    late_requests: FloatArray
    minute_violation: FloatArray
    """Share of online GPUs whose minute missed (p99 over the SLO, or nothing served)."""
    oom_rate: FloatArray
    offline_throughput: FloatArray
    running: IntArray
    online_served: IntArray
    gpus: int
    jobs_completed: int
    jct_mean_min: float
    counts: dict[str, int]
    """``pauses``, ``throttles``, ``evictions``, ``share_changes``, ``offline_starts``,
    ``online_oom_intervals``, ``jobs_given_up``."""
    faults: dict[str, int]
    job_wait_min: FloatArray | None = None

    @property
    def violation_pct(self) -> float:
        """Per request: the share of all requests slower than their SLO, in percent."""
        total = float(self.requests.sum())
        return 100.0 * float(self.late_requests.sum()) / total if total > 0 else 0.0

    def summary(self) -> dict[str, object]:
        """Totals and means over the run, JSON-ready."""
        return {
            "policy": self.policy,
            "seed": self.seed,
            "gpus": self.gpus,
            "utilisation_pct": round(100 * float(self.utilisation.mean()), 2),
            "sm_activity_pct": round(100 * float(self.sm_activity.mean()), 2),
            "memory_used_pct": round(100 * float(self.memory_used.mean()), 2),
            "slo_violation_pct": round(self.violation_pct, 3),
            "gpu_minute_violation_pct": round(100 * float(self.minute_violation.mean()), 3),
            "offline_throughput": round(float(self.offline_throughput.mean()), 4),
            "jobs_completed": self.jobs_completed,
            "jct_mean_min": (round(self.jct_mean_min, 1) if self.jobs_completed else None),
            "colocated_gpu_intervals": int(self.running.sum()),
            **self.counts,
            "faults": dict(sorted(self.faults.items())),
        }


@dataclass(frozen=True)
class IntervalState:
    """What an observer (progress bar, test) sees after each interval."""

    t: int
    online_share: IntArray
    offline_job: IntArray
    memory_used_mib: FloatArray
    online_served: int


def common_finished(runs: Sequence[ColocationRun]) -> npt.NDArray[np.bool_] | None:
    """Per job, whether every run that finished any job finished it; None if none did."""
    waits = [r.job_wait_min for r in runs if r.job_wait_min is not None and r.jobs_completed]
    if not waits:
        return None
    return np.asarray(np.logical_and.reduce([~np.isnan(w) for w in waits]), dtype=np.bool_)


def common_jct(runs: Sequence[ColocationRun]) -> dict[str, float | None]:
    """Per run (by policy), the mean completion time (minutes) of the jobs that *every* run
    finishing any job finished; None for runs that finished none, or an empty set."""
    common = common_finished(runs)
    if common is None:
        return {r.policy: None for r in runs}
    out: dict[str, float | None] = {}
    for r in runs:
        wait = r.job_wait_min
        out[r.policy] = (round(float(wait[common].mean()), 1)
                         if wait is not None and r.jobs_completed and common.any() else None)
    return out
