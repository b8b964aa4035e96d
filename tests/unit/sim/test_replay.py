"""Time replay: departures free capacity, failures are counted, nothing is lost."""

from __future__ import annotations

import numpy as np

from cotenant.model.cluster import Cluster
from cotenant.model.gpu import CATALOG
from cotenant.model.workload import Node, Pod, PodShape, Qos
from cotenant.sim.replay import ReplayConfig, run_replay


def cluster() -> Cluster:
    return Cluster([Node("a", 16_000, 64_000, 1, CATALOG.get("T4"))])


def test_departure_frees_room_for_later_arrival() -> None:
    pods = [
        Pod("p1", PodShape(1000, 1000, 1, 1000), Qos.LS, 0, 100),
        Pod("p2", PodShape(1000, 1000, 1, 1000), Qos.LS, 50, 200),  # GPU busy: fails
        Pod("p3", PodShape(1000, 1000, 1, 1000), Qos.BE, 100, 300),  # p1 left at 100: fits
    ]
    run = run_replay(cluster(), pods, "best-fit", 1, ReplayConfig(sample_every=25))
    assert run.arrivals == 3
    assert run.failed == 1
    assert run.departures == 2
    assert run.alloc_percent.max() == 100.0
    assert run.alloc_percent[-1] == 0.0
    assert np.all(np.diff(run.times) == 25)


def test_pod_without_deletion_stays() -> None:
    pods = [Pod("p", PodShape(0, 0, 1, 500), Qos.LS, 10, None)]
    run = run_replay(cluster(), pods, "fgd", 1, ReplayConfig(sample_every=5))
    assert run.departures == 0
    assert run.alloc_percent[-1] == 50.0
    assert run.running[-1] == 1


def test_replay_is_deterministic(synthetic_workload: tuple[Cluster, list[Pod]]) -> None:
    c, pods = synthetic_workload
    a = run_replay(c, pods, "fgd", 9, ReplayConfig(sample_every=86_400))
    b = run_replay(c, pods, "fgd", 9, ReplayConfig(sample_every=86_400))
    assert np.array_equal(a.alloc_percent, b.alloc_percent)
    assert a.arrivals == len(pods) == a.departures + a.failed + int(a.running[-1])
