"""The agent's side-effect interfaces: four small Protocols and the values they exchange.

A backend (NVML or the fake node) implements :class:`DeviceInventory`, :class:`MigBackend`,
:class:`MpsBackend` and :class:`ProcessBackend`, and declares which :class:`BackendFeature` it
offers. Asking for a missing one raises :class:`~cotenant.errors.NotSupportedError` through
:func:`require`, so a GPU without MIG (a T4) or a backend without XID events degrades cleanly
instead of failing deep inside a call.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from cotenant.errors import NotSupportedError
from cotenant.model.mig import MigLayout, MigPlacement


class BackendFeature(enum.Enum):
    """A capability a backend may lack."""

    MIG = "MIG"
    MPS = "MPS"
    MPS_MEM_LIMIT = "MPS pinned memory limit"
    SM_ACTIVITY = "SM activity"
    XID_EVENTS = "XID events"
    PROCESS_CONTROL = "process control"


@dataclass(frozen=True)
class GpuProcess:
    """A compute process NVML sees on a GPU."""

    pid: int
    used_memory_mib: int
    sm_util_pct: float | None = None
    """Its SM utilisation from NVML's per-process samples; None without one. NVML samples an
    MPS client's SM use on its server's pid, not on the client's."""
    mps_client: bool = False
    """A client of an MPS daemon (``nvmlDeviceGetMPSComputeRunningProcesses``)."""
    mps_server: bool = False
    """An MPS server: its utilisation is its clients' on this GPU, together."""


def workload_sm_util(pid: int, per_pid: Mapping[int, float | None],
                     members: Callable[[int], list[int]]) -> float | None:
    """The SM utilisation (percent) of the workload ``pid`` leads: the sum over its processes
    (``ProcessBackend.members``: the leader and its workers) that NVML sampled, at most 100;
    None where none was sampled."""
    found = [u for m in members(pid) if (u := per_pid.get(m)) is not None]
    return min(100.0, sum(found)) if found else None


@dataclass(frozen=True)
class GpuInfo:
    """One GPU as the inventory reports it. ``utilisation_pct`` and ``sm_activity_pct`` are
    ``None`` where the GPU or backend does not report them (NVML reports no utilisation for a
    GPU in MIG mode); ``mig_enabled`` is the current MIG mode."""

    index: int
    uuid: str
    model: str
    memory_total_mib: int
    memory_used_mib: int
    utilisation_pct: float | None
    sm_activity_pct: float | None
    mig_enabled: bool
    processes: tuple[GpuProcess, ...] = ()


def daemon_samples(gpus: Sequence[GpuInfo]) -> dict[int, float]:
    """Per MPS client without a sample of its own, on a GPU whose MPS server has one, that
    server's SM utilisation: all its clients on the GPU together (NVML samples MPS clients'
    SM use on the server's pid)."""
    out: dict[int, float] = {}
    for info in gpus:
        served = next((p.sm_util_pct for p in info.processes
                       if p.mps_server and p.sm_util_pct is not None), None)
        if served is not None:
            out.update((p.pid, served) for p in info.processes
                       if p.mps_client and p.sm_util_pct is None)
    return out


@dataclass(frozen=True)
class MigDevice:
    """A MIG device (a GPU instance with its compute instance) that CUDA can be pointed at
    with ``CUDA_VISIBLE_DEVICES=<uuid>``."""

    gpu: int
    placement: MigPlacement
    uuid: str


@dataclass(frozen=True)
class XidEvent:
    """An XID error the driver reported on ``gpu`` at ``time`` (``pid`` where known)."""

    gpu: int
    xid: int
    time: float
    pid: int | None = None


LAUNCH_VAR = "COTENANT_LAUNCH"
"""The launch id the supervisor gives each start, in the process's environment: recorded
before the spawn (the write-ahead intent), it finds the process after an agent crash."""
WORKLOAD_VAR = "COTENANT_WORKLOAD"
SPEC_VAR = "COTENANT_SPEC"
"""The workload's spec (JSON), so that a process outlives even the loss of the database."""
AGENT_VARS = (LAUNCH_VAR, WORKLOAD_VAR, SPEC_VAR)


@dataclass(frozen=True)
class Launched:
    """A live workload leader a backend (or an earlier agent on the same state) started,
    with what its environment says it is."""

    pid: int
    launch: str
    workload: str
    spec: str = ""


def launched_from(pid: int, env: Mapping[str, str]) -> Launched | None:
    """The :class:`Launched` an environment names; None without a launch id."""
    launch = env.get(LAUNCH_VAR, "")
    if not launch:
        return None
    return Launched(pid, launch, env.get(WORKLOAD_VAR, ""), env.get(SPEC_VAR, ""))


class ProcState(enum.Enum):
    RUNNING = "running"
    EXITED = "exited"
    UNKNOWN = "unknown"  # not our child and no longer alive: the exit status is lost


@dataclass(frozen=True)
class ProcessStatus:
    """What a process backend knows about ``pid``. ``returncode`` follows ``subprocess``:
    negative = killed by that signal. ``message`` is the last line the process wrote to
    stderr (the CUDA/MPS/OOM error text used to classify the exit)."""

    pid: int
    state: ProcState
    returncode: int | None = None
    message: str = ""
    gpu: int | None = None


@dataclass(frozen=True)
class DaemonConfig:
    """How to run the MPS control daemon of one GPU."""

    gpu: int
    pipe_dir: Path
    log_dir: Path
    default_thread_pct: int = 100
    default_mem_limit_mib: int | None = None
    extra_env: Mapping[str, str] = field(default_factory=dict)


def require(features: frozenset[BackendFeature], feature: BackendFeature, subject: str) -> None:
    """Raise :class:`NotSupportedError` unless ``feature`` is among ``features``."""
    if feature not in features:
        raise NotSupportedError(feature.value, subject)


class DeviceInventory(Protocol):
    """GPUs of this node and their health."""

    def features(self) -> frozenset[BackendFeature]:
        """What this backend can do."""
        ...

    def gpus(self) -> list[GpuInfo]:
        """Every GPU, by index."""
        ...

    def gpu(self, index: int) -> GpuInfo:
        """One GPU; an unknown index raises :class:`~cotenant.errors.InputError`."""
        ...

    def xid_events(self, since: float) -> list[XidEvent]:
        """XID events reported after ``since`` (requires ``XID_EVENTS``)."""
        ...


class MigBackend(Protocol):
    """GPU and compute instances of a MIG-enabled GPU (one compute instance per GPU instance)."""

    def mig_layout(self, gpu: int) -> MigLayout:
        """The GPU instances that exist now."""
        ...

    def possible_starts(self, gpu: int, profile: str) -> tuple[int, ...]:
        """Where a new instance of ``profile`` could be created now."""
        ...

    def create_instance(self, gpu: int, profile: str, start: int | None = None) -> MigPlacement:
        """Create a GPU instance (and its full compute instance); ``start=None`` lets the
        driver choose, which is what makes creation order matter."""
        ...

    def destroy_instance(self, gpu: int, placement: MigPlacement) -> None:
        """Destroy the compute instances and the GPU instance at ``placement``."""
        ...

    def mig_devices(self, gpu: int) -> list[MigDevice]:
        """The MIG devices of ``gpu`` with their UUIDs, one per GPU instance."""
        ...


class MpsBackend(Protocol):
    """The MPS control daemon, one per GPU."""

    def start_daemon(self, config: DaemonConfig) -> None:
        """Start the daemon (idempotent when already running) with its defaults."""
        ...

    def stop_daemon(self, config: DaemonConfig) -> None:
        """Stop the daemon (``quit``); a stopped one is a no-op."""
        ...

    def daemon_healthy(self, config: DaemonConfig) -> bool:
        """Whether the daemon answers on its pipe directory."""
        ...


class ProcessBackend(Protocol):
    """Processes started from argv lists. No shell is ever involved."""

    def spawn(self, argv: Sequence[str], env: Mapping[str, str], gpu: int) -> int:
        """Start ``argv`` with ``env`` added to the agent's environment; return its pid."""
        ...

    def poll(self, pid: int) -> ProcessStatus:
        """The process's state; a pid this backend never started is looked up as alive/unknown."""
        ...

    def send_signal(self, pid: int, signum: int) -> None:
        """Send ``signum``; a process that has already exited is a no-op."""
        ...

    def pids(self) -> list[int]:
        """Pids started by this backend that are still running."""
        ...

    def members(self, pid: int) -> list[int]:
        """The processes of the workload ``pid`` leads (its workers too: torchrun's run
        apart from the leader), ``pid`` included; ``[pid]`` where the backend cannot tell."""
        ...

    def launched(self) -> list[Launched]:
        """The live leaders with a launch id (:data:`LAUNCH_VAR`) that this backend, or an
        earlier agent on the same state, started: how an agent that starts finds what a
        crashed one left running, whatever its database says."""
        ...


class NodeBackend(DeviceInventory, MigBackend, MpsBackend, ProcessBackend, Protocol):
    """All four interfaces of one node, as a backend factory returns them."""
