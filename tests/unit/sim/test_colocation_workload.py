"""Building the co-location workload: counted rejections and one-line errors, never drops."""

from __future__ import annotations

import numpy as np
import pytest

from cotenant.errors import InputError
from cotenant.model.cluster import Cluster
from cotenant.model.gpu import CATALOG
from cotenant.model.workload import Node, Pod, PodShape, Qos
from cotenant.sim.colocation.queue import JobQueue
from cotenant.sim.colocation.workload import build_workload, synthetic_workload
from cotenant.traces.genai import LoadSeries


def _load(values: np.ndarray) -> LoadSeries:
    names = tuple(f"s{i}" for i in range(values.shape[0]))
    return LoadSeries(names, 60, 0.0, values, None)


def _pods(ls: int, be: int, be_milli: int = 500) -> list[Pod]:
    pods = [Pod(f"ls{i}", PodShape(1000, 1024, 1, 1000), Qos.LS, 0, 3600) for i in range(ls)]
    pods += [
        Pod(f"be{i}", PodShape(1000, 1024, 1, be_milli), Qos.BE, 0, 600) for i in range(be)
    ]
    return pods


def test_online_instances_beyond_the_gpus_are_counted(small_cluster: Cluster) -> None:
    load = _load(np.full((3, 10), 0.1))
    work = build_workload(small_cluster, _pods(30, 5), load, np.random.default_rng(0))
    assert work.gpus == small_cluster.total_gpus
    assert work.rejected["online instance: no GPU left"] == 30 - small_cluster.total_gpus
    assert np.all(work.slo_ms > 0)
    # offline work resampled up to the demand, from the BE pods only (300 GPU-s each)
    assert work.job_work_s.sum() >= 2.0 * work.gpus * 600 - 300


def test_pods_without_lifetime_are_counted(small_cluster: Cluster) -> None:
    pods = [*_pods(4, 2), Pod("x", PodShape(1000, 1024, 1, 500), Qos.BE, 0, None)]
    work = build_workload(small_cluster, pods, _load(np.full((2, 5), 0.1)),
                          np.random.default_rng(0))
    assert work.rejected["offline pod without a lifetime"] == 1


@pytest.mark.parametrize("bad", [-0.1, np.nan])
def test_bad_load_values_are_one_line_errors(small_cluster: Cluster, bad: float) -> None:
    values = np.full((2, 5), 0.1)
    values[1, 3] = bad
    with pytest.raises(InputError, match="duty cycles"):
        build_workload(small_cluster, _pods(4, 2), _load(values), np.random.default_rng(0))


def test_no_online_pod_is_an_error(small_cluster: Cluster) -> None:
    with pytest.raises(InputError, match="no LS pod"):
        build_workload(small_cluster, _pods(0, 2), _load(np.full((1, 5), 0.1)),
                       np.random.default_rng(0))


def test_queue_offers_fitting_jobs_largest_first_and_takes_them_back() -> None:
    need = np.array([1000.0, 9000.0, 3000.0, 9000.0, 500.0])
    ready = np.zeros(5, dtype=np.int64)
    queue = JobQueue(need, ready)
    got = queue.take(4000.0, 10, 0)
    assert list(got) == [2, 0, 4]  # 3000, 1000, 500: largest that fit first
    assert queue.pending() == 2
    queue.put_back(np.array([0]))
    ready[0] = 5
    assert len(queue.take(4000.0, 10, 1)) == 0  # not ready until interval 5
    assert list(queue.take(4000.0, 10, 5)) == [0]
    assert list(queue.take(1e9, 1, 5)) == [1]


def test_offline_jobs_too_big_for_every_gpu_are_counted_not_dropped() -> None:
    cluster = Cluster([Node("t4", 32_000, 131_072, 4, CATALOG.get("T4"))])
    pods = _pods(4, 0) + [
        Pod(f"big{i}", PodShape(1000, 1024, 1, 1000), Qos.BE, 0, 600) for i in range(200)
    ]
    work = build_workload(cluster, pods, _load(np.full((2, 5), 0.1)), np.random.default_rng(1))
    too_big = work.rejected.get("offline job: memory exceeds the room of every GPU", 0)
    assert too_big > 0  # Tally footprints of 12.7-18.1 GB do not fit beside the online pod
    room = (work.gpu_memory_mib - work.online_memory_mib).max()
    assert np.all(work.job_memory_mib <= room)


def _long_pods(ls: int, be: int) -> list[Pod]:
    """BE pods of mixed lifetimes, some longer than the horizon."""
    pods = [Pod(f"ls{i}", PodShape(1000, 1024, 1, 1000), Qos.LS, 0, 3600) for i in range(ls)]
    pods += [
        Pod(f"be{i}", PodShape(1000, 1024, 1, 500), Qos.BE, 0, 60 * (1 + 37 * i))
        for i in range(be)
    ]
    return pods


@pytest.mark.parametrize("arrivals", ["spread", "start"])
def test_offline_work_that_can_run_in_the_horizon_meets_the_demand(
    small_cluster: Cluster, arrivals: str
) -> None:
    load = _load(np.full((3, 30), 0.1))
    work = build_workload(small_cluster, _long_pods(8, 12), load, np.random.default_rng(4),
                          offline_demand=2.0, arrivals=arrivals)
    horizon_s = work.intervals * work.interval_s
    runnable = np.minimum(work.job_work_s, horizon_s - work.job_arrival * work.interval_s)
    fits = work.job_memory_mib <= np.median(work.gpu_memory_mib - work.online_memory_mib)
    assert runnable[fits].sum() >= 2.0 * work.gpus * horizon_s
    assert np.all(np.diff(work.job_arrival) >= 0)  # job order is arrival order
    assert work.job_arrival.min() >= 0
    assert work.job_arrival.max() < work.intervals
    if arrivals == "start":
        assert not work.job_arrival.any()
    else:
        assert len(np.unique(work.job_arrival)) > work.intervals // 2


def test_bad_arrivals_and_load_scale_are_one_line_errors(small_cluster: Cluster) -> None:
    load = _load(np.full((1, 5), 0.1))
    with pytest.raises(InputError, match="--arrivals"):
        build_workload(small_cluster, _pods(2, 2), load, np.random.default_rng(0),
                       arrivals="later")
    for bad in (0.0, -1.0, float("nan")):
        with pytest.raises(InputError, match="--load-scale"):
            build_workload(small_cluster, _pods(2, 2), load, np.random.default_rng(0),
                           load_scale=bad)


def test_load_scale_multiplies_the_duty_cycles_capped_at_one(small_cluster: Cluster) -> None:
    values = np.array([[0.1, 0.3, 0.6], [0.0, 0.2, 0.4]])
    work = build_workload(small_cluster, _pods(2, 2), _load(values), np.random.default_rng(0),
                          load_scale=2.0)
    assert np.allclose(work.load, np.minimum(values * 2.0, 1.0))
    assert np.allclose(work.peak_load, work.load[work.series].max(axis=1))


def test_queue_offers_never_started_jobs_only_once_they_have_arrived() -> None:
    need = np.full(4, 1000.0)
    arrival = np.array([0, 2, 2, 5], dtype=np.int64)
    queue = JobQueue(need, arrival.copy())
    assert list(queue.take(4000.0, 10, 0)) == [0]
    assert len(queue.take(4000.0, 10, 1)) == 0
    assert list(queue.take(4000.0, 10, 3)) == [1, 2]
    assert list(queue.take(4000.0, 10, 5)) == [3]


def test_demand_nothing_can_meet_is_counted(small_cluster: Cluster) -> None:
    # 0.9-GPU BE pods need 14.7 GB: over the median room (16 GB GPUs), within the 32 GB ones
    pods = _pods(4, 3, be_milli=900)
    work = build_workload(small_cluster, pods, _load(np.full((2, 5), 0.1)),
                          np.random.default_rng(2))
    room = np.median(work.gpu_memory_mib - work.online_memory_mib)
    assert np.all(work.job_memory_mib > room)
    assert work.jobs == 3  # kept (they fit the large GPUs), not resampled
    assert work.rejected["offline demand unmet: no BE job fits the median GPU's room"] == 1


def test_online_memory_follows_the_load_memory_profile(small_cluster: Cluster) -> None:
    values = np.full((2, 4), 0.1)
    profile = np.array([[0.5, 1.0, 0.25, 1.0], [np.nan] * 4])
    load = LoadSeries(("a", "b"), 60, 0.0, values, None, profile)
    work = build_workload(small_cluster, _pods(4, 2), load, np.random.default_rng(0),
                          intervals=6)
    assert work.memory_profile is not None
    for t in range(6):
        expected = np.where(work.series == 0, profile[0, t % 4], 1.0)  # NaN row: at its peak
        np.testing.assert_allclose(work.online_memory_at(t), work.online_memory_mib * expected)
    flat = build_workload(small_cluster, _pods(4, 2), load, np.random.default_rng(0),
                          memory_over_time=False)
    assert flat.memory_profile is None
    np.testing.assert_array_equal(flat.online_memory_at(2), flat.online_memory_mib)


@pytest.mark.parametrize(
    ("profile", "rule"),
    [(np.full((2, 3), 0.5), "shape"), (np.array([[0.5, 1.2, 1.0, 1.0]] * 2), "in \\[0, 1\\]")],
)
def test_a_bad_memory_profile_is_a_one_line_error(
    small_cluster: Cluster, profile: np.ndarray, rule: str
) -> None:
    load = LoadSeries(("a", "b"), 60, 0.0, np.full((2, 4), 0.1), None, profile)
    with pytest.raises(InputError, match=f"memory profile.*{rule}"):
        build_workload(small_cluster, _pods(4, 2), load, np.random.default_rng(0))



@pytest.mark.parametrize("gpus", [1, 5, 37])
def test_a_synthetic_fleet_has_exactly_the_gpus_asked_for(gpus: int) -> None:
    work = synthetic_workload(np.random.default_rng(1), gpus=gpus, intervals=6)
    assert work.gpus == gpus  # a multi-GPU service that would pass the target is left out


def test_gpu_pods_of_other_classes_are_counted_not_dropped(small_cluster: Cluster) -> None:
    shape = PodShape(1000, 1024, 1, 1000)
    pods = [*_pods(2, 2), Pod("g", shape, Qos.GUARANTEED, 0, 600),
            Pod("b", shape, Qos.BURSTABLE, 0, 600), Pod("cpu", PodShape(1000, 1024, 0, 0),
                                                         Qos.BURSTABLE, 0, 600)]
    work = build_workload(small_cluster, pods, _load(np.full((2, 5), 0.1)),
                          np.random.default_rng(0))
    assert work.gpus == 2
    assert work.rejected == {"GPU pod neither LS nor BE (Burstable, Guaranteed)": 2}
