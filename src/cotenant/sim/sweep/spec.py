"""A sweep as one versioned document: ``kind: Sweep``.

``cotenant sweep run FILE`` reads it. Every combination of the grid's values runs once per
seed, from the simulator's base settings::

    apiVersion: cotenant/v1alpha1
    kind: Sweep
    simulator: colocation       # or placement
    base:                       # the simulator's own settings, shared by every run
      workload: {gpus: 200, hours: 2}
    grid:                       # each axis a list of values; every combination runs
      policy: [dedicated, muxflow, {name: mps-fixed, share: 50}]
      workload.sloMultiple: [3, 5]
    seeds: [42, 43]             # or {start: 42, count: 10}

An axis is a setting's path in ``base`` (``workload.sloMultiple``; ``policy`` for one policy
per run); which axes and base keys a simulator takes is its own
(:mod:`cotenant.sim.sweep.simulators`). Unknown keys are errors naming their path; paths in
``base`` are relative to the file.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cotenant.errors import InputError
from cotenant.model.documents import check_header, read_yaml

KIND = "Sweep"
MAX_RUNS = 1_000_000
"""Past this a typo (a grid of a thousand values on three axes), not a sweep."""


@dataclass(frozen=True)
class Sweep:
    """A simulator, its base settings, the grid of settings to vary, and the seeds."""

    simulator: str
    base: Mapping[str, Any]
    grid: tuple[tuple[str, tuple[Any, ...]], ...] = ()
    seeds: tuple[int, ...] = (42,)
    base_dir: Path | None = None
    """Where relative paths in ``base`` start (the file's folder)."""
    where: str = "sweep"
    """The document's name in error messages."""

    def __post_init__(self) -> None:
        if not self.seeds:
            raise InputError(f"{self.where}.seeds", "must name at least one seed")
        if len(set(self.seeds)) != len(self.seeds):
            raise InputError(f"{self.where}.seeds", "names a seed twice")
        if self.size > MAX_RUNS:
            raise InputError(f"{self.where}.grid", f"{self.size:,} runs; at most {MAX_RUNS:,}")

    @property
    def size(self) -> int:
        """Runs: the product of the axes' lengths, times the seeds."""
        n = len(self.seeds)
        for _, values in self.grid:
            n *= len(values)
        return n

    def points(self) -> list[dict[str, Any]]:
        """Each run's settings (its value on every axis, and ``seed``), the first axis
        slowest, the seed fastest."""
        axes = [name for name, _ in self.grid]
        out = []
        for combo in itertools.product(*(values for _, values in self.grid), self.seeds):
            out.append({**dict(zip(axes, combo[:-1], strict=True)), "seed": combo[-1]})
        return out

    @classmethod
    def load(cls, path: Path) -> Sweep:
        return cls.from_mapping(read_yaml(path), str(path), path.parent)

    @classmethod
    def from_mapping(cls, data: Any, where: str, base_dir: Path | None = None) -> Sweep:
        data = check_header(data, where, KIND,
                            ("apiVersion", "kind", "simulator", "base", "grid", "seeds"))
        simulator = data.get("simulator")
        if not isinstance(simulator, str):
            raise InputError(f"{where}.simulator", "must name a simulator",
                             hint="colocation or placement")
        base = data.get("base", {})
        if not isinstance(base, dict):
            raise InputError(f"{where}.base", "must be a mapping of the simulator's settings")
        return cls(simulator, base, _grid(data.get("grid", {}), f"{where}.grid"),
                   _seeds(data.get("seeds", [42]), f"{where}.seeds"), base_dir, where)


def value_text(value: Any) -> str:
    """A setting's value as a label shows it: ``mps-fixed(share=50)`` for a policy mapping."""
    if isinstance(value, dict):
        rest = ",".join(f"{k}={v}" for k, v in value.items() if k != "name")
        return f"{value.get('name', '')}({rest})" if "name" in value else f"({rest})"
    return str(value)


def label(settings: Mapping[str, Any]) -> str:
    """A run's settings on one line: ``policy=muxflow workload.sloMultiple=3 seed=42``."""
    return " ".join(f"{k}={value_text(v)}" for k, v in settings.items())


def _grid(data: Any, where: str) -> tuple[tuple[str, tuple[Any, ...]], ...]:
    if not isinstance(data, dict):
        raise InputError(where, "must map each axis to a list of values")
    out = []
    for name, values in data.items():
        if not isinstance(name, str) or name == "seed":
            raise InputError(f"{where}.{name}", "an axis is a setting's name; seeds go in "
                             "seeds")
        if not isinstance(values, list) or not values:
            raise InputError(f"{where}.{name}", "must be a non-empty list of values")
        out.append((name, tuple(values)))
    return tuple(out)


def _seeds(data: Any, where: str) -> tuple[int, ...]:
    if isinstance(data, dict):
        extra = set(data) - {"start", "count"}
        if extra:
            raise InputError(f"{where}.{sorted(extra)[0]}", "unknown key",
                             hint="seeds: {start: 42, count: 10}")
        start, count = data.get("start", 42), data.get("count")
        for name, value, low in (("start", start, 0), ("count", count, 1)):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise InputError(f"{where}.{name}", f"must be an integer >= {low}, got "
                                 f"{value!r}")
        return tuple(range(start, start + count))
    if not isinstance(data, list):
        raise InputError(where, "must be a list of seeds or {start: 42, count: 10}")
    for i, seed in enumerate(data):
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise InputError(f"{where}[{i}]", f"must be an integer >= 0, got {seed!r}")
    return tuple(data)
