"""A workload as the agent runs it: a validated, frozen spec parsed from JSON.

The command is an argv *list*; no shell ever sees it, so shell metacharacters in an item are
just bytes of an argument. A string command is refused (it would need a shell or a split).
Unknown keys are rejected with their name. The agent owns the MPS variables: a spec may not
set ``CUDA_MPS_*`` or ``CUDA_VISIBLE_DEVICES`` in its env.
"""

from __future__ import annotations

import enum
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cotenant.agent.backends.local import check_argv
from cotenant.errors import InputError
from cotenant.policies.colocation.contract import check_share_pct

_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,62}$")
_KEYS = {"name", "argv", "role", "gpu", "sm_share", "mem_limit_mib", "env", "model", "slo_ms"}
_RESERVED_ENV = ("CUDA_MPS_", "CUDA_VISIBLE_DEVICES")


class Role(enum.Enum):
    ONLINE = "online"
    OFFLINE = "offline"


@dataclass(frozen=True)
class WorkloadSpec:
    """One workload. ``sm_share`` caps its MPS active-thread %; ``mem_limit_mib`` its pinned
    device memory; ``model``/``slo_ms`` describe an online service to the share policy."""

    name: str
    argv: tuple[str, ...]
    role: Role
    gpu: int
    sm_share: int | None = None
    mem_limit_mib: int | None = None
    env: tuple[tuple[str, str], ...] = ()
    model: str = ""
    slo_ms: float = 100.0

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
        if not isinstance(name, str) or not _NAME.match(name):
            raise InputError(f"{where}.name", f"{name!r} must match {_NAME.pattern}")
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
        return WorkloadSpec(name, argv, role, gpu, share, mem, _env(data.get("env", {}), where),
                            _text(data.get("model", ""), f"{where}.model"),
                            _slo(data.get("slo_ms", 100.0), f"{where}.slo_ms"))

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "argv": list(self.argv), "role": self.role.value, "gpu": self.gpu,
            "sm_share": self.sm_share, "mem_limit_mib": self.mem_limit_mib,
            "env": dict(self.env), "model": self.model, "slo_ms": self.slo_ms,
        }


def _env(value: object, where: str) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, Mapping):
        raise InputError(f"{where}.env", "must be an object of strings")
    for key, item in value.items():
        if not isinstance(key, str) or not isinstance(item, str):
            raise InputError(f"{where}.env", "keys and values must be strings")
        if key.startswith(_RESERVED_ENV):
            raise InputError(f"{where}.env.{key}", "is set by the agent (MPS limits, GPU)")
    return tuple(sorted(value.items()))


def _text(value: object, where: str) -> str:
    if not isinstance(value, str):
        raise InputError(where, "must be a string")
    return value


def _slo(value: object, where: str) -> float:
    rule = "must be a positive, finite number of milliseconds"
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InputError(where, f"{rule}, got {value!r:.40}")
    try:
        ms = float(value)
    except OverflowError:
        raise InputError(where, rule) from None
    if not (math.isfinite(ms) and ms > 0):
        raise InputError(where, f"{rule}, got {ms!r}")
    return ms
