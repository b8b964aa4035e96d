"""What the node stages (:mod:`.stages`) work on: a temporary replica, one node's stage, and
the pool as it stands while the stages are found and checked: per node its GPUs, the
temporary replicas serving, and the reconfiguration's invariants (:func:`~.steps.shortfall`)
for a node taken out of rotation.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from cotenant.model.deployment import GpuPlan
from cotenant.model.mig import MigPlacement
from cotenant.policies.partition.export import layout_key
from cotenant.policies.partition.problem import PartitionProblem
from cotenant.policies.partition.reconfig.steps import shortfall


@dataclass(frozen=True)
class Temporary:
    """A replica the plan does not keep: ``service`` on ``placement`` of physical ``gpu``."""

    service: str
    gpu: int
    placement: MigPlacement


@dataclass(frozen=True)
class NodeStage:
    node: int
    before: tuple[GpuPlan, ...]
    """The node's GPUs before the stage (their replicas are drained if the layout changes)."""
    after: tuple[GpuPlan, ...]
    """The node's GPUs after it: the layout to apply and the plan's replicas it then serves."""
    temporaries: tuple[Temporary, ...] = ()
    """Temporary replicas that must be serving (elsewhere) before the node is drained."""
    release: tuple[Temporary, ...] = ()
    """Temporary replicas no longer needed once the node serves again."""
    final: bool = True
    """Whether ``after`` is the node's final layout (else an intermediate one lending room)."""

    @property
    def drains(self) -> bool:
        """Whether the node is drained: a GPU's layout changes, or a replica on it goes (it
        moves while the node serves nothing). A node that keeps its layouts and only gains
        replicas on idle instances serves on: its new replicas join as they come."""
        return must_drain(self.before, self.after)


def view(gpus: tuple[GpuPlan, ...]) -> list[tuple[tuple[object, ...], Counter[object]]]:
    """Per GPU, its layout as mig-parted sees it (profile counts) and its replicas."""
    return [(layout_key(g.layout), Counter((p.profile.name, s) for p, s in g.assignment
                                           if s is not None)) for g in gpus]


def must_drain(before: tuple[GpuPlan, ...], after: tuple[GpuPlan, ...]) -> bool:
    """Whether a layout changes or a replica goes (see :attr:`NodeStage.drains`)."""
    return any(b[0] != a[0] or b[1] - a[1] for b, a in zip(view(before), view(after),
                                                           strict=True))


def differs(before: tuple[GpuPlan, ...], after: tuple[GpuPlan, ...]) -> bool:
    """Whether mig-parted changes a layout (profile counts), or a replica changes."""
    return view(before) != view(after)


@dataclass
class Pool:
    """Per node its GPUs now, the temporary replicas serving, and the invariants' counts."""

    problem: PartitionProblem
    nodes: list[tuple[GpuPlan, ...]]
    per_node: int
    floor: np.ndarray
    today: np.ndarray
    temps: list[Temporary] = field(default_factory=list)
    usual: dict[str, frozenset[str]] = field(default_factory=dict)
    """Per service, the profiles its replicas have today (a temporary replica's first try)."""

    def rate(self, service: str, placement: MigPlacement) -> float:
        if service not in self.problem.services:
            return 0.0
        return self.problem.rate_of(self.problem.services.index(service), placement.profile.name)

    def serving(self, skip_node: int | None = None,
                skip: tuple[Temporary, ...] = ()) -> tuple[np.ndarray, np.ndarray]:
        """Per service, req/s and replicas in rotation, less ``skip_node``'s and ``skip``."""
        index = {s: i for i, s in enumerate(self.problem.services)}
        rate, count = np.zeros(len(index)), np.zeros(len(index), dtype=np.int64)
        items = [(p, s) for n, gpus in enumerate(self.nodes) if n != skip_node
                 for g in gpus for p, s in g.assignment if s is not None]
        items += [(t.placement, t.service) for t in self.temps
                  if t not in skip and t.gpu // self.per_node != skip_node]
        for p, s in items:
            if s in index:
                rate[index[s]] += self.rate(s, p)
                count[index[s]] += 1
        return rate, count

    def lacks(self, skip_node: int | None = None,
              skip: tuple[Temporary, ...] = ()) -> str | None:
        """Why taking ``skip_node`` and ``skip`` out of rotation breaks an invariant."""
        rate, count = self.serving(skip_node, skip)
        return shortfall(self.problem.services, rate, count, self.floor, self.today)


def node_gpus(gpus: list[GpuPlan], node: int, per_node: int) -> tuple[GpuPlan, ...]:
    return tuple(gpus[node * per_node:(node + 1) * per_node])


def move(state: Pool, node: int, gpus: tuple[GpuPlan, ...], final: bool) -> NodeStage:
    before = state.nodes[node]
    serving = tuple(t for t in state.temps if t.gpu // state.per_node != node)
    if not differs(before, gpus):  # mig-parted touches no GPU and no replica moves
        return NodeStage(node, before, before, serving, (), final)
    state.nodes[node] = gpus
    return NodeStage(node, before, gpus, serving, (), final)
