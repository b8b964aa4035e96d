"""The simulators a sweep file can name, each turning a :class:`~.spec.Sweep` into runs.

A simulator's :meth:`plan` checks the sweep against its own settings, builds every distinct
input once (a workload per distinct workload setting and seed: runs differing only in policy
share it) and gives one task per run; :func:`run_point` runs one task where the executor
puts it and returns the run's summary, JSON-ready.

* ``colocation``: ``base`` holds the sections of a
  :class:`~cotenant.sim.colocation.scenario.ColocationScenario` (``workload``, ``world``,
  ``policies``); the axes are ``policy`` (one policy per run: a name or ``{name: ...,
  <parameter>: ...}``; without it the base's ``policies`` are the axis) and any
  ``workload.<key>`` or ``world.<key>``.
* ``placement``: the fragmentation experiment; ``base`` takes ``pods``, ``nodes``,
  ``params``, ``syntheticPods``, ``syntheticNodes``, ``demand`` and ``reportAt``, each an
  axis too, and ``policy`` (a placement policy per run; default the seven).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from cotenant.errors import CotenantError, InputError
from cotenant.model.documents import API_VERSION
from cotenant.policies.placement import PLACEMENT
from cotenant.registry import Registry
from cotenant.sim.colocation.inputs import workload_of
from cotenant.sim.colocation.run import run_colocation
from cotenant.sim.colocation.scenario import KIND as SCENARIO
from cotenant.sim.colocation.scenario import ColocationScenario
from cotenant.sim.experiment import summarise
from cotenant.sim.fragmentation import FragmentationConfig, check_gpu_demand, run_fragmentation
from cotenant.sim.sweep.spec import Sweep, label
from cotenant.traces.source import load_workload


@dataclass
class Plan:
    """A sweep made concrete: each run's settings and task, and the inputs they share."""

    points: list[dict[str, Any]]
    tasks: list[tuple[str, int, Any]]
    """Per run: the simulator, the index of its inputs, its task."""
    inputs: list[Any] = field(default_factory=list)
    description: str = ""
    columns: tuple[str, ...] = ()
    """The figures of a run's summary a table shows."""
    notes: list[str] = field(default_factory=list)
    """What building the inputs read, kept and rejected (each line once)."""


class SweepSimulator(Protocol):
    def plan(self, sweep: Sweep) -> Plan:
        """The runs, or an :class:`InputError` naming the setting at fault."""
        ...

    def run(self, inputs: Any, task: Any) -> dict[str, object]:
        """One run's summary."""
        ...


SIMULATORS: Registry[SweepSimulator] = Registry("sweep simulator")


def run_point(inputs: Sequence[Any], item: tuple[str, int, Any]) -> dict[str, object]:
    """One run of a planned sweep (the executors' unit of work)."""
    name, key, task = item
    return SIMULATORS.create(name).run(inputs[key], task)


def _set(doc: dict[str, Any], path: str, value: Any, where: str) -> None:
    *parents, last = path.split(".")
    node = doc
    for part in parents:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise InputError(where, f"{part!r} is not a section")
        node = child
    node[last] = copy.deepcopy(value)


@SIMULATORS.register("colocation")
class ColocationSweep:
    """Runs of the co-location simulator, one policy each."""

    sections = ("workload", "world")
    columns = ("utilisation_pct", "slo_violation_pct", "offline_throughput", "jobs_completed")

    def plan(self, sweep: Sweep) -> Plan:
        base = dict(sweep.base)
        for key in ("apiVersion", "kind", "seed", "frontier"):
            if key in base:
                raise InputError(f"{sweep.where}.base.{key}", "not a sweep's setting",
                                 hint="seeds go in seeds; the frontier is "
                                 "`cotenant simulate colocation --frontier`")
        grid = dict(sweep.grid)
        for axis in grid:
            if axis != "policy" and axis.split(".")[0] not in self.sections:
                raise InputError(f"{sweep.where}.grid.{axis}", "not a co-location setting",
                                 hint="policy, workload.<key> or world.<key>")
        if "policy" not in grid:
            listed = base.get("policies", ["dedicated", "mps-fixed", "time-slicing",
                                           "priority", "muxflow", "cotenant-pause",
                                           "cotenant-priority"])
            if not isinstance(listed, list) or not listed:
                raise InputError(f"{sweep.where}.base.policies", "must be a non-empty list")
            sweep = Sweep(sweep.simulator, base, (("policy", tuple(listed)), *sweep.grid),
                          sweep.seeds, sweep.base_dir, sweep.where)
        base.pop("policies", None)
        plan = Plan(sweep.points(), [], columns=self.columns)
        keys: dict[object, int] = {}
        notes: list[str] = []
        for i, point in enumerate(plan.points):
            doc: dict[str, Any] = {"apiVersion": API_VERSION, "kind": SCENARIO,
                                   **copy.deepcopy(base), "seed": point["seed"]}
            where = f"{sweep.where} run {i} ({label(point)})"
            for axis, value in point.items():
                if axis != "seed":
                    _set(doc, "policies" if axis == "policy" else axis,
                         [value] if axis == "policy" else value, where)
            scenario = ColocationScenario.from_mapping(doc, where, sweep.base_dir)
            try:
                policy = scenario.build_policies()[0]
            except CotenantError as exc:
                raise InputError(f"{where}.policy", exc.one_line()) from exc
            drawn = (scenario.workload, scenario.seed)
            if drawn not in keys:
                keys[drawn] = len(plan.inputs)
                plan.inputs.append(workload_of(scenario, notes))
                plan.description = plan.inputs[-1].description
                plan.notes += [n for n in notes if n not in plan.notes]
            plan.tasks.append(("colocation", keys[drawn], (policy, scenario.seed,
                                                            scenario.config())))
        return plan

    def run(self, inputs: Any, task: Any) -> dict[str, object]:
        policy, seed, config = task
        return run_colocation(inputs, policy, seed, config).summary()


_PLACEMENT_KEYS = {"pods": "pods", "nodes": "nodes", "params": "params",
                   "syntheticPods": "synthetic_pods", "syntheticNodes": "synthetic_nodes",
                   "demand": "demand", "reportAt": "report_at"}
_PATHS = ("pods", "nodes", "params")
_INPUTS = ("pods", "nodes", "params", "synthetic_pods", "synthetic_nodes")
MAX_DRAW = 1_000_000
"""Synthetic pods or nodes drawn at most (as ``cotenant simulate``)."""


@SIMULATORS.register("placement", aliases=("fragmentation",))
class PlacementSweep:
    """Runs of the fragmentation experiment, one placement policy and seed each."""

    columns = ("alloc_percent", "alloc_percent_final", "failed_pods", "frag_percent")

    def plan(self, sweep: Sweep) -> Plan:
        allowed = set(_PLACEMENT_KEYS) | {"policy"}
        for key in sweep.base:
            if key not in _PLACEMENT_KEYS:
                raise InputError(f"{sweep.where}.base.{key}", "unknown key",
                                 hint=f"known: {', '.join(sorted(_PLACEMENT_KEYS))}")
        for axis, _ in sweep.grid:
            if axis not in allowed:
                raise InputError(f"{sweep.where}.grid.{axis}", "not a placement setting",
                                 hint=f"one of: {', '.join(sorted(allowed))}")
        if "policy" not in dict(sweep.grid):
            sweep = Sweep(sweep.simulator, sweep.base,
                          (("policy", tuple(PLACEMENT)), *sweep.grid), sweep.seeds,
                          sweep.base_dir, sweep.where)
        plan = Plan(sweep.points(), [], columns=self.columns)
        keys: dict[object, int] = {}
        for i, point in enumerate(plan.points):
            where = f"{sweep.where} run {i} ({label(point)})"
            s = {_PLACEMENT_KEYS.get(k, k): v for k, v in {**sweep.base, **point}.items()}
            source = tuple(self._input(s, name, sweep.base_dir, where) for name in _INPUTS)
            demand = _number(s.get("demand", 1.3), f"{where}.demand", 0.01, 100.0)
            report_at = _number(s.get("report_at", 100), f"{where}.reportAt", 0,
                                round(demand * 100))
            policy = s.get("policy")
            if not isinstance(policy, str):
                raise InputError(f"{where}.policy", f"must be a policy name, got {policy!r}")
            if source not in keys:
                keys[source] = len(plan.inputs)
                pods, nodes, params, n_pods, n_nodes = source
                loaded = load_workload(pods, nodes, params=params, synthetic_pods=n_pods,
                                       synthetic_nodes=n_nodes)
                check_gpu_demand(loaded.pods)
                plan.inputs.append((loaded.cluster, loaded.pods))
                plan.description = loaded.description
            plan.tasks.append(("placement", keys[source], (
                PLACEMENT.canonical(policy), int(s["seed"]),
                FragmentationConfig(demand_multiple=demand), int(report_at))))
        return plan

    @staticmethod
    def _input(s: dict[str, Any], name: str, base: Path | None, where: str) -> Any:
        value = s.get(name)
        if value is None:
            return None
        if name in _PATHS:
            if not isinstance(value, str) or not value:
                raise InputError(f"{where}.{name}", "must be a path")
            path = Path(value)
            return base / path if base is not None and not path.is_absolute() else path
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_DRAW:
            raise InputError(f"{where}.{name}", f"must be an integer in 1..{MAX_DRAW:,}, got "
                             f"{value!r}")
        return value

    def run(self, inputs: Any, task: Any) -> dict[str, object]:
        cluster, pods = inputs
        policy, seed, config, report_at = task
        run = run_fragmentation(cluster, pods, policy, seed, config)
        row = summarise([run], report_at)[0].as_dict()
        return {"policy": policy, "seed": seed, "alloc_percent": row["alloc_percent_mean"],
                "alloc_percent_final": row["alloc_percent_final"],
                "failed_pods": row["failed_pods_mean"], "frag_percent": row["frag_percent_mean"]}


def _number(value: Any, where: str, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) \
            or not low <= value <= high:
        raise InputError(where, f"must be a number in {low:g}..{high:g}, got {value!r}")
    return float(value)
