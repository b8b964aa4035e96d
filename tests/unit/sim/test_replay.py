"""Time replay: departures free capacity, failures are counted, nothing is lost."""

from __future__ import annotations

import numpy as np

from cotenant.model.cluster import Cluster
from cotenant.model.gpu import CATALOG
from cotenant.model.workload import Node, Pod, PodShape, Qos
from cotenant.sim.replay import (
    ReplayConfig,
    peak_demand,
    run_replay,
    sample_nodes,
    speed_up_arrivals,
)


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


def test_peak_demand_counts_what_is_alive_at_once() -> None:
    two = Cluster([Node("a", 16_000, 64_000, 2, CATALOG.get("T4"))])
    pods = [
        Pod("p1", PodShape(1000, 1000, 1, 500), Qos.LS, 0, 100),
        Pod("p2", PodShape(1000, 1000, 1, 1000), Qos.LS, 50, 150),  # with p1: 1.5 GPUs
        Pod("p3", PodShape(1000, 1000, 1, 1000), Qos.LS, 100, 200),  # p1 gone at 100
        Pod("p4", PodShape(1000, 1000, 0, 0), Qos.LS, 120, None),  # CPU only, never leaves
    ]
    peak = peak_demand(two, pods)
    assert peak.pods == 3  # p2, p3, p4 at 120
    assert peak.gpu_percent == 100.0  # p2 + p3: two of two GPUs


def test_faster_arrivals_keep_each_lifetime_and_raise_concurrency() -> None:
    pods = [Pod(f"p{i}", PodShape(1000, 1000, 1, 100), Qos.LS, 1000 * i, 1000 * i + 500)
            for i in range(10)]
    fast = speed_up_arrivals(pods, 10)
    assert [p.creation_time for p in fast] == [100 * i for i in range(10)]
    assert all(p.duration == 500 for p in fast)
    c = cluster()
    assert peak_demand(c, pods).pods == 1
    assert peak_demand(c, fast).pods == 5


def test_a_sampled_cluster_is_smaller_and_seeded() -> None:
    nodes = [Node(f"n{i}", 16_000, 64_000, 1 + i % 2, CATALOG.get("T4")) for i in range(100)]
    big = Cluster(nodes)
    small = sample_nodes(big, 0.1, np.random.default_rng(3))
    assert small.size == 10
    again = sample_nodes(big, 0.1, np.random.default_rng(3))
    assert [n.name for n in small.nodes] == [n.name for n in again.nodes]
    assert sample_nodes(big, 0.001, np.random.default_rng(3)).size == 1
