"""Resource-fit baselines from the FGD paper's evaluation: best fit and dot product.

Both score the node's leftover resources in two dimensions, CPU scaled by the largest node's
128 cores and GPU by its 8 GPUs (``MAX_SPEC_CPU``, ``MAX_SPEC_GPU``), and both put a fractional
pod on the GPU it fits most tightly (least free milli that fits, lowest index on ties).

* **Best fit** prefers the node left with the least resources:
  ``int(100 * (1 - (0.5 * (c_n - c) / 128000 + 0.5 * (I_n - k*m) / 8000)))``.
* **Dot product** (Grandl et al., "Multi-resource packing for cluster schedulers", SIGCOMM'14,
  as configured in the FGD artifact) prefers the *smallest* dot product of the node's free
  vector and the pod's demand vector:
  ``int(100 * (1 - ((c_n/128000)(c/128000) + (I_n/8000)(k*m/8000)) / 2))``.

The artifact also min-max normalises best fit's scores to 0..100 with integer division; that
never changes which nodes hold the top score, so it is left out.
"""

from __future__ import annotations

import numpy as np

from cotenant.model.cluster import ClusterState, IntArray
from cotenant.model.workload import PodShape
from cotenant.policies.placement.base import (
    MAX_SPEC_CPU,
    MAX_SPEC_GPU,
    PlacementPolicy,
    Scores,
    best_fit_gpu,
    demand_milli,
    idle_milli,
    truncate,
)
from cotenant.policies.placement.registry import PLACEMENT


def _gpu_choice(state: ClusterState, shape: PodShape, nodes: IntArray) -> IntArray:
    if shape.fractional:
        return best_fit_gpu(state.gpu_free[nodes], shape.gpu_milli)
    return np.full(len(nodes), -1, np.int64)


@PLACEMENT.register("best-fit", aliases=("bestfit", "best_fit"))
class BestFitPolicy(PlacementPolicy):
    """Least leftover CPU and GPU after placing."""

    name = "best-fit"

    def score(
        self, state: ClusterState, shape: PodShape, nodes: IntArray, rng: np.random.Generator
    ) -> Scores:
        cpu_left = state.cpu_free[nodes] - shape.cpu_milli
        gpu_left = idle_milli(state, nodes) - demand_milli(shape)
        raw = 100.0 * (1.0 - (0.5 * cpu_left / MAX_SPEC_CPU + 0.5 * gpu_left / MAX_SPEC_GPU))
        return Scores(truncate(raw), _gpu_choice(state, shape, nodes))


@PLACEMENT.register("dot-product", aliases=("dotprod", "dot_product", "tetris"))
class DotProductPolicy(PlacementPolicy):
    """Smallest dot product of free resources and demand."""

    name = "dot-product"

    def score(
        self, state: ClusterState, shape: PodShape, nodes: IntArray, rng: np.random.Generator
    ) -> Scores:
        cpu = state.cpu_free[nodes] / MAX_SPEC_CPU * (shape.cpu_milli / MAX_SPEC_CPU)
        gpu = idle_milli(state, nodes) / MAX_SPEC_GPU * (demand_milli(shape) / MAX_SPEC_GPU)
        raw = 100.0 * (1.0 - (cpu + gpu) / 2.0)
        return Scores(truncate(raw), _gpu_choice(state, shape, nodes))
