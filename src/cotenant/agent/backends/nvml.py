"""The real backend: NVML (nvidia-ml-py) for inventory, MIG and XID events, plus
``nvidia-cuda-mps-control`` and :mod:`subprocess` for MPS and processes.

``pynvml`` is imported lazily, only when this backend is opened, so the rest of cotenant (and
the fake backend) runs where no NVIDIA driver is installed. NVML return codes map to
:class:`~cotenant.errors.TemporaryError` (timeouts, busy, not ready, GPU lost while resetting:
retry later) or :class:`~cotenant.errors.PermanentError` (no permission, not supported, invalid
argument), each with a hint (:func:`map_nvml_error`).

MIG: every GPU instance gets one compute instance spanning it (the usual layout); profile IDs
are the catalog's ``nvml_id`` (19, 15, 14, 9, 5, 0, 20), resolved to NVML's profile enum through
``nvmlDeviceGetGpuInstanceProfileInfo``. Placements come from NVML itself
(``nvmlDeviceGetGpuInstancePossiblePlacements_v2``). The agent never switches MIG mode: that
needs a GPU reset and is left to the operator (``nvidia-smi -mig 1``).

XID events carry the agent's wall-clock time when read (NVML gives none). SM activity is read
from GPM (``NVML_GPM_METRIC_SM_UTIL``, Hopper and newer) between two
successive inventory calls; where GPM is unsupported it is reported as ``None``.
"""

from __future__ import annotations

import ctypes
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from cotenant.agent.backends.base import (
    BackendFeature,
    DaemonConfig,
    GpuInfo,
    GpuProcess,
    ProcessStatus,
    XidEvent,
)
from cotenant.agent.backends.local import PopenProcesses
from cotenant.agent.backends.mpsctl import MpsControl
from cotenant.errors import CotenantError, InputError, PermanentError, TemporaryError
from cotenant.model.gpu import CATALOG
from cotenant.model.mig import MigLayout, MigPlacement, MigProfile

_MIB = 1024 * 1024
# NVML return codes (nvml.h) that may pass on a retry.
_TEMPORARY = {10: "Timeout", 11: "IRQ issue", 15: "GPU is lost", 19: "In use", 20: "Memory",
              21: "No data", 27: "Not ready"}
_HINTS = {
    3: "this GPU or driver does not support the call",
    4: "run the agent as root or with CAP_SYS_ADMIN for MIG changes",
    9: "load the NVIDIA kernel driver",
    12: "install the NVIDIA driver (libnvidia-ml.so)",
    16: "the GPU needs a reset (nvidia-smi -r) after a MIG mode change",
    23: "destroy overlapping instances first",
}
_CI_PROFILE = {1: 0, 2: 1, 3: 2, 4: 3, 7: 4}  # NVML_COMPUTE_INSTANCE_PROFILE_<g>_SLICE


def map_nvml_error(code: int, call: str, text: str = "") -> CotenantError:
    """The cotenant error for NVML return ``code`` from ``call``."""
    message = f"NVML {call}: error {code}{' ' + text if text else ''}"
    if code in _TEMPORARY:
        return TemporaryError(message, delay_s=2.0, hint=f"{_TEMPORARY[code]}; retrying")
    return PermanentError(message, hint=_HINTS.get(code, "see nvidia-smi -q and dmesg"))


def _load_pynvml() -> Any:
    try:
        import pynvml  # noqa: PLC0415 - optional SDK, loaded only when the nvml backend is chosen
    except ImportError as exc:
        raise PermanentError(
            "nvidia-ml-py is not installed", hint="pip install nvidia-ml-py"
        ) from exc
    return pynvml


class NvmlNode:
    """This host's GPUs through NVML; MPS and processes through the local tools."""

    def __init__(self, state_dir: Path, cgroup_root: Path | None = None) -> None:
        self._nv = _load_pynvml()
        with self._call("nvmlInit"):
            self._nv.nvmlInit()
        self._mps = MpsControl()
        self._procs = PopenProcesses(state_dir / "logs", cgroup_root=cgroup_root)
        self._event_set: Any = None
        self._xids: list[XidEvent] = []
        self._gpm: dict[int, Any] = {}
        self._gi_enum: dict[tuple[int, int], int] = {}

    @contextmanager
    def _call(self, call: str) -> Iterator[None]:
        try:
            yield
        except self._nv.NVMLError as exc:
            raise map_nvml_error(int(exc.value), call, str(exc)) from exc

    def close(self) -> None:
        with self._call("nvmlShutdown"):
            self._nv.nvmlShutdown()

    def _handle(self, index: int) -> Any:
        with self._call("nvmlDeviceGetCount"):
            count = int(self._nv.nvmlDeviceGetCount())
        if isinstance(index, bool) or not 0 <= index < count:
            raise InputError(f"GPU {index}", f"no such GPU; this node has 0-{count - 1}")
        with self._call("nvmlDeviceGetHandleByIndex"):
            return self._nv.nvmlDeviceGetHandleByIndex(index)

    # --- DeviceInventory ---------------------------------------------------------------------

    def features(self) -> frozenset[BackendFeature]:
        found = {BackendFeature.MPS, BackendFeature.MPS_MEM_LIMIT, BackendFeature.XID_EVENTS,
                 BackendFeature.PROCESS_CONTROL}
        infos = self.gpus()
        if infos and all(i.mig_enabled for i in infos):
            found.add(BackendFeature.MIG)
        if infos and all(i.sm_activity_pct is not None for i in infos):
            found.add(BackendFeature.SM_ACTIVITY)
        return frozenset(found)

    def gpus(self) -> list[GpuInfo]:
        with self._call("nvmlDeviceGetCount"):
            count = int(self._nv.nvmlDeviceGetCount())
        return [self.gpu(i) for i in range(count)]

    def gpu(self, index: int) -> GpuInfo:
        nv, handle = self._nv, self._handle(index)
        with self._call("nvmlDeviceGetName"):
            name = nv.nvmlDeviceGetName(handle)
            uuid = nv.nvmlDeviceGetUUID(handle)
            memory = nv.nvmlDeviceGetMemoryInfo(handle)
            util = nv.nvmlDeviceGetUtilizationRates(handle)
            procs = nv.nvmlDeviceGetComputeRunningProcesses(handle)
        per_pid = self._proc_util(handle)
        return GpuInfo(
            index=index,
            uuid=str(uuid),
            model=catalog_name(str(name), int(memory.total) // _MIB),
            memory_total_mib=int(memory.total) // _MIB,
            memory_used_mib=int(memory.used) // _MIB,
            utilisation_pct=float(util.gpu),
            sm_activity_pct=self._sm_activity(index, handle),
            mig_enabled=self._mig_mode(handle),
            processes=tuple(
                GpuProcess(int(p.pid), int(p.usedGpuMemory or 0) // _MIB,
                           per_pid.get(int(p.pid)))
                for p in procs
            ),
        )

    def _mig_mode(self, handle: Any) -> bool:
        try:
            current, _pending = self._nv.nvmlDeviceGetMigMode(handle)
        except self._nv.NVMLError:
            return False
        return bool(current)

    def _proc_util(self, handle: Any) -> dict[int, float]:
        try:
            samples = self._nv.nvmlDeviceGetProcessUtilization(handle, 0)
        except self._nv.NVMLError:
            return {}
        return {int(s.pid): float(s.smUtil) for s in samples}

    def _sm_activity(self, index: int, handle: Any) -> float | None:
        nv = self._nv
        try:
            if not nv.nvmlGpmQueryDeviceSupport(handle).isSupportedDevice:
                return None
            sample = nv.nvmlGpmSampleGet(handle, nv.nvmlGpmSampleAlloc())
        except nv.NVMLError:
            return None
        previous, self._gpm[index] = self._gpm.get(index), sample
        if previous is None:
            return None
        query = nv.c_nvmlGpmMetricsGet_t()
        query.version, query.numMetrics = nv.NVML_GPM_METRICS_GET_VERSION, 1
        query.sample1, query.sample2 = previous, sample
        query.metrics[0].metricId = nv.NVML_GPM_METRIC_SM_UTIL
        try:
            nv.nvmlGpmMetricsGet(query)
        except nv.NVMLError:
            return None
        finally:
            nv.nvmlGpmSampleFree(previous)
        return float(query.metrics[0].value)

    def xid_events(self, since: float) -> list[XidEvent]:
        nv = self._nv
        with self._call("nvmlEventSetCreate"):
            if self._event_set is None:
                self._event_set = nv.nvmlEventSetCreate()
                for i in range(int(nv.nvmlDeviceGetCount())):
                    nv.nvmlDeviceRegisterEvents(
                        nv.nvmlDeviceGetHandleByIndex(i), nv.nvmlEventTypeXidCriticalError,
                        self._event_set)
        while True:
            try:
                data = nv.nvmlEventSetWait(self._event_set, 0)
            except nv.NVMLError as exc:
                if int(exc.value) == nv.NVML_ERROR_TIMEOUT:
                    break
                raise map_nvml_error(int(exc.value), "nvmlEventSetWait", str(exc)) from exc
            index = int(nv.nvmlDeviceGetIndex(data.device))
            self._xids.append(XidEvent(index, int(data.eventData), time.time()))
        self._xids = self._xids[-1000:]
        return [e for e in self._xids if e.time > since]

    # --- MigBackend --------------------------------------------------------------------------

    def _profiles(self, index: int) -> tuple[MigProfile, ...]:
        model = CATALOG.get(self.gpu(index).model)
        if model.mig is None:
            raise PermanentError(f"GPU {index} ({model.name}) has no MIG profiles")
        return model.mig.profiles

    def _profile_enum(self, handle: Any, index: int, profile_id: int) -> int:
        key = (index, profile_id)
        if key not in self._gi_enum:
            for enum in range(int(self._nv.NVML_GPU_INSTANCE_PROFILE_COUNT)):
                try:
                    info = self._nv.nvmlDeviceGetGpuInstanceProfileInfo(handle, enum)
                except self._nv.NVMLError:
                    continue
                self._gi_enum[(index, int(info.id))] = enum
        if key not in self._gi_enum:
            raise PermanentError(f"GPU {index}: NVML knows no GPU instance profile {profile_id}")
        return self._gi_enum[key]

    def _instances(self, index: int) -> list[tuple[Any, MigPlacement]]:
        nv, handle = self._nv, self._handle(index)
        found: list[tuple[Any, MigPlacement]] = []
        for profile in self._profiles(index):
            array = (nv.c_nvmlGpuInstance_t * 8)()
            count = ctypes.c_uint(0)
            with self._call("nvmlDeviceGetGpuInstances"):
                nv.nvmlDeviceGetGpuInstances(handle, profile.nvml_id, array, ctypes.byref(count))
            for gi in array[: count.value]:
                with self._call("nvmlGpuInstanceGetInfo"):
                    info = nv.nvmlGpuInstanceGetInfo(gi)
                found.append((gi, MigPlacement(profile, int(info.placement.start))))
        return found

    def mig_layout(self, gpu: int) -> MigLayout:
        return MigLayout(tuple(p for _, p in self._instances(gpu)))

    def possible_starts(self, gpu: int, profile: str) -> tuple[int, ...]:
        nv, handle = self._nv, self._handle(gpu)
        prof = self._find(gpu, profile)
        array = (nv.c_nvmlGpuInstancePlacement_t * 8)()
        count = ctypes.c_uint(len(array))
        with self._call("nvmlDeviceGetGpuInstancePossiblePlacements_v2"):
            nv.nvmlDeviceGetGpuInstancePossiblePlacements(handle, prof.nvml_id, array,
                                                          ctypes.byref(count))
        return tuple(sorted(int(p.start) for p in array[: count.value]))

    def _find(self, gpu: int, name: str) -> MigProfile:
        for profile in self._profiles(gpu):
            if profile.name == name:
                return profile
        raise InputError(f"GPU {gpu}", f"no MIG profile {name!r}")

    def create_instance(self, gpu: int, profile: str, start: int | None = None) -> MigPlacement:
        nv, handle = self._nv, self._handle(gpu)
        prof = self._find(gpu, profile)
        self._profile_enum(handle, gpu, prof.nvml_id)
        with self._call("nvmlDeviceCreateGpuInstance"):
            if start is None:
                gi = nv.nvmlDeviceCreateGpuInstance(handle, prof.nvml_id)
            else:
                place = nv.c_nvmlGpuInstancePlacement_t(start, prof.memory_slices)
                gi = nv.nvmlDeviceCreateGpuInstanceWithPlacement(
                    handle, prof.nvml_id, ctypes.byref(place)
                )
            info = nv.nvmlGpuInstanceGetInfo(gi)
            shared = nv.NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED
            ci_info = nv.nvmlGpuInstanceGetComputeInstanceProfileInfo(
                gi, _CI_PROFILE[prof.compute_slices], shared
            )
            nv.nvmlGpuInstanceCreateComputeInstance(gi, ci_info.id)
        return MigPlacement(prof, int(info.placement.start))

    def destroy_instance(self, gpu: int, placement: MigPlacement) -> None:
        nv = self._nv
        for gi, found in self._instances(gpu):
            if found != placement:
                continue
            for ci_profile in _CI_PROFILE.values():
                array = (nv.c_nvmlComputeInstance_t * 8)()
                count = ctypes.c_uint(0)
                try:
                    nv.nvmlGpuInstanceGetComputeInstances(gi, ci_profile, array,
                                                          ctypes.byref(count))
                except nv.NVMLError:
                    continue
                for ci in array[: count.value]:
                    with self._call("nvmlComputeInstanceDestroy"):
                        nv.nvmlComputeInstanceDestroy(ci)
            with self._call("nvmlGpuInstanceDestroy"):
                nv.nvmlGpuInstanceDestroy(gi)
            return
        raise PermanentError(f"GPU {gpu}: no GPU instance {placement}")

    # --- MpsBackend and ProcessBackend: local tools ------------------------------------------

    def start_daemon(self, config: DaemonConfig) -> None:
        self._mps.start_daemon(config)

    def stop_daemon(self, config: DaemonConfig) -> None:
        self._mps.stop_daemon(config)

    def daemon_healthy(self, config: DaemonConfig) -> bool:
        return self._mps.daemon_healthy(config)

    def spawn(self, argv: Sequence[str], env: Mapping[str, str], gpu: int) -> int:
        self._handle(gpu)
        return self._procs.spawn(argv, env, gpu)

    def poll(self, pid: int) -> ProcessStatus:
        return self._procs.poll(pid)

    def send_signal(self, pid: int, signum: int) -> None:
        self._procs.send_signal(pid, signum)

    def pids(self) -> list[int]:
        return self._procs.pids()


def catalog_name(nvml_name: str, memory_mib: int) -> str:
    """The catalog model for an NVML name such as ``NVIDIA A100-SXM4-40GB`` (falls back to the
    NVML name itself when the catalog does not know the model)."""
    text = nvml_name.upper().replace("NVIDIA ", "").replace("TESLA ", "").strip()
    for model in CATALOG.models:
        family = model.name.split("-")[0].upper()
        if model.memory_mib is None or not text.startswith(family):
            continue
        if abs(model.memory_mib - memory_mib) <= model.memory_mib * 0.1:
            return model.name
    return nvml_name
