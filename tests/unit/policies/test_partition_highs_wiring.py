"""HiGHS's wiring in :mod:`cotenant.policies.partition.highs` and the rounding's in
:mod:`cotenant.policies.partition.auto`, by value: the time HiGHS is given (:func:`reserve`),
what :class:`Solve` hands its child process, the bounds, limits and quiet log scipy's
``milp`` gets (on programs solved by hand), and the time shares and fallbacks of the LP
rounding."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from cotenant.errors import InfeasibleError
from cotenant.policies.partition import PartitionProblem, auto, highs
from cotenant.policies.partition.auto import Rounded, _round, _rounded_plan, lp_round_counts
from cotenant.policies.partition.bounds import Relaxation
from cotenant.policies.partition.highs import Solve, _milp, reserve, solve_small
from cotenant.policies.partition.milp import MilpResult
from tests.unit.policies.a100 import GEOMETRY, PROFILES, only_4g, still

# min x0 + 1.4 x1 over integers with 2 x0 + 3 x1 >= 7: (2, 1) at 3.4; with x1 <= 0, (4, 0)
COST = np.array([1.0, 1.4])
ROW = (np.array([[2.0, 3.0]]), np.array([7.0]), np.array([np.inf]))
FREE = np.array([np.inf, np.inf])
NO_X1 = np.array([np.inf, 0.0])
# min x0 with x0 >= 2: presolve solves it before HiGHS first reads the clock
TRIVIAL = (np.array([1.0]), np.array([[1.0]]), np.array([2.0]), np.array([np.inf]),
           np.array([np.inf]))


def test_highs_keeps_back_5_percent_and_50_ms_at_most_a_second() -> None:
    assert reserve(0.0) == pytest.approx(0.05)
    assert reserve(2.0) == pytest.approx(0.15)
    assert reserve(19.0) == pytest.approx(1.0)
    assert reserve(40.0) == 1.0


def test_a_solve_hands_its_child_the_limit_less_the_reserve_and_its_priority(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    children: list[tuple[Callable[[], Any], float, int]] = []
    programs: list[tuple[Any, ...]] = []

    class Child:
        def __init__(self, work: Callable[[], Any], seconds: float, nice: int) -> None:
            children.append((work, seconds, nice))

        def result(self) -> str:
            return "answer"

    monkeypatch.setattr(highs, "Pending", Child)
    monkeypatch.setattr(highs, "_milp", lambda *args: programs.append(args) or "solved")
    a, b, c, d, e = TRIVIAL
    solve = Solve(a, b, c, d, e, 2.0, {"node_limit": 4})
    Solve(a, b, c, d, e, 40.0, nice=19)
    Solve(a, b, c, d, e, 0.0)
    assert [(s, n) for _, s, n in children] == [(2.0, 0), (40.0, 19), (0.0, 0)]
    assert solve.result() == "answer"
    assert [work() for work, _, _ in children] == ["solved"] * 3
    assert programs[0][:5] == TRIVIAL
    assert [p[5] for p in programs] == [
        {"time_limit": pytest.approx(1.85), "node_limit": 4},
        {"time_limit": 39.0},
        {"time_limit": 0.001},  # never none at all
    ]


def test_the_programs_bounds_and_integrality_reach_highs() -> None:
    res = _milp(COST, *ROW, FREE, {})
    assert np.rint(res.x).tolist() == [2.0, 1.0]
    res = _milp(COST, *ROW, NO_X1, {})
    assert np.rint(res.x).tolist() == [4.0, 0.0]


def test_highs_options_reach_it_quietly(capfd: pytest.CaptureFixture[str]) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # scipy's note on options it passes on verbatim
        res = _milp(COST, *ROW, FREE, {"time_limit": 1e-9, "mip_heuristic_effort": 0.0})
    assert (res.status, res.x) == (1, None)  # out of time before a plan
    assert capfd.readouterr().out == ""  # HiGHS's log stays off


def test_only_scipys_note_on_extra_options_is_silenced(monkeypatch: pytest.MonkeyPatch) -> None:
    def noisy(*_: Any, **__: Any) -> str:
        warnings.warn("extra options", RuntimeWarning, stacklevel=1)
        warnings.warn("something else", UserWarning, stacklevel=1)
        return "solved"

    monkeypatch.setattr(highs, "milp", noisy)
    with pytest.warns(UserWarning, match="something else") as caught:
        assert _milp(COST, *ROW, FREE, {}) == "solved"
    assert [w.category for w in caught] == [UserWarning]


def test_the_small_program_has_no_time_at_zero_and_its_limit_otherwise() -> None:
    assert solve_small(*TRIVIAL, 0.0) is None  # HiGHS would solve it even at a limit of 0
    res = solve_small(*TRIVIAL, 1e-9)
    assert res is not None
    assert res.x.tolist() == [2.0]
    assert solve_small(COST, *ROW, FREE, 1e-9) is None  # a search: out of time


def test_the_lp_gets_its_share_of_the_roundings_time(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[float] = []

    def relax(problem: PartitionProblem, seconds: float) -> None:
        asked.append(seconds)

    monkeypatch.setattr(auto, "relaxation", relax)
    assert _round(only_4g(300.0), still(2.0)) is None
    assert asked == [pytest.approx(0.7 * (2.0 - 0.03 - 2e-5), abs=1e-12)]


def test_a_rounding_that_fails_keeps_the_lps_value(monkeypatch: pytest.MonkeyPatch) -> None:
    problem = only_4g(250.0)
    lp = Relaxation(2.5, np.array([[0.0, 0.0, 0.0, 2.5, 0.0]]), np.full(5, 0.5))
    monkeypatch.setattr(auto, "relaxation", lambda *_: lp)

    def fails(*_: Any) -> None:
        raise InfeasibleError("no candidate")

    monkeypatch.setattr(auto, "lp_round_counts", fails)
    assert _round(problem, still(2.0)) == Rounded(2.5)


def test_a_rounding_without_instances_has_no_plan() -> None:
    problem = only_4g(300.0)
    use = np.zeros(len(problem.layouts), dtype=np.int64)
    use[int(np.flatnonzero(problem.layout_counts()[:, 3] > 0)[0])] = 3
    assert _rounded_plan(problem, Rounded(3.0, use, None)) is None
    plan = _rounded_plan(problem, Rounded(3.0, use, np.array([[0, 0, 0, 3, 0]])))
    assert plan is not None
    assert len(plan) == 3


def test_a_remainder_of_400_services_goes_to_the_milp_with_its_share(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    n = 400
    problem = PartitionProblem(GEOMETRY, tuple(f"s{i}" for i in range(n)), np.full(n, 150.0),
                               PROFILES, np.tile([100.0, 190.0, 260.0, 330.0, 650.0], (n, 1)))
    calls: list[tuple[int, float]] = []
    given = np.zeros((n, 5), dtype=np.int64)
    given[:, 1] = 1  # a 2g each

    def solve(remainder: PartitionProblem, seconds: float) -> MilpResult:
        calls.append((int(np.count_nonzero(remainder.demand)), seconds))
        return MilpResult(None, given, None, True)

    monkeypatch.setattr(auto, "solve_counts", solve)
    nothing = Relaxation(0.0, np.zeros((n, 5)), np.array([0.1, 0.2, 0.3, 0.4, 0.7]))
    _, total = lp_round_counts(problem, nothing, still(5.0), 0.5)
    assert calls == [(n, pytest.approx(0.5 * (5.0 - 0.03 - n * 2e-5), abs=1e-12))]
    np.testing.assert_array_equal(total, given)
