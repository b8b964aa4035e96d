"""GPU catalog look-ups and the cluster state's allocation invariants."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cotenant.errors import UnknownNameError
from cotenant.model.cluster import AllocationError, Cluster, ClusterState
from cotenant.model.gpu import CATALOG
from cotenant.model.workload import PodShape
from tests.strategies import clusters, pod_shapes


def test_catalog_aliases_and_unknown() -> None:
    assert CATALOG.get("v100m16").name == "V100-16GB"
    assert CATALOG.get("H100").sms == 132
    assert CATALOG.get("G2").memory_mib is None
    with pytest.raises(UnknownNameError, match=r"valid: .*A100-40GB"):
        CATALOG.get("RTX9090")


def test_every_catalog_model_listed() -> None:
    names = set(CATALOG.names())
    for model in ["V100-16GB", "V100-32GB", "P100", "T4", "A10", "A30", "A100-40GB",
                  "A100-80GB", "H100-80GB", "H200-141GB", "G2", "G3"]:
        assert model in names
    mig = {m.name for m in CATALOG.models if m.supports_mig}
    assert mig == {"A30", "A100-40GB", "A100-80GB", "H100-80GB", "H200-141GB"}


def test_allocate_and_release(small_cluster: Cluster) -> None:
    state = ClusterState(small_cluster)
    shape = PodShape(4000, 8000, 1, 300)
    alloc = state.allocate(shape, 2, (1,))
    assert state.gpu_free[2, 1] == 700
    assert state.cpu_free[2] == 28_000
    assert state.gpu_allocated_milli() == 300
    assert state.kind_count[2, 0] == 1
    state.release(shape, alloc)
    assert state.gpu_allocated_milli() == 0
    assert state.kind_count[2].sum() == 0


def test_over_allocation_is_refused(small_cluster: Cluster) -> None:
    state = ClusterState(small_cluster)
    state.allocate(PodShape(0, 0, 1, 800), 2, (0,))
    with pytest.raises(AllocationError):
        state.allocate(PodShape(0, 0, 1, 300), 2, (0,))
    with pytest.raises(AllocationError):
        state.allocate(PodShape(40_000, 0, 0, 0), 2, ())
    with pytest.raises(AllocationError):
        state.allocate(PodShape(0, 0, 1, 100), 2, (5,))  # T4 node has GPUs 0 and 1 only
    with pytest.raises(AllocationError):
        state.allocate(PodShape(0, 0, 2, 1000), 0, (3, 3))


def test_feasibility_respects_spec_and_whole_gpus(small_cluster: Cluster) -> None:
    state = ClusterState(small_cluster)
    assert state.feasible(PodShape(0, 0, 4, 1000)).tolist() == [True, True, False, True]
    assert state.feasible(PodShape(0, 0, 1, 500, ("T4",))).tolist() == [False, False, True, False]
    assert state.feasible(PodShape(50_000, 0, 0, 0)).tolist() == [True, True, False, True]
    assert state.feasible(PodShape(0, 300_000, 0, 0)).tolist() == [True, True, False, False]


@settings(max_examples=60, deadline=None)
@given(clusters(), st.lists(pod_shapes(), max_size=40), st.randoms(use_true_random=False))
def test_random_allocations_never_break_capacity(
    cluster: Cluster, shapes: list[PodShape], rnd: object
) -> None:
    state = ClusterState(cluster)
    rng = np.random.default_rng(0)
    for shape in shapes:
        ok = np.flatnonzero(state.feasible(shape))
        if ok.size == 0:
            continue
        node = int(ok[rng.integers(ok.size)])
        free = state.gpu_free[node]
        if shape.fractional:
            gpus: tuple[int, ...] = (int(np.flatnonzero(free >= shape.gpu_milli)[0]),)
        else:
            gpus = tuple(int(g) for g in np.flatnonzero(free == 1000)[: shape.num_gpu])
        state.allocate(shape, node, gpus)
    assert (state.gpu_free >= 0).all()
    assert (state.gpu_free <= 1000).all()
    assert (state.cpu_free >= 0).all()
    assert (state.mem_free >= 0).all()
    assert (state.gpu_free[~cluster.gpu_present] == 0).all()


def test_per_gpu_free_memory_follows_milli(small_cluster: Cluster) -> None:
    state = ClusterState(small_cluster)
    state.allocate(PodShape(0, 0, 1, 250), 2, (0,))  # T4: 15360 MiB per GPU
    free = state.gpu_free_memory_mib()
    assert free[2, 0] == 15360 * 0.75
    assert free[2, 1] == 15360
    assert np.isnan(free[0, 0])  # G2: memory not published in the trace
    assert free[3, 0] == 32768  # V100-32GB


def test_mig_profile_k8s_resource_name() -> None:
    geometry = CATALOG.get("A100-80GB").mig
    assert geometry is not None
    assert geometry.profile("3g.40gb").k8s_resource == "nvidia.com/mig-3g.40gb"
