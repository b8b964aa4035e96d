"""Placement policies on hand-built states whose right answer is known."""

from __future__ import annotations

import numpy as np
import pytest

from cotenant.errors import CotenantError, UnknownNameError
from cotenant.model.cluster import Cluster, ClusterState
from cotenant.model.gpu import CATALOG
from cotenant.model.workload import Node, PodShape
from cotenant.policies.placement import PLACEMENT, Scores, select_node
from cotenant.policies.placement.frag import FragModel, TypicalPods
from cotenant.registry import Registry

RNG = np.random.default_rng(0)


def two_node_cluster() -> Cluster:
    g2 = CATALOG.get("G2")
    return Cluster([Node("a", 64_000, 256_000, 2, g2), Node("b", 64_000, 256_000, 2, g2)])


def scores(
    policy: str, state: ClusterState, shape: PodShape, workload: list[PodShape] | None = None
) -> tuple[np.ndarray, Scores]:
    chosen = PLACEMENT.create(policy, workload=workload or [shape])
    nodes = np.flatnonzero(state.feasible(shape))
    return nodes, chosen.score(state, shape, nodes, RNG)


def test_registry_names_and_unknown() -> None:
    assert set(PLACEMENT.names()) == {
        "random", "best-fit", "dot-product", "gpu-packing", "gpu-clustering", "fgd",
        "cotenant-pack",
    }
    assert PLACEMENT.canonical("BestFit") == "best-fit"
    assert PLACEMENT.canonical("dotprod") == "dot-product"
    with pytest.raises(UnknownNameError, match="valid: best-fit, cotenant-pack, dot-product, fgd"):
        PLACEMENT.canonical("first-fit")


def test_registry_rejects_duplicates_and_loads_module_attr() -> None:
    reg: Registry[object] = Registry("thing")
    reg.register("a", aliases=("b",))(object)
    with pytest.raises(CotenantError, match="registered twice"):
        reg.register("b")(object)
    made = PLACEMENT.create("cotenant.policies.placement.fit:BestFitPolicy")
    assert made.name == "best-fit"
    with pytest.raises(UnknownNameError):
        PLACEMENT.create("no.such.module:Thing")


def test_select_node_breaks_ties_by_rank() -> None:
    nodes = np.array([0, 1, 2, 3])
    rank = np.array([3, 2, 0, 1])
    assert select_node(nodes, np.array([5, 9, 9, 1]), rank) == 2  # 1 and 2 tie; rank 0 wins
    assert select_node(nodes, np.array([9, 9, 1, 9]), rank) == 3


def test_best_fit_prefers_fuller_node_and_tightest_gpu() -> None:
    state = ClusterState(two_node_cluster())
    state.allocate(PodShape(0, 0, 1, 400), 1, (1,))  # node b: GPUs [1000, 600]
    shape = PodShape(1000, 0, 1, 500)
    _, sc = scores("best-fit", state, shape)
    assert sc.score[1] > sc.score[0]
    assert sc.gpu[1] == 1  # 600 free fits 500 more tightly than 1000


def test_dot_product_prefers_smaller_product() -> None:
    state = ClusterState(two_node_cluster())
    state.allocate(PodShape(40_000, 0, 0, 0), 0, ())  # node a has less free CPU
    _, sc = scores("dot-product", state, PodShape(8000, 0, 1, 1000))
    assert sc.score[0] > sc.score[1]


def test_gpu_packing_prefers_used_gpu_then_used_node() -> None:
    state = ClusterState(two_node_cluster())
    state.allocate(PodShape(0, 0, 1, 300), 0, (0,))  # node a: GPU 0 in use
    _, sc = scores("gpu-packing", state, PodShape(0, 0, 1, 500))
    assert sc.score.tolist() == [100 - 700 // 100, 31]  # used GPU: 93; empty 2-GPU node: 31
    _, sc = scores("gpu-packing", state, PodShape(0, 0, 1, 1000))
    assert sc.score.tolist() == [49, 31]
    _, sc = scores("gpu-packing", state, PodShape(100, 0, 0, 0))
    assert sc.score.tolist() == [0, 0]


def test_gpu_clustering_groups_pods_of_a_kind() -> None:
    state = ClusterState(two_node_cluster())
    state.allocate(PodShape(0, 0, 1, 1000), 0, (0,))  # node a holds a 1-GPU pod
    _, frac = scores("gpu-clustering", state, PodShape(0, 0, 1, 200))
    _, whole = scores("gpu-clustering", state, PodShape(0, 0, 1, 1000))
    # fractional: a holds only other kinds (+0), b holds no GPU pod (+25)
    assert frac.score[1] > frac.score[0]
    # whole 1-GPU: a holds only this kind (+75)
    assert whole.score[0] > whole.score[1]


def test_frag_measure_by_hand() -> None:
    cluster = Cluster([Node("a", 10_000, 10_000, 2, CATALOG.get("T4"))])
    typical = TypicalPods(
        (PodShape(0, 0, 1, 500), PodShape(1000, 0, 0, 0), PodShape(0, 0, 2, 1000)),
        (0.5, 0.25, 0.25),
        1.0,
    )
    model = FragModel(typical, cluster)
    free = np.array([[1000, 300]])
    frag = model.node_frag(free, np.array([10_000]), np.array([0]))
    # 500-milli shape: only GPU 1 (300) is too small -> 300; CPU-only shape: all idle 1300;
    # 2-whole-GPU shape cannot fit -> all idle 1300.
    assert frag[0] == pytest.approx(0.5 * 300 + 0.25 * 1300 + 0.25 * 1300)
    # with too little CPU for the 500-milli shape's 0 CPU nothing changes; with CPU 0 the
    # CPU-only shape (1000 milli CPU) lacks CPU: still all idle.
    assert model.node_frag(free, np.array([0]), np.array([0]))[0] == frag[0]


def test_a_nodes_fragmentation_does_not_depend_on_its_batch() -> None:
    """F_n of a node is the same, bit for bit, scored alone or beside other nodes: the cached
    placer rescoring a few nodes must agree with a full rescoring of all of them."""
    rng = np.random.default_rng(7)
    nodes = [Node(f"n{i}", 64_000, 256_000, 8, CATALOG.get("V100-16GB")) for i in range(60)]
    cluster = Cluster(nodes)
    milli = rng.integers(1, 1000, 23)
    shapes = tuple(PodShape(int(c), 0, int(g), int(m)) for c, g, m in
                   zip(rng.integers(0, 16_000, 23), rng.integers(0, 3, 23), milli, strict=True))
    weights = rng.random(23)
    typical = TypicalPods(shapes, tuple(float(w) for w in weights / weights.sum()), 1.0)
    model = FragModel(typical, cluster)
    free = rng.integers(0, 11, (60, 8)) * 100
    cpu = rng.integers(0, 64_000, 60)
    every = np.arange(60)
    batch = model.node_frag(free, cpu, every)
    alone = np.array([model.node_frag(free[i:i + 1], cpu[i:i + 1], every[i:i + 1])[0]
                      for i in range(60)])
    assert np.array_equal(batch, alone)


def test_typical_pods_cover_threshold() -> None:
    shapes = [PodShape(1, 0, 1, 500)] * 6 + [PodShape(2, 0, 0, 0)] * 3 + [PodShape(3, 0, 1, 1000)]
    typical = TypicalPods.from_shapes(shapes, 0.9)
    assert len(typical.shapes) == 2
    assert typical.freq == pytest.approx((6 / 9, 3 / 9))
    assert typical.coverage == pytest.approx(0.9)


def test_fgd_picks_gpu_that_fragments_least_where_best_fit_does_not() -> None:
    cluster = Cluster([Node("a", 64_000, 256_000, 2, CATALOG.get("T4"))])
    state = ClusterState(cluster)
    state.allocate(PodShape(0, 0, 1, 400), 0, (1,))  # GPUs free [1000, 600]
    pod = PodShape(0, 0, 1, 400)
    workload = [PodShape(0, 0, 1, 500)] * 10
    # On GPU 0 -> [600, 600]: nothing too small for a 500 pod (frag 0).
    # On GPU 1 -> [1000, 200]: 200 stranded. FGD takes GPU 0; best fit takes GPU 1 (tighter).
    _, fgd = scores("fgd", state, pod, workload)
    _, bf = scores("best-fit", state, pod)
    assert fgd.gpu[0] == 0
    assert bf.gpu[0] == 1


def test_fgd_prefers_node_where_fragmentation_grows_least() -> None:
    state = ClusterState(two_node_cluster())
    state.allocate(PodShape(0, 0, 1, 500), 0, (0,))  # node a: [500, 1000]; b: [1000, 1000]
    workload = [PodShape(0, 0, 1, 500)] * 10
    _, sc = scores("fgd", state, PodShape(0, 0, 1, 500), workload)
    # a: fills GPU 0 exactly (no fragment created); b: leaves 500, still usable by 500 pods:
    # both keep frag at 0, so scores tie at int(100 * sigmoid(0)) = 50.
    assert sc.score.tolist() == [50, 50]
    _, sc = scores("fgd", state, PodShape(0, 0, 1, 700), workload)
    # 700 on a's GPU 1 leaves 300 (< 500: fragment); on b leaves 300 too: equal again,
    # but on a the 500 on GPU 0 is untouched. Both create a 300 fragment.
    assert sc.score[0] == sc.score[1] < 50


def test_random_policy_is_seeded() -> None:
    state = ClusterState(two_node_cluster())
    shape = PodShape(0, 0, 1, 100)
    policy = PLACEMENT.create("random")
    nodes = np.arange(2)
    first = [int(policy.score(state, shape, nodes, np.random.default_rng(3)).score.argmax())
             for _ in range(5)]
    again = [int(policy.score(state, shape, nodes, np.random.default_rng(3)).score.argmax())
             for _ in range(5)]
    assert first == again


def test_gpu_clustering_truncates_as_the_artifact_on_a_16_gpu_node() -> None:
    state = ClusterState(Cluster([Node("big", 256_000, 10**6, 16, CATALOG.get("A100-80GB"))]))
    shape = PodShape(1000, 1000, 1, 500)
    state.allocate(shape, 0, (0,))  # idle 15,500 milli: 25 * (8000 - 15500) / 8000 = -23.4
    _, scored = scores("gpu-clustering", state, shape)
    assert scored.score[0] == -23 + 75  # Go truncates toward zero; a floor would give -24
