"""Sweeps: the executors agree bit for bit, a failed run leaves the others, sweep files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from cotenant.errors import CotenantError, InputError
from cotenant.model.cluster import Cluster
from cotenant.model.workload import Pod
from cotenant.sim.colocation.frontier import FrontierPoint, frontier, settings
from cotenant.sim.colocation.run import run_colocation
from cotenant.sim.colocation.workload import synthetic_workload
from cotenant.sim.experiment import run_matrix
from cotenant.sim.fragmentation import run_fragmentation
from cotenant.sim.sweep.executor import (
    LocalExecutor,
    RunFailure,
    SerialExecutor,
    SweepError,
    results,
)
from cotenant.sim.sweep.run import plan, run_sweep
from cotenant.sim.sweep.spec import Sweep, label


def _twice_or_fail(shared: int, item: int) -> int:
    if item == 3:
        raise ValueError(f"item {item} is bad")
    return shared * item


@pytest.mark.parametrize("executor", [SerialExecutor(), LocalExecutor(2)])
def test_a_failed_run_comes_back_as_data_and_the_others_finish(executor: Any) -> None:
    seen: list[int] = []
    out = executor.map(_twice_or_fail, 2, [1, 2, 3, 4, 5], order=[4, 3, 2, 1, 0],
                       on_done=lambda i, _: seen.append(i))
    assert sorted(seen) == [0, 1, 2, 3, 4]
    assert [o for o in out if not isinstance(o, RunFailure)] == [2, 4, 8, 10]
    failure = out[2]
    assert isinstance(failure, RunFailure)
    assert failure.index == 2
    assert failure.error == "ValueError: item 3 is bad"
    assert "Traceback" in failure.detail
    with pytest.raises(SweepError, match="1 of 5 runs failed: c: ValueError: item 3 is bad"):
        results(out, list("abcde"))


def test_a_start_order_must_name_each_run_once() -> None:
    with pytest.raises(CotenantError, match="each of its 2 runs once"):
        SerialExecutor().map(_twice_or_fail, 1, [1, 2], order=[0, 0])


def test_the_frontier_is_the_same_in_a_pool_as_in_process() -> None:
    w = synthetic_workload(np.random.default_rng(1), gpus=30, intervals=40)
    runs = [r for r in settings() if r[1].name in ("muxflow", "priority", "mps-fixed")][:5]
    serial = frontier(w, 3, runs=runs)
    finished: list[str] = []
    pooled = frontier(w, 3, runs=runs, executor=LocalExecutor(2),
                      on_run=lambda name, _: finished.append(name))
    assert pooled == serial  # every float equal, not approximately
    floor = run_colocation(w, "dedicated", 3).violation_pct  # as the frontier was defined
    assert serial == (floor, [FrontierPoint.of(run_colocation(w, p, 3), label, floor)
                              for label, p in runs])
    assert sorted(finished) == sorted(["dedicated", *(p.name for _, p in runs)])


def test_the_placement_study_is_the_same_whatever_the_executor(
        synthetic_workload: tuple[Cluster, list[Pod]]) -> None:
    cluster, pods = synthetic_workload
    a = run_matrix(cluster, pods, ["fgd", "random"], [1, 2], executor=SerialExecutor())
    b = run_matrix(cluster, pods, ["fgd", "random"], [1, 2], executor=LocalExecutor(2))
    direct = run_fragmentation(cluster, pods, "random", 2)
    assert np.array_equal(b[3].used_milli, direct.used_milli)
    for x, y in zip(a, b, strict=True):
        assert (x.policy, x.seed) == (y.policy, y.seed)
        assert np.array_equal(x.used_milli, y.used_milli)
        assert np.array_equal(x.frag_milli, y.frag_milli)


def _sweep(**changes: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "apiVersion": "cotenant/v1alpha1", "kind": "Sweep", "simulator": "colocation",
        "base": {"workload": {"gpus": 20, "hours": 0.5}},
        "grid": {"policy": ["dedicated", {"name": "mps-fixed", "share": 50}],
                 "workload.sloMultiple": [3, 5]},
        "seeds": [1, 2]}
    doc.update(changes)
    return doc


def test_a_sweep_is_every_combination_once_per_seed_and_shares_its_workloads() -> None:
    sweep = Sweep.from_mapping(_sweep(), "s.yaml")
    assert sweep.size == 8
    points = sweep.points()
    assert points[0] == {"policy": "dedicated", "workload.sloMultiple": 3, "seed": 1}
    assert points[1]["seed"] == 2
    assert label(points[-1]) == "policy=mps-fixed(share=50) workload.sloMultiple=5 seed=2"
    planned = plan(sweep)
    assert len(planned.inputs) == 4  # two SLOs x two seeds: policies share a workload
    serial = run_sweep(planned, SerialExecutor())
    streamed: list[int] = []
    pooled = run_sweep(planned, LocalExecutor(2), lambda r: streamed.append(r.index))
    assert pooled == serial
    assert sorted(streamed) == list(range(8))
    rows = [r.summary for r in serial]
    assert all(r is not None for r in rows)
    assert [r["policy"] for r in rows if r] == ["dedicated"] * 4 + ["mps-fixed"] * 4
    # the same draw and seed for both policies: dedicated has no offline work
    assert rows[0] is not None
    assert rows[0]["offline_throughput"] == 0.0


def test_without_a_policy_axis_the_base_policies_are_one() -> None:
    sweep = Sweep.from_mapping(_sweep(base={"workload": {"gpus": 20, "hours": 0.5},
                                            "policies": ["dedicated", "muxflow"]},
                                      grid={}, seeds=[4]), "s.yaml")
    assert [p["policy"] for p in plan(sweep).points] == ["dedicated", "muxflow"]


def test_a_placement_sweep_runs_the_fragmentation_experiment() -> None:
    sweep = Sweep.from_mapping(_sweep(simulator="placement",
                                      base={"syntheticPods": 200, "syntheticNodes": 20},
                                      grid={"policy": ["fgd", "random"], "demand": [1.0, 1.3]},
                                      seeds={"start": 5, "count": 2}), "s.yaml")
    planned = plan(sweep)
    assert len(planned.inputs) == 1
    out = run_sweep(planned, SerialExecutor())
    assert [r.settings["seed"] for r in out[:2]] == [5, 6]
    assert all(r.ok and r.summary is not None and 0 < float(r.summary["alloc_percent"]) <= 100
               for r in out)


@pytest.mark.parametrize(("changes", "message"), [
    ({"kind": "Scenario"}, "s.yaml.kind: must be 'Sweep'"),
    ({"extra": 1}, "s.yaml.extra: unknown key"),
    ({"seeds": []}, "s.yaml.seeds: must name at least one seed"),
    ({"seeds": [1, 1]}, "s.yaml.seeds: names a seed twice"),
    ({"seeds": {"start": 1, "count": 0}}, "s.yaml.seeds.count: must be an integer >= 1"),
    ({"grid": {"policy": "muxflow"}}, "s.yaml.grid.policy: must be a non-empty list"),
    ({"grid": {"seed": [1]}}, "seeds go in seeds"),
])
def test_bad_sweep_files_name_the_place(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(InputError, match=message.replace(".", r"\.").replace("(", r"\(")):
        Sweep.from_mapping(_sweep(**changes), "s.yaml")


@pytest.mark.parametrize(("changes", "message"), [
    ({"grid": {"workload.nope": [1]}}, r"run 0 \(policy=dedicated workload.nope=1 "
                                       r"seed=1\).workload.nope: unknown key"),
    ({"grid": {"policy": [{"name": "mps-fixed", "share": 500}]}},
     r"run 0 \(policy=mps-fixed\(share=500\) seed=1\).policy: .*outside"),
    ({"grid": {"speed": [1]}}, r"s.yaml.grid.speed: not a co-location setting"),
    ({"base": {"seed": 3}}, r"s.yaml.base.seed: not a sweep's setting"),
    ({"simulator": "placement", "base": {"demand": 200}},
     r"run 0 \(policy=\S+ seed=1\).demand: must be a number in 0.01..100"),
    ({"simulator": "nope"}, "unknown sweep simulator 'nope'"),
])
def test_bad_settings_name_the_run(changes: dict[str, Any], message: str) -> None:
    changes.setdefault("grid", {})
    with pytest.raises(CotenantError, match=message):
        plan(Sweep.from_mapping(_sweep(**changes), "s.yaml"))


def test_paths_in_base_are_relative_to_the_file(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("apiVersion: cotenant/v1alpha1\nkind: Sweep\nsimulator: placement\n"
                    "base: {pods: missing.csv}\ngrid: {policy: [fgd]}\n")
    with pytest.raises(InputError, match=str(tmp_path / "missing.csv")):
        plan(Sweep.load(path))
