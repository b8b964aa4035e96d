"""The planner's program and lower bounds by value: the fewest slices against a brute-force
knapsack, the program written out by hand for two profiles, and a problem where the LP bound
is above the slice bound (one A100 holds at most one 4g instance, so three 4g instances need
three GPUs although their 12 compute slices fit in two). The LP is tried only with the time
it may take (a share of what the deadline has left, less a margin), and rates below 1 req/s
count."""

from __future__ import annotations

import numpy as np
import pytest

from cotenant.model.deployment import GpuPlan
from cotenant.policies.partition import PartitionProblem, verify
from cotenant.policies.partition.bounds import (
    Relaxation,
    lower_bound,
    lp_bound,
    relaxation,
    solver_time,
)
from cotenant.policies.partition.formulation import formulate, min_slices, slice_bound
from cotenant.policies.partition.problem import TOLERANCE, Plan
from tests.unit.policies.a100 import GEOMETRY, PROFILES, only_4g, still


def test_three_4g_instances_need_three_gpus_though_their_slices_fit_in_two() -> None:
    problem = only_4g(300.0)
    assert slice_bound(problem) == 2  # ceil(12 / 7)
    assert lp_bound(problem) == 3
    assert lower_bound(problem) == 2  # no deadline, no relaxation: the slice bound
    relaxed = relaxation(problem)
    assert relaxed is not None
    assert abs(relaxed.value - 3.0) < 1e-9
    # the dual price of an instance, in GPUs: each 4g takes a GPU of its own, nothing else
    # is asked for
    np.testing.assert_allclose(relaxed.price, [0.0, 0.0, 0.0, 1.0, 0.0], atol=1e-9)
    assert lower_bound(problem, relaxed=relaxed) == 3  # exactly 3: not rounded up past it


def test_the_lp_is_tried_only_with_its_share_of_the_time_left() -> None:
    problem = only_4g(300.0)
    # the margin is 0.03 s + 20 us per service; HiGHS is not handed under 0.02 s
    assert lower_bound(problem, still(1.0)) == 3
    assert lower_bound(problem, still(0.06)) == 2  # half of 0.06 - 0.03002: too short
    assert lower_bound(problem, still(0.06), share=1.0) == 3  # all of it: 0.02998 s


def test_the_solver_time_is_a_share_of_what_is_left_less_a_margin_per_service() -> None:
    one, many = only_4g(300.0), PartitionProblem(
        GEOMETRY, tuple(f"s{i}" for i in range(500)), np.full(500, 10.0), PROFILES,
        np.tile([10.0, 20.0, 30.0, 40.0, 70.0], (500, 1)))
    assert solver_time(one, still(1.0)) == pytest.approx(1.0 - 0.03 - 2e-5)
    assert solver_time(one, still(1.0), 0.25) == pytest.approx(0.25 * (1.0 - 0.03 - 2e-5))
    assert solver_time(many, still(2.0)) == pytest.approx(2.0 - 0.03 - 2e-5 * 500)
    assert solver_time(many, still(0.035)) == 0.0  # less left than the margin


def test_an_lp_value_is_rounded_up_past_its_solver_noise_only() -> None:
    problem = only_4g(300.0)
    none = np.zeros(0)
    for value, bound in ((3.0000004, 3), (3.000002, 4), (2.9999996, 3)):
        relaxed = Relaxation(value, none, none)
        assert lower_bound(problem, relaxed=relaxed) == bound


def test_rates_below_one_request_a_second_still_count() -> None:
    problem = only_4g(1.5, rate=0.5)  # three 4g instances of 0.5 req/s
    assert lp_bound(problem) == 3


def test_a_plan_exactly_at_the_tolerance_is_valid() -> None:
    demand = 1000.0
    edge = demand - TOLERANCE * max(1.0, demand)
    problem = PartitionProblem(GEOMETRY, ("s",), np.array([demand]), PROFILES,
                               np.array([[0.0, 0.0, 0.0, 0.0, edge]]))
    layout = GEOMETRY.parse("7g.40gb@0")
    verify(problem, Plan("edge", (GpuPlan(layout, ((layout.placements[0], "s"),)),), 1, True))


def test_the_program_by_hand_on_two_profiles() -> None:
    # s0: 100 req/s, 30 on a 3g or exactly 25 on a 4g; s1: 60 req/s, 50 on a 4g; s2: none
    problem = PartitionProblem(
        GEOMETRY, ("s0", "s1", "s2"), np.array([100.0, 60.0, 0.0]), ("3g.20gb", "4g.20gb"),
        np.array([[30.0, 25.0], [0.0, 50.0], [30.0, 25.0]]))
    form = formulate(problem, free=np.array([1, 2]))
    y = problem.layout_counts()[form.layouts]
    assert sorted(map(tuple, y.tolist())) == [(1, 1), (2, 0)]  # 3g+4g, 3g+3g
    assert form.pairs.tolist() == [[0, 0], [0, 1], [1, 1]]  # an instance serving s2: none
    np.testing.assert_array_equal(form.cost, [1, 1, 0, 0, 0])
    near = 1 - TOLERANCE / 2
    inf = np.inf
    np.testing.assert_array_equal(form.matrix.toarray(), [
        [-y[0, 0], -y[1, 0], 1, 0, 0],  # 3g instances exist: z - c y <= free
        [-y[0, 1], -y[1, 1], 0, 1, 1],  # 4g
        [0, 0, 0.3, 0.25, 0], [0, 0, 0, 0, 50 / 60],  # demand rows: r / d
        [0, 0, 3, 4, 0], [0, 0, 0, 0, 4],  # compute slices
        [0, 0, 4, 4, 0], [0, 0, 0, 0, 4]])  # memory slices
    # s0 needs four 3g (12 slices; three give 90 req/s) and four instances of memory (16);
    # s1 two 4g (8 and 8)
    np.testing.assert_array_equal(form.row_lower, [-inf, -inf, near, near, 12, 8, 16, 8])
    np.testing.assert_array_equal(form.row_upper, [1, 2, inf, inf, inf, inf, inf, inf])
    # at most ceil(d / r) of each: 100 / 25 is exactly 4, not 5
    np.testing.assert_array_equal(form.upper, [inf, inf, 4, 4, 2])
    a_ub, b_ub = form.as_upper_rows()
    np.testing.assert_array_equal(b_ub, [1, 2, -near, -near, -12, -8, -16, -8])
    np.testing.assert_array_equal(a_ub.toarray(), np.vstack([form.matrix.toarray()[:2],
                                                            -form.matrix.toarray()[2:]]))
    assert formulate(problem).row_upper[:2].tolist() == [0.0, 0.0]  # nothing free


def brute_min_slices(rate: np.ndarray, weight: tuple[int, ...], demand: np.ndarray) -> list[int]:
    """Per service, the fewest slices integer instances covering its demand (within the
    tolerance) take, by trying every count vector of up to 40 slices."""
    def within(room: int, rest: tuple[int, ...]) -> list[tuple[int, ...]]:
        if not rest:
            return [()]
        return [(a, *tail) for a in range(room // rest[0] + 1)
                for tail in within(room - a * rest[0], rest[1:])]

    vectors = np.array(within(40, weight))
    used = vectors @ np.array(weight)
    serves = rate @ vectors.T  # (S, Q)
    ok = serves >= (demand * (1 - TOLERANCE))[:, None]
    return [0 if d <= 0 else int(used[row].min()) for d, row in zip(demand, ok, strict=True)]


def test_min_slices_is_the_integer_knapsack_by_brute_force() -> None:
    rng = np.random.default_rng(11)
    compute, memory = (1, 2, 3, 4, 7), (1, 2, 4, 4, 8)
    rate = rng.uniform(5.0, 60.0, size=(25, 5)).round(1)
    rate[rng.uniform(size=rate.shape) < 0.3] = 0.0  # SLOs some profiles miss
    rate[:, 4] = np.maximum(rate[:, 4], 1.0)  # every service has some profile
    demand = rng.uniform(0.0, 150.0, size=25).round(1)
    demand[0] = 0.0
    demand[1] = rate[1, 4] * 2  # exactly two 7g
    for weight in (compute, memory):
        got = min_slices(rate, np.array(weight), demand)
        assert got.tolist() == brute_min_slices(rate, weight, demand)


def test_past_the_knapsack_the_bound_is_each_services_best_rate_per_slice() -> None:
    rate = np.array([[10.0, 25.0, 30.0, 45.0, 70.0],  # 2g: 12.5 req/s a slice, the best
                     [5.0, 5.0, 5.0, 5.0, 5.0],  # 5 a slice at best (the 1g)
                     [0.5, 0.0, 0.0, 0.0, 0.0],  # half a request a second a slice
                     [0.0, 0.0, 0.0, 0.0, 100.0]])  # whole 7g only
    demand = np.array([1000.0, 1000.0, 100.0, 401.0])
    got = min_slices(rate, np.array([1, 2, 3, 4, 7]), demand)
    # 1000 / 12.5 = 80 and 1000 / 5 = 200 slices, past the 32 solved exactly; 100 / 0.5 =
    # 200; 401 req/s take five 7g (35 slices), where 401 / (100 / 7) = 28.07 a slice would
    # say 29: the bound is never below 33, one past what the knapsack tried
    assert got.tolist() == [80, 200, 200, 33]


def test_the_slice_bound_takes_compute_or_memory_whichever_binds() -> None:
    # five 1g.10gb (1 compute, 2 memory slices each): 5 compute slices fit one GPU, 10
    # memory slices need two
    problem = PartitionProblem(GEOMETRY, ("s",), np.array([50.0]), ("1g.10gb", "7g.40gb"),
                               np.array([[10.0, 0.0]]))
    assert slice_bound(problem) == 2
    compute_bound = PartitionProblem(GEOMETRY, ("s",), np.array([80.0]), PROFILES,
                                     np.array([[10.0, 0.0, 0.0, 0.0, 0.0]]))
    assert slice_bound(compute_bound) == 2  # eight 1g.5gb: 8 compute slices, 8 memory
