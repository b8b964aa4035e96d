"""What runs where: per GPU, a MIG layout and the service each instance serves.

The planner's output and the operator's current state share this one type. A deployment is
written as a versioned document whose GPU entries are the same as the planner's JSON output
(``gpu_plans``, whose ``layout`` string is optional here and, where given, checked against
the instances), so yesterday's plan is today's ``current``::

    apiVersion: cotenant/v1alpha1
    kind: Deployment
    gpu: A100-40GB
    gpus:
      - gpu: 0
        instances:
          - {instance: 4g.20gb@0, service: search-ranker}
          - {instance: 3g.20gb@4}          # idle
      - gpu: 1
        instances: []                      # a free GPU
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cotenant.errors import InputError, InvalidLayoutError, UnknownNameError
from cotenant.model.gpu import CATALOG, GpuModel
from cotenant.model.mig import MigLayout, MigPlacement

API_VERSION = "cotenant/v1alpha1"
KIND = "Deployment"


@dataclass(frozen=True)
class GpuPlan:
    """One GPU: its layout and, per instance, the service it serves (None: idle)."""

    layout: MigLayout
    assignment: tuple[tuple[MigPlacement, str | None], ...]

    def services(self) -> set[str]:
        return {s for _, s in self.assignment if s is not None}


@dataclass(frozen=True)
class Deployment:
    """The GPUs of a pool, in index order, each with its layout and assignment."""

    gpu: GpuModel
    gpus: tuple[GpuPlan, ...]


def unknown_keys(data: Mapping[str, Any], allowed: set[str], where: str) -> None:
    """Reject the first key of ``data`` not in ``allowed``, naming its path."""
    extra = sorted(set(data) - allowed, key=str)  # YAML keys may be numbers too
    if extra:
        raise InputError(
            f"{where}.{extra[0]}", f"unknown key; allowed: {', '.join(sorted(allowed))}"
        )


def _gpu_entry(item: Any, gpu: GpuModel, where: str) -> GpuPlan:
    if not isinstance(item, Mapping):
        raise InputError(where, "each GPU must be a mapping with gpu and instances")
    unknown_keys(item, {"gpu", "layout", "instances"}, where)
    raw = item.get("instances", [])
    if not isinstance(raw, list):
        raise InputError(f"{where}.instances", "must be a list (empty for a free GPU)")
    assert gpu.mig is not None
    placements: list[MigPlacement] = []
    services: list[str | None] = []
    for j, inst in enumerate(raw):
        at = f"{where}.instances[{j}]"
        if not isinstance(inst, Mapping):
            raise InputError(at, "each instance must be a mapping with instance and service")
        unknown_keys(inst, {"instance", "service"}, at)
        text = inst.get("instance")
        name, sep, start = str(text).partition("@")
        if not isinstance(text, str) or not sep or not (start.isascii() and start.isdigit()):
            raise InputError(f"{at}.instance", f"{text!r} must be PROFILE@START, e.g. 3g.20gb@4")
        try:
            placements.append(MigPlacement(gpu.mig.profile(name), int(start)))
        except InvalidLayoutError as exc:
            raise InputError(f"{at}.instance", exc.message) from exc
        service = inst.get("service")
        if service is not None and (not isinstance(service, str) or not service):
            raise InputError(f"{at}.service", "must be a service name or absent (idle)")
        services.append(service)
    try:
        layout = gpu.mig.layout(placements)
    except InvalidLayoutError as exc:
        raise InputError(f"{where}.instances", exc.message) from exc
    _check_stated_layout(item.get("layout"), layout, f"{where}.layout")
    return GpuPlan(layout, tuple(zip(placements, services, strict=True)))


def _check_stated_layout(stated: Any, layout: MigLayout, where: str) -> None:
    """The planner's ``gpu_plans`` repeat each GPU's layout beside its instances; where an
    entry states one, it must name the same instances (in any order)."""
    if stated is None:
        return
    if not isinstance(stated, str):
        raise InputError(where, "must be a layout string such as 4g.20gb@0,3g.20gb@4")
    named = {t.strip() for t in stated.split(",") if t.strip()} - {"(empty)"}
    if named != {str(p) for p in layout.placements}:
        raise InputError(where, f"{stated!r} does not match the instances ({layout})")


def parse_deployment(data: Any, source: str = "deployment") -> Deployment:
    """Validate a loaded YAML/JSON document into a :class:`Deployment`."""
    if not isinstance(data, Mapping):
        raise InputError(source, "the document must be a mapping with apiVersion, kind, ...")
    unknown_keys(data, {"apiVersion", "kind", "gpu", "gpus"}, source)
    if data.get("apiVersion") != API_VERSION:
        raise InputError(f"{source}.apiVersion", f"must be {API_VERSION!r}")
    if data.get("kind") != KIND:
        raise InputError(f"{source}.kind", f"must be {KIND!r}")
    try:
        gpu = CATALOG.get(str(data.get("gpu")))
    except UnknownNameError as exc:
        raise InputError(f"{source}.gpu", exc.message) from exc
    gpu.require_mig(f"{source}.gpu")
    return Deployment(gpu, parse_gpus(data.get("gpus"), gpu, f"{source}.gpus"))


def parse_gpus(raw: Any, gpu: GpuModel, where: str) -> tuple[GpuPlan, ...]:
    """The ``gpus`` list of a deployment (also a ServingPlan's ``current``)."""
    if not isinstance(raw, list):
        raise InputError(where, "must be a list of GPUs")
    gpus = []
    for i, item in enumerate(raw):
        at = f"{where}[{i}]"
        index = item.get("gpu", i) if isinstance(item, Mapping) else i
        if isinstance(index, bool) or not isinstance(index, int) or index != i:
            raise InputError(f"{at}.gpu", f"list GPUs in order 0, 1, ...; got {index!r}")
        gpus.append(_gpu_entry(item, gpu, at))
    return tuple(gpus)


def deployment_document(deployment: Deployment) -> dict[str, Any]:
    """The inverse of :func:`parse_deployment`."""
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "gpu": deployment.gpu.name,
        "gpus": [
            {
                "gpu": i,
                "instances": [
                    {"instance": str(p), **({"service": s} if s is not None else {})}
                    for p, s in g.assignment
                ],
            }
            for i, g in enumerate(deployment.gpus)
        ],
    }
