"""Reconfiguration step lists worked out by hand from the ordering rules (match, grow first,
then shrink where there is slack, repartition a GPU whose every instance changes), and the
bounded search's refusal within a bound it is given."""

from __future__ import annotations

import numpy as np
import pytest

from cotenant.errors import InfeasibleError
from cotenant.model.deployment import GpuPlan
from cotenant.model.mig import MigPlacement
from cotenant.policies.partition import PartitionProblem
from cotenant.policies.partition.reconfig import (
    SearchBound,
    State,
    Step,
    StepKind,
    check_steps,
    floor_of,
    plan_steps,
    replicas_today,
)
from cotenant.policies.partition.reconfig.lend import _profiles
from cotenant.policies.partition.reconfig.pool import Pool
from cotenant.policies.partition.reconfig.steps import losing
from tests.unit.policies.a100 import GEOMETRY, PROFILES
from tests.unit.policies.reconfig_helpers import EMPTY, RATES, gpu, problem

FREE = EMPTY


def test_a_new_layout_is_built_on_the_free_gpu_then_the_old_one_retired() -> None:
    # the plan's GPU keeps nothing of GPU 0, so the free GPU 1 takes it (it scores 0.5);
    # grow: create and start each planned instance in layout order; shrink: a keeps 590
    # req/s >= its floor of 500 without the 7g, so its traffic moves off, then it stops and
    # the instance goes
    result = plan_steps(problem([500, 0]), (gpu("7g.40gb@0", ["a"]), FREE),
                        (gpu("4g.20gb@0,3g.20gb@4", ["a", "a"]),))
    assert result.placement == (1,)
    assert result.target == (FREE, gpu("4g.20gb@0,3g.20gb@4", ["a", "a"]))
    assert [str(s) for s in result.steps] == [
        "create-instance gpu1 4g.20gb@0",
        "start-replica gpu1 4g.20gb@0 a",
        "create-instance gpu1 3g.20gb@4",
        "start-replica gpu1 3g.20gb@4 a",
        "move-traffic gpu0 7g.40gb@0 a",
        "stop-replica gpu0 7g.40gb@0 a",
        "destroy-instance gpu0 7g.40gb@0",
    ]
    assert (result.drained, result.method) == (0, "rules")


def test_a_gpu_whose_every_instance_changes_is_drained_and_repartitioned() -> None:
    # plan GPU 0 keeps GPU 1's 7g for a as it is (score 3): it stays put; plan GPU 1 keeps
    # nothing of GPU 0, which is drained (a keeps its 7g's 650 >= 100 req/s; b has no demand
    # left) and repartitioned in one step, then a starts on the new 2g
    current = (gpu("4g.20gb@0,3g.20gb@4", ["a", "b"]), gpu("7g.40gb@0", ["a"]))
    plan = (gpu("7g.40gb@0", ["a"]),
            gpu("2g.10gb@0,2g.10gb@2,2g.10gb@4,1g.5gb@6", ["a", None, None, None]))
    result = plan_steps(problem([100, 0]), current, plan)
    assert result.placement == (1, 0)
    assert [str(s) for s in result.steps] == [
        "move-traffic gpu0 4g.20gb@0 a",
        "stop-replica gpu0 4g.20gb@0 a",
        "move-traffic gpu0 3g.20gb@4 b",
        "stop-replica gpu0 3g.20gb@4 b",
        "repartition gpu0 2g.10gb@0,2g.10gb@2,2g.10gb@4,1g.5gb@6",
        "start-replica gpu0 2g.10gb@0 a",
    ]
    assert result.drained == 1


def test_the_search_stops_at_the_bound_it_is_given() -> None:
    # three GPUs each serving one busy service on a 7g (4g + 3g serve exactly its 590 req/s)
    # and a spare, and a plan that spreads each over two GPUs: the rules find nothing, and
    # the search (which finds an order within its default bound) gives up at the 2 states
    # it is allowed
    four_three = [[0, 0, 260, 330, 650]] * 3
    pb = PartitionProblem(GEOMETRY, ("a", "b", "c"), np.array([590.0] * 3), PROFILES,
                          np.array(four_three, dtype=np.float64))
    current = (gpu("7g.40gb@0", ["a"]), gpu("7g.40gb@0", ["b"]), gpu("7g.40gb@0", ["c"]),
               FREE)
    plan = (gpu("4g.20gb@0,3g.20gb@4", ["a", "b"]), gpu("4g.20gb@0,3g.20gb@4", ["b", "c"]),
            gpu("4g.20gb@0,3g.20gb@4", ["c", "a"]))
    with pytest.raises(InfeasibleError, match=r"within the search bound \(\d+ states, 7\.5 s\)"):
        plan_steps(pb, current, plan, SearchBound(states=2, seconds=7.5))
    assert plan_steps(pb, current, plan).method == "search"


def test_the_search_refusal_names_its_one_state_and_what_blocks_it() -> None:
    # one GPU, a needs its whole 7g (600 of 650 req/s): retiring it would drop a to 0, and no
    # slot is free for anything new, so the start is the only state
    pb = problem([600, 100])
    with pytest.raises(InfeasibleError) as refused:
        plan_steps(pb, (gpu("7g.40gb@0", ["a"]),), (gpu("4g.20gb@0,3g.20gb@4", ["a", "b"]),))
    assert str(refused.value) == (
        "no safe order exists (every reachable state searched: 1); add a spare GPU, or plan "
        "closer to today's layout: a lacks 600.0 req/s to retire gpu0 7g.40gb@0 (floor 600.0)")


ONE = gpu("4g.20gb@0,2g.10gb@4,1g.5gb@6", ["a", None, None])
FOUR, TWO, SINGLE = ONE.layout.placements
NEW_LAYOUT = GEOMETRY.parse("7g.40gb@0")


@pytest.mark.parametrize(("current", "step", "why"), [
    (ONE, Step(StepKind.REPARTITION, 0, layout=NEW_LAYOUT), "GPU still has replicas"),
    (gpu("7g.40gb@0", [None]), Step(StepKind.REPARTITION, 0), "GPU still has replicas"),
    (ONE, Step(StepKind.CREATE, 0), "no instance named"),
    (ONE, Step(StepKind.CREATE, 0, TWO), "slots taken"),
    (ONE, Step(StepKind.CREATE, 0, GEOMETRY.parse("2g.10gb@2").placements[0]), "slots taken"),
    (ONE, Step(StepKind.START, 0, GEOMETRY.parse("1g.5gb@5").placements[0], "b"),
     "no such instance"),
    (ONE, Step(StepKind.START, 0, FOUR, "b"), "instance busy"),
    (ONE, Step(StepKind.START, 0, TWO), "instance busy"),
    (ONE, Step(StepKind.MOVE_TRAFFIC, 0, TWO), "replica not in rotation"),
    (ONE, Step(StepKind.STOP, 0, FOUR, "a"), "traffic not moved off first"),
    (ONE, Step(StepKind.STOP, 0, TWO), "traffic not moved off first"),
    (ONE, Step(StepKind.DESTROY, 0, FOUR), "replica still running"),
])
def test_the_checker_refuses_each_step_the_driver_would(current: GpuPlan, step: Step,
                                                        why: str) -> None:
    with pytest.raises(InfeasibleError) as refused:
        check_steps(problem([0, 0]), (current,), (step,), (current,))
    assert str(refused.value) == f"step {step} is not possible: {why}"


def test_a_new_instance_serves_nothing_until_started() -> None:
    one = GEOMETRY.parse("1g.5gb@0").placements[0]
    steps = (Step(StepKind.CREATE, 0, one), Step(StepKind.MOVE_TRAFFIC, 0, one))
    with pytest.raises(InfeasibleError, match="replica not in rotation"):
        check_steps(problem([0, 0]), (FREE,), steps, (FREE,))
    drained = gpu("7g.40gb@0", [None])
    new = GEOMETRY.parse("3g.20gb@0,3g.20gb@4")
    steps = (Step(StepKind.REPARTITION, 0, layout=new),
             Step(StepKind.MOVE_TRAFFIC, 0, new.placements[0]))
    with pytest.raises(InfeasibleError, match="replica not in rotation"):
        check_steps(problem([0, 0]), (drained,), steps, (drained,))


def test_a_step_on_a_gpu_outside_the_pool_is_refused() -> None:
    step = Step(StepKind.CREATE, 1, SINGLE)
    with pytest.raises(InfeasibleError) as refused:
        check_steps(problem([0, 0]), (ONE,), (step,), (ONE,))
    assert str(refused.value) == f"step 1 ({step}): no GPU 1 in the pool"


def tightened(demand: list[float]) -> PartitionProblem:
    """a's SLO was tightened: its 1g replicas serve nothing within it (floor 0 req/s)."""
    return PartitionProblem(GEOMETRY, ("a", "b"), np.array(demand, dtype=np.float64),
                            PROFILES, np.array([[0, 190, 260, 330, 650], RATES[1]],
                                               dtype=np.float64))


def test_the_last_replica_stays_in_rotation() -> None:
    current = gpu("1g.5gb@0", ["a"])
    steps = (Step(StepKind.MOVE_TRAFFIC, 0, current.layout.placements[0], "a"),)
    with pytest.raises(InfeasibleError) as refused:
        check_steps(tightened([50, 0]), (current,), steps, (current,))
    assert str(refused.value) == (
        "step 1 (move-traffic gpu0 1g.5gb@0 a): a would have no replica in rotation")


def test_a_replica_of_a_service_the_spec_dropped_can_go() -> None:
    old = gpu("4g.20gb@0,3g.20gb@4", ["a", "gone"])
    three = old.layout.placements[1]
    steps = (Step(StepKind.MOVE_TRAFFIC, 0, three, "gone"), Step(StepKind.STOP, 0, three, "gone"),
             Step(StepKind.DESTROY, 0, three))
    check_steps(problem([100, 0]), (old,), steps, (gpu("4g.20gb@0", ["a"]),))


def test_what_taking_a_replica_out_would_break() -> None:
    pb = problem([400, 0.5])
    two_a = gpu("4g.20gb@0,3g.20gb@4", ["a", "a"])
    state, floor = State(pb, (two_a,)), floor_of(pb, (two_a,))
    today = replicas_today(pb, (two_a,))
    four, three = two_a.layout.placements
    assert losing(pb, state, floor, today, four, "a") == (
        "a would have 260.0 req/s in rotation, below its floor of 400.0")
    assert losing(pb, state, floor, today, three, "gone") is None
    # two replicas serving nothing within a's SLO (floor 0): one may go, the last may not
    pair = gpu("1g.5gb@0,1g.5gb@1", ["a", "a"])
    first, second = pair.layout.placements
    pb = tightened([100, 0])
    state, floor, today = State(pb, (pair,)), floor_of(pb, (pair,)), replicas_today(pb, (pair,))
    assert losing(pb, state, floor, today, first, "a") is None
    state.apply(Step(StepKind.MOVE_TRAFFIC, 0, first, "a"))
    assert losing(pb, state, floor, today, second, "a") == (
        "a would have no replica in rotation")


def test_replicas_today_count_only_services_with_a_demand() -> None:
    current = (gpu("4g.20gb@0,3g.20gb@4", ["a", "b"]),)
    assert list(replicas_today(problem([0.5, 0]), current)) == [1, 0]


def test_a_plan_gpu_goes_where_more_of_it_is_kept_as_it_is() -> None:
    # the plan's GPU keeps GPU 0's 3g for b as it is (3 points) or GPU 1's two 2g slots for
    # another service (1 point each): GPU 0
    current = (gpu("4g.20gb@0,3g.20gb@4", ["a", "b"]),
               gpu("2g.10gb@0,2g.10gb@2,1g.5gb@4,1g.5gb@5,1g.5gb@6", ["b", "b", None, None,
                                                                     None]))
    plan = (gpu("2g.10gb@0,2g.10gb@2,3g.20gb@4", ["a", "a", "b"]),)
    assert plan_steps(problem([0, 0]), current, plan).placement == (0,)


def test_a_kept_slot_outweighs_a_free_gpu() -> None:
    # b takes over a's 7g slot: keeping the slot (1 point) beats the free GPU (0.5)
    result = plan_steps(problem([0, 100]), (gpu("7g.40gb@0", ["a"]), FREE),
                        (gpu("7g.40gb@0", ["b"]),))
    assert result.placement == (0,)
    assert [str(s) for s in result.steps] == [
        "move-traffic gpu0 7g.40gb@0 a",
        "stop-replica gpu0 7g.40gb@0 a",
        "start-replica gpu0 7g.40gb@0 b",
    ]


def test_the_search_refusal_names_a_last_replica() -> None:
    # a's SLO now rules out its 7g (floor 0 req/s), but its one replica there must serve
    # until another does, and the GPU has no free slot for one
    pb = PartitionProblem(GEOMETRY, ("a", "b"), np.array([100.0, 0.0]), PROFILES,
                          np.array([[0, 190, 260, 330, 0], RATES[1]], dtype=np.float64))
    with pytest.raises(InfeasibleError) as refused:
        plan_steps(pb, (gpu("7g.40gb@0", ["a"]),), (gpu("4g.20gb@0,3g.20gb@4", ["a", "a"]),))
    assert str(refused.value) == (
        "no safe order exists (every reachable state searched: 1); add a spare GPU, or plan "
        "closer to today's layout: a would lose its last replica on gpu0 7g.40gb@0")


def _names(placements: list[MigPlacement]) -> list[str]:
    return [str(p) for p in placements]


def test_a_temporary_replica_tries_the_smallest_covering_profile_else_the_largest_first() -> None:
    # a serves 0.5 req/s on a 1g, 190 on a 2g, 260 on a 3g, 330 on a 4g and 650 on a 7g; b
    # serves nothing (its SLO rules every profile out; it has no demand left)
    pb = PartitionProblem(GEOMETRY, ("a", "b"), np.array([100.0, 0.0]), PROFILES,
                          np.array([[0.5, 190, 260, 330, 650], [0, 0, 0, 0, 0]],
                                   dtype=np.float64))
    pool = Pool(pb, [], 1, np.zeros(2), np.zeros(2, dtype=np.int64))
    assert _names(_profiles(pool, "a", 200.0)) == ["3g.20gb@0", "3g.20gb@4"]
    assert _names(_profiles(pool, "a", 260.0)) == ["3g.20gb@0", "3g.20gb@4"]  # exactly
    # nothing covers 1000 req/s: every profile that serves, the largest first
    assert _names(_profiles(pool, "a", 1000.0)) == [
        "7g.40gb@0", "4g.20gb@0", "3g.20gb@0", "3g.20gb@4", "2g.10gb@0", "2g.10gb@2",
        "2g.10gb@4", *(f"1g.5gb@{s}" for s in range(7))]
    # nothing serves: the smallest profile
    assert _names(_profiles(pool, "b", 10.0)) == [f"1g.5gb@{s}" for s in range(7)]
    # a's replicas today are on a 4g and a 2g: those first (the covering 4g, then the 2g),
    # then the smallest covering profile
    pool.usual["a"] = frozenset({"4g.20gb", "2g.10gb"})
    assert _names(_profiles(pool, "a", 200.0)) == [
        "4g.20gb@0", "2g.10gb@0", "2g.10gb@2", "2g.10gb@4", "3g.20gb@0", "3g.20gb@4"]
