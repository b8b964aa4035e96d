"""Reconfiguration: generated steps keep every service at its floor and end at the plan
(replayed by the checker, on hand-made cases and on random plans); the checker fails step
lists that would drop a service or that the driver would refuse."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cotenant.errors import InfeasibleError
from cotenant.model.deployment import GpuPlan
from cotenant.model.gpu import CATALOG
from cotenant.model.mig import MigLayout
from cotenant.policies.partition import PARTITION, PartitionProblem
from cotenant.policies.partition.reconfig import Step, StepKind, check_steps, plan_steps

GEOMETRY = CATALOG.get("A100-40GB").mig
assert GEOMETRY is not None
PROFILES = ("1g.5gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb")
RATES = [[100, 190, 260, 330, 650], [50, 100, 150, 200, 350]]


def problem(demand: list[float]) -> PartitionProblem:
    assert GEOMETRY is not None
    return PartitionProblem(
        GEOMETRY, ("a", "b"), np.array(demand, dtype=np.float64), PROFILES,
        np.array(RATES, dtype=np.float64),
    )


def gpu(text: str, services: list[str | None]) -> GpuPlan:
    assert GEOMETRY is not None
    layout = GEOMETRY.parse(text)
    return GpuPlan(layout, tuple(zip(layout.placements, services, strict=True)))


def test_moves_work_to_a_free_gpu_first() -> None:
    # Today: GPU 0 is one 7g for a (650 req/s), GPU 1 is free. Plan: a on 4g+3g of one GPU.
    pb = problem([500, 0])
    current = (gpu("7g.40gb@0", ["a"]), GpuPlan(MigLayout(), ()))
    plan = (gpu("4g.20gb@0,3g.20gb@4", ["a", "a"]),)
    result = plan_steps(pb, current, plan)
    kinds = [s.kind for s in result.steps]
    # The new layout goes on the free GPU 1 and serves before the old replica stops.
    assert result.placement == (1,)
    assert kinds.index(StepKind.START) < kinds.index(StepKind.MOVE_TRAFFIC)
    assert result.drained == 0
    check_steps(pb, current, result.steps, result.target)


def test_partial_change_keeps_other_instances_serving() -> None:
    # The 2g becomes two 1g; the 4g keeps serving a throughout and b moves to the idle 1g
    # before its 2g is destroyed: nothing drains.
    pb = problem([330, 50])
    current = (gpu("4g.20gb@0,2g.10gb@4,1g.5gb@6", ["a", "b", None]),)
    plan = (gpu("4g.20gb@0,1g.5gb@4,1g.5gb@5,1g.5gb@6", ["a", "a", None, "b"]),)
    result = plan_steps(pb, current, plan)
    assert result.drained == 0
    assert not any(s.kind is StepKind.REPARTITION for s in result.steps)
    check_steps(pb, current, result.steps, result.target)


def test_no_safe_order_without_a_spare_gpu_is_reported() -> None:
    # One GPU, a needs its whole 7g: no instance can be freed without dropping a.
    pb = problem([600, 100])
    current = (gpu("7g.40gb@0", ["a"]),)
    plan = (gpu("4g.20gb@0,3g.20gb@4", ["a", "b"]),)
    with pytest.raises(InfeasibleError, match="no safe step"):
        plan_steps(pb, current, plan)


def test_checker_fails_a_step_list_that_drops_a_service() -> None:
    pb = problem([500, 0])
    current = (gpu("7g.40gb@0", ["a"]), GpuPlan(MigLayout(), ()))
    target_gpu = gpu("4g.20gb@0,3g.20gb@4", ["a", "a"])
    seven = current[0].layout.placements[0]
    four, three = target_gpu.layout.placements
    # Stop first, then build: a drops to 0 req/s in between.
    dropping = (
        Step(StepKind.MOVE_TRAFFIC, 0, seven, "a"),
        Step(StepKind.STOP, 0, seven, "a"),
        Step(StepKind.DESTROY, 0, seven),
        Step(StepKind.CREATE, 0, four),
        Step(StepKind.START, 0, four, "a"),
        Step(StepKind.CREATE, 0, three),
        Step(StepKind.START, 0, three, "a"),
    )
    with pytest.raises(InfeasibleError, match=r"step 1 .* drops a to 0\.0 req/s"):
        check_steps(pb, current, dropping, (target_gpu, GpuPlan(MigLayout(), ())))


def test_checker_refuses_what_the_driver_refuses() -> None:
    pb = problem([0, 0])
    current = (gpu("7g.40gb@0", ["a"]),)
    four = gpu("4g.20gb@0", ["a"]).layout.placements[0]
    seven = current[0].layout.placements[0]
    with pytest.raises(InfeasibleError, match="slots taken"):
        check_steps(pb, current, (Step(StepKind.CREATE, 0, four),), current)
    with pytest.raises(InfeasibleError, match="traffic not moved off first"):
        check_steps(pb, current, (Step(StepKind.STOP, 0, seven, "a"),), current)
    with pytest.raises(InfeasibleError, match="replica still running"):
        check_steps(pb, current, (Step(StepKind.DESTROY, 0, seven),), current)
    with pytest.raises(InfeasibleError, match="not as the plan says"):
        check_steps(pb, current, (), (GpuPlan(MigLayout(), ()),) * 2)


@settings(max_examples=25, deadline=None)
@given(
    st.lists(st.floats(0, 2000), min_size=2, max_size=2),
    st.lists(st.floats(0, 2000), min_size=2, max_size=2),
    st.integers(0, 2),
)
def test_random_replans_are_safe(before: list[float], after: list[float], spare: int) -> None:
    """From the plan for one demand to the plan for another, with 0-2 free GPUs beside."""
    old = PARTITION.get("greedy")(problem(before), 1.0)
    new = PARTITION.get("milp")(problem(after), 5.0)
    pb = problem(after)
    current = old.gpus + (GpuPlan(MigLayout(), ()),) * spare
    try:
        result = plan_steps(pb, current, new.gpus)
    except InfeasibleError as exc:
        message = str(exc)
    else:
        check_steps(pb, current, result.steps, result.target)
        return
    assert "no safe step" in message
