"""Cluster capacity and allocation state, as numpy arrays so that policies can score every node
at once.

:class:`Cluster` is the static part (capacities, GPU models). :class:`ClusterState` holds what
is free: CPU, memory, and per-GPU free milli-GPUs (GPU memory follows the milli share, as in
openb). It is the one mutable object of the model; only the simulator (or agent) calls
:meth:`ClusterState.allocate` and :meth:`ClusterState.release`, and each checks the invariants
(no GPU over 1000 milli, no node over CPU or memory) so a buggy policy fails loudly.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from cotenant.errors import CotenantError
from cotenant.model.workload import MILLI_PER_GPU, Node, PodShape

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


def pod_kind(shape: PodShape) -> int:
    """0 for a fractional GPU pod, k for a pod of k whole GPUs (GPU clustering's tags)."""
    return 0 if shape.fractional else shape.num_gpu


class AllocationError(CotenantError):
    """An allocation that would break capacity (a policy or simulator bug)."""


@dataclass(frozen=True)
class Allocation:
    """Where a pod went: a node and the GPUs it uses on it (empty for CPU-only pods)."""

    node: int
    gpus: tuple[int, ...]
    milli: int  # per GPU


class Cluster:
    """The static cluster: nodes, capacities and a GPU-model index per node."""

    def __init__(self, nodes: Sequence[Node]) -> None:
        if not nodes:
            raise CotenantError("a cluster needs at least one node")
        self.nodes = tuple(nodes)
        self.size = len(self.nodes)
        self.cpu = np.array([n.cpu_milli for n in nodes], dtype=np.int64)
        self.memory = np.array([n.memory_mib for n in nodes], dtype=np.int64)
        self.gpu_count = np.array([n.gpu_count for n in nodes], dtype=np.int64)
        self.max_gpus = max(1, int(self.gpu_count.max()))
        self.gpu_present: BoolArray = (
            np.arange(self.max_gpus)[None, :] < self.gpu_count[:, None]
        )
        names = sorted({n.gpu_model.name for n in nodes if n.gpu_model is not None})
        self.model_names: tuple[str, ...] = tuple(names)
        index = {name: i for i, name in enumerate(names)}
        self.model_index = np.array(
            [index[n.gpu_model.name] if n.gpu_model is not None else -1 for n in nodes],
            dtype=np.int64,
        )

    @property
    def total_gpus(self) -> int:
        return int(self.gpu_count.sum())

    @property
    def total_gpu_milli(self) -> int:
        return self.total_gpus * MILLI_PER_GPU

    def spec_mask(self, spec: tuple[str, ...]) -> BoolArray:
        """Nodes whose GPU model is allowed by ``spec`` (all GPU nodes when empty)."""
        if not spec:
            return np.ones(self.size, dtype=np.bool_)
        allowed = [i for i, name in enumerate(self.model_names) if name in spec]
        return np.isin(self.model_index, allowed)


class ClusterState:
    """Free resources of a :class:`Cluster`; the allocation invariants are checked here."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.cpu_free = cluster.cpu.copy()
        self.mem_free = cluster.memory.copy()
        self.gpu_free: IntArray = np.where(cluster.gpu_present, MILLI_PER_GPU, 0).astype(np.int64)
        self.version = np.zeros(cluster.size, dtype=np.int64)  # bumped when a node changes
        # GPU pods per node by kind: column 0 fractional pods, column k pods of k whole GPUs.
        self.kind_count: IntArray = np.zeros((cluster.size, cluster.max_gpus + 1), np.int64)

    def copy(self) -> ClusterState:
        other = ClusterState.__new__(ClusterState)
        other.cluster = self.cluster
        other.cpu_free = self.cpu_free.copy()
        other.mem_free = self.mem_free.copy()
        other.gpu_free = self.gpu_free.copy()
        other.version = self.version.copy()
        other.kind_count = self.kind_count.copy()
        return other

    # ---- views used by policies ------------------------------------------------------------
    def feasible(
        self,
        shape: PodShape,
        nodes: IntArray | None = None,
        spec_mask: BoolArray | None = None,
    ) -> BoolArray:
        """Which of ``nodes`` (default all) can host ``shape``: CPU, memory, GPU model and GPU
        room. ``spec_mask`` is the precomputed :meth:`Cluster.spec_mask` of the shape, over
        all nodes."""
        idx = slice(None) if nodes is None else nodes
        ok = (self.cpu_free[idx] >= shape.cpu_milli) & (self.mem_free[idx] >= shape.memory_mib)
        if shape.gpu_spec:
            mask = spec_mask if spec_mask is not None else self.cluster.spec_mask(shape.gpu_spec)
            ok &= mask[idx]
        if shape.num_gpu == 0:
            return ok
        free = self.gpu_free[idx]
        if shape.fractional:
            room: BoolArray = free.max(axis=1) >= shape.gpu_milli
        else:
            room = (free == MILLI_PER_GPU).sum(axis=1) >= shape.num_gpu
        return ok & room

    # ---- mutation (simulator / agent only) ------------------------------------------------
    def allocate(self, shape: PodShape, node: int, gpus: tuple[int, ...]) -> Allocation:
        """Take ``shape``'s resources on ``node`` and ``gpus``; raise if that breaks capacity."""
        milli = shape.gpu_milli if shape.fractional else MILLI_PER_GPU
        if len(gpus) != shape.num_gpu or len(set(gpus)) != len(gpus):
            raise AllocationError(f"pod needs {shape.num_gpu} distinct GPUs, got {gpus}")
        if self.cpu_free[node] < shape.cpu_milli or self.mem_free[node] < shape.memory_mib:
            raise AllocationError(f"node {node} lacks CPU or memory for {shape}")
        for g in gpus:
            if not self.cluster.gpu_present[node, g] or self.gpu_free[node, g] < milli:
                raise AllocationError(f"GPU {g} of node {node} lacks {milli} milli")
        self.cpu_free[node] -= shape.cpu_milli
        self.mem_free[node] -= shape.memory_mib
        for g in gpus:
            self.gpu_free[node, g] -= milli
        if shape.num_gpu:
            self.kind_count[node, pod_kind(shape)] += 1
        self.version[node] += 1
        return Allocation(node, gpus, milli if gpus else 0)

    def release(self, shape: PodShape, alloc: Allocation) -> None:
        """Give back what :meth:`allocate` took."""
        node = alloc.node
        self.cpu_free[node] += shape.cpu_milli
        self.mem_free[node] += shape.memory_mib
        for g in alloc.gpus:
            self.gpu_free[node, g] += alloc.milli
        if shape.num_gpu:
            self.kind_count[node, pod_kind(shape)] -= 1
        if (
            self.cpu_free[node] > self.cluster.cpu[node]
            or self.mem_free[node] > self.cluster.memory[node]
            or (self.gpu_free[node] > MILLI_PER_GPU).any()
        ):
            raise AllocationError(f"node {node} released more than it had allocated")
        self.version[node] += 1

    # ---- metrics -----------------------------------------------------------------------------
    def gpu_allocated_milli(self) -> int:
        return int(self.cluster.total_gpu_milli - self.gpu_free.sum())

    def gpu_free_memory_mib(self) -> npt.NDArray[np.float64]:
        """Per-GPU free memory, where the GPU model's memory is known (NaN otherwise)."""
        mem = np.array(
            [
                n.gpu_model.memory_mib
                if n.gpu_model is not None and n.gpu_model.memory_mib is not None
                else np.nan
                for n in self.cluster.nodes
            ]
        )
        free: npt.NDArray[np.float64] = mem[:, None] * self.gpu_free / MILLI_PER_GPU
        return free


def never_fits(empty: ClusterState, shape: PodShape) -> str | None:
    """Why no node of ``empty`` (a cluster with nothing allocated) could host ``shape``, or
    None when one could: a pod like that can only fail, and whoever replays a trace should
    hear so."""
    if empty.feasible(shape).any():
        return None
    cluster = empty.cluster
    nodes = cluster.spec_mask(shape.gpu_spec) if shape.gpu_spec else np.ones(cluster.size, bool)
    if shape.num_gpu:
        nodes &= cluster.gpu_count > 0
    if not nodes.any():
        models = ", ".join(shape.gpu_spec) if shape.gpu_spec else "any GPU"
        return f"asks for {models}; the cluster has {', '.join(cluster.model_names) or 'none'}"
    for ask, have, what in (
        (shape.num_gpu, cluster.gpu_count, "GPUs"),
        (shape.cpu_milli, cluster.cpu, "milli-CPU"),
        (shape.memory_mib, cluster.memory, "MiB of memory"),
    ):
        most = int(have[nodes].max())
        if ask > most:
            return f"asks for {ask} {what}; a node it may use has at most {most}"
    return "no single node has its GPUs, CPU and memory together"
