"""A node-level placement from the relaxation's solution, checked by the cluster model.

The relaxation (:mod:`.relaxation`) says which pods to place and which of them share a GPU,
but not which node takes them. Here they are laid out node by node, and every placement goes
through :meth:`ClusterState.allocate`, which refuses anything that breaks a GPU's 1000 milli or
a node's CPU or memory (GPU models are checked here, with the pods' specs); the milli allocated
is therefore reachable, a lower bound on the optimum. :func:`check` replays a placement from
scratch for whoever doubts it.

The items are multi-GPU pods and single GPUs (a whole-GPU pod, or the fractional pods one GPU
of the solution shares). Multi-GPU pods go first, largest first, each on the node left with
the fewest whole GPUs free (best fit, so whole nodes stay whole) among those it does not
starve. Then single GPUs, those with a GPU-model restriction first and then by their larger
share of CPU or memory (each against what the items ask per GPU on average), each on the node
whose CPU and memory per free GPU exceed the item's the least: rich nodes stay for the items
that need them. A node the item would starve (less left per free GPU than it asks) is used
only when every node would be, and then the one where the fewest other free GPUs lose the
average CPU and memory per GPU. Whatever did not fit, and then every arrived pod the solution
left out, is tried once more, pod by pod, on the tightest GPU with room anywhere.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from cotenant.model.cluster import (
    Allocation,
    AllocationError,
    BoolArray,
    Cluster,
    ClusterState,
    IntArray,
)
from cotenant.model.workload import MILLI_PER_GPU, PodShape
from cotenant.policies.placement.optimum.relaxation import FloatArray, Relaxed

Placement = tuple[int, Allocation]  # (index of the pod in the arrived list, where it went)


@dataclass(frozen=True)
class _Item:
    pods: tuple[int, ...]  # indices into the arrived list
    gpus: int  # whole GPUs (a multi-GPU pod), or 1 for a shared or whole single GPU
    milli: int  # per GPU
    cpu: int
    mem: int
    allowed: BoolArray  # nodes whose GPU model every pod of the item may use


def realise(cluster: Cluster, shapes: Sequence[PodShape], relaxed: Relaxed) -> list[Placement]:
    """A checked placement of ``shapes`` following ``relaxed``; see the module docstring."""
    state = ClusterState(cluster)
    items, rest = _items(cluster, shapes, relaxed)
    per_gpu = _per_gpu(items)
    items.sort(key=lambda it: (-it.gpus, it.allowed.all(),
                               -max(it.cpu / per_gpu[0], it.mem / per_gpu[1])))
    placed: list[Placement] = []
    left: list[int] = []
    for item in items:
        where = (_whole_node(state, item, per_gpu) if item.gpus > 1
                 else _single_gpu(state, item, per_gpu))
        if where is None:
            left.extend(item.pods)
            continue
        node, gpus = where
        for i in item.pods:
            placed.append((i, state.allocate(shapes[i], node, gpus)))
    for i in sorted(left) + sorted(rest, key=lambda i: -shapes[i].gpu_milli_total):
        shape = shapes[i]
        if shape.num_gpu == 0:
            continue
        alone = _Item((i,), shape.num_gpu if not shape.fractional else 1,
                      shape.gpu_milli if shape.fractional else MILLI_PER_GPU,
                      shape.cpu_milli, shape.memory_mib, cluster.spec_mask(shape.gpu_spec))
        where = _tightest_gpu(state, alone) if shape.fractional else _whole_node(state, alone)
        if where is not None:
            placed.append((i, state.allocate(shape, *where)))
    return placed


def _per_gpu(items: Sequence[_Item]) -> tuple[float, float]:
    """The CPU and memory the items ask per GPU, on average (1 where they ask none)."""
    gpus = max(sum(it.gpus for it in items), 1)
    cpu = sum(it.cpu for it in items) / gpus
    mem = sum(it.mem for it in items) / gpus
    return cpu or 1.0, mem or 1.0


def _items(
    cluster: Cluster, shapes: Sequence[PodShape], relaxed: Relaxed
) -> tuple[list[_Item], list[int]]:
    """The solution's items, and the GPU pods it leaves out."""
    waiting: dict[PodShape, list[int]] = defaultdict(list)
    for i in reversed(range(len(shapes))):
        waiting[shapes[i]].append(i)  # pop() takes the earliest arrival
    items: list[_Item] = []

    def item(pods: list[int], gpus: int, milli: int) -> _Item:
        allowed = np.ones(cluster.size, np.bool_)
        for i in pods:
            allowed &= cluster.spec_mask(shapes[i].gpu_spec)
        return _Item(tuple(pods), gpus, milli, sum(shapes[i].cpu_milli for i in pods),
                     sum(shapes[i].memory_mib for i in pods), allowed)

    for p, patterns in enumerate(relaxed.patterns):
        chosen = {s: n for (s, q), n in relaxed.placed.items() if q == p}
        by_size: dict[int, list[int]] = defaultdict(list)
        for shape in sorted(chosen, key=lambda s: -s.cpu_milli):
            pods = [waiting[shape].pop() for _ in range(chosen[shape])]
            if shape.fractional:
                by_size[shape.gpu_milli].extend(pods)
            else:
                items.extend(item([i], shape.num_gpu, MILLI_PER_GPU) for i in pods)
        for pattern in patterns:
            group = [by_size[size].pop(0) for size in pattern if by_size[size]]
            if group:
                items.append(item(group, 1, sum(shapes[i].gpu_milli for i in group)))
        for pods in by_size.values():  # pods no path carried (none when consistent)
            items.extend(item([i], 1, shapes[i].gpu_milli) for i in pods)
    rest = [i for pods in waiting.values() for i in pods]
    return items, rest


def _candidates(state: ClusterState, item: _Item) -> IntArray:
    ok = item.allowed & (state.cpu_free >= item.cpu) & (state.mem_free >= item.mem)
    return np.flatnonzero(ok)


def _whole_node(
    state: ClusterState, item: _Item, per_gpu: tuple[float, float] = (1.0, 1.0)
) -> tuple[int, tuple[int, ...]] | None:
    """Best fit on free whole GPUs for an item of ``item.gpus`` whole GPUs, among the nodes
    it leaves enough CPU and memory per free GPU for its own kind (see the module docstring)
    where there are any."""
    nodes = _candidates(state, item)
    whole = (state.gpu_free[nodes] == MILLI_PER_GPU).sum(axis=1)
    nodes, whole = nodes[whole >= item.gpus], whole[whole >= item.gpus]
    if nodes.size == 0:
        return None
    _, starves = _surplus(state, nodes, whole, item, per_gpu)
    node = int(nodes[np.lexsort((whole, starves))[0]])
    free = np.flatnonzero(state.gpu_free[node] == MILLI_PER_GPU)[: item.gpus]
    return node, tuple(int(g) for g in free)


def _surplus(
    state: ClusterState, nodes: IntArray, whole: IntArray, item: _Item,
    per_gpu: tuple[float, float],
) -> tuple[FloatArray, BoolArray]:
    """Per node: how far its CPU and memory per free GPU exceed the item's per GPU (each in
    units of the cluster's per GPU, summed), and whether either falls short."""
    over_cpu = (state.cpu_free[nodes] / whole - item.cpu / item.gpus) / per_gpu[0]
    over_mem = (state.mem_free[nodes] / whole - item.mem / item.gpus) / per_gpu[1]
    return over_cpu + over_mem, (over_cpu < 0) | (over_mem < 0)


def _single_gpu(
    state: ClusterState, item: _Item, per_gpu: tuple[float, float]
) -> tuple[int, tuple[int, ...]] | None:
    """A whole free GPU on the node whose CPU and memory per free GPU exceed the item's the
    least (see the module docstring); then the fewest free GPUs."""
    nodes = _candidates(state, item)
    whole = (state.gpu_free[nodes] == MILLI_PER_GPU).sum(axis=1)
    nodes, whole = nodes[whole > 0], whole[whole > 0]
    if nodes.size == 0:
        return None
    over, starves = _surplus(state, nodes, whole, item, per_gpu)
    if starves.all():  # the node where the fewest other GPUs go without
        cpu, mem = state.cpu_free[nodes], state.mem_free[nodes]
        lost = (_stranded(whole - 1, cpu - item.cpu, mem - item.mem, per_gpu)
                - _stranded(whole, cpu, mem, per_gpu))
        node = int(nodes[np.lexsort((whole, lost))[0]])
    else:
        node = int(nodes[np.lexsort((whole, -over, np.where(starves, np.inf, over)))[0]])
    return node, (int(np.flatnonzero(state.gpu_free[node] == MILLI_PER_GPU)[0]),)


def _stranded(
    gpus: IntArray, cpu: IntArray, mem: IntArray, per_gpu: tuple[float, float]
) -> FloatArray:
    """Free GPUs that the CPU and memory left cannot serve at ``per_gpu`` each."""
    out: FloatArray = np.maximum(0.0, np.maximum(gpus - cpu / per_gpu[0],
                                                  gpus - mem / per_gpu[1]))
    return out


def _tightest_gpu(state: ClusterState, item: _Item) -> tuple[int, tuple[int, ...]] | None:
    """The GPU with the least room that still fits one fractional pod."""
    nodes = _candidates(state, item)
    if nodes.size == 0:
        return None
    free = state.gpu_free[nodes]
    room = np.where(free >= item.milli, free, MILLI_PER_GPU + 1)
    flat = int(room.argmin())
    if room.flat[flat] > MILLI_PER_GPU:
        return None
    return int(nodes[flat // free.shape[1]]), (flat % free.shape[1],)


def check(cluster: Cluster, shapes: Sequence[PodShape], placed: Sequence[Placement]) -> int:
    """Replay ``placed`` on an empty cluster (each pod at most once, on a GPU model its spec
    allows, through :meth:`ClusterState.allocate`); the milli it allocates. Raises
    :class:`AllocationError` on a placement that breaks a rule."""
    state = ClusterState(cluster)
    seen: set[int] = set()
    for i, alloc in placed:
        shape = shapes[i]
        if i in seen:
            raise AllocationError(f"pod {i} is placed twice")
        seen.add(i)
        if shape.gpu_spec and not cluster.spec_mask(shape.gpu_spec)[alloc.node]:
            raise AllocationError(f"pod {i} may not use node {alloc.node}'s GPU model")
        state.allocate(shape, alloc.node, alloc.gpus)
    return state.gpu_allocated_milli()
