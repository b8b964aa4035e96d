"""Node stages: the planner's reconfiguration grouped for whole-node changes keeps every
service at its floor with the whole node out of rotation, borrows room on nodes empty at the
end, and says which service blocks where no order is safe; on random replans, every stage
list is replayed by the checker and run by the MIG controller against a fake that checks
the floors after each write."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cotenant.errors import InfeasibleError
from cotenant.model.deployment import GpuPlan
from cotenant.policies.partition import PartitionProblem
from cotenant.policies.partition.reconfig import plan_steps
from cotenant.policies.partition.reconfig.stages import (
    NodeStage,
    NodeStages,
    check_stages,
    differs,
    node_stages,
)
from tests.unit.policies.a100 import GEOMETRY, PROFILES
from tests.unit.policies.reconfig_helpers import (
    EMPTY,
    RATES,
    gpu,
    problem,
    replan,
)


def test_a_partial_change_the_planner_makes_in_place_borrows_an_empty_node() -> None:
    # GPU 0 keeps a's 4g serving while b's 3g becomes two 1g: fine per GPU, but a whole-node
    # change drains a too. GPU 1 is free and stays free: the stage lends it to a.
    pb = problem([300, 90])
    current = (gpu("4g.20gb@0,3g.20gb@4", ["a", "b"]), EMPTY)
    plan = (gpu("4g.20gb@0,1g.5gb@4,1g.5gb@5", ["a", "b", "b"]),)
    change = plan_steps(pb, current, plan)
    assert change.target[1] == EMPTY  # the planner keeps GPU 0 (its 4g stays)
    stages = node_stages(pb, current, change, 1)
    assert stages.blocked is None
    kinds = [(s.node, s.final, s.drains) for s in stages.stages]
    # node 1 first (the planner builds there first; its final layout is the empty one),
    # then it lends room, node 0 changes, node 1 goes back
    assert kinds == [(1, True, False), (1, False, True), (0, True, True), (1, True, True)]
    temps = stages.stages[2].temporaries
    assert {(t.service, t.gpu) for t in temps} == {("a", 1), ("b", 1)}
    assert stages.stages[2].release == temps


def idle_beside() -> tuple[PartitionProblem, tuple[GpuPlan, ...], tuple[GpuPlan, ...]]:
    """GPU 1 keeps an idle 4g (its final layout has it idle) beside GPU 0's change."""
    return (problem([300, 90]),
            (gpu("4g.20gb@0,3g.20gb@4", ["a", "b"]), gpu("4g.20gb@0,3g.20gb@4", [None, "b"])),
            (gpu("4g.20gb@0,1g.5gb@4,1g.5gb@5", ["a", "b", "b"]),
             gpu("4g.20gb@0,3g.20gb@4", [None, "b"])))


def test_an_idle_instance_of_a_final_node_serves_without_a_new_layout() -> None:
    pb, current, plan = idle_beside()
    stages = node_stages(pb, current, plan_steps(pb, current, plan), 1)
    assert stages.blocked is None
    assert all(s.final for s in stages.stages)  # no intermediate layout
    (temp,) = stages.stages[-1].temporaries
    assert (temp.service, temp.gpu, str(temp.placement)) == ("a", 1, "4g.20gb@0")
    assert stages.stages[-1].release == (temp,)


def test_one_node_with_nothing_beside_it_is_blocked_by_the_service_it_holds() -> None:
    pb = problem([300, 90])
    current = (gpu("4g.20gb@0,3g.20gb@4", ["a", "b"]), EMPTY)
    plan = (gpu("4g.20gb@0,1g.5gb@4,1g.5gb@5", ["a", "b", "b"]),)
    change = plan_steps(pb, current, plan)
    stages = node_stages(pb, current, change, 2)  # both on one node
    assert stages.blocked == 0
    assert stages.why == "a would have 0.0 req/s in rotation, below its floor of 300.0"
    with pytest.raises(InfeasibleError, match=r"stage 1: draining node 0: a would have 0\.0"):
        check_stages(pb, current, stages, change.target, 2)


def test_the_checker_fails_a_drain_under_a_temporary_replica_or_one_left_behind() -> None:
    pb = problem([300, 90])
    current = (gpu("4g.20gb@0,3g.20gb@4", ["a", "b"]), EMPTY)
    plan = (gpu("4g.20gb@0,1g.5gb@4,1g.5gb@5", ["a", "b", "b"]),)
    change = plan_steps(pb, current, plan)
    good = node_stages(pb, current, change, 1)
    first, lend, move, back = good.stages
    kept = NodeStages((first, lend, NodeStage(move.node, move.before, move.after,
                                              move.temporaries)), good.floor)
    with pytest.raises(InfeasibleError, match="temporary replicas left at the end"):
        check_stages(pb, current, kept, change.target, 1)
    early = NodeStages((first, lend, NodeStage(back.node, back.before, back.after,
                                               move.temporaries), move, back), good.floor)
    with pytest.raises(InfeasibleError, match="stage 3: node 1 changes under a temporary"):
        check_stages(pb, current, early, change.target, 1)


COMPLETED: list[bool] = []
MUTANTS: list[bool] = []


@settings(max_examples=30, deadline=None, derandomize=True)
@given(st.lists(st.floats(0, 2000), min_size=2, max_size=2),
       st.lists(st.floats(0, 2000), min_size=2, max_size=2),
       st.integers(0, 3), st.sampled_from([1, 2]))
def test_random_replans_keep_every_floor_node_by_node(before: list[float], after: list[float],
                                                      spare: int, per_node: int) -> None:
    """From the plan for one demand to the plan for another, with spare GPUs beside: the
    stages, replayed by the checker, keep the floors; where they are blocked, the blocked
    node really lacks slack."""
    try:
        pb, current, change = replan(before, after, spare)
    except InfeasibleError:
        return  # no safe order per GPU: nothing to group
    stages = node_stages(pb, current, change, per_node)
    COMPLETED.append(stages.blocked is None)
    if stages.blocked is None:
        check_stages(pb, current, stages, change.target, per_node)  # also run inside
        # a mutant that leaves the odd nodes as they are must fail where one of them changes
        odd = NodeStages(tuple(s for s in stages.stages if s.node % 2 == 0), stages.floor)
        count = -(-max(len(current), len(change.target)) // per_node)
        today = current + (EMPTY,) * (count * per_node - len(current))
        goal = change.target + (EMPTY,) * (count * per_node - len(change.target))
        if any(differs(today[g:g + per_node], goal[g:g + per_node])
               for g in range(per_node, count * per_node, 2 * per_node)):
            with pytest.raises(InfeasibleError):
                check_stages(pb, current, odd, change.target, per_node)
            MUTANTS.append(True)
    else:
        assert stages.why


def test_random_replans_mostly_complete_node_by_node() -> None:
    """The property above does not pass on its blocked exit alone."""
    if not COMPLETED:
        test_random_replans_keep_every_floor_node_by_node()
    assert len(COMPLETED) >= 15
    assert sum(COMPLETED) >= len(COMPLETED) // 2, COMPLETED
    assert len(MUTANTS) >= 5, MUTANTS  # the end-state check was exercised


def test_a_node_that_only_gains_a_replica_on_an_idle_instance_is_not_drained() -> None:
    pb = problem([300, 90])
    current = (gpu("4g.20gb@0,3g.20gb@4", ["a", None]),)
    plan = (gpu("4g.20gb@0,3g.20gb@4", ["a", "b"]),)
    change = plan_steps(pb, current, plan)
    stages = node_stages(pb, current, change, 1)
    assert stages.blocked is None  # a's only replica keeps serving while b joins
    (stage,) = stages.stages
    assert not stage.drains
    assert stage.after == plan


# Found by a review on the random replans below (same generator: the greedy plan for
# `before`, the greedy plan for `after`, `spare` empty GPUs, `per_node` GPUs a node): the
# planner's node order gets stuck where another order of the nodes ready is safe.
@pytest.mark.parametrize(("before", "after", "spare", "per_node"), [
    ([1604.8, 380.99], [775.32, 715.22], 0, 1),  # safe: node 2 before node 1
    ([1753.68, 310.49], [353.53, 1982.46], 1, 1),  # safe: node 1 before node 3
])
def test_a_stuck_node_order_is_searched_for_a_safe_one(before: list[float], after: list[float],
                                                       spare: int, per_node: int) -> None:
    pb, current, change = replan(before, after, spare)
    stages = node_stages(pb, current, change, per_node)
    assert stages.blocked is None, stages.why
    check_stages(pb, current, stages, change.target, per_node)


def test_a_temporary_replica_takes_the_profile_its_service_has_today() -> None:
    # b serves on a 3g today; a 2g would cover its floor, but the pod copied for the
    # temporary replica was sized for a 3g, so the lent room gets a 3g where it fits
    pb = problem([300, 90])
    current = (gpu("4g.20gb@0,3g.20gb@4", ["a", "b"]), EMPTY)
    plan = (gpu("4g.20gb@0,1g.5gb@4,1g.5gb@5", ["a", "b", "b"]),)
    stages = node_stages(pb, current, plan_steps(pb, current, plan), 1)
    assert {(t.service, t.placement.profile.name) for t in stages.stages[2].temporaries} == {
        ("a", "4g.20gb"), ("b", "3g.20gb")}


# Two GPUs a node. Node 0 (GPUs 0, 1) turns b's 3g on GPU 0 into two 1g beside a's 4g: the
# whole node drains. b keeps 350 >= 90 req/s on its 7g on GPU 2 (node 1), but a has nothing
# else (floor 300, and it had a replica today): it borrows on node 1's second GPU, GPU 3.
A_ONLY = gpu("4g.20gb@0,3g.20gb@4", ["a", "b"])
A_PLAN = gpu("4g.20gb@0,1g.5gb@4,1g.5gb@5", ["a", "b", "b"])
B_SEVEN = gpu("7g.40gb@0", ["b"])


def _stages(current: tuple[GpuPlan, ...], plan: tuple[GpuPlan, ...]) -> NodeStages:
    pb = problem([300, 90])
    change = plan_steps(pb, current, plan)
    stages = node_stages(pb, current, change, 2)
    assert stages.blocked is None
    assert stages.floor == (300.0, 90.0)
    return stages


def test_a_node_lends_room_on_its_second_gpu() -> None:
    # node 1 is final as it is (not drained); then, its GPU 2 full, it lends GPU 3 a's
    # usual profile, a 4g at its one start (an intermediate layout: node 1 drains, b keeps
    # 150 on GPU 0's 3g); node 0 changes; node 1 goes back to its final layout
    stages = _stages((A_ONLY, EMPTY, B_SEVEN, EMPTY), (A_PLAN, B_SEVEN))
    assert [(s.node, s.final, s.drains) for s in stages.stages] == [
        (1, True, False), (1, False, True), (0, True, True), (1, True, True)]
    assert [str(g.layout) for g in stages.stages[1].after] == ["7g.40gb@0", "4g.20gb@0"]
    (temp,) = stages.stages[2].temporaries
    assert (temp.service, temp.gpu, str(temp.placement)) == ("a", 3, "4g.20gb@0")
    assert stages.stages[2].release == (temp,)


def test_an_idle_instance_on_a_nodes_second_gpu_serves_as_it_is() -> None:
    # as above, but GPU 3 holds a 4g the plan keeps idle: a's temporary replica starts there,
    # with no intermediate layout, and goes once node 0 serves again
    idle = gpu("4g.20gb@0", [None])
    stages = _stages((A_ONLY, EMPTY, B_SEVEN, idle), (A_PLAN, B_SEVEN, idle))
    assert [(s.node, s.final, s.drains) for s in stages.stages] == [
        (1, True, False), (0, True, True)]
    (temp,) = stages.stages[1].temporaries
    assert (temp.service, temp.gpu, str(temp.placement)) == ("a", 3, "4g.20gb@0")
    assert stages.stages[1].release == (temp,)


def test_room_is_lent_until_the_shortfall_is_covered_exactly() -> None:
    # b's floor is 150 req/s, all on its 3g on GPU 0; a keeps 650 on its 7g on GPU 2. The
    # planner borrows a 3g for b on the free GPU 1 (150 covers the floor exactly). Node by
    # node, GPU 0 and 1 drain together: node 1 lends b a 3g at its first start on GPU 3, which
    # covers b's shortfall exactly, so no second one is added at 3g.20gb@4
    pb = problem([300, 150])
    current = (A_ONLY, EMPTY, gpu("7g.40gb@0", ["a"]), EMPTY)
    plan = (gpu("4g.20gb@0,2g.10gb@4,1g.5gb@6", ["a", "b", "b"]), gpu("7g.40gb@0", ["a"]))
    change = plan_steps(pb, current, plan)
    assert [str(s) for s in change.steps][:2] == [
        "create-instance gpu1 3g.20gb@0", "start-replica gpu1 3g.20gb@0 b"]
    stages = node_stages(pb, current, change, 2)
    assert stages.blocked is None
    assert [(s.node, s.final, s.drains) for s in stages.stages] == [
        (1, True, False), (1, False, True), (0, True, True), (1, True, True)]
    assert [str(g.layout) for g in stages.stages[1].after] == ["7g.40gb@0", "3g.20gb@0"]
    (temp,) = stages.stages[2].temporaries
    assert (temp.service, temp.gpu, str(temp.placement)) == ("b", 3, "3g.20gb@0")


def test_nodes_go_in_the_order_the_planner_first_changes_their_layouts() -> None:
    # the planner creates b's 7g on the free GPU 1 first and only starts b on GPU 0's idle
    # 3g (no layout step there): both nodes are ready from the start (b had no replica and
    # has a floor of 0; GPU 0 only gains a replica), and node 1 goes first
    pb = problem([100, 100])
    current = (gpu("4g.20gb@0,3g.20gb@4", ["a", None]), EMPTY)
    plan = (gpu("4g.20gb@0,3g.20gb@4", ["a", "b"]), gpu("7g.40gb@0", ["b"]))
    change = plan_steps(pb, current, plan)
    assert str(change.steps[0]) == "create-instance gpu1 7g.40gb@0"
    stages = node_stages(pb, current, change, 1)
    assert (stages.blocked, stages.why, stages.unsafe_from) == (None, None, None)
    assert stages.floor == (100.0, 0.0)
    assert [(s.node, s.final, s.drains) for s in stages.stages] == [(1, True, True),
                                                                    (0, True, False)]


def test_a_blocked_node_and_the_nodes_after_it_are_listed_as_final_stages() -> None:
    pb = problem([300, 90])
    current = (A_ONLY, EMPTY)
    plan = (gpu("4g.20gb@0,1g.5gb@4,1g.5gb@5", ["a", "b", "b"]),)
    stages = node_stages(pb, current, plan_steps(pb, current, plan), 2)
    assert (stages.blocked, stages.unsafe_from, stages.floor) == (0, 0, (300.0, 90.0))
    (stage,) = stages.stages
    assert (stage.node, stage.final, stage.after) == (0, True, (plan[0], EMPTY))


def test_the_checker_fails_a_stage_on_a_node_outside_the_pool() -> None:
    # one GPU a node, a pool of two; a stage list that builds a 7g on a node 2 nobody has
    pb = problem([100, 0])
    current = (gpu("7g.40gb@0", ["a"]), EMPTY)
    stray = NodeStages((NodeStage(2, (EMPTY,), (gpu("7g.40gb@0", ["a"]),)),), (100.0, 0.0))
    with pytest.raises(InfeasibleError, match=r"^node 2 does not end at its target layout"):
        check_stages(pb, current, stray, current, 1)


def test_a_replica_that_serves_nothing_within_the_slo_is_still_lent_room() -> None:
    # a's SLO now rules out the 1g: its one replica there serves 0 req/s within it (floor 0),
    # but a had a replica today and must keep one. GPU 0's 3g for b becomes two 1g, so node 0
    # drains: a lacks a replica (0 req/s), b 90 req/s and a replica. Node 1 lends a 2g for a
    # (its 1g today serves nothing: the smallest profile that serves, at its first start)
    # and b's usual 3g, at the first start that fits beside it
    assert GEOMETRY is not None
    pb = PartitionProblem(GEOMETRY, ("a", "b"), np.array([100.0, 90.0]), PROFILES,
                          np.array([[0, 190, 260, 330, 650], RATES[1]], dtype=np.float64))
    current = (gpu("1g.5gb@0,3g.20gb@4", ["a", "b"]), EMPTY)
    plan = (gpu("1g.5gb@0,1g.5gb@4,1g.5gb@5", ["a", "b", "b"]),)
    stages = node_stages(pb, current, plan_steps(pb, current, plan), 1)
    assert (stages.blocked, stages.floor) == (None, (0.0, 90.0))
    assert [(s.node, s.final, s.drains) for s in stages.stages] == [
        (1, True, False), (1, False, True), (0, True, True), (1, True, True)]
    assert [str(g.layout) for g in stages.stages[1].after] == ["2g.10gb@0,3g.20gb@4"]
    temps = stages.stages[2].temporaries
    assert [(t.service, t.gpu, str(t.placement)) for t in temps] == [
        ("a", 1, "2g.10gb@0"), ("b", 1, "3g.20gb@4")]
    assert stages.stages[2].release == temps


def test_room_is_lent_by_a_node_empty_at_the_end_before_one_that_serves() -> None:
    # one GPU a node. Node 1 keeps b's 1g (50 req/s); node 2 is empty, today and at the end
    # (the planner borrows there, so it goes first). Node 0 drains: a lacks 300 req/s, b 40.
    # Node 2 lends before node 1 (which serves at the end): a its usual 4g, b the smallest of
    # its usual profiles that covers 40 (a 1g, 50), at the first start beside the 4g
    pb = problem([300, 90])
    one = gpu("1g.5gb@0", ["b"])
    current = (A_ONLY, one, EMPTY)
    stages = node_stages(pb, current, plan_steps(pb, current, (A_PLAN, one)), 1)
    assert stages.blocked is None
    assert [(s.node, s.final, s.drains) for s in stages.stages] == [
        (2, True, False), (1, True, False), (2, False, True), (0, True, True), (2, True, True)]
    temps = stages.stages[3].temporaries
    assert [(t.service, t.gpu, str(t.placement)) for t in temps] == [
        ("a", 2, "4g.20gb@0"), ("b", 2, "1g.5gb@4")]
