"""The planner's front door by value: which profiles a problem is built over and in what
order, which services it refuses and where, the GPU counts its two size checks quote (each
derived by hand below), and what ``plan_spec`` hands the solver (time, node limit) and
refuses after it (a plan over the size cap)."""

from __future__ import annotations

import numpy as np
import pytest

from cotenant.errors import InputError
from cotenant.model.deployment import GpuPlan
from cotenant.model.gpu import CATALOG
from cotenant.model.serving import Service, ServingSpec
from cotenant.perf.mig_profiles import ProfilePoint, ProfileTable
from cotenant.policies.partition import PARTITION, PartitionProblem, planner
from cotenant.policies.partition.planner import build_problem, plan_spec
from cotenant.policies.partition.problem import Deadline, Plan

A100 = CATALOG.get("A100-40GB")


def table(rows: dict[tuple[str, str], tuple[float, float]]) -> ProfileTable:
    """(model, profile) -> (req/s, latency ms) at batch 8."""
    return ProfileTable([ProfilePoint(m, "A100-40GB", p, 8, r, lat, "test")
                         for (m, p), (r, lat) in rows.items()])


SEVEN = table({("m", "7g.40gb"): (100.0, 20.0), ("slow", "7g.40gb"): (0.5, 20.0)})
"""One 7g instance serves 100 req/s of ``m`` (0.5 of ``slow``) within 20 ms."""


def spec(*services: Service) -> ServingSpec:
    return ServingSpec(A100, services)


def refusal(services: tuple[Service, ...], rows: ProfileTable = SEVEN) -> InputError:
    with pytest.raises(InputError) as caught:
        build_problem(spec(*services), rows)
    return caught.value


# -- what a problem is built over -----------------------------------------------------------

def test_profiles_are_those_with_a_rate_smallest_first() -> None:
    rows = table({("m", "7g.40gb"): (100.0, 20.0), ("m", "1g.10gb"): (30.0, 20.0),
                  ("m", "2g.10gb"): (50.0, 90.0),  # misses a 50 ms SLO: left out
                  ("m", "1g.5gb"): (0.8, 20.0)})  # below 1 req/s, still a rate
    problem = build_problem(spec(Service("a", "m", 120.0, 50.0)), rows)
    # by compute then memory slices, not by name ("1g.10gb" < "1g.5gb" as text)
    assert problem.profiles == ("1g.5gb", "1g.10gb", "7g.40gb")
    np.testing.assert_array_equal(problem.rate, [[0.8, 30.0, 100.0]])
    assert problem.layouts == A100.require_mig("x").maximal_layouts(problem.profiles)


def test_with_nothing_to_serve_and_no_slo_met_the_plan_is_over_the_7g_alone() -> None:
    problem = build_problem(spec(Service("z", "m", 0.0, 1.0)), SEVEN)
    assert problem.profiles == ("7g.40gb",)
    np.testing.assert_array_equal(problem.demand, [0.0])


def test_whole_number_rates_and_slos_build_the_same_problem_as_floats() -> None:
    as_ints = build_problem(spec(Service("a", "m", 250, 50)), SEVEN)  # a library caller's ints
    as_floats = build_problem(spec(Service("a", "m", 250.0, 50.0)), SEVEN)
    np.testing.assert_array_equal(as_ints.demand, as_floats.demand)
    np.testing.assert_array_equal(as_ints.rate, as_floats.rate)


def test_a_model_without_mig_is_refused_at_the_specs_gpu() -> None:
    with pytest.raises(InputError) as caught:
        build_problem(ServingSpec(CATALOG.get("T4"), (Service("a", "m", 1.0, 50.0),)), SEVEN)
    assert caught.value.where == "spec.gpu"
    assert "T4 has no MIG" in caught.value.rule


# -- which services are refused -------------------------------------------------------------

def test_a_service_no_profile_serves_is_refused_by_name_even_at_half_a_request() -> None:
    error = refusal((Service("a", "m", 100.0, 50.0), Service("u", "m", 0.5, 1.0)))
    assert error.where == "spec.services[1] (u)"
    assert error.rule == ("no MIG profile of A100-40GB meets an SLO of 1 ms for m; the best "
                          "latency available is 20 ms")


def test_a_service_with_no_demand_or_a_slow_profile_is_not_refused() -> None:
    problem = build_problem(spec(Service("a", "m", 100.0, 50.0), Service("z", "m", 0.0, 1.0),
                                 Service("s", "slow", 1.0, 50.0)), SEVEN)
    np.testing.assert_array_equal(problem.demand, [100.0, 0.0, 1.0])
    np.testing.assert_array_equal(problem.rate, [[100.0], [0.0], [0.5]])


# -- the two size checks --------------------------------------------------------------------
# One 7g instance serves 100 req/s of m: d req/s need d / 100 instances, and a 7-slice GPU
# serves 100 / 7 req/s per slice. The first check counts instances of each service's best
# profile (before any program is built), the second the slice bound.

def test_the_first_check_counts_each_services_best_instances() -> None:
    # a: 3e7 / 100 = 300,000; s: 5e4 / 0.5 = 100,000 (a rate below 1 req/s counts); z: no
    # demand and no rate, counted as 0
    error = refusal((Service("a", "m", 3e7, 50.0), Service("z", "m", 0.0, 1.0),
                     Service("s", "slow", 5e4, 50.0)))
    assert error.where == "spec.services"
    assert error.rule == ("the rates need at least 400,000 GPUs; the planner plans up to "
                          "20,000")
    assert error.hint == "check the rates' unit (req/s), or split the spec"


@pytest.mark.parametrize(("rate", "count"), [(1e11, "1e+09"), (1e12, "1e+10"),
                                             (9.9e10, "990,000,000")])
def test_a_count_of_a_billion_or_more_is_written_in_three_figures(rate: float,
                                                                  count: str) -> None:
    error = refusal((Service("a", "m", rate, 50.0),))
    assert error.rule.startswith(f"the rates need at least {count} GPUs;")


def test_past_ten_times_the_cap_the_instance_count_is_quoted() -> None:
    # 21,000,030 / 100 = 210,000.3 instances (> 200,000); the slice bound would say
    # ceil(ceil(21,000,030 * (1 - 1e-6) * 7 / 100) / 7) = 210,001
    assert refusal((Service("a", "m", 21_000_030.0, 50.0),)).rule.startswith(
        "the rates need at least 210,000 GPUs;")


def test_at_ten_times_the_cap_the_slice_bound_is_quoted() -> None:
    # instances: 199,999.5 + 0.5 = 200,000, not past 10 x 20,000; slices: a takes
    # ceil(19,999,950 * (1 - 1e-6) * 7 / 100) = 1,399,996 and b one whole 7g, 7: 1,400,003
    # slices, 200,001 GPUs
    error = refusal((Service("a", "m", 19_999_950.0, 50.0), Service("b", "m", 50.0, 50.0)))
    assert error.rule.startswith("the rates need at least 200,001 GPUs;")


def test_the_slice_bound_is_held_to_the_cap_and_the_cap_itself_is_allowed() -> None:
    # 3,000,000 req/s: 30,000 instances (under 200,000) but 210,000 slices, 30,000 GPUs
    error = refusal((Service("a", "m", 3_000_000.0, 50.0),))
    assert (error.where, error.rule) == (
        "spec.services", "the rates need at least 30,000 GPUs; the planner plans up to 20,000")
    # 2,000,000 req/s: ceil(1,999,998 * 7 / 100) = 140,000 slices, exactly 20,000 GPUs
    problem = build_problem(spec(Service("a", "m", 2_000_000.0, 50.0)), SEVEN)
    assert problem.demand[0] == 2_000_000.0


# -- what plan_spec hands the solver --------------------------------------------------------

class _Still(Deadline):
    """A deadline on a clock that does not move: the time left is the limit itself."""

    def __init__(self, seconds: float) -> None:
        super().__init__(seconds, clock=lambda: 0.0)


def spy(gpus: int, given: list[float]) -> object:
    """A solver that notes the seconds it is given and plans one GPU per service, then idle
    ones up to ``gpus``."""
    def solve(problem: PartitionProblem, seconds: float) -> Plan:
        given.append(seconds)
        layout = problem.layouts[0]
        serving = tuple(GpuPlan(layout, tuple((p, name) for p in layout.placements))
                        for name in problem.services)
        idle = GpuPlan(layout, tuple((p, None) for p in layout.placements))
        return Plan("spy", serving + (idle,) * (gpus - len(serving)), 1, False)
    return solve


def test_the_solver_gets_the_limit_less_the_check_of_each_service(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(planner, "Deadline", _Still)
    given: list[float] = []
    monkeypatch.setitem(PARTITION._factories, "spy", spy(1, given))
    services = tuple(Service(f"s{i}", "m", 10.0, 50.0) for i in range(100))
    plan_spec(spec(*services), SEVEN, "spy", 2.0)
    plan_spec(spec(*services), SEVEN, "spy", 0.001)  # never below the limit or 20 ms
    assert given == [pytest.approx(2.0 - 1e-5 * 100, abs=1e-12), 0.001]


def test_a_plan_over_the_cap_is_refused_after_the_solve(monkeypatch: pytest.MonkeyPatch) -> None:
    given: list[float] = []
    monkeypatch.setitem(PARTITION._factories, "big", spy(20_001, given))
    monkeypatch.setitem(PARTITION._factories, "cap", spy(20_000, given))
    one = spec(Service("a", "m", 50.0, 50.0))
    with pytest.raises(InputError) as caught:
        plan_spec(one, SEVEN, "big", 1.0)
    assert (caught.value.where, caught.value.rule, caught.value.hint) == (
        "spec.services", "the spy plan takes 20,001 GPUs; the planner plans up to 20,000",
        "split the spec, or try --solver auto with a longer --time-limit")
    assert plan_spec(one, SEVEN, "cap", 1.0)[1].gpu_count == 20_000


def test_a_node_limit_goes_to_the_solvers_that_take_one(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[int | None] = []

    def milp(problem: PartitionProblem, seconds: float, node_limit: int | None = None) -> Plan:
        seen.append(node_limit)
        return PARTITION.get("greedy")(problem, seconds)

    monkeypatch.setitem(planner.NODE_LIMITED, "milp", milp)
    plan_spec(spec(Service("a", "m", 50.0, 50.0)), SEVEN, "milp", 1.0, node_limit=7)
    assert seen == [7]
    with pytest.raises(InputError) as caught:
        plan_spec(spec(Service("a", "m", 50.0, 50.0)), SEVEN, "greedy", 1.0, node_limit=7)
    assert (caught.value.where, caught.value.rule, caught.value.hint) == (
        "--node-limit", "the greedy solver takes no node limit",
        "use it with --solver milp or auto")


def test_the_default_solver_is_auto_and_names_ignore_case() -> None:
    one = spec(Service("a", "m", 150.0, 50.0))
    _, plan = plan_spec(one, SEVEN)
    assert plan.solver.startswith("auto:")
    assert plan.gpu_count == 2
    assert plan_spec(one, SEVEN, node_limit=7)[1].solver.startswith("auto:")
    assert plan_spec(one, SEVEN, "MILP", 5.0, node_limit=7)[1].solver.startswith("milp")
