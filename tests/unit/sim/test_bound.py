"""The offline optimum beside the fragmentation experiment."""

from __future__ import annotations

import numpy as np
import pytest

from cotenant.model.cluster import Cluster
from cotenant.model.workload import Pod
from cotenant.sim.bound import bound_points, run_bounds, summarise_bounds
from cotenant.sim.experiment import run_matrix, summarise
from cotenant.sim.fragmentation import point_window, run_fragmentation
from cotenant.traces.openb import load_nodes, load_pods


def test_window_is_what_the_curve_averages(synthetic_workload: tuple[Cluster, list[Pod]]) -> None:
    cluster, pods = synthetic_workload
    run = run_fragmentation(cluster, pods, "best-fit", 3)
    _, ys = run.curve()
    for percent in (10, 50, 99, 100, 130):
        window = point_window(run.arrived_milli, run.capacity_milli, percent)
        mean = 100.0 * run.used_milli[window].mean() / run.capacity_milli
        assert mean == pytest.approx(ys[percent]), percent


def test_no_policy_beats_the_bound_anywhere_in_its_window(
    synthetic_workload: tuple[Cluster, list[Pod]],
) -> None:
    cluster, pods = synthetic_workload
    points = bound_points(cluster, pods, 4, [60, 100, 120])
    runs = run_matrix(cluster, pods, ["fgd", "best-fit", "cotenant-pack", "random"], [4],
                      workers=1)
    for point in points:
        assert point.plan_milli is not None
        assert point.upper_milli is not None
        assert point.plan_milli <= point.upper_milli
        for run in runs:
            window = point_window(run.arrived_milli, run.capacity_milli, point.percent)
            assert run.arrivals >= point.arrivals == window.max() + 1
            assert run.used_milli[window].max() <= point.upper_milli, (run.policy, point)
    assert points[0].kind == "exact"  # at 60% every pod fits


def test_parallel_bounds_equal_serial(synthetic_workload: tuple[Cluster, list[Pod]]) -> None:
    cluster, pods = synthetic_workload
    serial = run_bounds(cluster, pods, [1, 2], [100], workers=1)
    parallel = run_bounds(cluster, pods, [1, 2], [100], workers=2)
    assert [(p.seed, p.upper_milli, p.plan_milli) for p in serial] == [
        (p.seed, p.upper_milli, p.plan_milli) for p in parallel]
    summary, = summarise_bounds(serial)
    assert summary.seeds == 2
    assert summary.upper_mean == pytest.approx(np.mean([p.upper_percent for p in serial]))


def test_a_point_no_arrival_reaches_has_no_bound(
    synthetic_workload: tuple[Cluster, list[Pod]],
) -> None:
    cluster, pods = synthetic_workload
    point, = bound_points(cluster, pods, 1, [250])
    assert not point.reached
    assert point.kind == "n/a"
    assert np.isnan(point.upper_percent)


@pytest.mark.shared_data
def test_openb_default_optimum_is_exact_and_above_every_policy(openb_dir) -> None:  # type: ignore[no-untyped-def]
    cluster = Cluster(load_nodes(openb_dir / "openb_node_list_gpu_node.csv"))
    pods = load_pods(openb_dir / "openb_pod_list_default.csv")
    point, = bound_points(cluster, pods, 42, [100])
    assert point.kind == "exact"
    runs = run_matrix(cluster, pods, ["fgd", "cotenant-pack"], [42], workers=2)
    fgd, pack = summarise(runs, 100)
    assert fgd.alloc_mean + 1.0 < point.upper_percent < 98.0
    assert fgd.alloc_mean < pack.alloc_mean < point.upper_percent
