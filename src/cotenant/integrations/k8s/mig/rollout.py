"""A MIG plan as node changes: which node gets which mig-parted config, in which order, what
each change takes out of and puts back into rotation, and the temporary replicas it needs.

NVIDIA's MIG manager (the GPU operator's ``mig-manager``, running ``mig-parted``) reconfigures a
node when its label ``nvidia.com/mig.config`` names a config of its ConfigMap, and reports
``nvidia.com/mig.config.state`` (``pending``, ``rebooting``, ``success``, ``failed``). A config
covers a whole node, so the node is the unit of change: a :class:`NodeChange` takes every
replica of the node out of rotation first (``drain``) and puts the node's new replicas in
afterwards (``restore``).

The changes are the planner's reconfiguration grouped into node stages
(:func:`~cotenant.policies.partition.reconfig.stages.node_stages`): nodes in the order the
planner's steps first touch their GPUs' layouts, and, where a node cannot be drained, a
temporary replica elsewhere first, on an idle instance or on a node given an intermediate
layout. Every layout a node passes through is a config: the final ones first, then the
intermediate ones, each named from its content (``cotenant-node-<8 hex digits>``) as ``cotenant
plan mig --mig-parted --gpus-per-node`` names them, so a node left at a config by an earlier
rollout shows one of this rollout's configs only if it has that config's layouts.
Physical GPU ``g`` is device ``g % gpus_per_node`` of node ``g // gpus_per_node`` (the nodes
given in order).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

from cotenant.errors import InputError
from cotenant.model.deployment import Deployment, GpuPlan
from cotenant.model.serving import ServingSpec
from cotenant.perf.mig_profiles import ProfileTable
from cotenant.policies.partition.export import NodeKey, layout_key, mig_parted_configs
from cotenant.policies.partition.planner import DEFAULT_TIME_LIMIT, plan_spec
from cotenant.policies.partition.problem import PartitionProblem
from cotenant.policies.partition.reconfig import (
    Reconfiguration,
    Temporary,
    node_stages,
    plan_steps,
    replicas_today,
)

Replica = tuple[str, float]
"""A replica in rotation: its service and the req/s it serves."""


@dataclass(frozen=True)
class TempReplica:
    """A temporary replica: a serving pod the controller creates and removes itself."""

    name: str
    """The pod's name: the same for the same replica on every run (resuming finds it)."""
    service: str
    node: str
    profile: str
    """The MIG profile it asks for (``nvidia.com/mig-<profile>``)."""
    rate: float


@dataclass(frozen=True)
class NodeChange:
    node: str
    config: str
    """The mig-parted config the node's label names."""
    drain: tuple[Replica, ...]
    """Replicas in rotation on the node before the change: taken out before the label."""
    restore: tuple[Replica, ...]
    """Replicas the node serves after the change: put in once the MIG manager succeeds."""
    drains: bool
    """Whether the node is drained: a GPU's layout changes, or the replicas it serves do. If
    not, the label is written without a drain (mig-parted finds the layout applied and
    touches no GPU)."""
    temporaries: tuple[TempReplica, ...] = ()
    """Temporary replicas that must be Ready and in rotation before the drain."""
    release: tuple[TempReplica, ...] = ()
    """Temporary replicas removed once the node serves again."""
    final: bool = True
    """Whether ``config`` is the node's final layout (else an intermediate one lending room)."""
    profiles: tuple[str, ...] = ()
    """The MIG profile of each of ``restore``'s replicas, in order (the instances they hold)."""
    drain_profiles: tuple[str, ...] = ()
    """The MIG profile of each of ``drain``'s replicas, in order."""


@dataclass(frozen=True)
class Rollout:
    changes: tuple[NodeChange, ...]
    """In the order they are carried out; a node may change more than once."""
    services: tuple[str, ...]
    floor: tuple[float, ...]
    """Per service, req/s that must stay in rotation: min(demand, capacity today)."""
    replicas: tuple[int, ...]
    """Per service with a demand, its replicas in rotation today (one must stay)."""
    configs: dict[str, Any]
    """The mig-parted document (``version: v1``, ``mig-configs``) the labels name."""
    blocked: str | None = None
    """Where the planner found no safe stage (the controller stops there), or None."""
    unsafe_from: int | None = None
    """Where blocked, the index of the first change that is not safe."""

    @property
    def clean(self) -> int:
        """How many changes, from the first, are safe and leave no temporary replica and no
        intermediate layout behind: all of them where the rollout is not blocked, else the
        most that do before the first unsafe change (what ``--partial`` carries out)."""
        if self.unsafe_from is None:
            return len(self.changes)
        best, out, last = 0, set[str](), dict[str, bool]()
        for k, c in enumerate(self.changes[:self.unsafe_from], 1):
            out = (out | {t.name for t in c.temporaries}) - {t.name for t in c.release}
            last[c.node] = c.final
            if not out and all(last.values()):
                best = k
        return best

    @property
    def temporaries(self) -> dict[str, TempReplica]:
        """Every temporary replica of the rollout, by pod name."""
        return {t.name: t for c in self.changes for t in (*c.temporaries, *c.release)}


def _replicas(problem: PartitionProblem, gpus: tuple[GpuPlan, ...]) -> tuple[Replica, ...]:
    index = {s: i for i, s in enumerate(problem.services)}
    out = []
    for gpu in gpus:
        for placement, service in gpu.assignment:
            if service is not None:
                rate = (problem.rate_of(index[service], placement.profile.name)
                        if service in index else 0.0)
                out.append((service, rate))
    return tuple(out)


def _profiles(gpus: tuple[GpuPlan, ...]) -> tuple[str, ...]:
    return tuple(p.profile.name for g in gpus for p, s in g.assignment if s is not None)


def pod_name(service: str, node: str, device: int, placement: str) -> str:
    """A temporary replica's pod name (a DNS subdomain, as Kubernetes requires)."""
    raw = f"cotenant-temp-{service}-{node}-{device}-{placement.replace('@', '-')}".lower()
    return re.sub(r"[^a-z0-9.-]", "-", raw)[:253].strip(".-")


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
    plan = node_stages(problem, current, change, gpus_per_node)
    pool_keys = {s.node: _key(s.after) for s in plan.stages if s.final}
    keys = [pool_keys[n] for n in range(need)]
    keys += [_key(s.after) for s in plan.stages if not s.final]
    document, names = mig_parted_configs(keys, gpu_model, gpus_per_node)
    config = dict(zip(keys, names, strict=True))

    def temp(t: Temporary) -> TempReplica:
        node, device = nodes[t.gpu // gpus_per_node], t.gpu % gpus_per_node
        rate = problem.rate_of(problem.services.index(t.service), t.placement.profile.name)
        return TempReplica(pod_name(t.service, node, device, str(t.placement)), t.service,
                           node, t.placement.profile.name, rate)

    changes = tuple(NodeChange(nodes[s.node], config[_key(s.after)],
                               _replicas(problem, s.before), _replicas(problem, s.after),
                               s.drains, tuple(temp(t) for t in s.temporaries),
                               tuple(temp(t) for t in s.release), s.final,
                               _profiles(s.after), _profiles(s.before))
                    for s in plan.stages)
    blocked = None if plan.blocked is None else f"{nodes[plan.blocked]}: {plan.why}"
    return Rollout(changes, tuple(problem.services), plan.floor,
                   tuple(int(x) for x in replicas_today(problem, current)), document, blocked,
                   plan.unsafe_from)


def describe(rollout: Rollout) -> list[str]:
    """The rollout's changes, one line each, in order (what ``--dry-run`` prints first)."""
    lines = []
    for k, c in enumerate(rollout.changes, 1):
        line = f"{k:4d}. {c.node} -> {c.config}"
        if not c.final:
            line += " (intermediate: room for temporary replicas)"
        if c.temporaries:
            line += "; needs " + ", ".join(f"{t.service} on {t.node} ({t.profile})"
                                           for t in c.temporaries)
        if c.drains and c.drain:
            line += "; drains " + ", ".join(sorted({s for s, _ in c.drain}))
        elif not c.drains:
            gains = Counter(s for s, _ in c.restore) - Counter(s for s, _ in c.drain)
            line += ("; no drain, gains " + ", ".join(sorted(gains))) if gains else "; no change"
        if c.release:
            line += "; then removes " + ", ".join(f"{t.service} on {t.node}" for t in c.release)
        lines.append(line)
    if rollout.blocked is not None:
        lines.append(f"      no safe node order was found from {rollout.blocked}")
    return lines


def _key(gpus: tuple[GpuPlan, ...]) -> NodeKey:
    return tuple(layout_key(g.layout) for g in gpus)


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
