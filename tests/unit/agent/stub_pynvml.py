# ruff: noqa: N802, N815 - the stand-in must carry pynvml's own names
"""A stand-in for the ``pynvml`` module, for the nvml backend's logic where no GPU is.

It has the names :class:`~cotenant.agent.backends.nvml.NvmlNode` calls, with pynvml's own
error classes and constants, and answers as NVML does in the cases the tests set up: a GPU
in MIG mode has no utilisation, a registration or a compute instance can fail, a driver can
lack a profile. It checks nothing else; the real NVML is the contract tests' (``gpu`` mark).
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pynvml

NOT_SUPPORTED = pynvml.NVML_ERROR_NOT_SUPPORTED
UNKNOWN = pynvml.NVML_ERROR_UNKNOWN


@dataclass
class StubGpu:
    name: str = "NVIDIA A100-SXM4-40GB"
    total_mib: int = 40960
    mig: bool = False
    util: int = 37
    pids: tuple[int, ...] = ()
    samples: list[tuple[int, int, int]] = field(default_factory=list)  # pid, stamp, smUtil
    mps_clients: tuple[int, ...] = ()  # of pids, those MPS clients
    register_error: list[int] = field(default_factory=list)  # codes for the next calls
    lacks: frozenset[int] = frozenset()  # GI profile IDs this driver does not know
    instances: dict[int, tuple[int, int]] = field(default_factory=dict)  # handle -> id, start


class StubNvml:
    """``pynvml`` over :class:`StubGpu` objects (handles are GPU indices)."""

    NVMLError = pynvml.NVMLError
    NVML_ERROR_TIMEOUT = pynvml.NVML_ERROR_TIMEOUT
    NVML_GPU_INSTANCE_PROFILE_COUNT = pynvml.NVML_GPU_INSTANCE_PROFILE_COUNT
    NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED = 0
    nvmlEventTypeXidCriticalError = pynvml.nvmlEventTypeXidCriticalError
    c_nvmlGpuInstance_t = ctypes.c_int
    c_nvmlComputeInstance_t = ctypes.c_int
    c_nvmlGpuInstancePlacement_t = pynvml.c_nvmlGpuInstancePlacement_t
    GI_IDS = (19, 20, 15, 14, 9, 5, 0)  # enum order -> profile ID, as an A100 reports them

    def __init__(self, gpus: list[StubGpu]) -> None:
        self.gpus = gpus
        self.event_sets: dict[int, list[int]] = {}  # set -> GPUs registered
        self.freed_sets: list[int] = []
        self.ci_error: int | None = None
        self._next = 100

    def _new(self) -> int:
        self._next += 1
        return self._next

    # --- inventory -------------------------------------------------------------------------
    def nvmlInit(self) -> None: ...

    def nvmlShutdown(self) -> None: ...

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def nvmlDeviceGetName(self, h: int) -> str:
        return self.gpus[h].name

    def nvmlDeviceGetMemoryInfo(self, h: int) -> Any:
        return SimpleNamespace(total=self.gpus[h].total_mib << 20, used=1 << 20)

    def nvmlDeviceGetUtilizationRates(self, h: int) -> Any:
        if self.gpus[h].mig:  # NVML: not supported on a GPU in MIG mode
            raise pynvml.NVMLError(NOT_SUPPORTED)
        return SimpleNamespace(gpu=self.gpus[h].util, memory=0)

    def nvmlDeviceGetComputeRunningProcesses(self, h: int) -> list[Any]:
        return [SimpleNamespace(pid=p, usedGpuMemory=None) for p in self.gpus[h].pids]

    def nvmlDeviceGetMPSComputeRunningProcesses(self, h: int) -> list[Any]:
        return [SimpleNamespace(pid=p, usedGpuMemory=None) for p in self.gpus[h].mps_clients]

    def nvmlDeviceGetProcessUtilization(self, h: int, stamp: int) -> list[Any]:
        return [SimpleNamespace(pid=p, timeStamp=t, smUtil=u) for p, t, u in self.gpus[h].samples]

    def nvmlDeviceGetMigMode(self, h: int) -> list[int]:
        return [int(self.gpus[h].mig), int(self.gpus[h].mig)]

    def nvmlGpmQueryDeviceSupport(self, h: int) -> Any:
        raise pynvml.NVMLError(NOT_SUPPORTED)

    # --- events ----------------------------------------------------------------------------
    def nvmlEventSetCreate(self) -> int:
        handle = self._new()
        self.event_sets[handle] = []
        return handle

    def nvmlEventSetFree(self, events: int) -> None:
        self.freed_sets.append(events)

    def nvmlDeviceRegisterEvents(self, h: int, kinds: int, events: int) -> None:
        if self.gpus[h].register_error:
            raise pynvml.NVMLError(self.gpus[h].register_error.pop(0))
        self.event_sets[events].append(h)

    def nvmlEventSetWait(self, events: int, timeout_ms: int) -> Any:
        raise pynvml.NVMLError(pynvml.NVML_ERROR_TIMEOUT)

    # --- MIG -------------------------------------------------------------------------------
    def nvmlDeviceGetGpuInstanceProfileInfo(self, h: int, enum: int) -> Any:
        if enum >= len(self.GI_IDS):
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return SimpleNamespace(id=self.GI_IDS[enum])

    def nvmlDeviceGetGpuInstances(self, h: int, profile_id: int, array: Any, count: Any) -> None:
        if profile_id in self.gpus[h].lacks:
            raise pynvml.NVMLError(NOT_SUPPORTED)
        found = [gi for gi, (pid, _) in self.gpus[h].instances.items() if pid == profile_id]
        for i, gi in enumerate(found):
            array[i] = gi
        count._obj.value = len(found)

    def nvmlGpuInstanceGetInfo(self, gi: int) -> Any:
        for gpu in self.gpus:
            if gi in gpu.instances:
                return SimpleNamespace(id=gi % 50, placement=SimpleNamespace(
                    start=gpu.instances[gi][1]))
        raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)

    def nvmlDeviceGetMaxMigDeviceCount(self, h: int) -> int:
        return 7

    def nvmlDeviceGetMigDeviceHandleByIndex(self, h: int, slot: int) -> str:
        made = sorted(self.gpus[h].instances)  # MIG devices in creation order, slots after
        if slot >= len(made):
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_FOUND)
        return f"mig:{h}:{made[slot]}"

    def nvmlDeviceGetGpuInstanceId(self, mig: str) -> int:
        return int(mig.split(":")[2]) % 50

    def nvmlDeviceGetUUID(self, h: int | str) -> str:
        if isinstance(h, str):
            return f"MIG-stub-{h.split(':')[2]}"
        return f"GPU-stub-{h}"

    def nvmlDeviceCreateGpuInstanceWithPlacement(self, h: int, profile_id: int,
                                                 place: Any) -> int:
        gi = self._new()
        self.gpus[h].instances[gi] = (profile_id, int(place._obj.start))
        return gi

    def nvmlGpuInstanceGetComputeInstanceProfileInfo(self, gi: int, enum: int,
                                                     engines: int) -> Any:
        return SimpleNamespace(id=enum)

    def nvmlGpuInstanceCreateComputeInstance(self, gi: int, ci_profile: int) -> int:
        if self.ci_error is not None:
            raise pynvml.NVMLError(self.ci_error)
        return self._new()

    def nvmlGpuInstanceDestroy(self, gi: int) -> None:
        for gpu in self.gpus:
            gpu.instances.pop(gi, None)
