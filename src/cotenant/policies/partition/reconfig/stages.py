"""Safe reconfiguration node by node, for tools whose unit of change is a whole node.

NVIDIA's mig-parted applies a config to a whole node and rebuilds every GPU whose layout
differs, so such a GPU serves nothing while it changes. The planner's steps (:mod:`.rules`,
:mod:`.search`) may keep one instance serving while its neighbours on the same GPU are
replaced; a whole-node change cannot. :func:`node_stages` turns a :class:`Reconfiguration`
into **stages**, each one node moving to one layout while every replica on it is out of
rotation, with the planner's invariants (:func:`~.steps.losing`: each service keeps its floor
and, if it had one today, a replica) checked for the whole node:

1. nodes go to their final layout in the planner's order (the order its layout steps first
   touch their GPUs), each as soon as its drain keeps every service at its floor (a node that
   keeps its layouts and only gains replicas is not drained); where that order gets stuck,
   the last choice of which ready node goes next is revisited, depth first, within a bound;
2. where no node left can, a **temporary replica** is borrowed for the services that block
   the first of them: on an idle instance of a node already final, else on a node already
   final that is given an *intermediate* layout (its final instances plus new ones in its free
   slots), nodes that are empty at the end first, as the planner borrows on GPUs that are
   empty at the end;
3. a temporary replica is released once no node left to change (other than those lending
   room) holds a replica of its service and its service keeps its floor without it; a node
   with an intermediate layout goes back to its final one once it holds no temporary replica.

Where no node order within the bound and no borrow helps, the nodes left (of the first order
that got stuck) are listed in order and ``blocked`` says which service blocks the first.
:func:`check_stages` replays the stages, and checks that every node ends at its target; it
is run on every result that is not blocked.
"""

from __future__ import annotations

from dataclasses import dataclass

from cotenant.errors import InfeasibleError
from cotenant.model.deployment import GpuPlan
from cotenant.model.mig import MigLayout
from cotenant.policies.partition.problem import PartitionProblem
from cotenant.policies.partition.reconfig.lend import borrow
from cotenant.policies.partition.reconfig.pool import (
    NodeStage,
    Pool,
    Temporary,
    differs,
    move,
    must_drain,
    node_gpus,
)
from cotenant.policies.partition.reconfig.steps import (
    Reconfiguration,
    StepKind,
    floor_of,
    replicas_today,
)

__all__ = ["NodeStage", "NodeStages", "Temporary", "check_stages", "differs", "node_stages"]

LAYOUT_STEPS = (StepKind.CREATE, StepKind.DESTROY, StepKind.REPARTITION)


@dataclass(frozen=True)
class NodeStages:
    stages: tuple[NodeStage, ...]
    floor: tuple[float, ...]
    blocked: int | None = None
    """The first node no safe stage was found for (the stages from there on are unsafe)."""
    why: str | None = None
    """Why that node cannot be drained."""
    unsafe_from: int | None = None
    """Where blocked, the index of the first stage that is not safe (that node's)."""


def node_stages(problem: PartitionProblem, current: tuple[GpuPlan, ...],
                change: Reconfiguration, per_node: int) -> NodeStages:
    """The stages from ``current`` to ``change.target`` on nodes of ``per_node`` GPUs (physical
    GPU ``g`` on node ``g // per_node``), see the module docstring."""
    empty = GpuPlan(MigLayout(), ())
    pool = max(len(current), len(change.target))
    count = -(-pool // per_node)
    today = list(current) + [empty] * (count * per_node - len(current))
    after = list(change.target) + [empty] * (count * per_node - len(change.target))
    final = [node_gpus(after, n, per_node) for n in range(count)]
    usual: dict[str, set[str]] = {}
    for g in current:
        for p, service in g.assignment:
            if service is not None:
                usual.setdefault(service, set()).add(p.profile.name)
    state = Pool(problem, [node_gpus(today, n, per_node) for n in range(count)], per_node,
                  floor_of(problem, current), replicas_today(problem, current), [],
                  {s: frozenset(names) for s, names in usual.items()})
    first: dict[int, int] = {}
    for k, step in enumerate(change.steps):
        if step.kind in LAYOUT_STEPS:
            first.setdefault(step.gpu // per_node, k)
    order = sorted(range(count), key=lambda n: (first.get(n, len(change.steps)), n))
    path = _Path(state, list(order), [False] * count, [])
    blocked = _search(path, final)
    state, pending, stages = path.state, path.pending, path.stages
    why = None if blocked is None else (state.lacks(blocked) or "it lends room to a temporary "
                                        "replica still needed")
    safe = len(stages)
    for n in pending:  # no safe order found: the rest in order, the controller stops at it
        stages.append(move(state, n, final[n], True))
    result = NodeStages(tuple(stages), tuple(float(x) for x in state.floor), blocked, why,
                        None if blocked is None else safe)
    if blocked is None:
        check_stages(problem, current, result, change.target, per_node)
    return result


@dataclass
class _Path:
    """Where a search for a node order stands: the pool, the nodes left (in the order tried),
    which of them lend room, and the stages so far."""

    state: Pool
    pending: list[int]
    lending: list[bool]
    stages: list[NodeStage]

    def copy(self) -> _Path:
        state = Pool(self.state.problem, list(self.state.nodes), self.state.per_node,
                      self.state.floor, self.state.today, list(self.state.temps),
                      self.state.usual)
        return _Path(state, list(self.pending), list(self.lending), list(self.stages))


SEARCH_BUDGET = 50_000
"""Work, all paths together, before a node order is declared not found: per stage tried, the
nodes left times the nodes of the pool (what checking each left node's drain costs)."""


def _search(path: _Path, final: list[tuple[GpuPlan, ...]]) -> int | None:
    """Move ``path`` on to every node's final layout: each time the first node that is ready
    (its drain keeps the invariants), borrowing room where none is; where a path is blocked,
    go back to the last choice of a ready node and try the next one (depth first, within
    :data:`SEARCH_BUDGET`). Leaves ``path`` complete, or as the first path blocked, and
    returns the node it is blocked at, or None."""
    per_node, count = path.state.per_node, len(final)
    choices: list[tuple[_Path, list[int]]] = []
    first: tuple[_Path, int] | None = None
    work = 0
    while work < SEARCH_BUDGET or first is None:
        state, pending, lending = path.state, path.pending, path.lending
        if not pending:
            return None
        work += len(pending) * count
        ready = [n for n in pending if not (lending[n] and any(
            t.gpu // per_node == n for t in state.temps))
            and (not must_drain(state.nodes[n], final[n]) or state.lacks(n) is None)]
        stuck = len(path.stages) > 8 * count + 8
        if ready and not stuck:
            if len(ready) > 1:
                choices.append((path.copy(), ready[1:]))
            _advance(path, ready[0], final)
            continue
        if not stuck and any(borrow(state, n, final, pending, lending, path.stages)
                             for n in pending if not lending[n]):
            continue
        if first is None:
            first = (path.copy(), pending[0])
        while choices and not choices[-1][1]:
            choices.pop()
        if not choices:
            break
        saved, options = choices[-1]
        path_next = saved.copy()
        _advance(path_next, options.pop(0), final)
        path.state, path.pending, path.lending, path.stages = (
            path_next.state, path_next.pending, path_next.lending, path_next.stages)
    if first is None:  # the budget ran out before any path was blocked
        first = (path.copy(), path.pending[0])
    path.state, path.pending, path.lending, path.stages = (
        first[0].state, first[0].pending, first[0].lending, first[0].stages)
    return first[1]


def _advance(path: _Path, n: int, final: list[tuple[GpuPlan, ...]]) -> None:
    path.stages.append(move(path.state, n, final[n], True))
    path.pending.remove(n)
    path.lending[n] = False
    _release(path.state, path.stages, path.pending, path.lending)


def _release(state: Pool, stages: list[NodeStage], pending: list[int],
             lending: list[bool]) -> None:
    """Release the temporary replicas no node left to change needs (see the module doc)."""
    busy = {s for n in pending if not lending[n] for g in state.nodes[n]
            for _, s in g.assignment if s is not None}
    gone: list[Temporary] = []
    for t in list(state.temps):
        if t.service not in busy and state.lacks(skip=(*gone, t)) is None:
            gone.append(t)
    if gone:
        state.temps = [t for t in state.temps if t not in gone]
        last = stages[-1]
        stages[-1] = NodeStage(last.node, last.before, last.after, last.temporaries,
                               tuple(gone), last.final)


def check_stages(problem: PartitionProblem, current: tuple[GpuPlan, ...], stages: NodeStages,
                 target: tuple[GpuPlan, ...], per_node: int) -> None:
    """Replay ``stages``: every drain keeps the invariants with the temporary replicas then
    serving, no node is changed while a temporary replica serves on it, and every node ends
    at a final stage with ``target``'s layouts and replicas (as mig-parted sees a layout:
    profile counts per GPU); :class:`InfeasibleError` at the first that does not."""
    empty = GpuPlan(MigLayout(), ())
    pool = max(len(current), len(target))
    count = max(-(-pool // per_node), 1 + max((s.node for s in stages.stages), default=-1))
    today = list(current) + [empty] * (count * per_node - len(current))
    goal = list(target) + [empty] * (count * per_node - len(target))
    state = Pool(problem, [node_gpus(today, n, per_node) for n in range(count)], per_node,
                  floor_of(problem, current), replicas_today(problem, current))
    for k, stage in enumerate(stages.stages, 1):
        if stage.before != state.nodes[stage.node]:
            raise InfeasibleError(f"stage {k}: node {stage.node} is not as the stage expects")
        for t in stage.temporaries:
            host = state.nodes[t.gpu // per_node][t.gpu % per_node]
            busy = {p for p, s in host.assignment if s is not None}
            if t not in state.temps and (t.placement not in host.layout.placements
                                         or t.placement in busy):
                raise InfeasibleError(f"stage {k}: no idle instance {t.placement} on GPU "
                                      f"{t.gpu} for a temporary replica of {t.service}")
        state.temps = list(dict.fromkeys([*state.temps, *stage.temporaries]))
        if stage.drains:
            if any(t.gpu // per_node == stage.node for t in state.temps):
                raise InfeasibleError(f"stage {k}: node {stage.node} changes under a "
                                      "temporary replica")
            why = state.lacks(stage.node)
            if why is not None:
                raise InfeasibleError(f"stage {k}: draining node {stage.node}: {why}")
        state.nodes[stage.node] = stage.after
        gone = tuple(stage.release)
        why = state.lacks(skip=gone)
        if why is not None:
            raise InfeasibleError(f"stage {k}: releasing temporary replicas: {why}")
        state.temps = [t for t in state.temps if t not in gone]
    if state.temps:
        raise InfeasibleError(f"temporary replicas left at the end: {len(state.temps)}")
    last = {stage.node: stage for stage in stages.stages}
    if not all(stage.final for stage in last.values()):
        raise InfeasibleError("a node ends at an intermediate layout")
    for n in range(count):
        if differs(state.nodes[n], node_gpus(goal, n, per_node)):
            raise InfeasibleError(f"node {n} does not end at its target layout and replicas")
