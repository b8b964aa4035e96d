"""What the device plugin advertises and what it answers, independent of gRPC.

One :class:`Resource` per registered resource name:

* ``cotenant.io/gpu-milli``: 1000 devices per GPU, ``<gpu uuid>-m<k>``; a container asking
  for 250 gets 250 of them. The kubelet picks *which* ids; what matters is the GPU the extender
  chose, written on the pod (``cotenant.io/gpus``). Allocate therefore finds the pod: the
  oldest pending pod bound to this node, annotated by the extender, asking exactly that many
  milli and not yet allocated (the kubelet admits one pod at a time; a running pod is never
  taken again, also after the plugin restarts). A share gets the MPS client
  environment of the agent's :class:`~cotenant.agent.mps.MpsManager` (active-thread % = milli /
  10, pinned memory = the share of the GPU's memory, the daemon's pipe directory, mounted).
* ``nvidia.com/gpu``: one device per GPU (its UUID); GetPreferredAllocation steers the kubelet
  to the GPUs annotated on the waiting pod.
* ``nvidia.com/mig-<profile>``: one device per MIG instance (its UUID), from the backend.

Health comes from the agent's backend (nvml or fake): a GPU the inventory cannot read, or one
with an XID error other than the application-caused ones (13, 31, 43, 45, 68, 109: the set
NVIDIA's device plugin also ignores), is ``Unhealthy``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from cotenant.agent.backends import BackendFeature, NodeBackend
from cotenant.agent.mps import MpsManager
from cotenant.errors import CotenantError, InputError
from cotenant.integrations.k8s.resources import (
    ANNOTATION_GPUS,
    GPU_MILLI,
    MIG_PREFIX,
    NVIDIA_GPU,
    pod_resources,
)
from cotenant.integrations.k8s.resources import (
    field as get_field,
)
from cotenant.model.workload import MILLI_PER_GPU
from cotenant.policies.colocation import milli_limits

HEALTHY, UNHEALTHY = "Healthy", "Unhealthy"
APPLICATION_XIDS = frozenset({13, 31, 43, 45, 68, 109})


class PodSource(Protocol):
    """Pods bound to this node (API JSON), oldest first."""

    def pods_on_node(self) -> list[dict[str, Any]]:
        ...


@dataclass(frozen=True)
class Allocation:
    """One container's answer: environment, mounts (host, container, read-only), devices."""

    envs: dict[str, str]
    mounts: tuple[tuple[str, str, bool], ...] = ()
    annotations: dict[str, str] = field(default_factory=dict)


class Health:
    """Per-GPU health from the backend, remembered across polls (a fatal XID stays)."""

    def __init__(self, backend: NodeBackend) -> None:
        self.backend = backend
        self.failed: set[int] = set()
        self._since = float("-inf")

    def poll(self) -> dict[int, bool]:
        try:
            gpus = self.backend.gpus()
            events = (self.backend.xid_events(self._since)
                      if BackendFeature.XID_EVENTS in self.backend.features() else [])
        except CotenantError:
            return {}
        for event in events:  # read by time after the last one seen, as the supervisor does
            self._since = max(self._since, event.time)
            if event.xid not in APPLICATION_XIDS:
                self.failed.add(event.gpu)
        return {g.index: g.index not in self.failed for g in gpus}


def check_resource(name: str) -> str:
    """``name`` if the device plugin can advertise it, else an :class:`InputError`."""
    if not (name in (GPU_MILLI, NVIDIA_GPU) or name.startswith(MIG_PREFIX)):
        raise InputError("--resource", f"{name!r} is not a resource cotenant advertises",
                         hint=f"{GPU_MILLI}, {NVIDIA_GPU} or {MIG_PREFIX}<profile>")
    return name


class Resource:
    """One advertised resource name: its devices and its answers."""

    def __init__(self, name: str, backend: NodeBackend, pods: PodSource, mps: MpsManager,
                 health: Health) -> None:
        self.name = check_resource(name)
        self.backend = backend
        self.pods = pods
        self.mps = mps
        self.health = health
        self.allocated: set[str] = set()
        """Pods already answered (uids), so two equal pods get their own GPUs."""
        self._uuids: dict[str, int] = {}

    @property
    def pre_start_required(self) -> bool:
        return self.name == GPU_MILLI  # PreStartContainer makes sure the MPS daemon runs

    def devices(self) -> list[tuple[str, str]]:
        """(id, health) of every device, in a stable order."""
        ok = self.health.poll()
        gpus = self.backend.gpus() if ok else []
        self._uuids = {g.uuid: g.index for g in gpus}
        out: list[tuple[str, str]] = []
        for g in gpus:
            state = HEALTHY if ok.get(g.index, False) else UNHEALTHY
            if self.name == GPU_MILLI and not g.mig_enabled:
                out.extend((f"{g.uuid}-m{k}", state) for k in range(MILLI_PER_GPU))
            elif self.name == NVIDIA_GPU and not g.mig_enabled:
                out.append((g.uuid, state))
            elif self.name.startswith(MIG_PREFIX) and g.mig_enabled:
                profile = self.name[len(MIG_PREFIX):]
                out.extend((d.uuid, state) for d in self.backend.mig_devices(g.index)
                           if d.placement.profile.name == profile)
        return out

    def _waiting_pod(self, amount: int) -> tuple[dict[str, Any], tuple[int, ...]]:
        for pod in self.pods.pods_on_node():
            uid = str(get_field(pod, "metadata", "uid"))
            text = get_field(pod, "metadata", "annotations", ANNOTATION_GPUS)
            asked = pod_resources(pod).get(self.name)
            phase = get_field(pod, "status", "phase") or "Pending"
            if (uid in self.allocated or phase != "Pending" or not isinstance(text, str)
                    or asked != amount):
                continue
            try:
                return pod, tuple(int(g) for g in text.split(","))
            except ValueError:
                raise InputError(f"pod {get_field(pod, 'metadata', 'name')}:{ANNOTATION_GPUS}",
                                 f"{text!r} must be GPU indices like 0 or 2,3") from None
        raise InputError(self.name, f"no pod on this node waits for {amount} {self.name} "
                         "with the extender's GPU annotation",
                         hint="is the pod scheduled by the cotenant extender?")

    def _uuid_map(self) -> dict[str, int]:
        """GPU UUID -> index, as of the last device list (read now if there was none)."""
        if not self._uuids:
            self._uuids = {g.uuid: g.index for g in self.backend.gpus()}
        return self._uuids

    def _uuid_of(self, index: int) -> str:
        for uuid, i in self._uuid_map().items():
            if i == index:
                return uuid
        return self.backend.gpu(index).uuid

    def allocate(self, device_ids: list[str]) -> Allocation:
        """The answer for one container that was given ``device_ids``."""
        if not device_ids:
            raise InputError(self.name, "a container asked for no devices")
        if self.name.startswith(MIG_PREFIX) or self.name == NVIDIA_GPU:
            visible = ",".join(device_ids)
            return Allocation({"NVIDIA_VISIBLE_DEVICES": visible, "CUDA_VISIBLE_DEVICES": visible})
        pod, gpus = self._waiting_pod(len(device_ids))
        self.allocated.add(str(get_field(pod, "metadata", "uid")))
        uuids = ",".join(self._uuid_of(g) for g in gpus)
        env = {"NVIDIA_VISIBLE_DEVICES": uuids, "CUDA_VISIBLE_DEVICES": uuids}
        milli = len(device_ids)
        if milli >= MILLI_PER_GPU:
            return Allocation(env)
        gpu = gpus[0]
        env |= self.mps.client_env(gpu, *milli_limits(milli, self.backend.gpu(gpu)
                                                      .memory_total_mib))
        pipe = env["CUDA_MPS_PIPE_DIRECTORY"]
        return Allocation(env, ((pipe, pipe, False),), {ANNOTATION_GPUS: str(gpu)})

    def preferred(self, available: list[str], must: list[str], size: int) -> list[str]:
        """The ids to prefer: for whole GPUs, the annotated GPUs of a waiting pod."""
        chosen = list(must)
        if self.name == NVIDIA_GPU:
            try:
                _, gpus = self._waiting_pod(size)
            except InputError:
                gpus = ()
            index = self._uuid_map()
            chosen += [u for u in available if index.get(u) in gpus and u not in chosen]
        chosen += [u for u in available if u not in chosen]
        return chosen[:size]

    def pre_start(self, device_ids: list[str]) -> None:
        """Before the container starts: the MPS daemon of each shared GPU answers."""
        if self.name != GPU_MILLI:
            return
        index = self._uuid_map()
        for gpu in sorted({index.get(d.rsplit("-m", 1)[0], -1) for d in device_ids}):
            if gpu >= 0:
                self.mps.ensure(gpu)

