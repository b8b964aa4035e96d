"""The placement policy contract, node selection, and GPU choice rules shared by policies.

A policy scores the feasible nodes for one pod shape; the node with the highest score wins,
and ties go to the node with the lowest rank in one random permutation of the nodes that is
fixed for a whole run. That is what the FGD artifact's scheduler does (its kube-scheduler fork
keeps the first node by name on equal scores, and every node name is prefixed with its rank in
a seeded permutation). Scores are integers, truncated as the Kubernetes framework truncates
them, because truncation creates the ties that the tie rule then decides.

A policy is *node local* when a node's score depends only on that node's state and the pod:
then a caller may cache scores per (shape, node) and recompute only nodes that changed. Every
policy here is node local except Random.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np

from cotenant.model.cluster import ClusterState, IntArray
from cotenant.model.workload import MILLI_PER_GPU, PodShape

MAX_SPEC_CPU = 128_000  # milli-CPU of the largest node, the scores' CPU scale (FGD artifact)
MAX_SPEC_GPU = 8_000  # milli-GPU of the largest node, the scores' GPU scale


@dataclass(frozen=True)
class Scores:
    """Scores of candidate nodes, and for fractional pods the GPU chosen on each (-1 else)."""

    score: IntArray
    gpu: IntArray


class PlacementPolicy(ABC):
    """Scores feasible nodes for a pod; pure apart from the injected ``rng``."""

    name: str = "policy"
    node_local: bool = True
    dedupe_states: bool = False
    """Costly per node: callers should score each distinct node state once."""
    uses_workload: bool = False
    """Models the workload from its pod shapes (``workload=...``): whoever builds the policy
    outside the simulator (the scheduler extender) must pass them."""

    def __init__(self, **_: object) -> None:
        """Policies are built by the registry with the same keywords (``workload=...``);
        those that need none ignore them."""
        super().__init__()

    @abstractmethod
    def score(
        self, state: ClusterState, shape: PodShape, nodes: IntArray, rng: np.random.Generator
    ) -> Scores:
        """Score ``nodes`` (all feasible for ``shape``); higher is better."""


def demand_milli(shape: PodShape) -> int:
    """k x m: the GPU milli a pod takes on its node."""
    return shape.num_gpu * (shape.gpu_milli if shape.fractional else MILLI_PER_GPU)


def idle_milli(state: ClusterState, nodes: IntArray) -> IntArray:
    idle: IntArray = state.gpu_free[nodes].sum(axis=1)
    return idle


def best_fit_gpu(free: IntArray, milli: int) -> IntArray:
    """Per row of ``free`` (nodes x GPUs), the GPU with the least free milli that still fits
    ``milli``, lowest index on ties; -1 where none fits."""
    fits = free >= milli
    masked = np.where(fits, free, np.iinfo(np.int64).max)
    choice: IntArray = masked.argmin(axis=1)
    return np.where(fits.any(axis=1), choice, -1)


def lowest_free_gpus(free_row: IntArray, count: int) -> tuple[int, ...]:
    """The ``count`` lowest-index fully free GPUs of one node."""
    return tuple(int(g) for g in np.flatnonzero(free_row == MILLI_PER_GPU)[:count])


def select_node(nodes: IntArray, scores: IntArray, rank: IntArray) -> int:
    """The highest-scoring node; among equals, the one with the lowest ``rank``."""
    best = scores.max()
    tied = nodes[scores == best]
    return int(tied[rank[tied].argmin()])


def truncate(values: np.ndarray) -> IntArray:
    """Go's ``int64(x)``: truncation toward zero."""
    out: IntArray = np.trunc(values).astype(np.int64)
    return out
