"""The offline optimum against brute force on clusters small enough to try every placement."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from cotenant.errors import InfeasibleError
from cotenant.model.cluster import AllocationError, Cluster, ClusterState
from cotenant.model.gpu import CATALOG
from cotenant.model.workload import MILLI_PER_GPU, Node, PodShape
from cotenant.policies.placement.optimum import check, offline_optimum
from cotenant.policies.placement.optimum.relaxation import pools_of, relax


def brute_force(cluster: Cluster, shapes: list[PodShape]) -> int:
    """The most milli any placement allocates: every pod skipped or put on every GPU (set)
    of every node that takes it, depth first."""
    state = ClusterState(cluster)
    gpu_pods = sorted((s for s in shapes if s.num_gpu), key=lambda s: -s.gpu_milli_total)
    best = 0

    def options(shape: PodShape) -> list[tuple[int, tuple[int, ...]]]:
        out = []
        for n in np.flatnonzero(state.feasible(shape)):
            free = state.gpu_free[n]
            if shape.fractional:
                out += [(int(n), (int(g),)) for g in np.flatnonzero(free >= shape.gpu_milli)]
            else:
                whole = np.flatnonzero(free == MILLI_PER_GPU)
                out += [(int(n), tuple(int(g) for g in c))
                        for c in itertools.combinations(whole, shape.num_gpu)]
        return out

    def go(i: int, used: int) -> None:
        nonlocal best
        rest = sum(s.gpu_milli_total for s in gpu_pods[i:])
        if used + rest <= best:
            return
        if i == len(gpu_pods):
            best = used
            return
        shape = gpu_pods[i]
        for node, gpus in options(shape):
            alloc = state.allocate(shape, node, gpus)
            go(i + 1, used + shape.gpu_milli_total)
            state.release(shape, alloc)
        go(i + 1, used)

    go(0, 0)
    return best


def random_instance(rng: np.random.Generator) -> tuple[Cluster, list[PodShape]]:
    """2-3 nodes of 1-4 GPUs on two models, tight CPU, and 4-7 pods of mixed kinds."""
    models = [CATALOG.get("T4"), CATALOG.get("G2")]
    nodes = [
        Node(f"n{i}", int(rng.choice([4_000, 8_000, 16_000])), 64_000,
             int(rng.choice([1, 2, 4])), models[int(rng.integers(2))])
        for i in range(int(rng.integers(2, 4)))
    ]
    shapes = []
    for _ in range(int(rng.integers(4, 8))):
        cpu = int(rng.choice([1_000, 2_000, 4_000, 6_000]))
        spec = ("T4",) if rng.random() < 0.2 else ()
        kind = rng.random()
        if kind < 0.6:
            shapes.append(PodShape(cpu, 1_000, 1, int(rng.choice(range(100, 1000, 50))), spec))
        else:
            shapes.append(PodShape(cpu, 1_000, int(rng.choice([1, 1, 2])), 1000, spec))
    return Cluster(nodes), shapes


@pytest.mark.parametrize("seed", range(100))
def test_bound_and_plan_bracket_the_brute_force_optimum(seed: int) -> None:
    cluster, shapes = random_instance(np.random.default_rng(seed))
    best = brute_force(cluster, shapes)
    found = offline_optimum(cluster, shapes)
    assert found.plan_milli <= best <= found.upper_milli
    assert check(cluster, shapes, found.placements) == found.plan_milli
    if found.exact:
        assert found.upper_milli == best


def test_exact_where_node_boundaries_cannot_matter() -> None:
    """One GPU per node and CPU to spare: the program is bin packing itself, and the placement
    reaches it on every instance."""
    for seed in range(15):
        rng = np.random.default_rng(100 + seed)
        cluster = Cluster([Node(f"n{i}", 64_000, 64_000, 1, CATALOG.get("T4"))
                           for i in range(int(rng.integers(2, 4)))])
        shapes = [PodShape(1_000, 1_000, 1, int(rng.choice(range(100, 1001, 50))))
                  for _ in range(int(rng.integers(4, 8)))]
        found = offline_optimum(cluster, shapes)
        assert found.exact, seed
        assert found.upper_milli == brute_force(cluster, shapes), seed


def test_cpu_only_and_unplaceable_pods_add_nothing() -> None:
    cluster = Cluster([Node("n0", 8_000, 64_000, 2, CATALOG.get("T4"))])
    shapes = [
        PodShape(4_000, 1_000, 0, 0),  # CPU only
        PodShape(1_000, 1_000, 4, 1000),  # more GPUs than any node has
        PodShape(1_000, 1_000, 1, 500, ("G2",)),  # a model the cluster lacks
        PodShape(1_000, 1_000, 1, 700),
    ]
    found = offline_optimum(cluster, shapes)
    assert (found.upper_milli, found.plan_milli) == (700, 700)
    assert found.kind == "exact"


def test_odd_sizes_use_a_fine_grid() -> None:
    """Sizes with no common step above 1 milli (333 + 667 fill a GPU exactly)."""
    cluster = Cluster([Node("n0", 64_000, 64_000, 2, CATALOG.get("T4"))])
    shapes = [PodShape(1_000, 1_000, 1, m) for m in (333, 667, 333, 667, 101)]
    found = offline_optimum(cluster, shapes)
    assert found.upper_milli == found.plan_milli == 2000


def test_pools_split_models_only_where_a_spec_tells_them_apart() -> None:
    cluster = Cluster([Node("a", 8_000, 8_000, 1, CATALOG.get("T4")),
                       Node("b", 8_000, 8_000, 1, CATALOG.get("G2")),
                       Node("c", 8_000, 8_000, 1, CATALOG.get("P100"))])
    assert len(pools_of(cluster, [PodShape(1, 1, 1, 500)])) == 1
    pools = pools_of(cluster, [PodShape(1, 1, 1, 500, ("T4",))])
    assert sorted(len(p.nodes) for p in pools) == [1, 2]


def test_a_time_limit_still_gives_a_proven_bound() -> None:
    rng = np.random.default_rng(3)
    cluster, shapes = random_instance(rng)
    relaxed = relax(cluster, shapes, time_limit=0.01)
    assert brute_force(cluster, shapes) <= relaxed.upper_milli <= cluster.total_gpu_milli


def test_check_refuses_a_broken_placement() -> None:
    cluster = Cluster([Node("n0", 8_000, 64_000, 1, CATALOG.get("T4"))])
    shapes = [PodShape(1_000, 1_000, 1, 600), PodShape(1_000, 1_000, 1, 600),
              PodShape(1_000, 1_000, 1, 100, ("G2",))]
    found = offline_optimum(cluster, shapes)
    (i, alloc), = found.placements
    with pytest.raises(AllocationError, match="twice"):
        check(cluster, shapes, [(i, alloc), (i, alloc)])
    with pytest.raises(AllocationError, match="lacks"):  # both 600s on the one GPU
        check(cluster, shapes, [(0, alloc), (1, alloc)])
    with pytest.raises(AllocationError, match="may not use"):
        check(cluster, shapes, [(2, alloc)])


def test_must_place_bounds_the_placements_that_keep_those_pods() -> None:
    """One GPU: the best leaves the 810 out for the whole pod; kept, the 810 costs 190."""
    cluster = Cluster([Node("n0", 64_000, 64_000, 1, CATALOG.get("T4"))])
    shapes = [PodShape(1_000, 1_000, 1, 810), PodShape(1_000, 1_000, 1, 1000)]
    assert relax(cluster, shapes).upper_milli == 1000
    kept = relax(cluster, shapes, must_place=lambda s: s.gpu_milli == 810)
    assert kept.upper_milli == 810
    with pytest.raises(InfeasibleError):
        relax(cluster, shapes * 2, must_place=lambda s: s.gpu_milli == 810)
