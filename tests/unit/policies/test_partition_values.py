"""The partition planner's building blocks by value: the tolerance on demand at its edges,
the deadline on a fake clock, rates of profiles a plan does not use, the verifier's messages
(and its cap of 20 named services), and the mig-parted documents and node layouts of
hand-made plans."""

from __future__ import annotations

import re

import numpy as np
import pytest

from cotenant.errors import InfeasibleError, InputError
from cotenant.model.deployment import GpuPlan
from cotenant.policies.partition import PartitionProblem
from cotenant.policies.partition.export import (
    DEVICE_FILTERS,
    WHOLE,
    node_config_name,
    node_layouts,
    to_json,
    to_mig_parted,
)
from cotenant.policies.partition.packing import repack
from cotenant.policies.partition.problem import (
    TOLERANCE,
    Deadline,
    Plan,
    demand_left,
    unmet,
    verify,
)
from tests.unit.policies.a100 import GEOMETRY, PROFILES

FILTER = DEVICE_FILTERS["A100-40GB"]


def gpu(text: str, services: list[str | None]) -> GpuPlan:
    layout = GEOMETRY.parse(text)
    return GpuPlan(layout, tuple(zip(layout.placements, services, strict=True)))


def problem(demand: list[float], rates: list[list[float]] | None = None,
            other: dict[tuple[str, str], float] | None = None) -> PartitionProblem:
    names = tuple(f"s{i}" for i in range(len(demand)))
    table = rates or [[100, 190, 260, 330, 650]] * len(demand)
    return PartitionProblem(GEOMETRY, names, np.array(demand, dtype=np.float64), PROFILES,
                            np.array(table, dtype=np.float64), other_rates=other or {})


def test_unmet_allows_one_part_in_a_million_and_no_more() -> None:
    assert not unmet(1000.0, 1000.0)
    assert not unmet(999.9995, 1000.0)  # short by half the tolerance
    assert unmet(999.998, 1000.0)  # short by twice it
    edge = 1000.0 - TOLERANCE * 1000.0
    assert not unmet(edge, 1000.0)  # exactly at the tolerance: met
    # below 1 req/s the tolerance is absolute (1e-6 req/s)
    assert unmet(0.5 - 1.5e-6, 0.5)
    assert not unmet(0.5 - 0.5e-6, 0.5)


def test_demand_left_is_zero_within_the_tolerance_else_at_least_the_minimum() -> None:
    left = demand_left(np.array([1000.0, 0.5, 1e-6, 10.0]),
                       np.array([999.9995, 0.5 - 1.5e-6, 0.0, 4.0]))
    assert left[0] == 0.0  # short by less than 1e-6 of the demand
    assert left[1] == 1e-3  # 1.5e-6 short: raised to the minimum demand
    assert left[2] == 0.0  # short by exactly the absolute tolerance: met
    assert left[3] == 6.0


def test_a_deadline_expires_when_no_time_is_left() -> None:
    now = [100.0]
    deadline = Deadline(5.0, clock=lambda: now[0])
    now[0] = 104.5
    assert (deadline.left(), deadline.expired()) == (0.5, False)
    now[0] = 105.0
    assert deadline.expired()
    now[0] = 200.0
    assert (deadline.left(), deadline.expired()) == (0.0, True)


def test_a_profile_the_plan_does_not_use_serves_what_it_was_measured_at_or_nothing() -> None:
    pb = problem([100.0], other={("s0", "1g.10gb"): 120.0})
    assert pb.rate_of(0, "2g.10gb") == 190.0
    assert pb.rate_of(0, "1g.10gb") == 120.0
    assert pb.rate_of(0, "1g.5gb+me") == 0.0


def test_the_verifier_names_twenty_short_services_and_counts_the_rest() -> None:
    for count, tail in ((20, ""), (21, "; and 1 more services short"),
                        (23, "; and 3 more services short")):
        pb = problem([100.0] * count)
        with pytest.raises(InfeasibleError) as refused:
            verify(pb, Plan("mine", (), 0, False))
        named = "; ".join(f"s{i}: 0.0 req/s < demand 100.0" for i in range(20))
        assert str(refused.value) == f"plan 'mine' is not valid: {named}{tail}"


def test_the_verifier_refuses_an_assignment_that_is_not_its_layout() -> None:
    pb = problem([100.0])
    good = gpu("7g.40gb@0", ["s0"])
    odd = GpuPlan(good.layout, ((GEOMETRY.parse("4g.20gb@0").placements[0], "s0"),))
    with pytest.raises(InfeasibleError) as refused:
        verify(pb, Plan("mine", (good, odd), 1, False))
    assert str(refused.value) == (
        "plan 'mine' is not valid: GPU 1: assignment does not match its layout")


def test_the_verifier_holds_small_demands_to_the_absolute_tolerance() -> None:
    # a demand of 1.0000015 req/s on one instance of 1 req/s: 1.5e-6 short, over 1e-6
    pb = problem([1.0000015], rates=[[1.0, 2.0, 3.0, 4.0, 7.0]])
    with pytest.raises(InfeasibleError, match=r"s0: 1\.0 req/s < demand 1\.0"):
        verify(pb, Plan("mine", (gpu("1g.5gb@0", ["s0"]),), 1, False))


def test_a_whole_gpu_plan_is_one_config_with_mig_off() -> None:
    whole = Plan("whole-gpu", (gpu("7g.40gb@0", ["s0"]),), 1, True, speedup=1.1)
    off = {"devices": "all", "mig-enabled": False, "device-filter": FILTER}
    assert to_mig_parted(whole, "A100-40GB") == {
        "version": "v1", "mig-configs": {"cotenant-0": [off]}}
    assert to_mig_parted(whole, "A100-40GB", 4) == {
        "version": "v1", "mig-configs": {node_config_name(WHOLE, "A100-40GB", 4): [off]}}


def test_one_config_per_distinct_layout() -> None:
    four_three, seven = gpu("4g.20gb@0,3g.20gb@4", ["s0", "s0"]), gpu("7g.40gb@0", ["s0"])
    expected = {"version": "v1", "mig-configs": {
        "cotenant-0": [{"devices": "all", "mig-enabled": True, "device-filter": FILTER,
                        "mig-devices": {"3g.20gb": 1, "4g.20gb": 1}}],
        "cotenant-1": [{"devices": "all", "mig-enabled": True, "device-filter": FILTER,
                        "mig-devices": {"7g.40gb": 1}}],
    }}
    # a layout seen again is skipped, wherever it comes
    for gpus in ((four_three, seven, four_three), (four_three, four_three, seven)):
        assert to_mig_parted(Plan("mine", gpus, 3, False), "A100-40GB") == expected


def test_layouts_are_dealt_onto_nodes_more_instances_first() -> None:
    plan = Plan("mine", (gpu("7g.40gb@0", ["s0"]), gpu("4g.20gb@0,3g.20gb@4", ["s0", "s0"]),
                         gpu("7g.40gb@0", ["s0"])), 3, False)
    four_three = (("3g.20gb", 1), ("4g.20gb", 1))
    seven = (("7g.40gb", 1),)
    # sorted by instance count (most first): 4+3, 7, 7; two nodes of 2, dealt round-robin
    assert node_layouts(plan, 2) == [(four_three, seven), (seven,)]
    assert to_mig_parted(plan, "A100-40GB", 2) == {"version": "v1", "mig-configs": {
        node_config_name((four_three, seven), "A100-40GB", 2): [
            {"devices": [0], "mig-enabled": True, "device-filter": FILTER,
             "mig-devices": dict(four_three)},
            {"devices": [1], "mig-enabled": True, "device-filter": FILTER,
             "mig-devices": dict(seven)}],
        node_config_name((seven,), "A100-40GB", 2): [
            {"devices": [0], "mig-enabled": True, "device-filter": FILTER,
             "mig-devices": dict(seven)},
            {"devices": [1], "mig-enabled": False}],
    }}


ONES = ",".join(f"1g.5gb@{i}" for i in range(7))


def test_layouts_with_more_profiles_come_first_on_nodes_and_within_one() -> None:
    four_three = (("3g.20gb", 1), ("4g.20gb", 1))
    ones = (("1g.5gb", 7),)
    seven = (("7g.40gb", 1),)
    # by name "1g.5gb" < "3g.20gb" < "7g.40gb"; by profiles 4+3 (two) before the others
    plan = Plan("mine", (gpu("7g.40gb@0", ["s0"]), gpu(ONES, ["s0"] * 7),
                         gpu("4g.20gb@0,3g.20gb@4", ["s0", "s0"])), 3, False)
    assert node_layouts(plan, 2) == [(four_three, seven), (ones,)]
    twice = Plan("mine", (gpu(ONES, ["s0"] * 7), gpu("4g.20gb@0,3g.20gb@4", ["s0", "s0"]),
                          gpu(ONES, ["s0"] * 7), gpu("4g.20gb@0,3g.20gb@4", ["s0", "s0"])),
                 4, False)
    assert node_layouts(twice, 2) == [(four_three, ones), (four_three, ones)]


def test_the_json_plan_rounds_each_figure_to_its_places() -> None:
    pb = problem([100.12345, 250.0], rates=[[100.2, 190.0, 260.0, 330.0, 650.0]] * 2)
    plan = Plan("mine", (gpu("4g.20gb@0,3g.20gb@4", ["s1", None]),
                         gpu("7g.40gb@0", ["s0"]), gpu("7g.40gb@0", [None])),
                2, False, seconds=0.123456)
    doc = to_json(pb, plan, "A100-40GB")
    assert {k: doc[k] for k in ("gpu_model", "solver", "gpus", "lower_bound", "optimal",
                                "gap", "seconds")} == {
        "gpu_model": "A100-40GB", "solver": "mine", "gpus": 3, "lower_bound": 2,
        "optimal": False, "gap": 0.3333, "seconds": 0.1235}
    assert doc["layouts"] == {"4g.20gb@0,3g.20gb@4": 1, "7g.40gb@0": 2}
    assert doc["services"] == [
        {"name": "s0", "demand_rps": 100.123, "capacity_rps": 650.0},
        {"name": "s1", "demand_rps": 250.0, "capacity_rps": 330.0}]
    assert doc["gpu_plans"][0] == {"gpu": 0, "layout": "4g.20gb@0,3g.20gb@4", "instances": [
        {"instance": "4g.20gb@0", "service": "s1"}, {"instance": "3g.20gb@4", "service": None}]}
    odd = Plan("mine", (gpu("7g.40gb@0", ["s0"]),), 1, True, seconds=2.0 / 3)
    third = problem([1.0 / 3], rates=[[0.1, 0.2, 0.3, 0.4, 2.0 / 3]])
    assert to_json(third, odd, "A100-40GB")["seconds"] == 0.6667
    assert to_json(third, odd, "A100-40GB")["services"] == [
        {"name": "s0", "demand_rps": 0.333, "capacity_rps": 0.667}]


def test_nodes_need_at_least_one_gpu() -> None:
    plan = Plan("mine", (gpu("7g.40gb@0", ["s0"]),), 1, False)
    with pytest.raises(InputError) as refused:
        node_layouts(plan, 0)
    assert str(refused.value) == "gpus per node: 0 must be at least 1"


def test_repack_puts_instances_on_the_fewest_gpus() -> None:
    pb = problem([100.0])
    # seven 1g, one 4g and one 3g: 4g + 3g fill one GPU, the seven 1g another
    need = np.array([7, 0, 1, 1, 0], dtype=np.int64)
    use = repack(pb, need, 0.5)
    assert use is not None
    assert use.dtype == np.int64
    assert use.sum() == 2
    held = (pb.layout_counts() * use[:, None]).sum(axis=0)
    assert (held >= need).all()
    assert repack(pb, need, 0.0) is None  # no time: no plan
    nothing = repack(pb, np.zeros(5, dtype=np.int64), 0.5)
    assert nothing is not None
    assert nothing.sum() == 0


def test_a_node_config_name_is_stable_and_changes_with_each_thing_it_names() -> None:
    """The name is ``cotenant-node-`` and 8 hex digits, the same for the same content in
    every call, and another for another layout, GPU model or node size."""
    seven = (("7g.40gb", 1),)
    four_three = (("3g.20gb", 1), ("4g.20gb", 1))
    base = node_config_name((seven, four_three), "A100-40GB", 2)
    assert re.fullmatch(r"cotenant-node-[0-9a-f]{8}", base)
    assert node_config_name((seven, four_three), "A100-40GB", 2) == base
    others = {node_config_name((four_three, seven), "A100-40GB", 2),  # devices swapped
              node_config_name((seven, seven), "A100-40GB", 2),
              node_config_name((seven, four_three), "A100-80GB", 2),
              node_config_name((seven, four_three), "A100-40GB", 4)}
    assert len(others) == 4
    assert base not in others


def test_a_problem_plans_tiny_demands_as_none_and_names_services_it_cannot_serve() -> None:
    pb = problem([0.0009, 0.001, 5.0])  # under a thousandth of a request a second: none
    np.testing.assert_array_equal(pb.demand, [0.0, 0.001, 5.0])
    assert pb.demand.dtype == np.float64
    assert pb.layouts == GEOMETRY.maximal_layouts(PROFILES)
    given = (GEOMETRY.parse("7g.40gb@0"),)
    assert problem([1.0]).layouts != given
    assert PartitionProblem(GEOMETRY, ("s0",), np.array([1]), PROFILES,
                            np.array([[1.0, 2.0, 3.0, 4.0, 7.0]]), given).layouts == given
    no_rate = [[0.0] * 5]
    with pytest.raises(InfeasibleError) as refused:
        problem([5.0, 0.0, 1.0], rates=no_rate * 3)
    assert str(refused.value) == "no MIG profile meets the latency target: s0; s2"
    assert problem([0.0005], rates=no_rate).demand.tolist() == [0.0]  # planned as none
