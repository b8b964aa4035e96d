"""The exact solver's wiring in :mod:`cotenant.policies.partition.milp`, by value: the HiGHS
options :func:`_options` chooses, what :class:`PendingMilp` hands its solve and makes of the
answer (fed made-up scipy results: plan, dual bound, status), the deadline its children get,
how :func:`start_exact` starts it, and which plan :func:`plan_from` takes. The solver tests
check only the plans returned, which these choices rarely change on small problems."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from scipy.optimize import OptimizeResult

from cotenant.policies.partition import PartitionProblem, milp
from cotenant.policies.partition.bounds import MIN_SOLVE_S
from cotenant.policies.partition.greedy import greedy_gpus
from cotenant.policies.partition.milp import (
    NO_ANSWER,
    MilpResult,
    PendingMilp,
    _options,
    children_deadline,
    plan_from,
    start_exact,
)
from cotenant.policies.partition.problem import Deadline
from tests.unit.policies.a100 import GEOMETRY, PROFILES, only_4g, still

QUIET = {"mip_heuristic_effort": 0.0}


def uniform(n: int, served: int = len(PROFILES), idle: int = 0) -> PartitionProblem:
    """n services at rates and demands of exactly 1, each served by the first ``served``
    profiles, the first ``idle`` without demand."""
    rate = np.zeros((n, len(PROFILES)))
    rate[:, :served] = 1.0
    demand = np.ones(n)
    demand[:idle] = 0.0
    return PartitionProblem(GEOMETRY, tuple(f"s{i}" for i in range(n)), demand, PROFILES, rate)


def test_heuristics_go_quiet_above_2000_pairs_per_second_of_at_least_one() -> None:
    crowded = uniform(401)  # 2,005 pairs
    assert _options(crowded, 1.0) == QUIET
    assert _options(crowded, 0.5) == QUIET  # under a second counts as one
    assert _options(crowded, 2.0) == {}  # 4,000 allowed in two seconds
    assert _options(uniform(400), 1.0) == {}  # 2,000: not above


def test_only_served_pairs_of_services_with_demand_are_counted() -> None:
    assert _options(uniform(500, served=4), 1.0) == {}  # 2,000 pairs: 500 x 4 profiles
    assert _options(uniform(500, idle=100), 1.0) == {}  # 2,000: 400 with demand x 5


def test_a_node_limit_is_passed_on_as_an_int() -> None:
    options = _options(only_4g(300.0), 1.0, np.int64(7))  # type: ignore[arg-type]
    assert options == {"node_limit": 7}
    assert type(options["node_limit"]) is int
    assert _options(uniform(401), 1.0, 3) == {**QUIET, "node_limit": 3}


@dataclass
class Made:
    """The arguments a :class:`PendingMilp` gave its solve."""

    cost: Any
    upper: Any
    seconds: float
    options: dict[str, float | int]
    nice: int


def fake_solve(monkeypatch: pytest.MonkeyPatch, answer: OptimizeResult | None) -> list[Made]:
    """Replace HiGHS's child process by a solve that records its arguments and answers
    ``answer``."""
    made: list[Made] = []

    class Answered:  # every argument required: one left out fails
        def __init__(self, cost: Any, matrix: Any, row_lower: Any, row_upper: Any, upper: Any,
                     seconds: float, options: dict[str, float | int], nice: int) -> None:
            made.append(Made(cost, upper, seconds, options, nice))

        def result(self) -> OptimizeResult | None:
            return answer

    monkeypatch.setattr(milp, "Solve", Answered)
    return made


def test_the_solve_gets_the_program_time_options_and_priority(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    made = fake_solve(monkeypatch, None)
    problem = only_4g(300.0)
    pending = PendingMilp(problem, 1.5, node_limit=7, nice=5)
    assert len(made) == 1
    assert made[0].cost is pending.form.cost
    assert made[0].upper is pending.form.upper
    assert (made[0].seconds, made[0].options, made[0].nice) == (1.5, {"node_limit": 7}, 5)
    PendingMilp(uniform(401), 1.0)
    assert (made[1].options, made[1].nice) == (QUIET, 0)  # by default at normal priority


def test_a_solve_starts_only_with_at_least_min_solve_s(monkeypatch: pytest.MonkeyPatch) -> None:
    made = fake_solve(monkeypatch, None)
    short = PendingMilp(only_4g(300.0), MIN_SOLVE_S / 2)
    assert made == []
    assert short.solve is None
    assert short.pending is None
    assert short.result() is NO_ANSWER
    PendingMilp(only_4g(300.0), MIN_SOLVE_S)
    assert [m.seconds for m in made] == [MIN_SOLVE_S]


def three_4g(pending: PendingMilp) -> tuple[np.ndarray, int]:
    """A solution ``x`` of ``pending``'s program for ``only_4g(300)``: three GPUs of the
    first layout holding a 4g and three 4g instances, off integers by HiGHS's tolerance; and
    that layout's index among the problem's."""
    form = pending.form
    held = pending.problem.layout_counts()[form.layouts][:, 3]
    first = int(np.flatnonzero(held > 0)[0])
    x = np.zeros(form.n_layouts + len(form.pairs))
    x[first] = 3.0 - 2e-7
    x[form.n_layouts:] = 3.0 + 1e-7
    return x, int(form.layouts[first])


def answered(monkeypatch: pytest.MonkeyPatch, plan: bool, **fields: Any
             ) -> tuple[MilpResult, int]:
    """What :meth:`PendingMilp.result` makes of a scipy result with ``fields`` and, where
    ``plan``, :func:`three_4g`'s solution as ``x`` (else none); and that plan's layout."""
    answer = OptimizeResult(fields)
    fake_solve(monkeypatch, answer)
    pending = PendingMilp(only_4g(300.0), 1.0)
    x, layout = three_4g(pending)
    answer.x = x if plan else None
    return pending.result(), layout


def test_a_proven_plan_comes_back_as_integer_counts_with_its_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    found, layout = answered(monkeypatch, True, status=0, fun=3.0, mip_dual_bound=3.0,
                             mip_gap=0.0)
    assert found.use is not None
    assert found.instances is not None
    expected = np.zeros(len(only_4g(300.0).layouts), dtype=np.int64)
    expected[layout] = 3
    assert found.use.dtype == np.int64
    assert found.use.tolist() == expected.tolist()
    assert found.instances.dtype == np.int64
    assert found.instances.tolist() == [[0, 0, 0, 3, 0]]
    assert found.bound == 3  # exactly 3: not rounded up past it
    assert found.proven is True


def test_a_plan_stopped_at_the_limit_is_not_proven_and_its_bound_is_rounded_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    found, _ = answered(monkeypatch, True, status=1, fun=3.0, mip_dual_bound=2.4, mip_gap=0.2)
    assert found.instances is not None
    assert found.instances.tolist() == [[0, 0, 0, 3, 0]]
    assert (found.bound, found.proven) == (3, False)
    # a bound a hair above an integer is that integer (HiGHS's tolerance)
    assert answered(monkeypatch, True, status=1, mip_dual_bound=2.0000003)[0].bound == 2


def test_without_a_plan_only_the_bound_comes_back(monkeypatch: pytest.MonkeyPatch) -> None:
    found, _ = answered(monkeypatch, False, status=1, fun=None, mip_dual_bound=2.3)
    assert (found.use, found.instances, found.bound) == (None, None, 3)
    assert found.proven is False


@pytest.mark.parametrize("dual", [None, np.inf, -np.inf, np.nan])
def test_a_missing_or_infinite_dual_bound_is_no_bound(
    monkeypatch: pytest.MonkeyPatch, dual: float | None,
) -> None:
    assert answered(monkeypatch, False, status=1, mip_dual_bound=dual)[0].bound is None
    found, _ = answered(monkeypatch, True, status=0, mip_dual_bound=dual)
    assert (found.bound, found.proven) == (None, True)
    assert found.instances is not None


def test_no_answer_in_time_is_no_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_solve(monkeypatch, None)
    assert PendingMilp(only_4g(300.0), 1.0).result() is NO_ANSWER


def test_the_children_keep_back_the_grace_the_wind_down_and_20_us_a_service() -> None:
    now = [0.0]
    deadline = Deadline(1.0, clock=lambda: now[0])
    problem = only_4g(300.0)
    three = PartitionProblem(GEOMETRY, ("a", "b", "c"), np.full(3, 100.0), PROFILES,
                             np.tile(problem.rate, (3, 1)))
    inner = children_deadline(three, deadline)
    assert inner.left() == pytest.approx(1.0 - 0.05 - 0.05 - 3 * 2e-5, abs=1e-12)
    now[0] = 0.5  # on the caller's clock
    assert inner.left() == pytest.approx(0.5 - 0.05 - 0.05 - 3 * 2e-5, abs=1e-12)
    assert children_deadline(three, deadline).left() == pytest.approx(0.39994, abs=1e-12)
    assert children_deadline(problem, still(0.05)).left() == 0.0  # none left, never less


def test_the_exact_solve_starts_with_the_childrens_time_less_the_solver_margin(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    started: list[tuple[float, int | None, int]] = []

    def record(problem: PartitionProblem, seconds: float, node_limit: int | None,
               nice: int) -> str:
        started.append((seconds, node_limit, nice))
        return "started"

    monkeypatch.setattr(milp, "PendingMilp", record)
    problem = only_4g(300.0)
    assert start_exact(problem, still(2.0), 9, nice=19) == "started"  # type: ignore
    start_exact(problem, still(2.0))
    # 2 s less the children's keep (0.1 s and 20 us) less HiGHS's margin (0.03 s and 20 us)
    left = 2.0 - 0.1 - 2e-5 - 0.03 - 2e-5
    assert started == [(pytest.approx(left, abs=1e-12), 9, 19),
                       (pytest.approx(left, abs=1e-12), None, 0)]


def test_the_milps_plan_is_taken_where_no_larger_than_the_fallback() -> None:
    problem = only_4g(300.0)
    use = np.zeros(len(problem.layouts), dtype=np.int64)
    use[int(np.flatnonzero(problem.layout_counts()[:, 3] > 0)[0])] = 3
    counts = np.array([[0, 0, 0, 3, 0]])
    found = MilpResult(use, counts, 3, False)
    three = greedy_gpus(problem)
    assert len(three) == 3
    gpus, taken = plan_from(problem, found, three)  # as large: taken
    assert taken is True
    assert gpus is not three
    assert [g.layout for g in gpus] == [problem.layouts[int(np.flatnonzero(use)[0])]] * 3
    four = (*three, three[0])
    assert plan_from(problem, found, four)[1] is True
    two = three[:2]
    gpus, taken = plan_from(problem, found, two)  # larger: the fallback
    assert (gpus, taken) == (two, False)
    for partial in (MilpResult(None, counts, 3, False), MilpResult(use, None, 3, False),
                    NO_ANSWER):
        gpus, taken = plan_from(problem, partial, three)
        assert gpus is three
        assert taken is False
