"""Classifying a workload's exit, the way MuxFlow's agent does before deciding what to do.

Order of evidence: an XID the driver reported on the workload's GPU shortly before the exit
(for the exiting pid, or for no pid in particular); an MPS server failure the supervisor saw;
a signal (``returncode < 0``); the CUDA error text of the last stderr line (out of memory, MPS,
other CUDA errors); exit 0 is a clean exit; anything else is a plain crash. A process whose
exit status was lost (not our child after an agent restart) is ``LOST``.
"""

from __future__ import annotations

import enum
import signal
from collections.abc import Sequence

from cotenant.agent.backends.base import ProcessStatus, ProcState, XidEvent

XID_WINDOW_S = 10.0


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
