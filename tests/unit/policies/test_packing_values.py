"""GPU packing's and GPU clustering's scores by value on hand-built states, from the formulas
in their module docstring (the FGD artifact's scoring plugins), and the Scores contract every
placement policy keeps: a GPU is named only for a fractional pod."""

from __future__ import annotations

import numpy as np
import pytest

from cotenant.model.cluster import Cluster, ClusterState
from cotenant.model.gpu import CATALOG
from cotenant.model.workload import Node, PodShape
from cotenant.policies.placement import PLACEMENT

RNG = np.random.default_rng(0)
FRACTION = PodShape(1_000, 1_000, 1, 300)
ONE_GPU = PodShape(1_000, 1_000, 1, 1000)
WORKLOAD = [FRACTION] * 5 + [ONE_GPU] * 5


def four_t4_nodes(count: int) -> ClusterState:
    return ClusterState(Cluster([Node(f"n{i}", 64_000, 256_000, 4, CATALOG.get("T4"))
                                 for i in range(count)]))


def scores(policy: str, state: ClusterState, shape: PodShape) -> tuple[list[int], list[int]]:
    got = PLACEMENT.create(policy, workload=WORKLOAD).score(
        state, shape, np.arange(state.cluster.size), RNG)
    return got.score.tolist(), got.gpu.tolist()


@pytest.mark.parametrize("policy", ["fgd", "best-fit", "dot-product", "cotenant-pack",
                                    "gpu-packing", "gpu-clustering", "random"])
@pytest.mark.parametrize("shape", [ONE_GPU, PodShape(1_000, 1_000, 2, 1000)])
def test_no_policy_names_a_gpu_for_a_whole_gpu_pod(policy: str, shape: PodShape) -> None:
    """Scores name the GPU only for fractional pods (-1 else): whole GPUs are the placer's."""
    state = four_t4_nodes(2)
    state.allocate(FRACTION, 0, (2,))
    assert scores(policy, state, shape)[1] == [-1, -1]


def test_gpu_packing_scores_by_hand() -> None:
    """Node 0: GPU 0 has 450 free (a used GPU: 100 - floor(450 / 100) = 96). Node 1: one GPU
    fully used, the rest free, so the best fit is a free GPU on a used node (49). Node 2: all
    four GPUs free (max(33 - 4, 4) = 29)."""
    state = four_t4_nodes(3)
    state.allocate(PodShape(1_000, 1_000, 1, 550), 0, (0,))
    state.allocate(ONE_GPU, 1, (3,))
    got, gpu = scores("gpu-packing", state, FRACTION)
    assert got == [96, 49, 29]
    assert gpu == [0, 0, 0]
    whole, _ = scores("gpu-packing", state, PodShape(1_000, 1_000, 2, 1000))
    assert whole == [48, 48, 29]  # max(50 - 2, 33) on a used node


def test_gpu_clustering_scores_by_hand() -> None:
    """floor(25 * (8000 - idle milli) / 8000) plus 75 where the node holds only the pod's
    kind, 50 where it holds it among others, 25 where it holds no GPU pod, 0 where only
    other kinds. For a fractional pod: node 0 empty (4000 idle: 12 + 25), node 1 one
    fractional pod (3700 idle: 13 + 75), node 2 a fractional and a 1-GPU pod (2700 idle:
    16 + 50), node 3 a 1-GPU pod only (3000 idle: 15 + 0)."""
    state = four_t4_nodes(4)
    state.allocate(FRACTION, 1, (0,))
    state.allocate(FRACTION, 2, (0,))
    state.allocate(ONE_GPU, 2, (1,))
    state.allocate(ONE_GPU, 3, (0,))
    got, gpu = scores("gpu-clustering", state, FRACTION)
    assert got == [12 + 25, 13 + 75, 16 + 50, 15 + 0]
    assert gpu == [0, 0, 0, 1]  # the tightest GPU that fits
    whole, _ = scores("gpu-clustering", state, ONE_GPU)
    assert whole == [12 + 25, 13 + 0, 16 + 50, 15 + 75]
