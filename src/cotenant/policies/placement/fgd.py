"""FGD: fragmentation gradient descent (Weng et al., USENIX ATC'23).

Place each pod where the expected fragmentation of the node grows least. With F_n the node's
fragmentation over the typical pods (:mod:`cotenant.policies.placement.frag`) before placing
and F'_n after, the score is ``int(100 * sigmoid((F_n - F'_n) / 1000))``: the change in whole
GPUs, squashed to 0..100 and truncated as the artifact does. A fractional pod tries every GPU
with room and takes the best score, the lowest GPU index on equal (truncated) scores; a pod of
k whole GPUs takes the k lowest-index free GPUs; a CPU-only pod changes only the node's CPU,
which can still change which typical pods the node can host.

For a fractional pod of (c, m) on GPU g only that GPU and the CPU change, so the per-shape
counts of fitting GPUs and of too-small milli are updated from the node's "before" parts
instead of being recomputed: all candidate GPUs of a batch of nodes are scored in one pass.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from cotenant.model.cluster import ClusterState, IntArray
from cotenant.model.workload import MILLI_PER_GPU, PodShape
from cotenant.policies.placement.base import PlacementPolicy, Scores, truncate
from cotenant.policies.placement.frag import FloatArray, FragModel, TypicalPods
from cotenant.policies.placement.registry import PLACEMENT


def _sigmoid_score(delta_milli: FloatArray) -> IntArray:
    return truncate(100.0 / (1.0 + np.exp(-delta_milli / 1000.0)))


@PLACEMENT.register("fgd", aliases=("fragmentation", "fgd-score"))
class FgdPolicy(PlacementPolicy):
    """Fragmentation gradient descent over the workload's typical pods."""

    name = "fgd"
    dedupe_states = True
    uses_workload = True

    def __init__(self, workload: Sequence[PodShape] = (), coverage: float = 0.95) -> None:
        self.typical = TypicalPods.from_shapes(workload, coverage)
        self._models: dict[int, FragModel] = {}

    def model(self, state: ClusterState) -> FragModel:
        """The typical pods laid out for this cluster (built once per cluster object)."""
        key = id(state.cluster)
        if key not in self._models:
            self._models[key] = FragModel(self.typical, state.cluster)
        return self._models[key]

    def gain(self, state: ClusterState, shape: PodShape, nodes: IntArray) -> FloatArray:
        """F_n - F'_n in milli-GPUs: per candidate GPU (nodes x GPUs) for a fractional pod,
        meaningless where it does not fit; per node (nodes x 1) for any other pod."""
        fm = self.model(state)
        free = state.gpu_free[nodes]
        cpu = state.cpu_free[nodes]
        fit_count, small, idle = fm.parts(free)
        before = fm.combine(fit_count, small, idle, cpu, nodes)
        cpu_after = cpu - shape.cpu_milli
        if shape.fractional:
            m = shape.gpu_milli
            fg = free[:, :, None]  # (B, G, 1)
            fa = fg - m
            milli = fm.milli[None, None, :]
            fit_after = (
                fit_count[:, None, :] - (fg >= milli).astype(np.int64) + (fa >= milli)
            )
            small_after = small[:, None, :] - np.where(fg < milli, fg, 0) + np.where(
                fa < milli, fa, 0
            )
            idle_after = np.broadcast_to((idle - m)[:, None], free.shape)
            cpu_b = np.broadcast_to(cpu_after[:, None], free.shape)
            after = fm.combine(fit_after, small_after, idle_after, cpu_b, nodes)
            per_gpu: FloatArray = before[:, None] - after
            return per_gpu
        free_after = free
        if shape.num_gpu:
            whole = free == MILLI_PER_GPU
            taken = whole & (np.cumsum(whole, axis=1) <= shape.num_gpu)
            free_after = np.where(taken, 0, free)
        per_node: FloatArray = (before - fm.node_frag(free_after, cpu_after, nodes))[:, None]
        return per_node

    def score(
        self, state: ClusterState, shape: PodShape, nodes: IntArray, rng: np.random.Generator
    ) -> Scores:
        delta = self.gain(state, shape, nodes)
        if shape.fractional:
            per_gpu = _sigmoid_score(delta)
            per_gpu = np.where(state.gpu_free[nodes] >= shape.gpu_milli, per_gpu, -1)
            gpu: IntArray = per_gpu.argmax(axis=1)
            return Scores(per_gpu[np.arange(len(nodes)), gpu], gpu)
        return Scores(_sigmoid_score(delta[:, 0]), np.full(len(nodes), -1, np.int64))
