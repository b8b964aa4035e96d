"""A co-location experiment as one versioned document: ``kind: ColocationScenario``.

``cotenant simulate colocation --config FILE`` reads it; its flags override single fields; the
benchmarks build the same object. Every key is checked (an unknown one is an error naming its
path), paths are relative to the file. The whole format, with defaults::

    apiVersion: cotenant/v1alpha1
    kind: ColocationScenario
    seed: 42
    workload:
      pods: null            # openb pod list (null: the synthetic workload fitted to openb)
      nodes: null           # openb node list (default: the one beside the pods)
      load: null            # GenAI duty-cycle file (null: synthetic duty cycles)
      memory: null          # GenAI memory-used file (needs load)
      gpus: 2000            # online GPUs of the synthetic workload (not with pods)
      hours: 24
      offlineDemand: 2.0    # offline work, times the online GPU-time of the horizon
      arrivals: spread      # or start
      loadScale: 1.0        # multiply the duty cycles (capped at 1)
      sloMultiple: 5        # SLO = this x the model's solo batch time
      substeps: 6           # loads per interval (bursts inside the minute)
      burstAlpha: 1.29      # Dirichlet concentration of the bursts (inf: flat)
    world:
      offlineStartS: 30
      shareChangeS: 30
      reactionS: 0.089      # from the end of a p99 report window to the action
      faultScale: 1.0
      calibration: tally    # or h200
      statistic: mean       # or min, max
      loadSignal: auto      # the load policies see: service, requests (counted from the
                            # request rate), whole-gpu; auto: requests under MPS, else service
    policies:               # names, or {name: ..., <parameter>: ...}
      - dedicated
      - {name: mps-fixed, share: 75, guard: pause, memory_limit: true}
    frontier: false         # true: every setting of every policy instead
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import numpy as np

from cotenant.errors import CotenantError, InputError
from cotenant.model.documents import check_header, read_yaml
from cotenant.perf.interference import SOURCES, STATISTICS
from cotenant.perf.slo import DEFAULT_MULTIPLE, check_multiple
from cotenant.policies.colocation import COLOCATION, ColocationPolicy
from cotenant.sim.colocation.faults import FaultRates
from cotenant.sim.colocation.load_signal import LoadSignal
from cotenant.sim.colocation.records import REACTION_S, ColocationConfig
from cotenant.sim.colocation.workload import ARRIVALS
from cotenant.traces.bursts import DEFAULT_ALPHA, DEFAULT_SUBSTEPS

KIND = "ColocationScenario"
DEFAULT_POLICIES = ("dedicated", "mps-fixed", "time-slicing", "priority", "muxflow",
                    "cotenant-pause", "cotenant-priority")
MAX_HOURS = 24 * 366
MAX_GPUS = 1_000_000


@dataclass(frozen=True)
class WorkloadSpec:
    pods: Path | None = None
    nodes: Path | None = None
    load: Path | None = None
    memory: Path | None = None
    gpus: int | None = None
    hours: float = 24.0
    offline_demand: float = 2.0
    arrivals: str = "spread"
    load_scale: float = 1.0
    slo_multiple: float = DEFAULT_MULTIPLE
    substeps: int = DEFAULT_SUBSTEPS
    burst_alpha: float = DEFAULT_ALPHA


@dataclass(frozen=True)
class WorldSpec:
    offline_start_s: float = 30.0
    share_change_s: float = 30.0
    reaction_s: float = REACTION_S
    fault_scale: float = 1.0
    calibration: str = "tally"
    statistic: str = "mean"
    load_signal: str = "auto"


@dataclass(frozen=True)
class PolicySpec:
    name: str
    params: tuple[tuple[str, Any], ...] = ()

    def build(self, where: str) -> ColocationPolicy:
        try:
            return COLOCATION.create(self.name, **dict(self.params))
        except TypeError as exc:
            raise InputError(where, f"policy {self.name!r} takes no such parameter: {exc}",
                             hint="see docs/reference/config.md for each policy's "
                             "parameters") from exc

    @property
    def label(self) -> str:
        args = ",".join(f"{k}={v}" for k, v in self.params)
        return f"{self.name}({args})" if args else self.name


@dataclass(frozen=True)
class ColocationScenario:
    """One co-location experiment (see the module docstring)."""

    seed: int = 42
    workload: WorkloadSpec = field(default_factory=WorkloadSpec)
    world: WorldSpec = field(default_factory=WorldSpec)
    policies: tuple[PolicySpec, ...] = tuple(PolicySpec(n) for n in DEFAULT_POLICIES)
    frontier: bool = False

    def __post_init__(self) -> None:
        _check(self)

    @classmethod
    def load(cls, path: Path) -> ColocationScenario:
        return cls.from_mapping(read_yaml(path), str(path), path.parent)

    @classmethod
    def from_mapping(cls, data: Any, where: str, base: Path | None = None) -> ColocationScenario:
        """The scenario of a parsed document; paths relative to ``base``."""
        data = check_header(data, where, KIND, ("apiVersion", "kind", "seed", "workload", "world",
                                                "policies", "frontier"))
        return cls(
            seed=_int(data.get("seed", 42), f"{where}.seed", 0),
            workload=_section(WorkloadSpec, data.get("workload", {}), f"{where}.workload", base),
            world=_section(WorldSpec, data.get("world", {}), f"{where}.world", base),
            policies=_policies(data.get("policies", list(DEFAULT_POLICIES)), f"{where}.policies"),
            frontier=_bool(data.get("frontier", False), f"{where}.frontier"),
        )

    def override(self, **changes: Any) -> ColocationScenario:
        """A copy with the given fields (``seed``, ``frontier``, ``policies`` or any field of
        the workload or world section) replaced; None leaves one as it is."""
        top = {k: v for k, v in changes.items()
               if k in ("seed", "frontier", "policies") and v is not None}
        work = {k: v for k, v in changes.items()
                if k in {f.name for f in fields(WorkloadSpec)} and v is not None}
        world = {k: v for k, v in changes.items()
                 if k in {f.name for f in fields(WorldSpec)} and v is not None}
        unknown = set(changes) - set(top) - set(work) - set(world) - {
            k for k, v in changes.items() if v is None}
        if unknown:
            raise InputError("scenario", f"no field {sorted(unknown)[0]!r}")
        return replace(self, workload=replace(self.workload, **work),
                       world=replace(self.world, **world), **top)

    def config(self) -> ColocationConfig:
        w = self.world
        return ColocationConfig(faults=FaultRates().scaled(w.fault_scale),
                                offline_start_s=w.offline_start_s,
                                share_change_s=w.share_change_s, reaction_s=w.reaction_s,
                                calibration=w.calibration, statistic=w.statistic,
                                load_signal=w.load_signal)

    def build_policies(self) -> list[ColocationPolicy]:
        return [p.build(f"policies[{i}]") for i, p in enumerate(self.policies)]

    def rng(self) -> np.random.Generator:
        return np.random.default_rng(self.seed)


_CAMEL = {"offlineDemand": "offline_demand", "loadScale": "load_scale",
          "sloMultiple": "slo_multiple", "burstAlpha": "burst_alpha",
          "offlineStartS": "offline_start_s", "shareChangeS": "share_change_s",
          "reactionS": "reaction_s", "faultScale": "fault_scale",
          "loadSignal": "load_signal"}


def _keys(data: dict[str, Any], where: str, allowed: set[str]) -> None:
    for key in data:
        if key not in allowed:
            raise InputError(f"{where}.{key}", "unknown key",
                             hint=f"known: {', '.join(sorted(allowed))}")


def _section(cls: type[Any], data: Any, where: str, base: Path | None) -> Any:
    if not isinstance(data, dict):
        raise InputError(where, "must be a mapping")
    names = {f.name: f for f in fields(cls)}
    camel = {k for k, v in _CAMEL.items() if v in names} | (set(names) - set(_CAMEL.values()))
    _keys(data, where, camel)
    out: dict[str, Any] = {}
    for key, value in data.items():
        name = str(_CAMEL.get(key, key))
        place = f"{where}.{key}"
        default = names[name].default
        if value is None:
            out[name] = None
        elif name in ("pods", "nodes", "load", "memory"):
            if not isinstance(value, str) or not value:
                raise InputError(place, "must be a path")
            out[name] = (base / value) if base is not None and not Path(value).is_absolute() \
                else Path(value)
        elif isinstance(default, str):
            if not isinstance(value, str):
                raise InputError(place, f"must be a string, got {value!r}")
            out[name] = value
        elif name in ("gpus", "substeps"):
            out[name] = _int(value, place, 1)
        else:
            out[name] = _float(value, place)
    return cls(**out)


def _policies(data: Any, where: str) -> tuple[PolicySpec, ...]:
    if not isinstance(data, list) or not data:
        raise InputError(where, "must be a non-empty list of policy names or mappings")
    out = []
    for i, item in enumerate(data):
        place = f"{where}[{i}]"
        if isinstance(item, str):
            out.append(PolicySpec(item))
        elif isinstance(item, dict) and isinstance(item.get("name"), str):
            params = tuple(sorted((k, v) for k, v in item.items() if k != "name"))
            out.append(PolicySpec(item["name"], params))
        else:
            raise InputError(place, "must be a policy name or a mapping with a name")
    return tuple(out)


def _int(value: Any, where: str, lowest: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < lowest:
        raise InputError(where, f"must be an integer >= {lowest}, got {value!r}")
    return value


def _float(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InputError(where, f"must be a number, got {value!r}")
    return float(value)


def _bool(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise InputError(where, f"must be true or false, got {value!r}")
    return value


def _check(s: ColocationScenario) -> None:
    w, world = s.workload, s.world
    if not (0.0 < w.hours <= MAX_HOURS) or not math.isfinite(w.hours):
        raise InputError("workload.hours", f"{w.hours:g} must be in (0, {MAX_HOURS}]")
    if w.gpus is not None and not 1 <= w.gpus <= MAX_GPUS:
        raise InputError("workload.gpus", f"{w.gpus} must be in 1..{MAX_GPUS}")
    if w.arrivals not in ARRIVALS:
        raise InputError("workload.arrivals", f"{w.arrivals!r}; one of {', '.join(ARRIVALS)}")
    for name, value in (("offline_demand", w.offline_demand), ("load_scale", w.load_scale)):
        if not (math.isfinite(value) and value >= 0.0):
            raise InputError(f"workload.{name}", f"{value:g} must be a finite number >= 0")
    if w.load_scale <= 0.0:
        raise InputError("workload.load_scale", "must be > 0")
    check_multiple(w.slo_multiple, "workload.slo_multiple")
    if not w.burst_alpha > 0.0:
        raise InputError("workload.burst_alpha", f"{w.burst_alpha:g} must be > 0 (inf: flat)")
    if w.memory is not None and w.load is None:
        raise InputError("workload.memory", "needs workload.load (the duty cycles it goes with)")
    if w.pods is None and w.nodes is not None:
        raise InputError("workload.nodes", "needs workload.pods")
    if w.pods is not None and w.gpus is not None:
        raise InputError("workload.gpus", "sizes the synthetic workload; with pods the online "
                         "GPUs are the trace's", hint="leave out gpus, or pods")
    for name in ("offline_start_s", "share_change_s", "reaction_s", "fault_scale"):
        value = getattr(world, name)
        if not (math.isfinite(value) and value >= 0.0):
            raise InputError(f"world.{name}", f"{value:g} must be a finite number >= 0")
    if world.calibration not in SOURCES:
        raise InputError("world.calibration", f"{world.calibration!r}; one of "
                         f"{', '.join(SOURCES)}")
    if world.statistic not in STATISTICS:
        raise InputError("world.statistic", f"{world.statistic!r}; one of "
                         f"{', '.join(STATISTICS)}")
    LoadSignal.parse(world.load_signal, "world.loadSignal")
    try:
        FaultRates().scaled(world.fault_scale)
    except CotenantError as exc:
        raise InputError("world.fault_scale", exc.one_line()) from exc

