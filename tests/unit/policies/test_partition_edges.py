"""Edges of the MIG planner a review found: a random search that picks a layout serving
nothing, demands within the solvers' tolerance of a whole number of instances, replicas on
profiles the plan does not use, A30's own profile IDs and media extensions, and the bound of
the whole-GPU baseline."""

from __future__ import annotations

import numpy as np
import pytest

from cotenant.errors import InvalidLayoutError
from cotenant.model.deployment import GpuPlan
from cotenant.model.gpu import CATALOG
from cotenant.policies.partition import PARTITION, PartitionProblem, Plan, verify
from cotenant.policies.partition.export import (
    layout_key,
    mig_parted_configs,
    node_counts,
    node_layouts,
    to_mig_parted,
)
from cotenant.policies.partition.problem import TOLERANCE, demand_left
from cotenant.policies.partition.reconfig import floor_of

GEOMETRY = CATALOG.get("A100-40GB").mig
assert GEOMETRY is not None
PROFILES = ("1g.5gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb")
SOLVERS = ["greedy", "milp", "auto", "lp-round", "genetic", "mcts"]


def problem(demand: list[float], rate: list[list[float]],
            other: dict[tuple[str, str], float] | None = None) -> PartitionProblem:
    assert GEOMETRY is not None
    return PartitionProblem(
        GEOMETRY, tuple("ab"[: len(demand)]), np.array(demand, dtype=np.float64), PROFILES,
        np.array(rate, dtype=np.float64), other_rates=other or {},
    )


@pytest.mark.parametrize("solver", ["genetic", "mcts"])
def test_a_random_search_never_picks_a_layout_that_serves_nothing(solver: str) -> None:
    # b meets its SLO on 7g only: a layout without 7g serves it nothing
    pb = problem([95, 200], [[10, 20, 30, 40, 70], [0, 0, 0, 0, 70]])
    for _ in range(3):
        plan = PARTITION.get(solver)(pb, 0.3)
        verify(pb, plan)
        assert plan.gpu_count == 5


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("excess", [0.0, 1e-8, 5e-8, 1e-5])
def test_demands_near_a_whole_number_of_instances(solver: str, excess: float) -> None:
    # 7g serves 70 req/s: 700 req/s is 10 GPUs; a millionth more is within the tolerance,
    # a hundred-thousandth more is not
    pb = problem([700 * (1 + excess)], [[10, 20, 30, 40, 70]])
    plan = PARTITION.get(solver)(pb, 2.0)
    verify(pb, plan)
    assert plan.gpu_count == (10 if excess < TOLERANCE else 11)


def test_milp_plans_meet_demands_that_are_not_round() -> None:
    pb = problem([864.900008649, 204.00000204],
                 [[29.8, 53.7, 75.7, 96.6, 155.3], [5.4, 9.6, 13.5, 17.1, 27.3]])
    for solver in ("milp", "lp-round", "auto"):
        verify(pb, PARTITION.get(solver)(pb, 2.0))


def test_a_remainder_too_small_to_plan_is_raised_not_dropped() -> None:
    left = demand_left(np.array([700.01, 700.0, 5.0]), np.array([700.0, 700.0, 4.9995]))
    assert left[0] == pytest.approx(0.01)
    assert left[1] == 0.0
    assert left[2] == pytest.approx(1e-3)  # 0.0005 would be planned as zero: MIN_DEMAND


def test_replicas_on_a_profile_the_plan_does_not_use_count_at_their_rate() -> None:
    assert GEOMETRY is not None
    layout = GEOMETRY.parse("1g.10gb@0,1g.10gb@2,1g.10gb@4,1g.10gb@6")
    today = (GpuPlan(layout, tuple((p, "a") for p in layout.placements)),)
    pb = problem([40], [[10, 20, 30, 40, 70]], other={("a", "1g.10gb"): 10.0})
    assert pb.rate_of(0, "1g.10gb") == 10.0
    assert pb.rate_of(0, "7g.40gb") == 70.0
    assert list(floor_of(pb, today)) == [40.0]  # was 0: the service could be stopped


def test_a30_profiles_carry_the_a30s_own_ids() -> None:
    geometry = CATALOG.get("A30").mig
    assert geometry is not None
    ids = {p.name: p.nvml_id for p in geometry.profiles}
    assert ids == {"1g.6gb": 14, "1g.6gb+me": 21, "2g.12gb": 5, "2g.12gb+me": 6,
                   "4g.24gb": 0}


def test_one_instance_per_gpu_takes_the_media_extensions() -> None:
    geometry = CATALOG.get("A30").mig
    assert geometry is not None
    with pytest.raises(InvalidLayoutError, match="media extensions"):
        geometry.parse("1g.6gb+me@0,2g.12gb+me@2")
    assert str(geometry.parse("1g.6gb+me@0,1g.6gb@1,2g.12gb@2"))


def test_the_whole_gpu_baseline_bound_allows_for_its_credit() -> None:
    # 720 req/s at 70 per 7g: MIG needs 11 GPUs, whole GPUs (72.8 each) need 10
    pb = problem([720], [[10, 20, 30, 40, 70]])
    mig = PARTITION.get("milp")(pb, 2.0)
    whole = PARTITION.get("whole-gpu")(pb, 2.0)
    assert (mig.gpu_count, whole.gpu_count) == (11, 10)
    assert whole.lower_bound <= whole.gpu_count
    assert whole.lower_bound <= 10  # the MIG bound (11) is no bound for whole GPUs


def test_nodes_get_the_same_mix_so_few_configs() -> None:
    assert GEOMETRY is not None
    mixed = GpuPlan(GEOMETRY.parse("3g.20gb,4g.20gb"), ())
    whole = GpuPlan(GEOMETRY.parse("7g.40gb"), ())
    plan = Plan("test", (mixed,) * 3 + (whole,) * 3, 0, False, 0.0)
    # three alike (mixed, whole) nodes
    assert list(node_counts(plan, "A100-40GB", 2).values()) == [3]
    assert sum(node_counts(plan, "A100-40GB", 4).values()) == 2
    assert sorted(node_counts(plan, "A100-40GB", 1).values()) == [3, 3]
    for per_node in (1, 2, 4):  # the names are those of the exported configs
        assert set(node_counts(plan, "A100-40GB", per_node)) == set(
            to_mig_parted(plan, "A100-40GB", per_node)["mig-configs"])
    nodes = node_layouts(plan, 4)
    assert sorted(k for node in nodes for k in node) == sorted(
        [layout_key(mixed.layout)] * 3 + [layout_key(whole.layout)] * 3)


def test_node_config_names_differ_between_models_with_the_same_profiles() -> None:
    """A100-80GB and H100-80GB share profile names but not their device filter: one layout
    on each is two configs, so a shared mig-parted document keeps both."""
    layout = ((("1g.10gb", 7),),)
    (a100,) = mig_parted_configs([layout], "A100-80GB", 1)[0]["mig-configs"].items()
    (h100,) = mig_parted_configs([layout], "H100-80GB", 1)[0]["mig-configs"].items()
    assert a100[0] != h100[0]
    assert a100[1][0]["device-filter"] != h100[1][0]["device-filter"]
