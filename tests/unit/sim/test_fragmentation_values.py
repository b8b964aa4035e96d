"""The fragmentation experiment's figures by value, worked out by hand on runs of a few pods.

The curve's discretisation (mean over the arrivals that round to a percent, else over its
neighbours), the arrivals' window, and what one run records per pod (arrived and allocated
milli, failures, fragmentation samples) are checked against values derived here from the
protocol's description, not from the code's output.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from cotenant.errors import InputError
from cotenant.model.cluster import Allocation, Cluster
from cotenant.model.gpu import CATALOG
from cotenant.model.workload import Node, Pod, PodShape
from cotenant.sim import fragmentation
from cotenant.sim.fragmentation import (
    FragmentationConfig,
    FragmentationRun,
    arrival_order,
    check_gpu_demand,
    point_window,
    run_fragmentation,
)
from cotenant.sim.placer import Placer

POLICIES = ("random", "best-fit", "dot-product", "gpu-packing", "gpu-clustering", "fgd",
            "cotenant-pack")

# capacity 10,000 milli (1% = 100 milli): arrived demand rounds to 0, 1, 1, 3, 6 and 10%
ARRIVED = [40, 100, 140, 320, 600, 1000]
USED = [40, 100, 140, 300, 500, 700]  # allocated: 0.4, 1.0, 1.4, 3.0, 5.0, 7.0 %


def _run(arrived: list[int], used: list[int], failed: list[bool]) -> FragmentationRun:
    return FragmentationRun("best-fit", 0, 10_000, np.array(arrived, np.int64),
                            np.array(used, np.int64), np.array(failed, np.bool_),
                            np.zeros(0, np.int64), np.zeros(0))


def _node(gpus: int, model: str = "T4") -> Cluster:
    return Cluster([Node("n0", 64_000, 262_144, gpus, CATALOG.get(model))])


def _pods(n: int, shape: PodShape, prefix: str = "p") -> list[Pod]:
    return [Pod(f"{prefix}{i}", shape) for i in range(n)]


def test_the_curve_averages_each_percent_else_its_neighbours() -> None:
    run = _run(ARRIVED, USED, [False] * 6)
    xs, ys = run.curve()
    assert xs.tolist() == list(range(11))
    # 0: the 0.4%; 1: mean of 1.0 and 1.4; 2: none rounds to 2, so 1-3: (1.0+1.4+3.0)/3;
    # 4: only 3 is near; 5: only 6; 8: nothing within 1 (7-9); 9: only 10
    want = [0.4, 1.2, 1.8, 3.0, 3.0, 5.0, 5.0, 5.0, math.nan, 7.0, 7.0]
    assert ys.tolist() == pytest.approx(want, nan_ok=True)


def test_a_curve_cut_short_still_sees_the_arrivals_just_past_its_end() -> None:
    xs, ys = _run(ARRIVED, USED, [False] * 6).curve(5)
    assert xs.tolist() == [0, 1, 2, 3, 4, 5]
    assert ys[5] == pytest.approx(5.0)  # the arrival at 6% is one point away
    _, longer = _run(ARRIVED, USED, [False] * 6).curve(12)
    assert longer[11] == pytest.approx(7.0)
    assert math.isnan(longer[12])


def test_the_first_percents_neighbours_include_zero() -> None:
    # demand 0.3% then 2.2%: nothing rounds to 1, whose neighbours are 0 and 2
    _, ys = _run([30, 220], [30, 200], [False, False]).curve()
    assert ys.tolist() == pytest.approx([0.3, 1.15, 2.0])


def test_alloc_at_reads_the_curve_and_is_nan_where_no_arrival_came_near() -> None:
    run = _run(ARRIVED, USED, [False] * 6)
    assert run.alloc_at(0) == pytest.approx(0.4)
    assert run.alloc_at(2) == pytest.approx(1.8)
    assert run.alloc_at(10) == pytest.approx(7.0)
    assert math.isnan(run.alloc_at(8))
    assert math.isnan(run.alloc_at(15))


@pytest.mark.parametrize("percent", [-1, -5])
def test_alloc_at_a_negative_percent_is_refused(percent: int) -> None:
    with pytest.raises(InputError) as info:
        _run(ARRIVED, USED, [False] * 6).alloc_at(percent)
    assert (info.value.where, info.value.rule) == (
        "alloc_at percent", f"{percent} must be >= 0 (a whole percent of arrived GPU demand)")


@pytest.mark.parametrize(("config", "cache"), [
    (FragmentationConfig(), True), (FragmentationConfig(cache=False), False)])
def test_the_score_cache_setting_reaches_the_placer(
        monkeypatch: pytest.MonkeyPatch, config: FragmentationConfig, cache: bool) -> None:
    made: list[bool] = []

    class Spy(Placer):
        def place(self, shape: PodShape) -> Allocation | None:
            made.append(self.use_cache)
            return super().place(shape)

    monkeypatch.setattr(fragmentation, "Placer", Spy)
    run = run_fragmentation(_node(2), _pods(4, PodShape(1000, 1000, 1, 600)), "fgd", 0, config)
    assert made == [cache] * 4
    assert run.used_milli.tolist() == [600, 1200, 1200, 1200]


def test_the_end_of_a_run_and_its_failures() -> None:
    run = _run(ARRIVED, USED, [False, True, False, True, True, False])
    assert run.arrivals == 6
    assert run.arrived_percent == 10
    assert run.final_alloc_percent == pytest.approx(7.0)
    assert run.failed_pods() == 3
    empty = _run([], [], [])
    assert (empty.arrivals, empty.arrived_percent, empty.final_alloc_percent) == (0, 0, 0.0)
    assert empty.failed_pods() == 0


def test_the_window_is_the_arrivals_rounding_to_the_percent_else_within_one() -> None:
    arrived = np.array(ARRIVED, np.int64)
    assert point_window(arrived, 10_000, 1).tolist() == [1, 2]
    assert point_window(arrived, 10_000, 2).tolist() == [1, 2, 3]  # 1% and 3%, not 0%
    assert point_window(arrived, 10_000, 4).tolist() == [3]  # 3% yes, 6% no
    assert point_window(arrived, 10_000, 7).tolist() == [4]
    assert point_window(arrived, 10_000, 0).tolist() == [0]
    assert point_window(arrived, 10_000, 8).tolist() == []


def test_only_a_pod_list_without_gpu_demand_is_refused() -> None:
    cpu_only = _pods(3, PodShape(1000, 1000, 0, 0))
    with pytest.raises(InputError) as err:
        check_gpu_demand(cpu_only)
    assert err.value.where == "pods"
    assert err.value.rule == ("no pod asks for a GPU; the experiment fills the cluster with "
                              "GPU demand")
    assert err.value.hint == "give a pod list with GPU pods"
    check_gpu_demand([*cpu_only, Pod("g", PodShape(1000, 1000, 1, 10))])  # one is enough
    with pytest.raises(InputError):
        arrival_order(cpu_only, 2000, 1.3, np.random.default_rng(0))


def test_arrivals_stop_exactly_at_the_target_and_never_pass_it() -> None:
    shape = PodShape(1000, 1000, 1, 500)
    # 2 pods (1000) inflated to a target of 3000: 4 more, the last landing on it exactly
    assert len(arrival_order(_pods(2, shape), 2000, 1.5, np.random.default_rng(0))) == 6
    # exactly at the target already: nothing added, nothing dropped
    assert len(arrival_order(_pods(6, shape), 2000, 1.5, np.random.default_rng(0))) == 6
    # one over: one dropped
    assert len(arrival_order(_pods(7, shape), 2000, 1.5, np.random.default_rng(0))) == 6
    # every pod larger than the target: all dropped
    big = _pods(2, PodShape(1000, 1000, 2, 1000))
    assert arrival_order(big, 2000, 0.5, np.random.default_rng(0)) == []


def test_no_cpu_only_pod_is_added_to_a_trace_already_at_its_target() -> None:
    pods = [*_pods(2, PodShape(1000, 1000, 0, 0), "c"), *_pods(2, PodShape(1000, 1000, 1, 1000))]
    for seed in range(10):  # 2000 milli arrived, exactly the target: nothing to sample
        assert len(arrival_order(pods, 2000, 1.0, np.random.default_rng(seed))) == 4


def test_arrivals_are_the_pods_by_name_shuffled_then_samples_of_them() -> None:
    pods = [Pod(f"p{i}", PodShape(1000 + i, 1000, 1, 100 * (i + 1))) for i in range(5)]
    order = arrival_order(pods, 4000, 1.0, np.random.default_rng(3))
    reversed_order = arrival_order(pods[::-1], 4000, 1.0, np.random.default_rng(3))
    assert order == reversed_order  # the input's order plays no part: sorted by name first
    assert sorted(order[:5], key=lambda s: s.cpu_milli) == [p.shape for p in pods]
    assert set(order[5:]) <= {p.shape for p in pods}
    total = sum(s.gpu_milli_total for s in order)
    assert 4000 - 500 < total <= 4000  # within the largest pod of the target
    others = [arrival_order(pods, 4000, 1.0, np.random.default_rng(s)) for s in range(4, 9)]
    assert any(o[:5] != order[:5] for o in others)  # the seed shuffles


@pytest.mark.parametrize("policy", POLICIES)
def test_each_pod_records_its_demand_allocation_failure_and_fragmentation(policy: str) -> None:
    # two T4s; 600-milli pods: 4 arrive (a fifth would pass 130%), two fit, one per GPU
    run = run_fragmentation(_node(2), _pods(4, PodShape(1000, 1000, 1, 600)), policy, 0)
    assert run.policy == policy
    assert run.seed == 0
    assert run.capacity_milli == 2000
    assert run.arrived_milli.tolist() == [600, 1200, 1800, 2400]
    assert run.used_milli.tolist() == [600, 1200, 1200, 1200]
    assert run.failed.tolist() == [False, False, True, True]
    assert run.frag_percent.tolist() == [30, 60, 90, 120]
    # 400 milli left on the first GPU, too little for a 600 pod, then 400 on each
    assert run.frag_milli.tolist() == [400.0, 800.0, 800.0, 800.0]
    _assert_declared_dtypes(run)


def _assert_declared_dtypes(run: FragmentationRun) -> None:
    """The record's arrays hold what its fields declare: whole milli, flags, whole percents."""
    assert run.arrived_milli.dtype == np.int64
    assert run.used_milli.dtype == np.int64
    assert run.failed.dtype == np.bool_
    assert run.frag_percent.dtype == np.int64
    assert run.frag_milli.dtype == np.float64


def test_a_run_that_draws_no_pod_records_nothing() -> None:
    # every pod is larger than the target demand (half of one GPU): all dropped
    run = run_fragmentation(_node(1), _pods(2, PodShape(1000, 1000, 1, 800)), "fgd", 0,
                            FragmentationConfig(demand_multiple=0.5))
    assert run.arrivals == 0
    assert run.frag_percent.size == 0
    _assert_declared_dtypes(run)


def test_a_multi_gpu_pod_allocates_all_its_gpus() -> None:
    run = run_fragmentation(_node(4, "V100M32"), _pods(2, PodShape(1000, 1000, 2, 1000)),
                            "best-fit", 0)
    assert run.arrived_milli.tolist() == [2000, 4000]
    assert run.used_milli.tolist() == [2000, 4000]
    assert run.frag_percent.tolist() == [50, 100]


@pytest.mark.parametrize("policy", ["best-fit", "fgd"])
def test_a_sample_at_every_whole_percent_when_each_pod_adds_one(policy: str) -> None:
    # 40 milli is 1% of four GPUs: 100 pods inflated to exactly 130, 25 fit on each GPU
    run = run_fragmentation(_node(4, "V100M32"), _pods(100, PodShape(100, 100, 1, 40)),
                            policy, 2)
    assert run.arrivals == 130
    assert run.frag_percent.tolist() == list(range(1, 131))
    assert run.used_milli.tolist() == [40 * min(i, 100) for i in range(1, 131)]
    assert run.failed.tolist() == [False] * 100 + [True] * 30
    assert not run.frag_milli.any()  # every GPU's free milli is a multiple of 40


def test_with_steps_under_one_percent_every_whole_percent_is_sampled_once() -> None:
    # 15 milli is 0.75% of two GPUs: 173 pods reach 129.75%; 66 fit on each GPU
    run = run_fragmentation(_node(2), _pods(4, PodShape(100, 100, 1, 15)), "best-fit", 1)
    assert run.arrivals == 173
    assert run.frag_percent.tolist() == list(range(130))
    assert run.used_milli.tolist() == [15 * min(i, 132) for i in range(1, 174)]


def _mixed() -> tuple[list[Pod], int]:
    """Two CPU-only and two 1-GPU pods, and a seed whose first arrival is CPU-only."""
    pods = [*_pods(2, PodShape(1000, 1000, 0, 0), "c"), *_pods(2, PodShape(1000, 1000, 1, 1000))]
    for seed in range(50):
        if arrival_order(pods, 2000, 1.3, np.random.default_rng(seed))[0].num_gpu == 0:
            return pods, seed
    raise AssertionError("no seed starts with a CPU-only pod")


def test_cpu_only_pods_add_no_demand_and_the_first_is_sampled_at_zero() -> None:
    pods, seed = _mixed()
    run = run_fragmentation(_node(2), pods, "fgd", seed)
    order = arrival_order(pods, 2000, 1.3, np.random.default_rng(seed))
    gpu_pods = np.cumsum([s.num_gpu for s in order])
    assert gpu_pods[-1] == 2  # a third GPU pod would pass 130% of two GPUs
    assert run.arrived_milli.tolist() == (1000 * gpu_pods).tolist()
    assert run.used_milli.tolist() == (1000 * gpu_pods).tolist()
    assert not run.failed.any()
    # typical pods: the CPU-only and the 1-GPU shape, half each; every idle milli is a
    # fragment for the CPU-only shape, none while a whole GPU is free for the other
    assert run.frag_percent.tolist() == [0, 50, 100]
    assert run.frag_milli.tolist() == [1000.0, 500.0, 0.0]


def test_the_typical_pods_cover_the_configured_share_of_the_trace() -> None:
    pods, seed = _mixed()
    # a coverage of 0.4 keeps only the 1-GPU shape (ties go to the larger GPU milli), for
    # which no free milli is a fragment while a whole GPU is free
    run = run_fragmentation(_node(2), pods, "fgd", seed, FragmentationConfig(coverage=0.4))
    assert run.frag_milli.tolist() == [0.0, 0.0, 0.0]


def test_the_demand_multiple_sets_where_the_arrivals_stop() -> None:
    shape = PodShape(1000, 1000, 1, 600)
    run = run_fragmentation(_node(2), _pods(4, shape), "fgd", 0,
                            FragmentationConfig(demand_multiple=0.6))
    assert run.arrived_milli.tolist() == [600, 1200]
