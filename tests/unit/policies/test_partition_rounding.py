"""The LP rounding that ``auto`` runs beside the exact solver, tested on its own: on small
problems the exact solver proves its plan first and the rounding's answer is dropped, so
nothing else would notice it break. Also the small exact packing program (HiGHS in this
process) and the MILP with instances that exist already, by value on programs solved by
hand."""

from __future__ import annotations

import numpy as np
import pytest

from cotenant.policies.partition import PartitionProblem, auto, verify
from cotenant.policies.partition.auto import Rounded, _round, _rounded_plan, lp_round_counts
from cotenant.policies.partition.bounds import Relaxation, relaxation
from cotenant.policies.partition.greedy import pack
from cotenant.policies.partition.highs import solve_small
from cotenant.policies.partition.milp import MilpResult, solve_counts
from cotenant.policies.partition.problem import Plan
from tests.unit.policies.a100 import GEOMETRY, PROFILES, only_4g, still


def mixed() -> PartitionProblem:
    return PartitionProblem(
        GEOMETRY, ("a", "b", "c"), np.array([350.0, 120.0, 45.0]), PROFILES,
        np.array([[60.0, 110.0, 150.0, 200.0, 330.0], [0.0, 0.0, 90.0, 120.0, 200.0],
                  [20.0, 40.0, 55.0, 70.0, 120.0]]))


@pytest.mark.parametrize("share", [0.0, 0.5])  # by dual prices, or by the MILP
def test_rounding_covers_every_demand_and_packs_the_instances(share: float) -> None:
    problem = mixed()
    relaxed = relaxation(problem)
    assert relaxed is not None
    use, total = lp_round_counts(problem, relaxed, still(5.0), share)
    assert use.dtype == np.int64
    assert total.dtype == np.int64
    # the instances cover each demand, and the layouts used hold them all
    assert ((problem.rate * total).sum(axis=1) >= problem.demand * (1 - 1e-6)).all()
    held = (problem.layout_counts() * use[:, None]).sum(axis=0)
    assert (held >= total.sum(axis=0)).all()
    # at least the LP's whole instances are kept
    assert (total >= np.floor(relaxed.z + 1e-9)).all()


def test_four_4g_are_rounded_to_four_gpus() -> None:
    problem = only_4g(400.0)  # the LP takes exactly four 4g: nothing left to cover
    rounded = _round(problem, still(5.0))
    assert rounded is not None
    assert abs(rounded.value - 4.0) < 1e-9
    assert rounded.use is not None
    assert rounded.instances is not None
    assert rounded.instances.tolist() == [[0, 0, 0, 4, 0]]
    gpus = _rounded_plan(problem, rounded)
    assert gpus is not None
    assert len(gpus) == 4
    verify(problem, Plan("lp-round", gpus, 4, True))


def test_a_rounding_without_time_or_without_a_plan_gives_none() -> None:
    problem = only_4g(300.0)
    assert _round(problem, still(0.01)) is None  # no time for the LP
    assert _rounded_plan(problem, Rounded(3.0)) is None  # the LP's value alone
    counts = np.array([[0, 0, 0, 3, 0]])
    assert _rounded_plan(problem, Rounded(3.0, None, counts)) is None  # instances, no GPUs
    short = Rounded(3.0, np.zeros(len(problem.layouts), dtype=np.int64),
                    np.array([[0, 0, 0, 3, 0]]))
    assert _rounded_plan(problem, short) is None  # instances no layout holds


# the program min x0 + 1.4 x1 over integers with 2 x0 + 3 x1 >= 7: the LP would take
# x1 = 7/3 (3.27); integers give (2, 1) at 3.4, ahead of (1, 2) at 3.8 and (0, 3) at 4.2
COST = np.array([1.0, 1.4])
INF = np.inf


def test_the_small_program_is_solved_in_integers_within_its_limits() -> None:
    res = solve_small(COST, np.array([[2.0, 3.0]]), np.array([7.0]), np.array([INF]),
                      np.array([INF, INF]), 1.0)
    assert res is not None
    assert np.rint(res.x).tolist() == [2.0, 1.0]
    # x1 held to 0: four x0
    res = solve_small(COST, np.array([[2.0, 3.0]]), np.array([7.0]), np.array([INF]),
                      np.array([INF, 0.0]), 1.0)
    assert res is not None
    assert np.rint(res.x).tolist() == [4.0, 0.0]
    # a row with an upper limit, x0 <= 1: (1, 2)
    res = solve_small(COST, np.array([[2.0, 3.0], [1.0, 0.0]]), np.array([7.0, -INF]),
                      np.array([INF, 1.0]), np.array([INF, INF]), 0.5)
    assert res is not None
    assert np.rint(res.x).tolist() == [1.0, 2.0]


def test_the_small_program_answers_none_without_time_or_a_solution(
    capfd: pytest.CaptureFixture[str],
) -> None:
    args = (COST, np.array([[2.0, 3.0]]), np.array([7.0]), np.array([INF]))
    assert solve_small(*args, np.array([INF, INF]), 0.0) is None
    assert solve_small(*args, np.array([1.0, 1.0]), 1.0) is None  # 5 < 7 at most
    assert capfd.readouterr().out == ""  # HiGHS's log stays off


def test_instances_that_exist_already_cost_nothing() -> None:
    problem = only_4g(300.0)
    alone = solve_counts(problem, 5.0)
    given = solve_counts(problem, 5.0, free=np.array([0, 0, 0, 1, 0]))
    assert alone.use is not None
    assert given.use is not None
    assert (int(alone.use.sum()), int(given.use.sum())) == (3, 2)
    assert alone.proven
    assert given.proven


def many(n: int) -> PartitionProblem:
    """n services of 150 req/s on 1g instances of 100: each LP leaves half an instance."""
    return PartitionProblem(GEOMETRY, tuple(f"s{i}" for i in range(n)), np.full(n, 150.0),
                            PROFILES, np.tile([100.0, 190.0, 260.0, 330.0, 650.0], (n, 1)))


def test_the_remainder_goes_to_the_milp_only_when_small_and_given_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[int] = []
    given = np.zeros((3, 5), dtype=np.int64)
    given[:, 4] = 1  # the MILP's answer: a 7g for each

    def milp(problem: PartitionProblem, seconds: float) -> MilpResult:
        calls.append(int(np.count_nonzero(problem.demand)))
        return MilpResult(None, given[: len(problem.services)], None, True)

    monkeypatch.setattr(auto, "solve_counts", milp)
    price = np.array([0.1, 0.2, 0.3, 0.4, 0.7])

    def nothing_taken(n: int) -> Relaxation:  # an LP that took no whole instance
        return Relaxation(0.0, np.zeros((n, 5)), price)

    problem = many(3)
    _, total = lp_round_counts(problem, nothing_taken(3), still(5.0), 0.5)
    assert calls == [3]
    np.testing.assert_array_equal(total, given)  # the MILP's instances are used
    calls.clear()
    lp_round_counts(problem, nothing_taken(3), still(5.0), 0.0)  # no time share: prices
    assert _round(problem, still(5.0)) is not None  # the rounding child gives it none
    lp_round_counts(many(401), nothing_taken(401), still(5.0), 0.5)  # over 400: prices
    assert calls == []


def test_the_exact_packing_is_used_and_the_greedy_packing_where_it_fails(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    problem = mixed()
    relaxed = relaxation(problem)
    assert relaxed is not None
    marked = np.arange(len(problem.layouts), dtype=np.int64)
    monkeypatch.setattr(auto, "repack", lambda *_: marked)
    use, _ = lp_round_counts(problem, relaxed, still(5.0), 0.0)
    assert use is marked
    monkeypatch.setattr(auto, "repack", lambda *_: None)
    use, total = lp_round_counts(problem, relaxed, still(5.0), 0.0)
    np.testing.assert_array_equal(use, pack(problem, total.sum(axis=0)))
