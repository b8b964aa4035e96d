"""A MIG plan as node changes: which node gets which mig-parted config, in which order, and
what each change takes out of and puts back into rotation.

NVIDIA's MIG manager (the GPU operator's ``mig-manager``, running ``mig-parted``) reconfigures a
node when its label ``nvidia.com/mig.config`` names a config of its ConfigMap, and reports
``nvidia.com/mig.config.state`` (``pending``, ``rebooting``, ``success``, ``failed``). A config
covers a whole node, so the node is the unit of change: its GPUs whose layout changes must
serve nothing while it applies. A :class:`NodeChange` therefore takes every replica of the node
out of rotation first (``drain``) and puts the node's new replicas in afterwards.

The order is the planner's: nodes in the order their GPUs first appear in a layout step
(create, destroy, repartition) of its reconfiguration (:func:`~cotenant.policies.partition.
reconfig.plan_steps`).
Physical GPU ``g`` is device ``g % gpus_per_node`` of node ``g // gpus_per_node`` (the nodes
given in order). Configs are named ``cotenant-node-<n>`` by distinct node layout, in the
format of ``cotenant plan mig --mig-parted --gpus-per-node``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from cotenant.errors import InputError
from cotenant.model.deployment import Deployment, GpuPlan
from cotenant.model.mig import MigLayout
from cotenant.model.serving import ServingSpec
from cotenant.perf.mig_profiles import ProfileTable
from cotenant.policies.partition.export import layout_key, mig_parted_configs
from cotenant.policies.partition.planner import DEFAULT_TIME_LIMIT, plan_spec
from cotenant.policies.partition.problem import PartitionProblem
from cotenant.policies.partition.reconfig import (
    Reconfiguration,
    StepKind,
    floor_of,
    plan_steps,
    replicas_today,
)

LAYOUT_STEPS = (StepKind.CREATE, StepKind.DESTROY, StepKind.REPARTITION)
Replica = tuple[str, float]
"""A replica in rotation: its service and the req/s it serves."""


@dataclass(frozen=True)
class NodeChange:
    node: str
    config: str
    """The mig-parted config the node's label names."""
    drain: tuple[Replica, ...]
    """Replicas in rotation on the node today: taken out before the label is written."""
    restore: tuple[Replica, ...]
    """Replicas the node serves after the change: put in once the MIG manager succeeds."""
    layout_changes: bool
    """Whether any GPU's layout changes; if not, the label is written without a drain
    (mig-parted finds the layout applied and touches no GPU)."""


@dataclass(frozen=True)
class Rollout:
    changes: tuple[NodeChange, ...]
    """In the planner's order."""
    services: tuple[str, ...]
    capacity: tuple[float, ...]
    """Per service, req/s in rotation today."""
    floor: tuple[float, ...]
    """Per service, req/s that must stay in rotation: min(demand, capacity today)."""
    replicas: tuple[int, ...]
    """Per service with a demand, its replicas in rotation today (one must stay)."""
    configs: dict[str, Any]
    """The mig-parted document (``version: v1``, ``mig-configs``) the labels name."""


def _replicas(problem: PartitionProblem, gpus: list[GpuPlan]) -> tuple[Replica, ...]:
    index = {s: i for i, s in enumerate(problem.services)}
    out = []
    for gpu in gpus:
        for placement, service in gpu.assignment:
            if service is not None:
                rate = (problem.rate_of(index[service], placement.profile.name)
                        if service in index else 0.0)
                out.append((service, rate))
    return tuple(out)


def build_rollout(problem: PartitionProblem, gpu_model: str, current: tuple[GpuPlan, ...],
                  change: Reconfiguration, nodes: list[str], gpus_per_node: int) -> Rollout:
    """The node changes from ``current`` to ``change.target`` on ``nodes`` (in GPU order)."""
    if gpus_per_node < 1:
        raise InputError("gpus per node", f"{gpus_per_node} must be at least 1")
    if len(set(nodes)) != len(nodes):
        raise InputError("nodes", "a node is named twice")
    pool = max(len(current), len(change.target))
    need = -(-pool // gpus_per_node)
    if len(nodes) < need:
        raise InputError("nodes", f"{len(nodes)} node(s) of {gpus_per_node} GPUs hold "
                         f"{len(nodes) * gpus_per_node} GPUs; the plan uses {pool}",
                         hint=f"name {need} nodes")
    empty = GpuPlan(MigLayout(), ())
    today = list(current) + [empty] * (pool - len(current))
    after = list(change.target) + [empty] * (pool - len(change.target))
    first: dict[int, int] = {}
    for n, step in enumerate(change.steps):
        if step.kind in LAYOUT_STEPS:
            first.setdefault(step.gpu // gpus_per_node, n)
    spans = [range(i * gpus_per_node, min(pool, (i + 1) * gpus_per_node)) for i in range(need)]
    keys = [tuple(layout_key(after[g].layout) for g in span) for span in spans]
    document, names = mig_parted_configs(keys, gpu_model, gpus_per_node)
    changes = []
    for i in sorted(range(need), key=lambda i: (first.get(i, len(change.steps)), i)):
        gpus = spans[i]
        changed = any(layout_key(today[g].layout) != layout_key(after[g].layout) for g in gpus)
        changes.append(NodeChange(nodes[i], names[i],
                                  _replicas(problem, [today[g] for g in gpus]),
                                  _replicas(problem, [after[g] for g in gpus]), changed))
    rate_today = np.zeros(len(problem.services))
    index = {s: k for k, s in enumerate(problem.services)}
    for c in changes:
        for service, rate in c.drain:
            if service in index:
                rate_today[index[service]] += rate
    return Rollout(tuple(changes), tuple(problem.services), tuple(rate_today.tolist()),
                   tuple(floor_of(problem, current).tolist()),
                   tuple(int(x) for x in replicas_today(problem, current)), document)


def plan_rollout(spec: ServingSpec, table: ProfileTable, nodes: list[str], gpus_per_node: int,
                 *, current: Deployment | None = None, solver: str = "auto",
                 time_limit: float = DEFAULT_TIME_LIMIT) -> tuple[Rollout, Reconfiguration]:
    """Plan ``spec`` (from ``current``, or from empty GPUs) and turn the planner's safe
    reconfiguration into node changes on ``nodes``."""
    if current is not None and current.gpu != spec.gpu:
        raise InputError("current", f"deployment is on {current.gpu.name}, spec on "
                         f"{spec.gpu.name}")
    problem, plan = plan_spec(spec, table, solver, time_limit)
    today = current.gpus if current is not None else ()
    change = plan_steps(problem, today, plan.gpus)
    return build_rollout(problem, spec.gpu.name, today, change, nodes, gpus_per_node), change
