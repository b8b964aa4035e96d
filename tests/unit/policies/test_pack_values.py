"""cotenant-pack's terms by value, worked out by hand from the rules in its module docstring:
GPU-model pressure, stranded GPUs and their growth, the best-fit tie break, and the packing
prices it reads from the workload."""

from __future__ import annotations

import numpy as np
import pytest

from cotenant.model.cluster import Cluster, ClusterState
from cotenant.model.gpu import CATALOG
from cotenant.model.workload import Node, PodShape
from cotenant.policies.placement.fgd import FgdPolicy
from cotenant.policies.placement.frag import TypicalPods
from cotenant.policies.placement.pack import CotenantPackPolicy, PackWeights
from cotenant.policies.placement.prices import PatternPrices

RNG = np.random.default_rng(0)
# GPU pods asking 2 CPU milli and 4 MiB per GPU milli: rho_c = 2, rho_m = 4
PLAIN = [PodShape(2_000, 4_000, 1, 1000)] * 10


def cluster_of(*nodes: tuple[int, int, int, str | None]) -> Cluster:
    return Cluster([Node(f"n{i}", cpu, mem, gpus, CATALOG.get(model) if model else None)
                    for i, (cpu, mem, gpus, model) in enumerate(nodes)])


def test_pressure_spreads_each_restricted_specs_gpus_over_its_models() -> None:
    """A spec's expected GPUs (its share of the workload's GPU milli times the cluster's GPUs)
    spread over the models it allows in proportion to their GPUs; a node's pressure is its
    model's expected GPUs per GPU, so each spec adds share * total GPUs / GPUs it allows."""
    t4_only = [PodShape(1_000, 1_000, 1, 1000, ("T4",))] * 30
    either = [PodShape(1_000, 1_000, 1, 1000, ("T4", "G2", "P100"))] * 10
    policy = CotenantPackPolicy(PLAIN + t4_only + either)
    cluster = cluster_of((64_000, 256_000, 2, "T4"), (64_000, 256_000, 4, "G2"),
                         (64_000, 256_000, 1, "P100"), (64_000, 256_000, 0, None))
    total_milli = 50_000
    s_t4, s_either = 30_000 / total_milli, 10_000 / total_milli
    gpus = 7
    t4 = s_t4 * gpus / 2 + s_either * gpus / 7
    shared = s_either * gpus / 7
    assert policy.pressure(cluster).tolist() == pytest.approx([t4, shared, shared, 0.0],
                                                               abs=1e-12)


def test_pressure_is_worked_out_for_each_cluster_it_is_asked_about() -> None:
    restricted = [PodShape(1_000, 1_000, 1, 1000, ("T4",))] * 10
    policy = CotenantPackPolicy(PLAIN + restricted)
    small = cluster_of((64_000, 256_000, 2, "T4"), (64_000, 256_000, 2, "G2"))
    large = cluster_of((64_000, 256_000, 2, "T4"), (64_000, 256_000, 6, "G2"))
    assert policy.pressure(small).tolist() == pytest.approx([0.5 * 4 / 2, 0.0])
    assert policy.pressure(large).tolist() == pytest.approx([0.5 * 8 / 2, 0.0])


@pytest.mark.parametrize(("idle", "cpu", "mem", "gpus"), [
    (1000, 1_000, 4_000, 0.5),  # CPU serves 500 of the 1000 idle milli
    (1000, 2_000, 2_000, 0.5),  # memory serves 500
    (2000, 1_000, 2_000, 1.5),  # both short: the worse (CPU, 500 served) counts
    (1000, 10_000, 40_000, 0.0),  # plenty: nothing stranded, never negative
])
def test_stranded_gpus_are_the_idle_milli_the_free_cpu_or_memory_cannot_serve(
        idle: int, cpu: int, mem: int, gpus: float) -> None:
    got = CotenantPackPolicy(PLAIN).stranded(np.array([idle]), np.array([cpu]), np.array([mem]))
    assert got[0] == pytest.approx(gpus, abs=1e-12)


@pytest.mark.parametrize(("cpu", "mem", "growth"), [
    (5_000, 100_000, 0.5),  # CPU-bound: 2500 -> 500 milli served of 1000 left
    (100_000, 10_000, 0.5),  # memory-bound: 2500 -> 500 milli served
    (100_000, 400_000, 0.0),  # neither before nor after: no growth, exactly
])
def test_stranding_is_the_growth_in_stranded_gpus_once_the_pod_is_placed(
        cpu: int, mem: int, growth: float) -> None:
    state = ClusterState(cluster_of((cpu, mem, 2, "T4")))
    pod = PodShape(4_000, 8_000, 1, 1000)  # 2000 CPU-milli and 2000 MiB-milli of service
    got = CotenantPackPolicy(PLAIN).stranding(state, pod, np.array([0]))
    assert got[0] == pytest.approx(growth, abs=1e-12)


def test_a_whole_gpu_pod_gets_no_gpu_from_the_policy() -> None:
    """Scores name a GPU only for fractional pods (-1 else: the placer takes whole GPUs)."""
    state = ClusterState(cluster_of((64_000, 256_000, 2, "T4"), (64_000, 256_000, 2, "T4")))
    scores = CotenantPackPolicy(PLAIN).score(state, PodShape(1_000, 1_000, 1, 1000),
                                             np.array([0, 1]), RNG)
    assert scores.gpu.tolist() == [-1, -1]


def test_with_every_term_off_a_fractional_pod_goes_to_the_tightest_gpu() -> None:
    """Ties go to the GPU left with the least free milli: with all weights 0 every GPU ties,
    and a GPU's tie-break is 1000 minus the milli it has left after the pod."""
    state = ClusterState(cluster_of((64_000, 256_000, 3, "T4")))
    state.allocate(PodShape(1_000, 1_000, 1, 400), 0, (1,))
    state.allocate(PodShape(1_000, 1_000, 1, 600), 0, (2,))
    policy = CotenantPackPolicy(PLAIN, weights=PackWeights(0.0, 0.0, 0.0, 0.0))
    scores = policy.score(state, PodShape(1_000, 1_000, 1, 300), np.array([0]), RNG)
    assert scores.gpu.tolist() == [2]
    assert scores.score.tolist() == [1000 - (400 - 300)]


def test_the_packing_prices_are_those_of_the_fractional_pod_sizes_frequencies() -> None:
    workload = ([PodShape(1_000, 1_000, 1, 470)] * 30 + [PodShape(1_000, 1_000, 1, 320)] * 15
                + [PodShape(1_000, 1_000, 1, 650)] * 15 + [PodShape(1_000, 1_000, 1, 1000)] * 40)
    policy = CotenantPackPolicy(workload)
    want = PatternPrices.from_frequencies({470: 0.3, 320: 0.15, 650: 0.15})
    assert policy.prices.price == pytest.approx(want.price)
    assert policy.prices.gap_value.tolist() == pytest.approx(want.gap_value.tolist())


def test_the_typical_pods_keep_cpu_gpu_and_model_and_ignore_memory() -> None:
    """FGD's workload model groups pods by what decides where they fit a GPU (CPU, GPUs, GPU
    milli, the models they allow); memory plays no part, so it is 0 in every typical shape."""
    pods = ([PodShape(1_000, 5_000, 1, 500, ("T4",))] * 3
            + [PodShape(1_000, 9_000, 1, 500, ("T4",))] * 3 + [PodShape(2_000, 5_000, 1, 500)] * 2)
    typical = TypicalPods.from_shapes(pods, 1.0)
    assert typical.shapes == (PodShape(1_000, 0, 1, 500, ("T4",)), PodShape(2_000, 0, 1, 500))
    assert typical.freq == pytest.approx((0.75, 0.25))
    assert TypicalPods.from_shapes([]) == TypicalPods((), (), 0.0)


def test_the_coverage_asked_for_is_the_one_used() -> None:
    """cotenant-pack's gain term is FGD's with the same workload model: its coverage, and by
    default FGD's."""
    workload = [PodShape(1_000, 1_000, 1, 500)] * 6 + [PodShape(2_000, 1_000, 1, 300)] * 4
    half = TypicalPods.from_shapes(workload, 0.5)
    assert FgdPolicy(workload, 0.5).typical == half
    assert CotenantPackPolicy(workload, 0.5).fgd.typical == half
    assert CotenantPackPolicy(workload).fgd.typical == FgdPolicy(workload).typical
    assert len(FgdPolicy(workload).typical.shapes) == 2


def test_one_fgd_policy_scores_each_cluster_with_that_clusters_gpu_models() -> None:
    """The typical pods are laid out per cluster (a T4-only pod has nowhere to go on a G2
    cluster): a policy that scored one cluster scores another as a fresh policy would."""
    workload = [PodShape(1_000, 1_000, 1, 500, ("T4",))] * 8 + [PodShape(1_000, 1_000, 1, 300)] * 2
    t4 = ClusterState(cluster_of((64_000, 256_000, 2, "T4")))
    g2 = ClusterState(cluster_of((64_000, 256_000, 2, "G2")))
    pod = PodShape(1_000, 1_000, 1, 300)
    used = FgdPolicy(workload)
    used.score(t4, pod, np.array([0]), RNG)
    again = used.gain(g2, pod, np.array([0]))
    fresh = FgdPolicy(workload).gain(g2, pod, np.array([0]))
    assert again.tolist() == fresh.tolist()
    assert fresh.tolist() != FgdPolicy(workload).gain(t4, pod, np.array([0])).tolist()
