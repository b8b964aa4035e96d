"""Random placement: a uniformly random feasible node, and for a fractional pod a uniformly
random GPU with room. The baseline of the FGD paper's evaluation. Not node local: scores are
drawn afresh for every pod from the injected RNG."""

from __future__ import annotations

import numpy as np

from cotenant.model.cluster import ClusterState, IntArray
from cotenant.model.workload import PodShape
from cotenant.policies.placement.base import PlacementPolicy, Scores
from cotenant.policies.placement.registry import PLACEMENT


@PLACEMENT.register("random")
class RandomPolicy(PlacementPolicy):
    """One random feasible node scores 100, the rest 0."""

    name = "random"
    node_local = False

    def score(
        self, state: ClusterState, shape: PodShape, nodes: IntArray, rng: np.random.Generator
    ) -> Scores:
        n = len(nodes)
        scores = np.zeros(n, np.int64)
        pick = int(rng.integers(n))
        scores[pick] = 100
        gpu = np.full(n, -1, np.int64)
        if shape.fractional:
            room = np.flatnonzero(state.gpu_free[nodes[pick]] >= shape.gpu_milli)
            gpu[pick] = int(room[rng.integers(len(room))])
        return Scores(scores, gpu)
