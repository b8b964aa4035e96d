"""Classifying a workload's exit, the way MuxFlow's agent does before deciding what to do.

Order of evidence: an XID the driver reported on the workload's GPU shortly before the exit
(for the exiting pid, or for no pid in particular); an MPS server failure the supervisor saw;
a signal (``returncode < 0``); the CUDA error text of the last stderr line (out of memory, MPS,
other CUDA errors); exit 0 is a clean exit; anything else is a plain crash. A process whose
exit status was lost (not our child after an agent restart) is ``LOST``. Also here: which
exits during a stop the agent asked for count as no fault (:func:`asked_for`), and the
restart backoff after a fault (:class:`Backoff`).
"""

from __future__ import annotations

import enum
import signal
from collections.abc import Sequence
from dataclasses import dataclass

from cotenant.agent.backends.base import ProcessStatus, ProcState, XidEvent

XID_WINDOW_S = 10.0
_ASKED = {signal.SIGTERM, signal.SIGKILL}  # what the agent sends to stop a workload
_ASKED_CODES = {0, 128 + signal.SIGTERM, 128 + signal.SIGKILL}  # clean, or a shell's code


class FaultClass(enum.Enum):
    NONE = "none"  # exit 0
    SIGNAL = "signal"
    OOM = "oom"
    MPS = "mps"
    CUDA = "cuda"
    XID = "xid"
    CRASH = "crash"  # non-zero exit without a GPU error
    LOST = "lost"  # exit status unknown


def classify(
    status: ProcessStatus,
    gpu: int,
    now: float,
    xids: Sequence[XidEvent] = (),
    mps_failed: bool = False,
) -> tuple[FaultClass, str]:
    """The fault class of an exited process and a one-line detail."""
    if status.state is ProcState.UNKNOWN:
        return FaultClass.LOST, "exit status unknown (process gone)"
    for event in reversed(xids):
        if event.gpu == gpu and now - event.time <= XID_WINDOW_S and event.pid in (None,
                                                                                   status.pid):
            return FaultClass.XID, f"XID {event.xid} on GPU {gpu}: {status.message}".strip()
    code = status.returncode
    text = status.message.lower()
    if mps_failed:
        return FaultClass.MPS, f"MPS server of GPU {gpu} failed: {status.message}".strip()
    if code is not None and code < 0:
        return FaultClass.SIGNAL, f"killed by {signal_name(-code)}"
    if "out of memory" in text:
        return FaultClass.OOM, status.message
    if "mps" in text:
        return FaultClass.MPS, status.message
    if "cuda" in text:
        return FaultClass.CUDA, status.message
    if code == 0:
        return FaultClass.NONE, "exit 0"
    return FaultClass.CRASH, f"exit {code}: {status.message}".strip()


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def asked_for(status: ProcessStatus, fault: FaultClass) -> bool:
    """Whether an exit during a stop the agent asked for (a stop, a share change, an
    eviction) is that stop, not a fault: the SIGTERM it sent or the SIGKILL after the
    grace, any exit code without a GPU error (torchrun exits 1 on SIGTERM), or exit 0, 143
    or 137 even where the last stderr line mentions CUDA or memory."""
    code = status.returncode
    return (
        (fault is FaultClass.SIGNAL and code is not None and -code in _ASKED)
        or fault in (FaultClass.NONE, FaultClass.CRASH)
        or (fault in (FaultClass.CUDA, FaultClass.OOM) and code in _ASKED_CODES)
    )


@dataclass(frozen=True)
class Backoff:
    """Delay before restart ``n`` (1-based): ``min(cap_s, base_s * factor ** (n - 1))``."""

    base_s: float = 1.0
    factor: float = 2.0
    cap_s: float = 300.0

    def delay(self, n: int) -> float:
        return min(self.cap_s, self.base_s * self.factor ** max(0, n - 1))
