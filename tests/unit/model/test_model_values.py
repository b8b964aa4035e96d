"""The domain model's exact figures and messages at its boundaries: resources equal to the
demand fit, bookkeeping moves by exactly the pod's size, every refusal names the place and the
rule (the mutation run's survivors in model/ are killed here)."""

from __future__ import annotations

import numpy as np
import pytest

from cotenant.errors import CotenantError, InputError, InvalidLayoutError
from cotenant.model.cluster import (
    Allocation,
    AllocationError,
    Cluster,
    ClusterState,
    never_fits,
)
from cotenant.model.deployment import GpuPlan, unknown_keys
from cotenant.model.gpu import CATALOG
from cotenant.model.mig import MigLayout, MigProfile
from cotenant.model.training import TrainingJob
from cotenant.model.workload import Node, PodShape


def one_node(cpu: int = 8000, mem: int = 16_000, gpus: int = 2) -> ClusterState:
    return ClusterState(Cluster([Node("a", cpu, mem, gpus, CATALOG.get("T4"))]))


def test_a_pod_asking_exactly_what_is_free_fits_and_takes_it_all() -> None:
    state = one_node()
    shape = PodShape(8000, 16_000, 1, 1000)
    assert state.feasible(shape).tolist() == [True]
    state.allocate(shape, 0, (0,))
    assert (int(state.cpu_free[0]), int(state.mem_free[0])) == (0, 0)
    assert state.gpu_free[0].tolist() == [0, 1000]
    assert state.feasible(PodShape(0, 1, 0, 0)).tolist() == [False]


def test_bookkeeping_moves_by_exactly_the_pods_size() -> None:
    state = one_node()
    shape = PodShape(1000, 3000, 1, 250)
    before = int(state.version[0])
    state.allocate(shape, 0, (1,))
    alloc = state.allocate(shape, 0, (1,))
    assert alloc == Allocation(0, (1,), 250)
    assert (int(state.cpu_free[0]), int(state.mem_free[0])) == (6000, 10_000)
    assert state.gpu_free[0].tolist() == [1000, 500]
    assert int(state.kind_count[0].sum()) == 2
    assert int(state.version[0]) == before + 2
    state.release(shape, alloc)
    assert (int(state.cpu_free[0]), int(state.mem_free[0])) == (7000, 13_000)
    assert int(state.kind_count[0].sum()) == 1
    assert int(state.version[0]) == before + 3


def test_a_given_spec_mask_is_the_one_used() -> None:
    state = one_node()
    shape = PodShape(0, 0, 1, 100, ("T4",))
    assert state.feasible(shape).tolist() == [True]
    assert state.feasible(shape, spec_mask=np.array([False])).tolist() == [False]


def test_allocation_refusals_name_the_rule() -> None:
    state = one_node()
    with pytest.raises(AllocationError, match=r"pod needs 2 distinct GPUs, got \(0, 0\)"):
        state.allocate(PodShape(0, 0, 2, 1000), 0, (0, 0))
    with pytest.raises(AllocationError, match="node 0 lacks CPU or memory for"):
        state.allocate(PodShape(0, 16_001, 0, 0), 0, ())
    state.allocate(PodShape(0, 0, 1, 300), 0, (1,))
    with pytest.raises(AllocationError, match="GPU 1 of node 0 lacks 1000 milli"):
        state.allocate(PodShape(0, 0, 1, 1000), 0, (1,))


@pytest.mark.parametrize("shape", [PodShape(1, 0, 0, 0), PodShape(0, 1, 0, 0),
                                   PodShape(0, 0, 1, 1)])
def test_releasing_what_was_never_taken_is_refused(shape: PodShape) -> None:
    state = one_node()
    milli = shape.gpu_milli
    with pytest.raises(AllocationError, match="node 0 released more than it had allocated"):
        state.release(shape, Allocation(0, (0,) if milli else (), milli))


def test_mig_profile_names() -> None:
    assert MigProfile.parse_name("1g.5gb+me") == (1, 5, True)
    assert MigProfile.parse_name(" 3g.40gb ") == (3, 40, False)
    with pytest.raises(InvalidLayoutError) as info:
        MigProfile.parse_name("3g40gb")
    assert info.value.hint == "for example 1g.10gb, 3g.40gb, 1g.5gb+me"
    assert str(MigLayout()) == "(empty)"


def test_a_gpu_plan_names_its_services_not_its_idle_instances() -> None:
    geometry = CATALOG.get("A100-40GB").mig
    assert geometry is not None
    layout = geometry.parse("3g.20gb@4,2g.10gb@0,1g.5gb@2")
    plan = GpuPlan(layout, tuple(zip(layout.placements, ["a", None, "b"], strict=True)))
    assert plan.services() == {"a", "b"}


def test_unknown_keys_are_named_with_the_allowed_ones() -> None:
    with pytest.raises(InputError) as info:
        unknown_keys({"gpu": 1, 7: "x", "zz": 2}, {"gpu", "layout"}, "spec.gpus[0]")
    assert str(info.value) == "spec.gpus[0].7: unknown key; allowed: gpu, layout"
    unknown_keys({"gpu": 1}, {"gpu", "layout"}, "spec")  # nothing extra: no error


@pytest.mark.parametrize(
    ("job", "message"),
    [
        (("j", 0, 10.0, 0.0), "job 'j'.slices: 0 must be 1-7"),
        (("j", 8, 10.0, 0.0), "job 'j'.slices: 8 must be 1-7"),
        (("j", 7, 0.0, 0.0), "job 'j': work must be > 0 s and arrival >= 0 s"),
        (("j", 1, 10.0, -1.0), "job 'j': work must be > 0 s and arrival >= 0 s"),
    ],
)
def test_training_jobs_are_checked(job: tuple[str, int, float, float], message: str) -> None:
    with pytest.raises(InputError) as info:
        TrainingJob(*job)
    assert str(info.value) == message
    assert TrainingJob("ok", 7, 1e-9, 0.0).slices == 7


def test_the_catalogue_lookups() -> None:
    assert 5 not in CATALOG  # not a name: no error
    assert "a100-40gb " in CATALOG
    with pytest.raises(InputError) as info:
        CATALOG.get("T4").require_mig("spec.gpu")
    names = ", ".join(CATALOG.mig_names())
    assert str(info.value) == f"spec.gpu: T4 has no MIG; use one of {names}"
    with pytest.raises(CotenantError, match="unknown GPU model 'Z9'"):
        CATALOG.get("Z9")


def two_kinds() -> ClusterState:
    return ClusterState(Cluster([Node("t", 8000, 16_000, 2, CATALOG.get("T4")),
                                 Node("p", 32_000, 8000, 4, CATALOG.get("P100")),
                                 Node("c", 64_000, 128_000, 0, None)]))


@pytest.mark.parametrize(
    ("shape", "why"),
    [
        (PodShape(0, 0, 1, 500, ("V100-16GB",)), "asks for V100-16GB; the cluster has P100, T4"),
        (PodShape(0, 0, 8, 1000), "asks for 8 GPUs; a node it may use has at most 4"),
        (PodShape(0, 0, 4, 1000, ("T4",)), "asks for 4 GPUs; a node it may use has at most 2"),
        (PodShape(40_000, 0, 1, 1000), "asks for 40000 milli-CPU; a node it may use has at "
                                       "most 32000"),
        (PodShape(70_000, 0, 0, 0), "asks for 70000 milli-CPU; a node it may use has at most "
                                    "64000"),
        (PodShape(0, 100_000, 1, 100), "asks for 100000 MiB of memory; a node it may use has "
                                       "at most 16000"),
        (PodShape(32_000, 8000, 4, 1000, ("T4",)),
         "asks for 4 GPUs; a node it may use has at most 2"),
        (PodShape(9000, 0, 2, 1000, ("T4",)), "asks for 9000 milli-CPU; a node it may use has "
                                              "at most 8000"),
        (PodShape(9000, 17_000, 1, 100, ("T4",)), "asks for 9000 milli-CPU; a node it may use "
                                                  "has at most 8000"),
        (PodShape(9000, 10_000, 1, 100), "no single node has its GPUs, CPU and memory together"),
    ],
)
def test_why_a_pod_can_never_fit(shape: PodShape, why: str) -> None:
    empty = two_kinds()
    assert never_fits(empty, shape) == why
    assert never_fits(empty, PodShape(8000, 16_000, 2, 1000, ("T4",))) is None
    assert never_fits(empty, PodShape(64_000, 128_000, 0, 0)) is None


def test_a_copied_state_is_independent() -> None:
    state = two_kinds()
    state.allocate(PodShape(1000, 1000, 1, 300), 1, (2,))
    copy = state.copy()
    for name in ("cpu_free", "mem_free", "gpu_free", "version", "kind_count"):
        assert np.array_equal(getattr(copy, name), getattr(state, name)), name
    copy.allocate(PodShape(1000, 1000, 1, 300), 1, (2,))
    assert int(state.gpu_free[1, 2]) == 700
    assert (int(state.cpu_free[1]), int(state.mem_free[1])) == (31_000, 7000)
    assert int(state.kind_count[1].sum()) == 1
    assert int(copy.version[1]) == int(state.version[1]) + 1
    assert copy.cluster is state.cluster


def test_spec_masks() -> None:
    cluster = two_kinds().cluster
    assert cluster.spec_mask(()).tolist() == [True, True, True]
    assert cluster.spec_mask(("P100",)).tolist() == [False, True, False]
    assert cluster.spec_mask(("T4", "P100")).tolist() == [True, True, False]
    assert cluster.spec_mask(("A10",)).tolist() == [False, False, False]


def test_whole_gpu_and_cpu_only_pods_take_what_their_demand_says() -> None:
    """A pod of k > 1 GPUs takes whole GPUs (``gpu_milli_total`` = 1000 k) whatever its
    per-GPU milli reads; a CPU-only pod takes no GPU milli."""
    state = one_node()
    shape = PodShape(0, 0, 2, 500)
    assert shape.gpu_milli_total == 2000
    assert state.allocate(shape, 0, (0, 1)) == Allocation(0, (0, 1), 1000)
    assert state.gpu_free[0].tolist() == [0, 0]
    assert state.allocate(PodShape(100, 0, 0, 0), 0, ()) == Allocation(0, (), 0)


def test_the_bookkeeping_arrays_are_integers_of_the_right_shape() -> None:
    state = two_kinds()
    assert state.version.dtype == np.int64
    assert state.kind_count.dtype == np.int64
    assert state.kind_count.shape == (3, 4 + 1)  # per node, per pod kind (0..max GPUs)
