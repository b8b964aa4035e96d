"""Injected faults on co-located GPUs, answered by the policy's recovery rules.

Four fault classes, drawn per GPU per interval from one uniform per GPU (the same draws for
every policy, so policies meet the same faults wherever they have a job placed; the rates are
ours, for exercising the handling, not measured):

* ``offline-crash``: the offline process dies (its own fault): the interval's progress is
  lost, and it restarts after the recovery's backoff, or is given up past ``max_restarts``;
* ``signal`` (SIGINT/SIGTERM, a preemption): with graceful handling the job checkpoints and
  is requeued with no loss; otherwise it is killed like a crash;
* ``mps-failure``: the MPS daemon dies with its clients (not the workloads' fault: no
  backoff, nothing counted). With ``online_first`` the online service is restarted first,
  outside MPS, and keeps serving; otherwise it is down for the interval (every request late).
  Not injected where the mechanism is not MPS;
* ``gpu-xid``: an XID error in the offline job's context: the job is evicted and the GPU takes
  no offline work for the recovery's ``quarantine_s``.

Each is counted as ``<class>:injected`` and ``<class>:<outcome>``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from cotenant.errors import InputError
from cotenant.policies.colocation import ColocationPolicy, Mechanism

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
    lost: BoolArray  # the interval's offline progress lost
    stopped: BoolArray  # the offline job leaves the GPU
    given_up: BoolArray  # ... for good
    quarantine: BoolArray
    online_down: BoolArray


def handle_faults(policy: ColocationPolicy, draw: npt.NDArray[np.float64], rates: FaultRates,
                  has: BoolArray, t: int, interval_s: int, job_on: IntArray, failures: IntArray,
                  ready: IntArray) -> FaultResult:
    """Faults of this interval where ``has`` (``draw``: one uniform per GPU); updates
    ``failures`` and ``ready`` (the interval a job may run again) in place."""
    rec = policy.recovery
    mps_rate = rates.mps_failure if policy.mechanism is Mechanism.MPS else 0.0
    edges = np.cumsum([rates.offline_crash, rates.signal, mps_rate, rates.gpu_xid])
    kind = np.where(has, np.searchsorted(edges, draw, side="right"), len(FAULTS))
    crash, signal, mps_fail, xid = (kind == i for i in range(len(FAULTS)))
    graceful = signal & rec.graceful_signals
    own = crash | (signal & ~graceful)
    lost = own | mps_fail | xid
    jobs = job_on[own]
    failures[jobs] += 1
    gave_up = np.zeros(len(has), dtype=np.bool_)
    gave_up[own] = failures[jobs] > rec.max_restarts
    delay = np.ceil(rec.delay_s(failures[jobs]) / interval_s).astype(np.int64)
    ready[jobs] = t + 1 + delay
    ready[job_on[graceful | mps_fail | xid]] = t + 1
    restart = "restarted-with-backoff" if rec.backoff_base_s else "restarted"
    counts = {
        "offline-crash:injected": int(crash.sum()),
        f"offline-crash:{restart}": int((crash & ~gave_up).sum()),
        "offline-crash:given-up": int((crash & gave_up).sum()),
        "signal:injected": int(signal.sum()),
        "signal:graceful-exit-requeued": int(graceful.sum()),
        "signal:killed-requeued": int((signal & ~graceful).sum()),
        "mps-failure:injected": int(mps_fail.sum()),
        "mps-failure:online-restarted-first": int((mps_fail & rec.online_first).sum()),
        "mps-failure:online-down-one-interval": int((mps_fail & ~rec.online_first).sum()),
        "mps-failure:offline-restarted": int(mps_fail.sum()),
        "gpu-xid:injected": int(xid.sum()),
        "gpu-xid:offline-evicted-gpu-quarantined": int(xid.sum()),
    }
    down = mps_fail & ~rec.online_first
    return FaultResult({k: v for k, v in counts.items() if v}, lost, lost | graceful, gave_up,
                       xid, down)
