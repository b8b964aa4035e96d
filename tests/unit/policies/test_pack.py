"""cotenant-pack: each of its terms on a hand-built state where the right choice is known, and
its decisions independent of later arrivals."""

from __future__ import annotations

import numpy as np

from cotenant.model.cluster import Cluster, ClusterState
from cotenant.model.gpu import CATALOG
from cotenant.model.workload import Node, PodShape
from cotenant.policies.placement import PLACEMENT, select_node
from cotenant.policies.placement.pack import CotenantPackPolicy
from cotenant.sim.placer import Placer

RNG = np.random.default_rng(0)
# the fractional sizes of a workload where 470s pair with 470s and 320s with 650s
WORKLOAD = ([PodShape(4_000, 8_000, 1, 470)] * 30 + [PodShape(4_000, 8_000, 1, 320)] * 15
            + [PodShape(4_000, 8_000, 1, 650)] * 15 + [PodShape(8_000, 16_000, 1, 1000)] * 40)


def choose(policy: CotenantPackPolicy, state: ClusterState, shape: PodShape) -> tuple[int, int]:
    nodes = np.flatnonzero(state.feasible(shape))
    scored = policy.score(state, shape, nodes, RNG)
    pick = select_node(np.arange(len(nodes)), scored.score, np.arange(len(nodes)))
    return int(nodes[pick]), int(scored.gpu[pick])


def cluster_of(*nodes: tuple[int, int, int, str]) -> Cluster:
    return Cluster([Node(f"n{i}", cpu, mem, gpus, CATALOG.get(model))
                    for i, (cpu, mem, gpus, model) in enumerate(nodes)])


def test_registered_under_its_name_and_aliases() -> None:
    assert PLACEMENT.canonical("cotenant") == "cotenant-pack"
    assert isinstance(PLACEMENT.create("cotenant-pack", workload=WORKLOAD), CotenantPackPolicy)


def test_a_pod_completes_the_packing_that_fits_it() -> None:
    """A 320 goes beside a 650 (gap 350), and a 470 beside a 470 (gap 530)."""
    state = ClusterState(cluster_of((64_000, 256_000, 2, "T4"), (64_000, 256_000, 2, "T4")))
    state.allocate(PodShape(1_000, 1_000, 1, 470), 0, (0,))
    state.allocate(PodShape(1_000, 1_000, 1, 650), 1, (0,))
    policy = CotenantPackPolicy(WORKLOAD)
    assert choose(policy, state, PodShape(1_000, 1_000, 1, 320)) == (1, 0)
    assert choose(policy, state, PodShape(1_000, 1_000, 1, 470)) == (0, 0)


def test_a_pod_opens_a_gpu_rather_than_spoil_a_packing() -> None:
    """With only a 470 open, a 320 beside it would leave 210 milli no common pod fits; on an
    empty GPU it waits for a 650. Best fit takes the tighter GPU."""
    state = ClusterState(cluster_of((64_000, 256_000, 2, "T4")))
    state.allocate(PodShape(1_000, 1_000, 1, 470), 0, (0,))
    pod = PodShape(1_000, 1_000, 1, 320)
    assert choose(CotenantPackPolicy(WORKLOAD), state, pod) == (0, 1)
    best_fit = PLACEMENT.create("best-fit").score(state, pod, np.array([0]), RNG)
    assert best_fit.gpu[0] == 0


def test_a_pod_keeps_away_from_a_node_it_would_leave_without_cpu() -> None:
    """Two nodes with one free GPU each; a CPU-heavy pod fits both, but on the first it would
    use up the CPU its other free GPU needs."""
    state = ClusterState(cluster_of((24_000, 256_000, 2, "T4"), (64_000, 256_000, 2, "T4")))
    policy = CotenantPackPolicy(WORKLOAD)
    heavy = PodShape(20_000, 8_000, 1, 1000)
    assert choose(policy, state, heavy)[0] == 1
    assert policy.stranded(np.array([1000]), np.array([4_000]), np.array([256_000]))[0] > 0.5


def test_an_unrestricted_pod_leaves_the_model_restricted_pods_need() -> None:
    restricted = [PodShape(4_000, 8_000, 1, 1000, ("T4",))] * 50
    state = ClusterState(cluster_of((64_000, 256_000, 2, "T4"), (64_000, 256_000, 2, "G2")))
    policy = CotenantPackPolicy(WORKLOAD + restricted)
    assert policy.pressure(state.cluster).tolist()[0] > policy.pressure(state.cluster)[1]
    assert choose(policy, state, PodShape(4_000, 8_000, 1, 1000))[0] == 1


def test_decisions_do_not_depend_on_later_arrivals() -> None:
    """Online: placing a prefix of the arrivals gives the same allocations whatever follows."""
    rng = np.random.default_rng(5)
    cluster = cluster_of(*[(96_000, 393_216, 8, "G2")] * 4, *[(104_000, 524_288, 2, "T4")] * 4)
    sizes = rng.choice([1000, 810, 650, 470, 320, 230, 160], 120)
    shapes = [PodShape(int(c), 8_000, 1, int(m)) for c, m in
              zip(rng.choice([2_000, 6_000, 12_000], 120), sizes, strict=True)]

    def run(arrivals: list[PodShape]) -> list[tuple[int, tuple[int, ...]] | None]:
        state = ClusterState(cluster)
        placer = Placer(PLACEMENT.create("cotenant-pack", workload=WORKLOAD), state,
                        np.arange(cluster.size, dtype=np.int64), np.random.default_rng(1))
        out = []
        for shape in arrivals:
            alloc = placer.place(shape)
            out.append(None if alloc is None else (alloc.node, alloc.gpus))
        return out

    full = run(shapes)
    assert run(shapes[:60]) == full[:60]
    assert run(shapes[:60] + shapes[::-1][:60]) [:60] == full[:60]


def test_no_gpu_pods_in_the_workload_leaves_only_fgds_term() -> None:
    policy = CotenantPackPolicy([PodShape(1_000, 1_000, 0, 0)])
    assert policy.stranded(np.array([1000]), np.array([0]), np.array([0]))[0] == 0.0
    state = ClusterState(cluster_of((8_000, 8_000, 1, "T4")))
    assert choose(policy, state, PodShape(1_000, 1_000, 1, 500)) == (0, 0)
