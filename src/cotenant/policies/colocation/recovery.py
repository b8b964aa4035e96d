"""What to do when a workload exits: restart now, after a backoff, or not at all.

One rule book for the simulator's injected faults and the node agent's real exits, so a policy's
fault handling is written once (MuxFlow's mixed error handling):

* a signal (SIGINT/SIGTERM, say a preemption) ends an offline job gracefully where
  ``graceful_signals`` holds (it checkpoints and exits: no progress lost, requeued at once),
  else it is killed (progress since its checkpoint lost) and restarts after its backoff;
* a crash of the workload itself (CUDA error, OOM, a plain crash) counts against its restart
  budget and restarts after ``delay_s(failures)``; an online service's first crash restarts at
  once; past ``max_restarts`` an offline job is given up, an online service never is (its GPU
  is healthy, so it is restarted at the capped backoff);
* a fault that is not the workload's own (its MPS server died, the agent lost its exit status)
  restarts it at once and does not count; with ``online_first`` the online service comes back
  first, outside MPS until the daemon is back, so it keeps serving;
* an XID error evicts the offline job and quarantines the GPU for ``quarantine_s``;
* the budget recovers: a run of ``stable_s`` without a fault clears the count.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from cotenant.errors import InputError, check_seconds

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


class Fault(enum.Enum):
    """Why a workload exited, as recovery sees it."""

    NONE = "none"  # exit 0: done
    SIGNAL = "signal"  # SIGINT/SIGTERM from outside
    CRASH = "crash"  # its own: CUDA error, OOM, plain crash, killed by another signal
    NOT_ITS_OWN = "not-its-own"  # MPS server died, exit status lost
    XID = "xid"


class Next(enum.Enum):
    DONE = "done"
    STOP = "stop"  # graceful: checkpointed, not restarted by the node (requeued by the cluster)
    RESTART = "restart"
    GIVE_UP = "give-up"


@dataclass(frozen=True)
class Response:
    next: Next
    delay_s: float = 0.0
    counts: bool = False
    """The exit counts against the restart budget."""
    loses_progress: bool = False
    quarantine_s: float = 0.0
    """The GPU takes no offline work for this long (an XID in the offline job's context)."""


@dataclass(frozen=True)
class Recovery:
    """Backoff ``min(cap_s, base_s * factor ** (failures - 1))``, budgets, and the rules above."""

    backoff_base_s: float = 0.0
    backoff_factor: float = 2.0
    backoff_cap_s: float = 300.0
    max_restarts: int = 10
    stable_s: float = 600.0
    online_first: bool = False
    graceful_signals: bool = False
    quarantine_s: float = 1800.0

    def __post_init__(self) -> None:
        for name in ("backoff_base_s", "backoff_cap_s", "stable_s", "quarantine_s"):
            check_seconds(getattr(self, name), f"recovery.{name}")
        if not self.backoff_factor >= 1.0:
            raise InputError("recovery.backoff_factor", f"{self.backoff_factor} must be >= 1")
        if self.max_restarts < 0:
            raise InputError("recovery.max_restarts", "must be >= 0")

    def delay_s(self, failures: IntArray | int) -> FloatArray:
        """Seconds before restart number ``failures`` (1-based); 0 without a backoff."""
        f = np.asarray(failures, dtype=np.float64)
        if self.backoff_base_s == 0.0:
            return np.zeros_like(f)
        exp = np.minimum(np.maximum(f - 1.0, 0.0), 60.0)
        return np.asarray(np.minimum(self.backoff_cap_s,
                                     self.backoff_base_s * self.backoff_factor ** exp),
                          dtype=np.float64)

    def failures_after(self, failures: int, stable_for_s: float) -> int:
        """The count a new fault adds to, after a run of ``stable_for_s`` seconds."""
        return 0 if stable_for_s >= self.stable_s else failures

    def respond(self, fault: Fault, online: bool, failures: int) -> Response:
        """What follows an exit of class ``fault`` after ``failures`` counted ones before it."""
        if fault is Fault.NONE:
            return Response(Next.DONE)
        if fault is Fault.NOT_ITS_OWN:  # its process died with the daemon: not counted
            return Response(Next.RESTART, loses_progress=True)
        if fault is Fault.SIGNAL and not online and self.graceful_signals:
            return Response(Next.STOP)
        if fault is Fault.XID and not online:
            return Response(Next.RESTART, self.quarantine_s, counts=True, loses_progress=True,
                            quarantine_s=self.quarantine_s)
        n = failures + 1
        if online:
            delay = 0.0 if n == 1 else float(self.delay_s(min(n - 1, 60)))
            return Response(Next.RESTART, delay, counts=True)
        if n > self.max_restarts:
            return Response(Next.GIVE_UP, counts=True, loses_progress=True)
        return Response(Next.RESTART, float(self.delay_s(n)), counts=True, loses_progress=True)
