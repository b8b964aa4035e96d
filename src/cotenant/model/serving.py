"""The serving spec: which DNN services must be served, how fast, within which latency.

On disk it is a versioned document, parsed strictly (unknown keys are rejected with their
path)::

    apiVersion: cotenant/v1alpha1
    kind: ServingPlan
    gpu: A100-40GB
    services:
      - name: search-ranker
        model: bert-base
        rate: 1200        # required requests per second
        sloMs: 50         # latency target
    current:              # optional: what runs today (see model/deployment.py)
      - gpu: 0
        instances: [{instance: 7g.40gb@0, service: search-ranker}]
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cotenant.errors import InputError, UnknownNameError
from cotenant.model.deployment import Deployment, parse_gpus, unknown_keys
from cotenant.model.gpu import CATALOG, GpuModel

API_VERSION = "cotenant/v1alpha1"
KIND = "ServingPlan"
_TOP_KEYS = {"apiVersion", "kind", "gpu", "services", "current"}
_SERVICE_KEYS = {"name", "model", "rate", "sloMs"}


@dataclass(frozen=True)
class Service:
    """One inference service: a DNN ``model`` that must serve ``rate`` req/s within
    ``slo_ms``."""

    name: str
    model: str
    rate: float
    slo_ms: float


@dataclass(frozen=True)
class ServingSpec:
    """What to plan: services on GPUs of one MIG-capable model."""

    gpu: GpuModel
    services: tuple[Service, ...]
    current: Deployment | None = None
    source: str = "spec"  # the document it came from, for error messages


_EXPONENT = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+")
"""A number with an exponent: YAML 1.1 (PyYAML) reads ``1.0e12`` as text, since its floats
need a sign in the exponent (``1.0e+12``) and a dot in the mantissa."""


def _number(value: Any, where: str, *, positive: bool) -> float:
    if isinstance(value, str) and _EXPONENT.fullmatch(value.strip()):
        value = float(value)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InputError(where, f"{value!r} is not a number")
    try:
        number = float(value)
    except OverflowError:  # an integer of hundreds of digits
        raise InputError(where, "is too large a number") from None
    if not math.isfinite(number):
        raise InputError(where, f"{value} must be a finite number")
    if value < 0 or (positive and value == 0):
        raise InputError(where, f"{value} must be {'> 0' if positive else '>= 0'}")
    return float(value)


def parse_spec(data: Any, source: str = "spec") -> ServingSpec:
    """Validate a loaded YAML/JSON document into a :class:`ServingSpec`."""
    if not isinstance(data, Mapping):
        raise InputError(source, "the document must be a mapping with apiVersion, kind, ...")
    unknown_keys(data, _TOP_KEYS, source)
    if data.get("apiVersion") != API_VERSION:
        raise InputError(f"{source}.apiVersion", f"must be {API_VERSION!r}")
    if data.get("kind") != KIND:
        raise InputError(f"{source}.kind", f"must be {KIND!r}")
    gpu_name = data.get("gpu")
    if not isinstance(gpu_name, str):
        raise InputError(f"{source}.gpu", "missing; e.g. gpu: A100-40GB")
    try:
        gpu = CATALOG.get(gpu_name)
    except UnknownNameError as exc:
        raise InputError(f"{source}.gpu", exc.message) from exc
    gpu.require_mig(f"{source}.gpu")
    raw = data.get("services")
    if not isinstance(raw, list) or not raw:
        raise InputError(f"{source}.services", "must be a non-empty list of services")
    services = []
    names: set[str] = set()
    for i, item in enumerate(raw):
        where = f"{source}.services[{i}]"
        if not isinstance(item, Mapping):
            raise InputError(where, "each service must be a mapping")
        unknown_keys(item, _SERVICE_KEYS, where)
        for key in sorted(_SERVICE_KEYS):
            if key not in item:
                raise InputError(f"{where}.{key}", "missing")
        name, model = item["name"], item["model"]
        if not isinstance(name, str) or not name:
            raise InputError(f"{where}.name", "must be a non-empty string")
        if name in names:
            raise InputError(f"{where}.name", f"service {name!r} appears twice")
        names.add(name)
        if not isinstance(model, str) or not model:
            raise InputError(f"{where}.model", "must be a non-empty string")
        services.append(
            Service(
                name,
                model,
                _number(item["rate"], f"{where}.rate", positive=False),
                _number(item["sloMs"], f"{where}.sloMs", positive=True),
            )
        )
    current = None
    if data.get("current") is not None:
        current = Deployment(gpu, parse_gpus(data["current"], gpu, f"{source}.current"))
    return ServingSpec(gpu, tuple(services), current, source)
