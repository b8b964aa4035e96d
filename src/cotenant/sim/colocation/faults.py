"""Injected faults on co-located GPUs, answered by the policy's recovery rules.

Four fault classes, drawn per GPU per interval from one uniform per GPU (the same draws for
every policy, so policies meet the same faults wherever they have a job placed; the rates are
ours, for exercising the handling, not measured):

* ``offline-crash``: the offline process dies (its own fault): the interval's progress is
  lost, and it restarts after the recovery's backoff, or is given up past ``max_restarts``;
* ``signal`` (SIGINT/SIGTERM, a preemption): with graceful handling the job checkpoints and
  is requeued with no loss; otherwise it is killed and restarts after its backoff;
* ``mps-failure``: the MPS daemon dies with its clients (not the workloads' fault: no
  backoff, nothing counted). With ``online_first`` the online service is restarted first,
  outside MPS, and keeps serving; otherwise it is down for the interval (every request late).
  Not injected where the mechanism is not MPS;
* ``gpu-xid``: an XID error in the offline job's context: the job is evicted and the GPU takes
  no offline work for the recovery's ``quarantine_s``.

Each is counted as ``<class>:injected`` and ``<class>:<outcome>``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from cotenant.errors import InputError
from cotenant.policies.colocation import ColocationPolicy, Fault, Mechanism, Next, Response

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
    """Faults of this interval where ``has`` (``draw``: one uniform per GPU), each answered by
    the policy's :meth:`Recovery.respond`, as the node agent's supervisor answers a real exit;
    updates ``failures`` and ``ready`` (the interval a job may run again) in place."""
    rec = policy.recovery
    mps_rate = rates.mps_failure if policy.mechanism is Mechanism.MPS else 0.0
    edges = np.cumsum([rates.offline_crash, rates.signal, mps_rate, rates.gpu_xid])
    kind = np.where(has, np.searchsorted(edges, draw, side="right"), len(FAULTS))
    n = len(has)
    lost, stopped, gave_up = (np.zeros(n, dtype=np.bool_) for _ in range(3))
    counts: Counter[str] = Counter()
    for gpu in np.flatnonzero(kind < len(FAULTS)):  # rare: a loop is cheap
        name = FAULTS[int(kind[gpu])]
        job = int(job_on[gpu])
        got = rec.respond(_FAULT_OF[name], online=False, failures=int(failures[job]))
        counts[f"{name}:injected"] += 1
        failures[job] += int(got.counts)
        stopped[gpu] = True
        lost[gpu] = got.loses_progress
        if got.next is Next.GIVE_UP:
            gave_up[gpu] = True
            counts[f"{name}:given-up"] += 1
            continue
        wait = max(got.delay_s, got.quarantine_s if name == "gpu-xid" else 0.0)
        ready[job] = t + 1 + (int(np.ceil(got.delay_s / interval_s)) if name != "gpu-xid"
                              else 0)
        counts[f"{name}:{_outcome(name, got, rec.online_first, wait)}"] += 1
    xid = kind == FAULTS.index("gpu-xid")
    down = (kind == FAULTS.index("mps-failure")) & ~rec.online_first
    if down.any():
        counts["mps-failure:online-down-one-interval"] += int(down.sum())
    return FaultResult(dict(counts), lost, stopped, gave_up, xid, down)


_FAULT_OF = {"offline-crash": Fault.CRASH, "signal": Fault.SIGNAL,
             "mps-failure": Fault.NOT_ITS_OWN, "gpu-xid": Fault.XID}


def _outcome(name: str, got: Response, online_first: bool, wait: float) -> str:
    if got.next is Next.STOP:
        return "graceful-exit-requeued"
    if name == "gpu-xid":
        return "offline-evicted-gpu-quarantined"
    if name == "mps-failure":
        return "offline-restarted" + ("-online-first" if online_first else "")
    return "restarted-with-backoff" if wait > 0 else "restarted"
