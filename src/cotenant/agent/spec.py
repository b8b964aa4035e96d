"""A workload as the agent runs it: a validated, frozen spec parsed from JSON.

The command is an argv *list*; no shell ever sees it, so shell metacharacters in an item are
just bytes of an argument. A string command is refused (it would need a shell or a split).
Unknown keys are rejected with their name. The agent owns the MPS variables: a spec may not
set ``CUDA_MPS_*``, ``CUDA_VISIBLE_DEVICES``, ``CUDA_DEVICE_ORDER`` or the priority runtime's
``COTENANT_PRIORITY_*`` in its env. An online
service may name a Prometheus latency histogram (``latency_metric``) the agent reads its p99
from, for the compute guard (:mod:`cotenant.agent.latency`).
"""

from __future__ import annotations

import enum
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from cotenant.agent.backends.commands import check_argv, check_encodable
from cotenant.errors import InputError
from cotenant.policies.colocation.contract import check_share_pct

_NAME = re.compile(r"[a-z0-9][a-z0-9_.-]{0,62}")
_KEYS = {"name", "argv", "role", "gpu", "sm_share", "mem_limit_mib", "env", "model", "slo_ms",
         "latency_metric", "mig_instance", "mig_instances", "master_port", "job", "solo_ms"}
_MIG_INSTANCE = re.compile(r"[1-7]g\.[0-9]{1,3}gb(\+me)?@[0-7]")
_MIG_ON_GPU = re.compile(
    r"(?:(?P<gpu>[0-9]{1,3}):)?(?P<instance>[1-7]g\.[0-9]{1,3}gb(\+me)?@[0-7])")
MAX_RANKS = 64
"""Instances one training job may span: eight A100-class GPUs of seven instances, and more."""
_RESERVED_ENV = ("CUDA_MPS_", "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "COTENANT_PRIORITY_")
_METRIC_KEYS = {"url", "histogram", "unit", "labels"}
_METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
UNIT_MS = {"s": 1000.0, "ms": 1.0, "us": 0.001}
MIN_SLO_MS, MAX_SLO_MS = 0.001, 3_600_000.0  # a microsecond to an hour
"""Milliseconds per unit of a latency histogram's bucket bounds."""


class Role(enum.Enum):
    ONLINE = "online"
    OFFLINE = "offline"


@dataclass(frozen=True)
class LatencyMetric:
    """Where the guard reads an online service's latency: the Prometheus histogram
    ``histogram`` (its ``_bucket`` series, summed over the series matching ``labels``) on the
    text exposition at ``url``; bucket bounds in ``unit`` (s, ms or us)."""

    url: str
    histogram: str
    unit: str = "s"
    labels: tuple[tuple[str, str], ...] = ()

    @staticmethod
    def from_dict(data: object, where: str) -> LatencyMetric:
        if not isinstance(data, Mapping):
            raise InputError(where, "must be a JSON object {url, histogram[, unit, labels]}")
        unknown = sorted(set(map(str, data)) - _METRIC_KEYS)
        if unknown:
            raise InputError(f"{where}.{unknown[0]}", f"unknown key; valid: {sorted(_METRIC_KEYS)}")
        url, histogram = data.get("url"), data.get("histogram")
        if not isinstance(url, str) or not _http_url(url):
            raise InputError(f"{where}.url", f"must be an http(s) URL, got {url!r:.60}",
                             hint="e.g. http://127.0.0.1:8000/metrics")
        if not isinstance(histogram, str) or not _METRIC_NAME.fullmatch(histogram):
            raise InputError(f"{where}.histogram",
                             f"must be a Prometheus metric name, got {histogram!r:.60}")
        unit = data.get("unit", "s")
        if not isinstance(unit, str) or unit not in UNIT_MS:  # a list is not even hashable
            raise InputError(f"{where}.unit", f"must be one of {sorted(UNIT_MS)}, got {unit!r:.20}")
        labels = data.get("labels", {})
        if not isinstance(labels, Mapping) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in labels.items()):
            raise InputError(f"{where}.labels", "must be an object of strings")
        bad = next((k for k in labels if not _LABEL_NAME.fullmatch(k)), None)
        if bad is not None:
            raise InputError(f"{where}.labels", f"{bad!r:.40} is not a Prometheus label name")
        if "le" in labels:
            raise InputError(f"{where}.labels.le", "is the bucket bound; the agent reads them all")
        return LatencyMetric(url, histogram, str(unit), tuple(sorted(labels.items())))

    def to_dict(self) -> dict[str, Any]:
        return {"url": self.url, "histogram": self.histogram, "unit": self.unit,
                "labels": dict(self.labels)}


@dataclass(frozen=True)
class WorkloadSpec:
    """One workload. ``sm_share`` caps its MPS active-thread %; ``mem_limit_mib`` its pinned
    device memory; ``model``/``slo_ms`` describe an online service to the co-location policy.
    ``mig_instance`` (``"3g.20gb@4"``: profile and start) runs it on that MIG instance of a GPU
    in MIG mode instead of on the whole GPU; the instance's own SMs and memory are its limits,
    so it takes no MPS share or memory limit, and the co-location policy and its guard leave
    it alone (the hardware isolates it).

    ``mig_instances`` (``["3g.20gb@4", "1:2g.10gb@0"]``: profile and start, on ``gpu`` or on
    the GPU before the colon) makes it a training job spanning those instances, started as
    one process per instance (:func:`cotenant.agent.mig_workloads.rank_specs`), each a
    workload of its own that names its ``job`` and gets the rank variables of
    ``torch.distributed``'s ``env://`` rendezvous, at ``master_port``.

    ``solo_ms`` is an online service's GPU time per request alone on the whole GPU (its
    utilisation over its request rate, measured alone): where NVML samples none of its
    processes (under MPS) the agent reads its load as its request rate (from
    ``latency_metric``) times this (:mod:`cotenant.agent.colocation.rates`)."""

    name: str
    argv: tuple[str, ...]
    role: Role
    gpu: int
    sm_share: int | None = None
    mem_limit_mib: int | None = None
    env: tuple[tuple[str, str], ...] = ()
    model: str = ""
    slo_ms: float = 100.0
    latency_metric: LatencyMetric | None = None
    mig_instance: str | None = None
    mig_instances: tuple[tuple[int, str], ...] = ()
    master_port: int | None = None
    job: str | None = None
    solo_ms: float | None = None

    @staticmethod
    def from_dict(data: object, where: str = "workload") -> WorkloadSpec:
        """Validate a JSON object; every error names the field and the rule."""
        if not isinstance(data, Mapping):
            raise InputError(where, "must be a JSON object")
        unknown = sorted(set(map(str, data)) - _KEYS)
        if unknown:
            raise InputError(f"{where}.{unknown[0]}", f"unknown key; valid: {sorted(_KEYS)}")
        for key in ("name", "argv", "role", "gpu"):
            if key not in data:
                raise InputError(f"{where}.{key}", "is required")
        name = data["name"]
        if not isinstance(name, str) or not _NAME.fullmatch(name):  # match() allows a "\n"
            raise InputError(f"{where}.name", f"{name!r:.80} must match {_NAME.pattern}")
        argv = tuple(check_argv(data["argv"], f"{where}.argv"))
        try:
            role = Role(data["role"])
        except ValueError as exc:
            raise InputError(f"{where}.role", "must be 'online' or 'offline'") from exc
        gpu = data["gpu"]
        if isinstance(gpu, bool) or not isinstance(gpu, int) or gpu < 0:
            raise InputError(f"{where}.gpu", f"GPU index must be an integer >= 0, got {gpu!r}")
        share = data.get("sm_share")
        if share is not None:
            share = check_share_pct(share, f"{where}.sm_share")
        mem = data.get("mem_limit_mib")
        if mem is not None and (isinstance(mem, bool) or not isinstance(mem, int) or mem <= 0):
            raise InputError(f"{where}.mem_limit_mib", f"must be a positive integer, got {mem!r}")
        metric = data.get("latency_metric")
        if metric is not None:
            if role is not Role.ONLINE:
                raise InputError(f"{where}.latency_metric", "only an online service has one")
            metric = LatencyMetric.from_dict(metric, f"{where}.latency_metric")
        instance = data.get("mig_instance")
        if instance is not None and (not isinstance(instance, str)
                                     or not _MIG_INSTANCE.fullmatch(instance)):
            raise InputError(f"{where}.mig_instance", f"{instance!r:.40} is not "
                             "<profile>@<start>", hint="e.g. 3g.20gb@4 (cotenant mig "
                             "layouts lists the placements)")
        ranks = _ranks(data.get("mig_instances"), gpu, f"{where}.mig_instances")
        for key in ("sm_share", "mem_limit_mib"):
            if (instance is not None or ranks) and data.get(key) is not None:
                raise InputError(f"{where}.{key}", "a MIG instance's own SMs and memory "
                                 "limit it; MPS limits do not apply there")
        if instance is not None and ranks:
            raise InputError(f"{where}.mig_instances", "give mig_instance (one process) or "
                             "mig_instances (one per instance), not both")
        port = data.get("master_port")
        if port is not None and (isinstance(port, bool) or not isinstance(port, int)
                                 or not 1024 <= port <= 65535):
            raise InputError(f"{where}.master_port", f"must be a port in 1024-65535, got "
                             f"{port!r:.20}")
        job = data.get("job")
        if job is not None and (not isinstance(job, str) or not _NAME.fullmatch(job)):
            raise InputError(f"{where}.job", f"{job!r:.80} must match {_NAME.pattern}")
        solo = data.get("solo_ms")
        if solo is not None:
            if role is not Role.ONLINE:
                raise InputError(f"{where}.solo_ms", "only an online service has one")
            if metric is None:
                raise InputError(f"{where}.solo_ms", "needs a latency_metric: the request "
                                 "rate it multiplies is read from that histogram")
            solo = _slo(solo, f"{where}.solo_ms")
        return WorkloadSpec(name, argv, role, gpu, share, mem, _env(data.get("env", {}), where),
                            _text(data.get("model", ""), f"{where}.model"),
                            _slo(data.get("slo_ms", 100.0), f"{where}.slo_ms"), metric,
                            instance, ranks, port, job, solo)

    def to_dict(self) -> dict[str, Any]:
        out = {
            "name": self.name, "argv": list(self.argv), "role": self.role.value, "gpu": self.gpu,
            "sm_share": self.sm_share, "mem_limit_mib": self.mem_limit_mib,
            "env": dict(self.env), "model": self.model, "slo_ms": self.slo_ms,
        }
        if self.latency_metric is not None:  # absent otherwise: an older agent reads the row
            out["latency_metric"] = self.latency_metric.to_dict()
        if self.mig_instance is not None:
            out["mig_instance"] = self.mig_instance
        if self.mig_instances:
            out["mig_instances"] = [f"{g}:{i}" for g, i in self.mig_instances]
        if self.master_port is not None:
            out["master_port"] = self.master_port
        if self.job is not None:
            out["job"] = self.job
        if self.solo_ms is not None:
            out["solo_ms"] = self.solo_ms
        return out


def _ranks(value: object, gpu: int, where: str) -> tuple[tuple[int, str], ...]:
    """``mig_instances`` as (GPU, instance) pairs, each named once."""
    if value is None:
        return ()
    if not isinstance(value, list) or not 1 <= len(value) <= MAX_RANKS:
        raise InputError(where, f"must be a list of 1-{MAX_RANKS} instances",
                         hint='e.g. ["3g.20gb@4", "1:2g.10gb@0"] (GPU 1\'s 2g at slice 0)')
    out: list[tuple[int, str]] = []
    for i, item in enumerate(value):
        match = _MIG_ON_GPU.fullmatch(item) if isinstance(item, str) else None
        if match is None:
            raise InputError(f"{where}[{i}]", f"{item!r:.40} is not [<gpu>:]<profile>@<start>",
                             hint="e.g. 3g.20gb@4 or 1:2g.10gb@0")
        pair = (int(match["gpu"]) if match["gpu"] else gpu, match["instance"])
        if pair in out:
            raise InputError(f"{where}[{i}]", f"GPU {pair[0]}'s {pair[1]} is named twice")
        out.append(pair)
    return tuple(out)


def _http_url(url: str) -> bool:
    """An http(s) URL with a host, a valid port if any, no user or password (the agent would
    store and show them), and no space or control character."""
    if any(c.isspace() or not c.isprintable() for c in url):
        return False
    try:
        parts = urlsplit(url)
        _ = parts.port  # ValueError when not a number in 0-65535
    except ValueError:
        return False
    return (parts.scheme in ("http", "https") and bool(parts.hostname)
            and parts.username is None and parts.password is None)


def _env(value: object, where: str) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, Mapping):
        raise InputError(f"{where}.env", "must be an object of strings")
    for key, item in value.items():
        if not isinstance(key, str) or not isinstance(item, str):
            raise InputError(f"{where}.env", "keys and values must be strings")
        if key.startswith(_RESERVED_ENV):
            raise InputError(f"{where}.env.{key}", "is set by the agent (MPS limits, GPU, "
                             "priority runtime)")
        if not key or "=" in key or not key.isprintable() or "\0" in item:
            raise InputError(f"{where}.env.{key!r:.60}", "a name must be non-empty, printable "
                             "and without '=', and a value without NUL (exec cannot pass them)")
        check_encodable(key, f"{where}.env")
        check_encodable(item, f"{where}.env.{key}")
    return tuple(sorted(value.items()))


def _text(value: object, where: str) -> str:
    if not isinstance(value, str):
        raise InputError(where, "must be a string")
    return value


def _slo(value: object, where: str) -> float:
    rule = f"must be a number of milliseconds in ({MIN_SLO_MS:g}, {MAX_SLO_MS:g}]"
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InputError(where, f"{rule}, got {value!r:.40}")
    try:
        ms = float(value)
    except OverflowError:
        raise InputError(where, rule) from None
    if not (math.isfinite(ms) and MIN_SLO_MS < ms <= MAX_SLO_MS):
        raise InputError(where, f"{rule}, got {ms!r}")
    return ms
