"""The real backend: NVML (nvidia-ml-py) for inventory, MIG and XID events, plus
``nvidia-cuda-mps-control`` and :mod:`subprocess` for MPS and processes.

NVML is loaded and its errors mapped in :mod:`~cotenant.agent.backends.nvml_lib`; MIG instances
are made and destroyed in :mod:`~cotenant.agent.backends.nvml_mig`; this module holds the
inventory and the XID events, and hands MPS and processes to the local tools.

XID events carry the agent's wall-clock time when read (NVML gives none). SM activity is read
from GPM (``NVML_GPM_METRIC_SM_UTIL``, Hopper and newer) over the window between two
inventory calls at least :data:`GPM_MIN_WINDOW_S` apart (a shorter call repeats the last
value); where GPM is unsupported it is ``None``. GPU utilisation is ``None`` where NVML does
not report it: on a GPU in MIG mode ``nvmlDeviceGetUtilizationRates`` is not supported.
Per-process SM utilisation is the newest of NVML's buffered samples for each process. NVML
samples an MPS client's SM use on its server's pid: each process is marked as an MPS client
(``nvmlDeviceGetMPSComputeRunningProcesses``) or server (its ``/proc/<pid>/comm``,
``nvidia-cuda-mps-server`` cut to 15 characters, read only on a GPU with MPS clients) so a
reader can tell.

A workload on a whole GPU is placed by index (with ``CUDA_DEVICE_ORDER=PCI_BUS_ID``, so
CUDA's index is NVML's); one on a MIG instance by the MIG device's UUID (``mig_devices``).
Not done (said here so nobody relies on it): MPS daemons per MIG instance.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from contextlib import suppress
from pathlib import Path
from typing import Any

from cotenant.agent.backends.base import (
    BackendFeature,
    DaemonConfig,
    GpuInfo,
    GpuProcess,
    Launched,
    MigDevice,
    ProcessStatus,
    XidEvent,
)
from cotenant.agent.backends.local import PopenProcesses
from cotenant.agent.backends.mpsctl import MpsControl
from cotenant.agent.backends.nvml_lib import (
    MIB,
    NOT_THERE,
    NvmlLib,
    catalog_name,
    load_pynvml,
    map_nvml_error,
)
from cotenant.agent.backends.nvml_mig import NvmlMig
from cotenant.errors import CotenantError
from cotenant.model.mig import MigLayout, MigPlacement

__all__ = ["GPM_MIN_WINDOW_S", "NvmlNode", "catalog_name", "map_nvml_error"]

GPM_MIN_WINDOW_S = 1.0
"""The shortest window SM activity is measured over (GPM needs two samples apart)."""


class NvmlNode:
    """This host's GPUs through NVML; MPS and processes through the local tools. ``nv`` is
    the ``pynvml`` module (tests pass a stand-in with its names), ``proc`` where the
    processes' ``comm`` files are read."""

    def __init__(self, state_dir: Path, cgroup_root: Path | None = None, nv: Any = None,
                 proc: Path = Path("/proc")) -> None:
        self._proc = proc
        self._lib = NvmlLib(load_pynvml() if nv is None else nv)
        self._nv = self._lib.nv
        self._call = self._lib.call
        with self._call("nvmlInit"):
            self._nv.nvmlInit()
        self._mig = NvmlMig(self._lib)
        self._mps = MpsControl()
        self._procs = PopenProcesses(state_dir / "logs", cgroup_root=cgroup_root, wrap=True)
        self._event_set: Any = None
        self._xids: list[XidEvent] = []
        self._gpm: dict[int, tuple[Any, float, float | None]] = {}  # sample, when, last value

    def close(self) -> None:
        nv = self._nv
        for sample, _, _ in self._gpm.values():
            with suppress(nv.NVMLError):
                nv.nvmlGpmSampleFree(sample)
        self._gpm.clear()
        if self._event_set is not None:
            with suppress(nv.NVMLError):
                nv.nvmlEventSetFree(self._event_set)
            self._event_set = None
        with self._call("nvmlShutdown"):
            nv.nvmlShutdown()

    # --- DeviceInventory ---------------------------------------------------------------------

    def features(self) -> frozenset[BackendFeature]:
        found = {BackendFeature.MPS, BackendFeature.MPS_MEM_LIMIT, BackendFeature.XID_EVENTS,
                 BackendFeature.PROCESS_CONTROL}
        infos = self.gpus()
        if infos and all(i.mig_enabled for i in infos):
            found.add(BackendFeature.MIG)
        if infos and all(self._gpm_supported(self._lib.handle(i.index)) for i in infos):
            found.add(BackendFeature.SM_ACTIVITY)
        return frozenset(found)

    def _gpm_supported(self, handle: Any) -> bool:
        try:
            return bool(self._nv.nvmlGpmQueryDeviceSupport(handle).isSupportedDevice)
        except self._nv.NVMLError:
            return False

    def gpus(self) -> list[GpuInfo]:
        return [self.gpu(i) for i in range(self._lib.count())]

    def gpu(self, index: int) -> GpuInfo:
        nv, handle = self._nv, self._lib.handle(index)
        with self._call("nvmlDeviceGetName"):
            name = nv.nvmlDeviceGetName(handle)
        with self._call("nvmlDeviceGetUUID"):
            uuid = nv.nvmlDeviceGetUUID(handle)
        with self._call("nvmlDeviceGetMemoryInfo"):
            memory = nv.nvmlDeviceGetMemoryInfo(handle)
        with self._call("nvmlDeviceGetComputeRunningProcesses"):
            procs = nv.nvmlDeviceGetComputeRunningProcesses(handle)
        per_pid = self._proc_util(handle)
        clients = self._mps_clients(handle)
        return GpuInfo(
            index=index,
            uuid=str(uuid),
            model=catalog_name(str(name), int(memory.total) // MIB),
            memory_total_mib=int(memory.total) // MIB,
            memory_used_mib=int(memory.used) // MIB,
            utilisation_pct=self._utilisation(handle),
            sm_activity_pct=self._sm_activity(index, handle),
            mig_enabled=self._mig_mode(handle),
            processes=tuple(
                GpuProcess(int(p.pid), int(p.usedGpuMemory or 0) // MIB,
                           per_pid.get(int(p.pid)), mps_client=int(p.pid) in clients,
                           mps_server=bool(clients) and int(p.pid) not in clients
                           and _is_mps_server(int(p.pid), self._proc))
                for p in procs
            ),
        )

    def _mig_mode(self, handle: Any) -> bool:
        try:
            current, _pending = self._nv.nvmlDeviceGetMigMode(handle)
        except self._nv.NVMLError:
            return False
        return bool(current)

    def _utilisation(self, handle: Any) -> float | None:
        """The GPU's utilisation; None where NVML does not report it (MIG mode)."""
        try:
            return float(self._nv.nvmlDeviceGetUtilizationRates(handle).gpu)
        except self._nv.NVMLError as exc:
            if int(exc.value) in NOT_THERE:
                return None
            raise map_nvml_error(int(exc.value), "nvmlDeviceGetUtilizationRates",
                                 str(exc)) from exc

    def _mps_clients(self, handle: Any) -> set[int]:
        """The pids of the GPU's MPS clients (none where NVML cannot list them)."""
        try:
            return {int(p.pid) for p in self._nv.nvmlDeviceGetMPSComputeRunningProcesses(handle)}
        except self._nv.NVMLError:
            return set()

    def _proc_util(self, handle: Any) -> dict[int, float]:
        """Each process's SM utilisation from the newest of NVML's buffered samples."""
        try:
            samples = self._nv.nvmlDeviceGetProcessUtilization(handle, 0)
        except self._nv.NVMLError:
            return {}
        newest: dict[int, tuple[int, float]] = {}
        for s in samples:
            pid, stamp = int(s.pid), int(s.timeStamp)
            if pid not in newest or stamp >= newest[pid][0]:
                newest[pid] = (stamp, float(s.smUtil))
        return {pid: util for pid, (_, util) in newest.items()}

    def _sm_activity(self, index: int, handle: Any) -> float | None:
        """SM activity since the last sample at least :data:`GPM_MIN_WINDOW_S` old."""
        nv = self._nv
        if not self._gpm_supported(handle):
            return None
        now = time.monotonic()
        previous = self._gpm.get(index)
        if previous is not None and now - previous[1] < GPM_MIN_WINDOW_S:
            return previous[2]
        try:
            sample = nv.nvmlGpmSampleAlloc()
        except nv.NVMLError:
            return None
        try:
            nv.nvmlGpmSampleGet(handle, sample)
        except nv.NVMLError:
            nv.nvmlGpmSampleFree(sample)
            return None
        value = None if previous is None else self._gpm_sm_util(previous[0], sample)
        self._gpm[index] = (sample, now, value)
        if previous is not None:
            with suppress(nv.NVMLError):
                nv.nvmlGpmSampleFree(previous[0])
        return value

    def _gpm_sm_util(self, older: Any, newer: Any) -> float | None:
        nv = self._nv
        query = nv.c_nvmlGpmMetricsGet_t()
        query.version, query.numMetrics = nv.NVML_GPM_METRICS_GET_VERSION, 1
        query.sample1, query.sample2 = older, newer
        query.metrics[0].metricId = nv.NVML_GPM_METRIC_SM_UTIL
        try:
            nv.nvmlGpmMetricsGet(query)
        except nv.NVMLError:
            return None
        if int(query.metrics[0].nvmlReturn) != 0:
            return None
        return float(query.metrics[0].value)

    def xid_events(self, since: float) -> list[XidEvent]:
        nv = self._nv
        if self._event_set is None:
            self._event_set = self._register_xids()
        while True:
            try:
                data = nv.nvmlEventSetWait(self._event_set, 0)
            except nv.NVMLError as exc:
                if int(exc.value) == nv.NVML_ERROR_TIMEOUT:
                    break
                raise map_nvml_error(int(exc.value), "nvmlEventSetWait", str(exc)) from exc
            with self._call("nvmlDeviceGetIndex"):
                index = int(nv.nvmlDeviceGetIndex(data.device))
            self._xids.append(XidEvent(index, int(data.eventData), time.time()))
        self._xids = self._xids[-1000:]
        return [e for e in self._xids if e.time > since]

    def _register_xids(self) -> Any:
        """A new event set with every GPU registered for XIDs (but those whose driver does not
        support it); none kept if one fails, so the next call registers them all again instead
        of missing a GPU's XIDs."""
        nv = self._nv
        with self._call("nvmlEventSetCreate"):
            events = nv.nvmlEventSetCreate()
        try:
            for i in range(self._lib.count()):
                try:
                    nv.nvmlDeviceRegisterEvents(
                        self._lib.handle(i), nv.nvmlEventTypeXidCriticalError, events)
                except nv.NVMLError as exc:
                    if int(exc.value) not in NOT_THERE:
                        raise map_nvml_error(int(exc.value), "nvmlDeviceRegisterEvents",
                                             str(exc)) from exc
        except CotenantError:
            with suppress(nv.NVMLError):
                nv.nvmlEventSetFree(events)
            raise
        return events

    # --- MigBackend: nvml_mig ----------------------------------------------------------------

    def mig_layout(self, gpu: int) -> MigLayout:
        return self._mig.mig_layout(gpu)

    def mig_devices(self, gpu: int) -> list[MigDevice]:
        return self._mig.mig_devices(gpu)

    def possible_starts(self, gpu: int, profile: str) -> tuple[int, ...]:
        return self._mig.possible_starts(gpu, profile)

    def create_instance(self, gpu: int, profile: str, start: int | None = None) -> MigPlacement:
        return self._mig.create_instance(gpu, profile, start)

    def destroy_instance(self, gpu: int, placement: MigPlacement) -> None:
        self._mig.destroy_instance(gpu, placement)

    # --- MpsBackend and ProcessBackend: local tools ------------------------------------------

    def start_daemon(self, config: DaemonConfig) -> None:
        self._mps.start_daemon(config)

    def stop_daemon(self, config: DaemonConfig) -> None:
        self._mps.stop_daemon(config)

    def daemon_healthy(self, config: DaemonConfig) -> bool:
        return self._mps.daemon_healthy(config)

    def spawn(self, argv: Sequence[str], env: Mapping[str, str], gpu: int) -> int:
        self._lib.handle(gpu)
        return self._procs.spawn(argv, env, gpu)

    def poll(self, pid: int) -> ProcessStatus:
        return self._procs.poll(pid)

    def send_signal(self, pid: int, signum: int) -> None:
        self._procs.send_signal(pid, signum)

    def pids(self) -> list[int]:
        return self._procs.pids()

    def members(self, pid: int) -> list[int]:
        return self._procs.members(pid)

    def launched(self) -> list[Launched]:
        return self._procs.launched()


MPS_SERVER_COMM = "nvidia-cuda-mps"
"""``nvidia-cuda-mps-server``'s name in ``/proc/<pid>/comm`` (the kernel keeps 15 characters)."""


def _is_mps_server(pid: int, proc: Path) -> bool:
    """Whether ``pid`` is an MPS server (False where its ``comm`` cannot be read)."""
    try:
        return (proc / str(pid) / "comm").read_text().strip() == MPS_SERVER_COMM
    except OSError:
        return False
