"""Drives a placement policy pod by pod over a :class:`ClusterState`, fast.

A node's feasibility for a pod shape, and for node-local policies (see
:mod:`cotenant.policies.placement.base`) its score, change only when that node changes. So the
placer keeps, per shape, the last feasibility, score and GPU choice of every node with the
node's version at the time, and recomputes only the nodes whose version moved since. Traces
have few distinct shapes (151 in openb's default pod list) and a placement changes one node,
so after warm-up a placement rescores a handful of nodes instead of all of them.

For policies that are costly per node (``dedupe_states``), a large batch (the first pod of a
shape) is first reduced to its distinct node states (free CPU, memory and GPU milli per GPU,
GPU model, pods by kind): identical nodes get identical scores, and an empty cluster has few
distinct nodes. Results are identical to scoring every node every time; the tests check that.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from cotenant.model.cluster import Allocation, BoolArray, ClusterState, IntArray
from cotenant.model.workload import PodShape
from cotenant.policies.placement.base import PlacementPolicy, lowest_free_gpus, select_node

DEDUP_MIN_BATCH = 32
"""Batches of at least this many nodes are reduced to distinct node states before scoring."""


@dataclass
class _ShapeCache:
    version: IntArray
    feasible: BoolArray
    score: IntArray
    gpu: IntArray
    spec_mask: BoolArray | None


@functools.cache
def _hash_weights(columns: int) -> IntArray:
    weights: IntArray = np.random.default_rng(0).integers(1, 2**62, columns, dtype=np.int64)
    return weights


def _distinct_rows(key: IntArray) -> tuple[IntArray, IntArray]:
    """Like ``np.unique(key, axis=0, return_index=True, return_inverse=True)[1:]``, but by a
    hash of each row (a fixed random linear form, wrapping in int64), which is about 20 times
    faster; where two different rows share a hash, the exact (sorting) way is taken."""
    _, first, inverse = np.unique(key @ _hash_weights(key.shape[1]), return_index=True,
                                  return_inverse=True)
    inverse = inverse.ravel()
    if not np.array_equal(key[first[inverse]], key):
        _, first, inverse = np.unique(key, axis=0, return_index=True, return_inverse=True)
    return first, inverse.ravel()


class Placer:
    """Places pods one at a time with ``policy``; ties go to the lowest ``rank``."""

    def __init__(
        self,
        policy: PlacementPolicy,
        state: ClusterState,
        rank: IntArray,
        rng: np.random.Generator,
        *,
        cache: bool = True,
    ) -> None:
        self.policy = policy
        self.state = state
        self.rank = rank
        self.rng = rng
        self.use_cache = cache
        self._caches: dict[PodShape, _ShapeCache] = {}

    def _cache_for(self, shape: PodShape) -> _ShapeCache:
        cache = self._caches.get(shape)
        if cache is None:
            n = self.state.cluster.size
            mask = self.state.cluster.spec_mask(shape.gpu_spec) if shape.gpu_spec else None
            cache = _ShapeCache(
                np.full(n, -1, np.int64),
                np.zeros(n, np.bool_),
                np.zeros(n, np.int64),
                np.full(n, -1, np.int64),
                mask,
            )
            self._caches[shape] = cache
        return cache

    def candidates(self, shape: PodShape) -> tuple[IntArray, IntArray, IntArray]:
        """The nodes that can host ``shape`` now, with the policy's score and GPU choice on
        each (the cached ones for a node-local policy, fresh ones otherwise)."""
        state = self.state
        if not self.use_cache:
            nodes = np.flatnonzero(state.feasible(shape))
            scored = self.policy.score(state, shape, nodes, self.rng)
            return nodes, scored.score, scored.gpu
        cache = self._cache_for(shape)
        stale = np.flatnonzero(cache.version != state.version)
        if stale.size:
            ok = state.feasible(shape, stale, cache.spec_mask)
            cache.feasible[stale] = ok
            cache.version[stale] = state.version[stale]
            fresh = stale[ok]
            if fresh.size and self.policy.node_local:
                self._score_into(cache, shape, fresh)
        nodes = np.flatnonzero(cache.feasible)
        if not self.policy.node_local:
            scored = self.policy.score(state, shape, nodes, self.rng)
            return nodes, scored.score, scored.gpu
        return nodes, cache.score[nodes], cache.gpu[nodes]

    def choose(self, shape: PodShape) -> tuple[int, int] | None:
        """(node, GPU for a fractional pod or -1), or None when no node fits."""
        if not self.use_cache or not self.policy.node_local:
            state = self.state
            nodes = (np.flatnonzero(state.feasible(shape)) if not self.use_cache
                     else np.flatnonzero(self._feasible_cached(shape)))
            return self._pick_fresh(shape, nodes)
        nodes, score, gpu = self.candidates(shape)
        if nodes.size == 0:
            return None
        pick = select_node(np.arange(nodes.size), score, self.rank[nodes])
        return int(nodes[pick]), int(gpu[pick])

    def feasible(self, shape: PodShape) -> BoolArray:
        """Which nodes can host ``shape`` now, over all nodes (from the per-shape cache where
        the placer keeps one: only nodes changed since the last call are checked again)."""
        if not self.use_cache:
            return self.state.feasible(shape)
        if self.policy.node_local:  # feasibility and scores are cached together
            self.candidates(shape)
            return self._caches[shape].feasible
        return self._feasible_cached(shape)

    def _feasible_cached(self, shape: PodShape) -> BoolArray:
        cache = self._cache_for(shape)
        stale = np.flatnonzero(cache.version != self.state.version)
        if stale.size:
            cache.feasible[stale] = self.state.feasible(shape, stale, cache.spec_mask)
            cache.version[stale] = self.state.version[stale]
        return cache.feasible

    def _pick_fresh(self, shape: PodShape, nodes: IntArray) -> tuple[int, int] | None:
        """Score ``nodes`` now (no score cache) and pick the best."""
        if nodes.size == 0:
            return None
        scored = self.policy.score(self.state, shape, nodes, self.rng)
        pick = select_node(np.arange(nodes.size), scored.score, self.rank[nodes])
        return int(nodes[pick]), int(scored.gpu[pick])

    def _score_into(self, cache: _ShapeCache, shape: PodShape, nodes: IntArray) -> None:
        """Score ``nodes`` into ``cache``, once per distinct node state in large batches."""
        state = self.state
        if self.policy.dedupe_states and nodes.size >= DEDUP_MIN_BATCH:
            key = np.column_stack(
                (
                    state.cpu_free[nodes],
                    state.mem_free[nodes],
                    state.cluster.model_index[nodes],
                    state.gpu_free[nodes],
                    state.kind_count[nodes],
                )
            )
            first, inverse = _distinct_rows(key)
            if first.size < nodes.size:
                scored = self.policy.score(state, shape, nodes[first], self.rng)
                cache.score[nodes] = scored.score[inverse]
                cache.gpu[nodes] = scored.gpu[inverse]
                return
        scored = self.policy.score(state, shape, nodes, self.rng)
        cache.score[nodes] = scored.score
        cache.gpu[nodes] = scored.gpu

    def place(self, shape: PodShape) -> Allocation | None:
        """Choose a node and GPUs for ``shape`` and allocate them; None if nothing fits."""
        choice = self.choose(shape)
        if choice is None:
            return None
        node, gpu = choice
        if shape.fractional:
            gpus: tuple[int, ...] = (gpu,)
        elif shape.num_gpu:
            gpus = lowest_free_gpus(self.state.gpu_free[node], shape.num_gpu)
        else:
            gpus = ()
        return self.state.allocate(shape, node, gpus)
