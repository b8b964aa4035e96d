"""GPU packing and GPU clustering: the heuristics the FGD paper compares against.

**GPU packing** fills partly used GPUs first, then partly used nodes, then empty nodes:
a fractional pod on an already used GPU scores ``max(100 - floor(f_g / 100), 50)`` (tighter
GPU, higher score); a pod that needs fully free GPUs on a partly used node scores
``max(50 - u, 33)`` with u the free GPUs it takes; on a node whose GPUs are all free, with G
GPUs, ``max(33 - G, G)``. CPU-only pods score 0 everywhere (first feasible node by rank).

**GPU clustering** keeps pods of one kind together (kinds: fractional, or k whole GPUs):
``floor(25 * (8000 - I_n) / 8000)`` plus 75 if the node holds only pods of this kind, 50 if it
holds this kind among others, 25 if it holds no GPU pods, 0 if only other kinds. CPU-only pods
score 0.

Both place a fractional pod on the tightest GPU that fits (best fit), whole GPUs lowest index
first. Formulas as defined by the FGD artifact's scoring plugins.
"""

from __future__ import annotations

import numpy as np

from cotenant.model.cluster import ClusterState, IntArray, pod_kind
from cotenant.model.workload import MILLI_PER_GPU, PodShape
from cotenant.policies.placement.base import (
    MAX_SPEC_GPU,
    PlacementPolicy,
    Scores,
    best_fit_gpu,
    idle_milli,
)
from cotenant.policies.placement.registry import PLACEMENT


@PLACEMENT.register("gpu-packing", aliases=("packing", "gpupacking", "gpu_packing"))
class GpuPackingPolicy(PlacementPolicy):
    """Used GPUs first, then used nodes, then empty nodes."""

    name = "gpu-packing"

    def score(
        self, state: ClusterState, shape: PodShape, nodes: IntArray, rng: np.random.Generator
    ) -> Scores:
        n = len(nodes)
        none = np.full(n, -1, np.int64)
        if shape.num_gpu == 0:
            return Scores(np.zeros(n, np.int64), none)
        free = state.gpu_free[nodes]
        gpus = state.cluster.gpu_count[nodes]
        whole = (free == MILLI_PER_GPU).sum(axis=1)
        all_free = whole == gpus
        empty_score = np.maximum(33 - gpus, gpus)
        if shape.fractional:
            gpu = best_fit_gpu(free, shape.gpu_milli)
            left = free[np.arange(n), gpu]
            used_gpu = left < MILLI_PER_GPU
            partial = np.where(used_gpu, np.maximum(100 - left // 100, 50), 49)
            return Scores(np.where(all_free, empty_score, partial), gpu)
        partial = np.full(n, max(50 - shape.num_gpu, 33), np.int64)
        return Scores(np.where(all_free, empty_score, partial), none)


@PLACEMENT.register("gpu-clustering", aliases=("clustering", "gpuclustering", "gpu_clustering"))
class GpuClusteringPolicy(PlacementPolicy):
    """Pods of the same kind together."""

    name = "gpu-clustering"

    def score(
        self, state: ClusterState, shape: PodShape, nodes: IntArray, rng: np.random.Generator
    ) -> Scores:
        n = len(nodes)
        if shape.num_gpu == 0:
            return Scores(np.zeros(n, np.int64), np.full(n, -1, np.int64))
        kinds = state.kind_count[nodes]
        mine = kinds[:, pod_kind(shape)] > 0
        total = kinds.sum(axis=1)
        others = total - kinds[:, pod_kind(shape)] > 0
        bonus = np.where(mine, np.where(others, 50, 75), np.where(total == 0, 25, 0))
        # the artifact's Go integer division truncates toward zero; // floors, which differs
        # when a node with more than 8 GPUs makes the numerator negative
        base = np.trunc(25 * (MAX_SPEC_GPU - idle_milli(state, nodes)) / MAX_SPEC_GPU)
        base = base.astype(np.int64)
        gpu = (
            best_fit_gpu(state.gpu_free[nodes], shape.gpu_milli)
            if shape.fractional
            else np.full(n, -1, np.int64)
        )
        return Scores(base + bonus, gpu)
