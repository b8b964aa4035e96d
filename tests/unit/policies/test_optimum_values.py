"""The offline optimum's program and placement checked by value on hand-worked clusters: the
relaxation's every field, the constraints that make its bound tight (per-node whole GPUs,
pools, single-node CPU and memory), HiGHS's answers without a solution or a bound, and the
placement's last pass over the pods the solution left out."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from cotenant.errors import InfeasibleError
from cotenant.model.cluster import Cluster
from cotenant.model.gpu import CATALOG
from cotenant.model.workload import Node, PodShape
from cotenant.policies.placement import optimum
from cotenant.policies.placement.optimum import offline_optimum, relaxation
from cotenant.policies.placement.optimum.plan import realise
from cotenant.policies.placement.optimum.relaxation import Pool, Relaxed, pools_of, relax


def node(name: str, gpus: int, model: str = "T4", cpu: int = 64_000,
         mem: int = 64_000) -> Node:
    return Node(name, cpu, mem, gpus, CATALOG.get(model))


def pod(milli: int, gpus: int = 1, cpu: int = 1_000, mem: int = 1_000,
        spec: tuple[str, ...] = ()) -> PodShape:
    return PodShape(cpu, mem, gpus, milli, spec)


def test_every_field_of_the_relaxation_on_two_gpus() -> None:
    # {950} and {600, 400} fill 1950 of the 2000 milli; no other packing reaches it, so the
    # 700 and one of the 600s are left out
    cluster = Cluster([node("n0", 2)])
    shapes = [pod(600), pod(600), pod(400), pod(950), pod(700)]
    found = relax(cluster, shapes)
    assert (found.upper_milli, found.solution_milli, found.optimal) == (1950, 1950, True)
    assert found.pools == (Pool((0,), (0,)),)
    assert found.placed == {(pod(600), 0): 1, (pod(400), 0): 1, (pod(950), 0): 1}
    assert len(found.patterns) == 1
    assert sorted(found.patterns[0]) == [(600, 400), (950,)]


def test_the_solution_counts_each_pod_it_places() -> None:
    found = relax(Cluster([node("n0", 2)]), [pod(500)] * 5)
    assert (found.solution_milli, found.placed) == (2000, {(pod(500), 0): 4})


def test_no_gpu_pod_gives_the_empty_answer() -> None:
    cluster = Cluster([node("n0", 2)])
    found = relax(cluster, [PodShape(4_000, 1_000, 0, 0)])
    assert found == Relaxed(0, 0, True, (Pool((0,), (0,)),), {}, ((),))


def _fake_milp(**answer: Any) -> Any:
    def solve(*_: object, **__: object) -> SimpleNamespace:
        return SimpleNamespace(**answer)
    return solve


def test_a_solve_stopped_before_any_solution_keeps_its_bound(
        monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = Cluster([node("n0", 2)])
    shapes = [pod(600), pod(400)]  # a 200-milli grid
    monkeypatch.setattr(relaxation, "milp", _fake_milp(
        status=1, x=None, mip_dual_bound=-1130.0, message="Time limit reached"))
    # -1130 rounds to the grid's 1200; the GPUs (2000) do not bind
    assert relax(cluster, shapes) == Relaxed(1200, 0, False, (Pool((0,), (0,)),), {}, ((),))
    monkeypatch.setattr(relaxation, "milp", _fake_milp(
        status=1, x=None, mip_dual_bound=-9000.0, message="Time limit reached"))
    assert relax(cluster, shapes).upper_milli == 2000  # every GPU full is a bound too


@pytest.mark.parametrize("answer", [
    {"status": 1, "x": None, "mip_dual_bound": float("inf"), "message": "Time limit reached"},
    {"status": 1, "x": None, "message": "Time limit reached"},
])
def test_no_bound_from_highs_is_an_error_naming_its_message(
        monkeypatch: pytest.MonkeyPatch, answer: dict[str, Any]) -> None:
    monkeypatch.setattr(relaxation, "milp", _fake_milp(**answer))
    with pytest.raises(RuntimeError, match=r"^HiGHS gave no bound: Time limit reached$"):
        relax(Cluster([node("n0", 1)]), [pod(500)])


def test_an_impossible_must_place_says_so() -> None:
    cluster = Cluster([node("n0", 1)])
    with pytest.raises(InfeasibleError, match=r"^no placement places every pod it must$"):
        relax(cluster, [pod(810), pod(810)], must_place=lambda s: True)


def test_a_pod_asking_exactly_a_nodes_cpu_and_memory_is_placed() -> None:
    cluster = Cluster([node("n0", 1, cpu=8_000, mem=16_000)])
    found = offline_optimum(cluster, [pod(500, cpu=8_000, mem=16_000)])
    assert (found.upper_milli, found.plan_milli) == (500, 500)


@pytest.mark.parametrize(("cpu", "mem"), [(6_000, 1_000), (1_000, 12_000)])
def test_a_pod_no_single_node_can_hold_adds_nothing(cpu: int, mem: int) -> None:
    # two nodes of 4 cores and 8 GB: together they have the pod's CPU (or memory), no node has
    cluster = Cluster([node("n0", 1, cpu=4_000, mem=8_000), node("n1", 1, cpu=4_000, mem=8_000)])
    assert relax(cluster, [pod(500, cpu=cpu, mem=mem)]).upper_milli == 0


def test_a_pool_counts_only_its_own_nodes_capacity() -> None:
    # the T4 node's two cores cannot take a 6-core pod, though the G2 node could; the T4-only
    # pod makes the models two pools
    cluster = Cluster([node("t0", 1, cpu=4_000), node("t1", 1, cpu=4_000),
                       node("g0", 1, "G2", cpu=16_000)])
    shapes = [pod(1000, cpu=6_000), pod(1000, cpu=6_000), pod(500, spec=("T4",))]
    found = offline_optimum(cluster, shapes)
    assert (found.upper_milli, found.plan_milli) == (1500, 1500)


@pytest.mark.parametrize("model", ["T4", "G2"])
def test_a_pool_with_no_pod_and_a_pool_short_of_gpus(model: str) -> None:
    # two pods for one model, one GPU of it: one of them; the other model's pool has nothing
    # to place (its rows are empty, first or last)
    cluster = Cluster([node("t0", 1), node("g0", 1, "G2")])
    shapes = [pod(1000, spec=(model,)), pod(1000, spec=(model,))]
    found = offline_optimum(cluster, shapes)
    assert (found.upper_milli, found.plan_milli) == (1000, 1000)


def test_nodes_without_gpus_are_in_no_pool() -> None:
    cluster = Cluster([node("a", 1), Node("cpu", 64_000, 64_000, 0, None), node("b", 2),
                       node("none-left", 0)])
    assert pools_of(cluster, [pod(500)]) == (Pool((0,), (0, 2)),)


def test_pods_of_k_gpus_fit_only_whole_multiples_of_k_on_a_node() -> None:
    # two nodes of 3 GPUs hold one 2-GPU pod each, not three between them
    cluster = Cluster([node("n0", 3), node("n1", 3)])
    found = offline_optimum(cluster, [pod(1000, 2)] * 3)
    assert (found.upper_milli, found.plan_milli) == (4000, 4000)


def test_pods_of_k_or_more_gpus_need_nodes_of_k_or_more() -> None:
    # a 3-GPU and a 2-GPU pod both need the one 3-GPU node; the 1-GPU nodes take neither
    cluster = Cluster([node("big", 3), node("s0", 1), node("s1", 1)])
    found = offline_optimum(cluster, [pod(1000, 3), pod(1000, 2)])
    assert (found.upper_milli, found.plan_milli) == (3000, 3000)


def test_the_last_pass_places_the_left_out_pods_largest_first_on_the_tightest_gpu() -> None:
    # nothing chosen by the solution: every pod goes through the last pass, by GPU demand
    cluster = Cluster([node("n0", 2), node("n1", 2)])
    shapes = [pod(300), pod(800), pod(1000, 2), pod(1000), pod(200), pod(600),
              PodShape(2_000, 1_000, 0, 0)]
    nothing = Relaxed(0, 0, False, pools_of(cluster, shapes), {}, ((),))
    placed = [(i, a.node, a.gpus) for i, a in realise(cluster, shapes, nothing)]
    # the 2-GPU pod on n0 (both nodes equal: the first); the whole GPU on n1, GPU 0; the 800
    # on n1's last free GPU (exactly 1000 free); the 600 and the 300 fit nowhere (200 left);
    # the 200 fills n1's GPU 1 exactly
    assert placed == [(2, 0, (0, 1)), (3, 1, (0,)), (1, 1, (1,)), (4, 1, (1,))]


def test_a_chosen_pod_no_gpu_pattern_carries_still_gets_a_gpu_of_its_own() -> None:
    # a solution that chose the 500 but left it off every GPU's pattern: it is placed alone,
    # on a whole free GPU (the first)
    cluster = Cluster([node("n0", 2)])
    shapes = [pod(500)]
    odd = Relaxed(500, 500, True, pools_of(cluster, shapes), {(pod(500), 0): 1}, ((),))
    assert [(i, a.node, a.gpus) for i, a in realise(cluster, shapes, odd)] == [(0, 0, (0,))]


def test_the_optimum_passes_its_time_limit_and_times_itself(
        monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[float] = []
    real = relax

    def spy(cluster: Cluster, shapes: Any, time_limit: float = 10.0) -> Relaxed:
        asked.append(time_limit)
        return real(cluster, shapes, time_limit)

    monkeypatch.setattr(optimum, "relax", spy)
    found = offline_optimum(Cluster([node("n0", 1)]), [pod(500)], time_limit=3.5)
    assert asked == [3.5]
    assert 0.0 <= found.seconds < 60.0


def test_a_placement_above_the_bound_is_a_bug_reported_as_such(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def too_low(cluster: Cluster, shapes: Any, time_limit: float = 10.0) -> Relaxed:
        return Relaxed(0, 0, True, pools_of(cluster, shapes), {}, ((),))

    monkeypatch.setattr(optimum, "relax", too_low)
    with pytest.raises(RuntimeError, match=r"^placement of 500 milli beats the bound 0$"):
        offline_optimum(Cluster([node("n0", 1)]), [pod(500)])
