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

from cotenant.agent.backends.base import ProcessStatus, ProcState, XidEvent
from cotenant.policies.colocation.recovery import Fault

XID_WINDOW_S = 10.0
_ASKED = {signal.SIGTERM, signal.SIGKILL}  # what the agent sends to stop a workload
_ASKED_CODES = {0, 128 + signal.SIGTERM, 128 + signal.SIGKILL}  # clean, or a shell's code
_FROM_OUTSIDE = {signal.SIGINT, signal.SIGTERM}  # a preemption, an operator's Ctrl-C


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
            return FaultClass.XID, _detail(f"XID {event.xid} on GPU {gpu}", status.message)
    code = status.returncode
    text = status.message.lower()
    if mps_failed:
        return FaultClass.MPS, _detail(f"MPS server of GPU {gpu} failed", status.message)
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
    return FaultClass.CRASH, _detail(f"exit {code}", status.message)


def _detail(what: str, message: str) -> str:
    """``what``, then the process's last stderr line where it left one."""
    return f"{what}: {message}" if message else what


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


_RECOVERY = {
    FaultClass.NONE: Fault.NONE,
    FaultClass.OOM: Fault.CRASH,
    FaultClass.CUDA: Fault.CRASH,
    FaultClass.CRASH: Fault.CRASH,
    FaultClass.MPS: Fault.NOT_ITS_OWN,
    FaultClass.LOST: Fault.NOT_ITS_OWN,
    FaultClass.XID: Fault.XID,
}


def recovery_fault(fault: FaultClass, signum: int = 0) -> Fault:
    """``fault`` as :class:`~cotenant.policies.colocation.Recovery` sees it: a workload's own
    error is a crash, a dead MPS server or a lost exit status is not its own; a signal is a
    request from outside only for SIGINT and SIGTERM (``signum``), any other (SIGSEGV, a
    SIGKILL from the kernel's OOM killer) ends it like a crash."""
    if fault is FaultClass.SIGNAL:
        return Fault.SIGNAL if signum in _FROM_OUTSIDE else Fault.CRASH
    return _RECOVERY[fault]
