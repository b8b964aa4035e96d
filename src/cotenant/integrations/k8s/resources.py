"""Kubernetes resource names and quantities, and the pod/node values cotenant reads from them.

Resources cotenant understands:

* ``cotenant.io/gpu-milli`` - a share of one GPU in thousandths (250 = a quarter of its SMs
  and memory), or whole GPUs in multiples of 1000. Milli is the unit of the openb traces and of
  the placement policies, so the extender scores exactly what the simulator scores.
* ``nvidia.com/gpu`` - whole GPUs, the name NVIDIA's device plugin and operators already use.
* ``nvidia.com/mig-<profile>`` - MIG instances in NVIDIA's "mixed" strategy naming
  (``nvidia.com/mig-1g.10gb``); the profile must exist in the GPU catalog.

Any other resource in the ``cotenant.io`` or ``nvidia.com`` domains is an error naming it (a
typo must not schedule as if nothing were asked); resources of other domains are not ours and
are left to kube-scheduler. The pod's role (``online``/``offline``), model and SLO come from
the annotations (or labels) ``cotenant.io/role``, ``cotenant.io/model``, ``cotenant.io/slo-ms``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from cotenant.errors import InputError
from cotenant.model.gpu import CATALOG, GpuModel
from cotenant.model.workload import MILLI_PER_GPU, Node, PodShape

GPU_MILLI = "cotenant.io/gpu-milli"
NVIDIA_GPU = "nvidia.com/gpu"
MIG_PREFIX = "nvidia.com/mig-"
OUR_DOMAINS = ("cotenant.io/", "nvidia.com/")
ANNOTATION_GPUS = "cotenant.io/gpus"
"""Set by the extender's bind: the node's GPU indices chosen for the pod, ``"0"`` or ``"2,3"``."""
ANNOTATION_MILLI = "cotenant.io/gpu-milli"
"""Set with the GPUs: the milli per GPU (the MPS share the device plugin enforces)."""
ROLE_KEY = "cotenant.io/role"
MODEL_KEY = "cotenant.io/model"
SLO_KEY = "cotenant.io/slo-ms"
GPU_MODEL_LABEL = "cotenant.io/gpu-model"
GFD_PRODUCT_LABEL = "nvidia.com/gpu.product"
ROLES = ("online", "offline")
MIB = 1 << 20

_SUFFIX = {
    "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": Decimal(1),
    "k": Decimal("1e3"), "M": Decimal("1e6"), "G": Decimal("1e9"), "T": Decimal("1e12"),
    "P": Decimal("1e15"), "E": Decimal("1e18"), "Ki": Decimal(2**10), "Mi": Decimal(2**20),
    "Gi": Decimal(2**30), "Ti": Decimal(2**40), "Pi": Decimal(2**50), "Ei": Decimal(2**60),
}


def quantity(value: object, where: str) -> Decimal:
    """A Kubernetes quantity (``"500m"``, ``"16Gi"``, ``"1e3"``, ``4``) as a Decimal."""
    text = str(value).strip() if isinstance(value, str | int) else None
    if text is None or isinstance(value, bool):
        raise InputError(where, f"{value!r} is not a Kubernetes quantity", hint="e.g. 500m, 16Gi")
    for suffix in sorted(_SUFFIX, key=len, reverse=True):
        if suffix and text.endswith(suffix):
            number, scale = text[: -len(suffix)], _SUFFIX[suffix]
            break
    else:
        number, scale = text, Decimal(1)
    try:
        amount = Decimal(number) * scale
    except InvalidOperation:
        raise InputError(where, f"{text!r} is not a Kubernetes quantity",
                         hint="e.g. 500m, 16Gi") from None
    if not amount.is_finite() or amount < 0:
        raise InputError(where, f"{text!r} must be a finite quantity >= 0")
    return amount


def field(obj: object, *path: str) -> Any:
    """``obj[path[0]][path[1]]...``, None where any step is missing or not a mapping."""
    for key in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


@dataclass(frozen=True)
class PodRequest:
    """What a pod asks of cotenant: its shape for the placement policy, MIG instances, role."""

    uid: str
    namespace: str
    name: str
    shape: PodShape
    mig: tuple[tuple[str, int], ...] = ()
    role: str = "online"
    model: str | None = None
    slo_ms: float | None = None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def _requests(containers: object, where: str) -> dict[str, Decimal]:
    total: dict[str, Decimal] = {}
    if not isinstance(containers, list):
        return total
    for i, container in enumerate(containers):
        requests = field(container, "resources", "requests") or {}
        limits = field(container, "resources", "limits") or {}
        if not isinstance(requests, dict) or not isinstance(limits, dict):
            raise InputError(f"{where}[{i}].resources", "requests and limits must be mappings")
        for name, value in {**limits, **requests}.items():  # a request defaults to its limit
            total[name] = total.get(name, Decimal(0)) + quantity(value, f"{where}[{i}]:{name}")
    return total


def pod_resources(pod: dict[str, Any]) -> dict[str, Decimal]:
    """The pod's effective requests: max(sum over containers, each init container)."""
    spec = pod.get("spec")
    if not isinstance(spec, dict):
        spec = {}
    total = _requests(spec.get("containers"), "pod.spec.containers")
    inits = spec.get("initContainers")
    for i, init in enumerate(inits if isinstance(inits, list) else []):
        for name, value in _requests([init], f"pod.spec.initContainers[{i}]").items():
            total[name] = max(total.get(name, Decimal(0)), value)
    return total


def _meta(pod: dict[str, Any], key: str) -> str | None:
    for part in ("annotations", "labels"):
        value = field(pod, "metadata", part, key)
        if isinstance(value, str):
            return value
    return None


def _count(amount: Decimal, where: str) -> int:
    if amount != amount.to_integral_value():
        raise InputError(where, f"{amount} must be a whole number")
    return int(amount)


def pod_request(pod: object) -> PodRequest:
    """Read a Pod (API JSON) into a :class:`PodRequest`; an :class:`InputError` names the
    field and the rule for anything cotenant cannot schedule."""
    if not isinstance(pod, dict) or not isinstance(pod.get("metadata"), dict):
        raise InputError("Pod", "must be a Pod object with metadata")
    name = field(pod, "metadata", "name")
    if not isinstance(name, str) or not name:
        raise InputError("Pod.metadata.name", "must be a non-empty string")
    namespace = field(pod, "metadata", "namespace") or "default"
    uid = field(pod, "metadata", "uid") or f"{namespace}/{name}"
    res = pod_resources(pod)
    where = f"pod {namespace}/{name}"
    cpu = math.ceil(res.get("cpu", Decimal(0)) * 1000)
    memory = math.ceil(res.get("memory", Decimal(0)) / MIB)
    milli = _count(res.get(GPU_MILLI, Decimal(0)), f"{where}:{GPU_MILLI}")
    whole = _count(res.get(NVIDIA_GPU, Decimal(0)), f"{where}:{NVIDIA_GPU}")
    mig: list[tuple[str, int]] = []
    for rname, amount in sorted(res.items()):
        if rname.startswith(MIG_PREFIX):
            profile = rname[len(MIG_PREFIX):]
            if not any(p.name == profile for m in CATALOG.models if m.mig
                       for p in m.mig.profiles):
                raise InputError(f"{where}:{rname}", f"unknown MIG profile {profile!r}",
                                 hint="e.g. nvidia.com/mig-1g.10gb")
            if (n := _count(amount, f"{where}:{rname}")) > 0:
                mig.append((profile, n))
        elif rname.startswith(OUR_DOMAINS) and rname not in (GPU_MILLI, NVIDIA_GPU):
            raise InputError(f"{where}:{rname}", "unknown resource",
                             hint=f"cotenant schedules {GPU_MILLI}, {NVIDIA_GPU}, "
                                  f"{MIG_PREFIX}<profile>")
    if sum(bool(x) for x in (milli, whole, mig)) > 1:
        raise InputError(where, f"ask for one of {GPU_MILLI}, {NVIDIA_GPU} or MIG instances")
    if milli and milli >= MILLI_PER_GPU and milli % MILLI_PER_GPU:
        raise InputError(f"{where}:{GPU_MILLI}", f"{milli} must be below 1000 (a share of "
                         "one GPU) or a multiple of 1000 (whole GPUs)")
    if milli:
        shape = (PodShape(cpu, memory, 1, milli) if milli < MILLI_PER_GPU
                 else PodShape(cpu, memory, milli // MILLI_PER_GPU, MILLI_PER_GPU))
    else:
        shape = PodShape(cpu, memory, whole, MILLI_PER_GPU if whole else 0)
    role = (_meta(pod, ROLE_KEY) or "online").strip().lower()
    if role not in ROLES:
        raise InputError(f"{where}:{ROLE_KEY}", f"{role!r} must be one of {', '.join(ROLES)}")
    slo_text = _meta(pod, SLO_KEY)
    slo = float(quantity(slo_text, f"{where}:{SLO_KEY}")) if slo_text is not None else None
    return PodRequest(str(uid), str(namespace), name, shape, tuple(mig), role,
                      _meta(pod, MODEL_KEY), slo)


@dataclass(frozen=True)
class NodeSpec:
    """A Kubernetes node as the placement model sees it, with its MIG instances by profile."""

    node: Node
    mig: tuple[tuple[str, int], ...] = ()


def gpu_model_of(labels: dict[str, Any]) -> GpuModel | None:
    """The node's GPU model: ``cotenant.io/gpu-model`` (a catalog name), else GPU feature
    discovery's ``nvidia.com/gpu.product`` matched to the catalog, else an opaque model of
    that product name (placement works on milli and needs no SM count)."""
    chosen = labels.get(GPU_MODEL_LABEL)
    if isinstance(chosen, str) and chosen:
        return CATALOG.get(chosen)  # an unknown name: an UnknownNameError listing valid ones
    product = labels.get(GFD_PRODUCT_LABEL)
    if not isinstance(product, str) or not product:
        return None
    bare = product.upper().removeprefix("NVIDIA-").removeprefix("TESLA-")
    return CATALOG.get(bare) if bare in CATALOG else GpuModel(product, None, None)


def node_spec(node: object) -> NodeSpec:
    """Read a Node (API JSON): allocatable CPU, memory, GPUs (``nvidia.com/gpu`` or
    ``cotenant.io/gpu-milli`` / 1000) and MIG instances."""
    name = field(node, "metadata", "name")
    if not isinstance(name, str) or not name:
        raise InputError("Node.metadata.name", "must be a non-empty string")
    alloc = field(node, "status", "allocatable") or {}
    if not isinstance(alloc, dict):
        raise InputError(f"node {name}.status.allocatable", "must be a mapping")
    where = f"node {name}.status.allocatable"
    cpu = int(quantity(alloc.get("cpu", 0), f"{where}:cpu") * 1000)
    memory = int(quantity(alloc.get("memory", 0), f"{where}:memory") / MIB)
    whole = int(quantity(alloc.get(NVIDIA_GPU, 0), f"{where}:{NVIDIA_GPU}"))
    milli = int(quantity(alloc.get(GPU_MILLI, 0), f"{where}:{GPU_MILLI}"))
    gpus = max(whole, milli // MILLI_PER_GPU)
    mig = tuple(sorted(
        (rname[len(MIG_PREFIX):], int(quantity(v, f"{where}:{rname}")))
        for rname, v in alloc.items() if rname.startswith(MIG_PREFIX)
    ))
    labels = field(node, "metadata", "labels") or {}
    model = gpu_model_of(labels if isinstance(labels, dict) else {}) if gpus else None
    if gpus and model is None:
        model = GpuModel("unknown-gpu", None, None)
    return NodeSpec(Node(name, cpu, memory, gpus, model), mig)
