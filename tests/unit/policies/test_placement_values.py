"""Placement figures derived independently of the code under test: by hand on a node of two
or four GPUs, and FGD's incremental scoring against the paper's definition written out as a
plain loop. Boundaries (a GPU left with exactly a typical pod's milli) and ties are asserted."""

from __future__ import annotations

import math

import numpy as np
import pytest

from cotenant.model.cluster import Cluster, ClusterState
from cotenant.model.gpu import CATALOG
from cotenant.model.workload import Node, PodShape
from cotenant.policies.placement import PLACEMENT
from cotenant.policies.placement.base import best_fit_gpu, demand_milli
from cotenant.policies.placement.fgd import FgdPolicy
from cotenant.policies.placement.frag import TypicalPods

RNG = np.random.default_rng(0)


def node_state(used: list[int], cpu: int = 64_000) -> ClusterState:
    """One node whose GPU g has ``used[g]`` milli allocated."""
    state = ClusterState(Cluster([Node("a", cpu, 256_000, len(used), CATALOG.get("G2"))]))
    for g, milli in enumerate(used):
        if milli:
            state.allocate(PodShape(0, 0, 1, milli), 0, (g,))
    return state


@pytest.mark.parametrize("policy", ["best-fit", "dot-product"])
def test_the_tightest_gpu_ties_go_to_the_lowest_index(policy: str) -> None:
    state = node_state([0, 700, 0, 700])  # free [1000, 300, 1000, 300]
    chosen = PLACEMENT.create(policy)
    scored = chosen.score(state, PodShape(0, 0, 1, 200), np.array([0]), RNG)
    assert scored.gpu.tolist() == [1]  # 300 fits 200 most tightly on GPUs 1 and 3
    scored = chosen.score(state, PodShape(0, 0, 1, 500), np.array([0]), RNG)
    assert scored.gpu.tolist() == [0]  # only 0 and 2 fit: equal, so 0
    empty = node_state([0, 0, 0, 0])
    assert chosen.score(empty, PodShape(0, 0, 1, 100), np.array([0]), RNG).gpu.tolist() == [0]


def fgd(typical: list[PodShape]) -> FgdPolicy:
    policy = FgdPolicy()
    policy.typical = TypicalPods(tuple(typical), tuple(1 / len(typical) for _ in typical), 1.0)
    return policy


def test_fgd_a_gpu_left_with_exactly_a_typical_pods_milli_is_no_fragment() -> None:
    """Free [1000, 200], typical pod 500 milli. Before: GPU 1 (200) is too small, F = 200.
    A 500 pod on GPU 0 leaves [500, 200]: 500 still hosts a 500 pod, F' = 200, gain 0,
    score int(100 * sigmoid(0)) = 50. GPU 1 cannot take it (-1)."""
    state = node_state([0, 800])
    policy = fgd([PodShape(0, 0, 1, 500)])
    pod = PodShape(0, 0, 1, 500)
    assert policy.gain(state, pod, np.array([0]))[0, 0] == 0.0
    scored = policy.score(state, pod, np.array([0]), RNG)
    assert (scored.score.tolist(), scored.gpu.tolist()) == ([50], [0])


def test_fgd_a_whole_free_gpu_counts_for_a_whole_gpu_typical_pod() -> None:
    """Free [1000, 1000], typical pod two whole GPUs. Before: it fits, no GPU is too small,
    F = 0. A 300 pod on either GPU leaves 700 + 1000: the typical pod no longer fits, so all
    1700 idle milli are fragments: gain -1700, score int(100 / (1 + e^1.7)) = 15, on GPU 0."""
    state = node_state([0, 0])
    policy = fgd([PodShape(0, 0, 2, 1000)])
    pod = PodShape(0, 0, 1, 300)
    assert policy.gain(state, pod, np.array([0]))[0].tolist() == [-1700.0, -1700.0]
    scored = policy.score(state, pod, np.array([0]), RNG)
    assert int(100 / (1 + math.exp(1.7))) == 15
    assert (scored.score.tolist(), scored.gpu.tolist()) == ([15], [0])


def frag_by_definition(free: list[int], cpu: int, typical: list[PodShape]) -> float:
    """F_n over equally weighted typical pods, as the FGD paper defines it, one pod at a time."""
    total = 0.0
    for s in typical:
        idle = sum(free)
        if s.num_gpu == 0:
            part = idle
        else:
            fits = sum(1 for f in free if f >= s.gpu_milli)
            hosts = fits >= s.num_gpu and cpu >= s.cpu_milli
            part = sum(f for f in free if f < s.gpu_milli) if hosts else idle
        total += part / len(typical)
    return total


def test_fgd_incremental_gain_matches_the_definition_at_every_candidate_gpu() -> None:
    """Random 4-GPU nodes on a 100-milli grid (so exact fits are common): the gain FGD
    computes incrementally equals F before minus F after placing on each GPU, both from the
    definition above."""
    rng = np.random.default_rng(11)
    grid = np.arange(1, 11) * 100
    checked = 0
    for _ in range(60):
        typical = [PodShape(int(rng.integers(0, 3)) * 1000, 0, 1, int(m))
                   for m in rng.choice(grid, 3)]
        typical.append(PodShape(0, 0, int(rng.integers(1, 3)), 1000))
        typical.append(PodShape(2000, 0, 0, 0))
        used = [int(u) for u in rng.choice(np.arange(0, 11) * 100, 4)]
        state = node_state(used, cpu=4000)
        pod = PodShape(int(rng.integers(0, 3)) * 1000, 0, 1, int(rng.choice(grid[:-1])))
        gain = fgd(typical).gain(state, pod, np.array([0]))[0]
        free = [1000 - u for u in used]
        before = frag_by_definition(free, 4000, typical)
        for g, f in enumerate(free):
            if f < pod.gpu_milli:
                continue
            after = [f - pod.gpu_milli if i == g else x for i, x in enumerate(free)]
            expected = before - frag_by_definition(after, 4000 - pod.cpu_milli, typical)
            assert gain[g] == pytest.approx(expected), (used, pod, typical, g)
            checked += 1
    assert checked > 100


def two_g2_nodes() -> ClusterState:
    """Two 8-GPU nodes of 64 CPUs; node 1 has 300 milli of GPU 0 in use."""
    g2 = CATALOG.get("G2")
    state = ClusterState(Cluster([Node("a", 64_000, 256_000, 8, g2),
                                  Node("b", 64_000, 256_000, 8, g2)]))
    state.allocate(PodShape(0, 0, 1, 300), 1, (0,))
    return state


def test_best_fit_and_dot_product_scores_by_hand() -> None:
    """With c = 16 CPUs and 500 milli: best fit int(100 (1 - (0.5 * 48000/128000 + 0.5 *
    7500/8000))) = int(34.375) on the empty node, 7200 GPU left (36.25) on the other; dot
    product int(100 (1 - (0.5 * 0.125 + 1 * 0.0625) / 2)) = int(93.75), and 93.87 with 7700
    idle; a 2-GPU pod leaves 6000 on the empty node: best fit int(43.75), no GPU chosen."""
    state = two_g2_nodes()
    nodes = np.array([0, 1])
    frac = PodShape(16_000, 0, 1, 500)
    best = PLACEMENT.create("best-fit").score(state, frac, nodes, RNG)
    assert (best.score.tolist(), best.gpu.tolist()) == ([34, 36], [0, 0])
    dot = PLACEMENT.create("dot-product").score(state, frac, nodes, RNG)
    assert (dot.score.tolist(), dot.gpu.tolist()) == ([93, 93], [0, 0])
    whole = PodShape(16_000, 0, 2, 1000)
    best = PLACEMENT.create("best-fit").score(state, whole, np.array([0]), RNG)
    assert (best.score.tolist(), best.gpu.tolist()) == ([43], [-1])
    dot = PLACEMENT.create("dot-product").score(state, whole, np.array([0]), RNG)
    # int(100 (1 - (0.0625 + 1 * 0.25) / 2)) = int(84.375)
    assert (dot.score.tolist(), dot.gpu.tolist()) == ([84], [-1])


def test_no_gpu_fits_a_row_is_minus_one() -> None:
    free = np.array([[100, 100], [1000, 600], [500, 499]])
    assert best_fit_gpu(free, 500).tolist() == [-1, 1, 0]
    assert demand_milli(PodShape(0, 0, 2, 500)) == 2000
    assert demand_milli(PodShape(0, 0, 1, 500)) == 500
