"""A priority-sharing experiment as one versioned document: ``kind: PriorityScenario``.

``cotenant simulate priority --config FILE`` reads it; flags override single fields. Every
key is checked (an unknown one is an error naming its path); paths are relative to the file::

    apiVersion: cotenant/v1alpha1
    kind: PriorityScenario
    seed: 0
    hp: bert                 # a Tally inference job (bert, llama)
    be: pytorch_resnet50     # a Tally training job, or null (HP alone)
    hpTrace: null            # a kernel trace (CSV) for one HP request instead of the profile's
    beTrace: null            # a kernel trace for one BE iteration
    load: 0.5                # HP arrivals, share of its single-stream capacity
    requests: 200
    arrivals: periodic       # or poisson
    maxKernels: 1000         # longer requests are coarsened to this many kernels
    schedulers:              # names, or {name: ..., <parameter>: ...}
      - tally
      - {name: time-slicing, timeslice_us: 1000}
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from cotenant.errors import InputError
from cotenant.model.documents import check_header, read_yaml
from cotenant.perf.kernels import DEFAULT_MAX_KERNELS, kernel_profile
from cotenant.policies.priority import PRIORITY, Scheduler
from cotenant.sim.priority.compare import DEFAULT_SCHEDULERS
from cotenant.sim.priority.run import Pair, PairResult, run_pair
from cotenant.traces.kernels import load_kernel_trace

KIND = "PriorityScenario"
_KEYS = {"apiVersion", "kind", "seed", "hp", "be", "hpTrace", "beTrace", "load", "requests",
         "arrivals", "maxKernels", "schedulers"}


@dataclass(frozen=True)
class PriorityScenario:
    seed: int = 0
    hp: str = "bert"
    be: str | None = "pytorch_resnet50"
    hp_trace: Path | None = None
    be_trace: Path | None = None
    load: float = 0.5
    requests: int = 200
    arrivals: str = "periodic"
    max_kernels: int = DEFAULT_MAX_KERNELS
    schedulers: tuple[tuple[str, tuple[tuple[str, Any], ...]], ...] = tuple(
        (n, ()) for n in DEFAULT_SCHEDULERS)

    def __post_init__(self) -> None:
        if self.seed < 0:
            raise InputError("seed", f"{self.seed} must be >= 0")
        self.pair()  # checks load, requests, arrivals
        kernel_profile(self.hp)
        if self.be is not None:
            kernel_profile(self.be)
        if self.be_trace is not None and self.be is None:
            raise InputError("beTrace", "needs a BE job (be), whose SMs its kernels use")
        if self.max_kernels < 1:
            raise InputError("maxKernels", f"{self.max_kernels} must be >= 1")
        self.build()

    @classmethod
    def load_file(cls, path: Path) -> PriorityScenario:
        return cls.from_mapping(read_yaml(path), str(path), path.parent)

    @classmethod
    def from_mapping(cls, data: Any, where: str, base: Path | None = None) -> PriorityScenario:
        data = check_header(data, where, KIND, _KEYS)
        out: dict[str, Any] = {}
        for key, name, typ in (("seed", "seed", int), ("requests", "requests", int),
                               ("maxKernels", "max_kernels", int), ("load", "load", float),
                               ("hp", "hp", str), ("arrivals", "arrivals", str)):
            if key in data:
                out[name] = _typed(data[key], typ, f"{where}.{key}")
        if out.get("seed", 0) < 0:
            raise InputError(f"{where}.seed", f"{out['seed']} must be >= 0")
        if "be" in data:
            out["be"] = None if data["be"] is None else _typed(data["be"], str, f"{where}.be")
        for key, name in (("hpTrace", "hp_trace"), ("beTrace", "be_trace")):
            if data.get(key) is not None:
                value = _typed(data[key], str, f"{where}.{key}")
                out[name] = base / value if base and not Path(value).is_absolute() \
                    else Path(value)
        if "schedulers" in data:
            out["schedulers"] = _schedulers(data["schedulers"], f"{where}.schedulers")
        return cls(**out)

    def override(self, **changes: Any) -> PriorityScenario:
        return replace(self, **{k: v for k, v in changes.items() if v is not None})

    def pair(self) -> Pair:
        return Pair(self.hp, self.be, self.load, self.requests, self.arrivals, self.max_kernels)

    def build(self) -> list[Scheduler]:
        return [_build(name, params, f"schedulers[{i}]")
                for i, (name, params) in enumerate(self.schedulers)]


def _build(name: str, params: tuple[tuple[str, Any], ...], where: str) -> Scheduler:
    """The scheduler ``name`` with ``params``, each checked against its range; errors name
    ``where`` (and the parameter)."""
    try:
        return PRIORITY.create(name, **dict(params))
    except TypeError as exc:
        raise InputError(where, f"scheduler {name!r} takes no such parameter: {exc}") from exc
    except InputError as exc:
        raise InputError(f"{where}.{exc.where}", exc.rule, hint=exc.hint) from exc


def _typed(value: Any, typ: type, where: str) -> Any:
    if isinstance(value, bool) or not isinstance(value, typ if typ is not float
                                                 else (int, float)):
        raise InputError(where, f"must be a {typ.__name__}, got {value!r}")
    return typ(value)


def _schedulers(data: Any, where: str) -> tuple[tuple[str, tuple[tuple[str, Any], ...]], ...]:
    if not isinstance(data, list) or not data:
        raise InputError(where, "must be a non-empty list of scheduler names or mappings")
    out: list[tuple[str, tuple[tuple[str, Any], ...]]] = []
    for i, item in enumerate(data):
        if isinstance(item, str):
            out.append((item, ()))
        elif isinstance(item, dict) and isinstance(item.get("name"), str):
            out.append((item["name"], tuple(sorted((k, v) for k, v in item.items()
                                                    if k != "name"))))
            _build(*out[-1], f"{where}[{i}]")
        else:
            raise InputError(f"{where}[{i}]", "must be a scheduler name or a mapping with a "
                             "name")
    return tuple(out)


def run_scenario(s: PriorityScenario) -> list[PairResult]:
    """Every scheduler of the scenario on its pair (the same draws for each)."""
    hp = load_kernel_trace(s.hp_trace) if s.hp_trace else None
    be = load_kernel_trace(s.be_trace) if s.be_trace else None
    out = []
    for (_, params), sched in zip(s.schedulers, s.build(), strict=True):
        r = run_pair(sched, s.pair(), s.seed, hp_units=hp, be_units=be)
        label = ",".join(f"{k}={v}" for k, v in params)
        out.append(replace(r, scheduler=f"{r.scheduler}({label})") if label else r)
    return out
