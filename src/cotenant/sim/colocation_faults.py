"""Injected faults on co-located GPUs and how each policy handles them.

Four fault classes, drawn independently per GPU that runs an offline job, per interval, from
the run's Generator (rates per GPU-interval in :class:`FaultRates`; the rates are ours, for
exercising the handling, not measured):

* ``offline-crash``: the offline process dies; work since its last checkpoint (this
  interval's) is lost; it restarts after ``restart_delay`` (MuxFlow: exponential backoff).
* ``signal`` (SIGINT/SIGTERM, e.g. a preemption): with graceful handling (MuxFlow) the job
  checkpoints and exits, no progress lost, and is requeued; otherwise it is killed.
* ``mps-failure``: the MPS control daemon dies, taking its clients with it. With
  ``online_first`` (MuxFlow) the online service is restarted first, outside MPS until the
  daemon is back, so it keeps serving; otherwise it waits for the daemon and its clients to
  come back and is down for the interval (counted as not served and as an SLO miss). The
  offline job restarts after the delay. Not injected under time slicing (no MPS).
* ``gpu-xid``: an XID error in the offline job's context; the job is evicted and the GPU takes
  no offline work for ``quarantine`` intervals; the online context is unaffected.

Every fault is counted as ``<class>:injected`` and ``<class>:<outcome>``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from cotenant.errors import InputError
from cotenant.policies.colocation import ColocationPolicy, Sharing

BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]
FAULTS = ("offline-crash", "signal", "mps-failure", "gpu-xid")


@dataclass(frozen=True)
class FaultRates:
    """Probability of each fault per co-located GPU per interval."""

    offline_crash: float = 1e-4
    signal: float = 5e-5
    mps_failure: float = 2e-5
    gpu_xid: float = 1e-5

    def __post_init__(self) -> None:
        values = (self.offline_crash, self.signal, self.mps_failure, self.gpu_xid)
        if any(not 0.0 <= v <= 1.0 for v in values) or sum(values) > 1.0:
            raise InputError("fault rates", "each must be in [0, 1] and their sum <= 1")

    def scaled(self, factor: float) -> FaultRates:
        return FaultRates(self.offline_crash * factor, self.signal * factor,
                          self.mps_failure * factor, self.gpu_xid * factor)


@dataclass(frozen=True)
class FaultResult:
    counts: dict[str, int]
    lost: BoolArray  # this interval's offline progress lost
    stopped: BoolArray  # the offline job leaves the GPU
    quarantine: BoolArray  # the GPU takes no offline work for a while
    online_down: BoolArray  # online service not served this interval


def handle_faults(
    policy: ColocationPolicy,
    rng: np.random.Generator,
    rates: FaultRates,
    has: BoolArray,
    t: int,
    job_on: IntArray,
    failures: IntArray,
    ready: IntArray,
) -> FaultResult:
    """Draw this interval's faults on GPUs in ``has``; update ``failures``/``ready`` in place."""
    n = len(has)
    mps_rate = rates.mps_failure if policy.sharing is Sharing.MPS else 0.0
    edges = np.cumsum([rates.offline_crash, rates.signal, mps_rate, rates.gpu_xid])
    idx = np.flatnonzero(has)
    kind = np.searchsorted(edges, rng.random(len(idx)), side="right")
    cls = np.full(n, len(FAULTS), dtype=np.int64)
    cls[idx] = kind
    crash, signal, mps_fail, xid = (cls == i for i in range(len(FAULTS)))
    graceful = signal & policy.graceful_signals
    lost = crash | mps_fail | xid | (signal & ~graceful)
    stopped = lost | graceful
    jobs = job_on[lost]
    failures[jobs] += 1
    ready[jobs] = t + 1 + policy.restart_delay(failures[jobs])
    ready[job_on[graceful]] = t + 1
    restart = "restarted-with-backoff" if policy.backoff_base else "restarted"
    counts = {
        "offline-crash:injected": int(crash.sum()),
        f"offline-crash:{restart}": int(crash.sum()),
        "signal:injected": int(signal.sum()),
        "signal:graceful-exit-requeued": int(graceful.sum()),
        "signal:killed-requeued": int((signal & ~graceful).sum()),
        "mps-failure:injected": int(mps_fail.sum()),
        "mps-failure:online-restarted-first": int((mps_fail & policy.online_first).sum()),
        "mps-failure:online-down-one-interval": int((mps_fail & ~policy.online_first).sum()),
        f"mps-failure:offline-{restart}": int(mps_fail.sum()),
        "gpu-xid:injected": int(xid.sum()),
        "gpu-xid:offline-evicted-gpu-quarantined": int(xid.sum()),
    }
    down = mps_fail if not policy.online_first else np.zeros(n, dtype=bool)
    return FaultResult({k: v for k, v in counts.items() if v}, lost, stopped, xid, down)
