"""Against a real local Ray cluster (2 CPUs, one fake GPU): the same sweep results as the
local pool, bit for bit, and two half-GPU actors from cotenant's requests on one GPU with
the agent's MPS environment. Skipped where ray is not installed."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from cotenant.integrations.ray.executor import RayExecutor
from cotenant.integrations.ray.resources import NOSET_VISIBLE, RayPlacer, node_resources
from cotenant.model.cluster import Cluster
from cotenant.model.workload import Pod
from cotenant.sim.colocation.frontier import frontier, settings
from cotenant.sim.colocation.workload import synthetic_workload
from cotenant.sim.experiment import run_matrix
from cotenant.sim.sweep.executor import LocalExecutor, RunFailure
from cotenant.sim.sweep.run import plan, run_sweep
from cotenant.sim.sweep.simulators import run_point
from cotenant.sim.sweep.spec import Sweep
from tests.unit.cli.test_cli import run

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.ray
GPU_MIB = 81_920
HERE = "this-node"
JOB_CAPS = {"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "7", "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": "0=1M"}
"""A job-level runtime_env (the mistake of setting a co-runner's caps on the whole job)."""


@pytest.fixture(scope="module")
def cluster() -> Iterator[RayExecutor]:
    """A new local cluster (never one another process runs here): 2 CPUs, 1 fake GPU, with
    its resource both unnamed and named for this node, and caps in the job's runtime_env."""
    ray.init(address="local", num_cpus=2, num_gpus=1,
             resources={**node_resources([0]), **node_resources([0], node=HERE)},
             runtime_env={"env_vars": JOB_CAPS}, include_dashboard=False,
             log_to_driver=False)
    try:
        yield RayExecutor()  # joins the cluster above
    finally:
        ray.shutdown()


def test_the_frontier_on_ray_equals_the_local_pool(cluster: RayExecutor) -> None:
    w = synthetic_workload(np.random.default_rng(1), gpus=30, intervals=40)
    runs = [r for r in settings() if r[1].name in ("muxflow", "priority", "mps-fixed")][:5]
    assert frontier(w, 3, runs=runs, executor=cluster) == frontier(
        w, 3, runs=runs, executor=LocalExecutor(2))


def test_the_placement_study_on_ray_equals_the_local_pool(
        cluster: RayExecutor, synthetic_workload: tuple[Cluster, list[Pod]]) -> None:
    nodes, pods = synthetic_workload
    local = run_matrix(nodes, pods, ["fgd", "random"], [1, 2], workers=2)
    remote = run_matrix(nodes, pods, ["fgd", "random"], [1, 2], executor=cluster)
    for a, b in zip(local, remote, strict=True):
        assert (a.policy, a.seed) == (b.policy, b.seed)
        assert np.array_equal(a.used_milli, b.used_milli)
        assert np.array_equal(a.frag_milli, b.frag_milli)


def test_a_sweep_file_on_ray_equals_the_local_pool_and_a_failure_is_one_run(
        cluster: RayExecutor) -> None:
    sweep = Sweep.from_mapping({
        "apiVersion": "cotenant/v1alpha1", "kind": "Sweep", "simulator": "colocation",
        "base": {"workload": {"gpus": 20, "hours": 0.5}},
        "grid": {"policy": ["dedicated", "muxflow"]}, "seeds": [1, 2]}, "s.yaml")
    planned = plan(sweep)
    streamed: list[int] = []
    on_ray = run_sweep(planned, cluster, lambda r: streamed.append(r.index))
    assert on_ray == run_sweep(planned, LocalExecutor(2))
    assert sorted(streamed) == [0, 1, 2, 3]
    out = cluster.map(run_point, planned.inputs, [("no-such", 0, None), planned.tasks[0]])
    assert isinstance(out[0], RunFailure)
    assert "unknown sweep simulator 'no-such'" in out[0].error
    assert out[1] == on_ray[0].summary


@ray.remote
class _Probe:
    def seen(self) -> dict[str, Any]:
        keys = ("CUDA_MPS_PIPE_DIRECTORY", "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE",
                "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", NOSET_VISIBLE)
        return {"env": {k: os.environ[k] for k in keys if k in os.environ},
                "gpus": [str(g) for g in ray.get_gpu_ids()]}


def test_two_half_gpu_actors_share_one_gpu_with_the_agents_mps_env(
        cluster: RayExecutor, tmp_path: Path) -> None:
    online, offline = RayPlacer(GPU_MIB, tmp_path).colocation(0, 50, online_memory_mib=20_000)
    actors = [_Probe.options(**r.actor_options()).remote() for r in (online, offline)]
    try:
        seen = ray.get([a.seen.remote() for a in actors], timeout=60)
        assert seen[0]["gpus"] == seen[1]["gpus"] == ["0"]  # both on the one GPU
        pipe = str(tmp_path / "mps" / "gpu0" / "pipe")
        # the job's caps (JOB_CAPS) reach neither: each request sets its own values
        assert seen[0]["env"] == {"CUDA_MPS_PIPE_DIRECTORY": pipe,
                                  "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "100",
                                  "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": f"0={GPU_MIB}M",
                                  NOSET_VISIBLE: "1"}
        assert seen[1]["env"] == {
            "CUDA_MPS_PIPE_DIRECTORY": pipe,
            "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "50",
            "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": f"0={GPU_MIB - 20_000}M", NOSET_VISIBLE: "1"}
        free = ray.available_resources()
        assert free.get("GPU", 0.0) == 0.0
        assert free.get("cotenant_gpu_0", 0.0) == 0.0
        third = _Probe.options(**RayPlacer(GPU_MIB, tmp_path).placement(0, 100)
                               .actor_options()).remote()
        ready, _ = ray.wait([third.seen.remote()], timeout=3)
        assert not ready  # the GPU's shares are booked: Ray holds the third back
        ray.kill(third)
    finally:
        for a in actors:
            ray.kill(a)


def test_a_request_for_a_named_node_lands_there_and_never_on_another(
        cluster: RayExecutor, tmp_path: Path) -> None:
    here = RayPlacer(GPU_MIB, tmp_path, node=HERE).placement(0, 500)
    elsewhere = RayPlacer(GPU_MIB, tmp_path, node="another-node").placement(0, 500)
    actors = [_Probe.options(**r.actor_options()).remote() for r in (here, elsewhere)]
    try:
        ready, _ = ray.wait([actors[0].seen.remote()], timeout=60)
        assert ready
        assert ray.get(ready[0])["gpus"] == ["0"]
        ready, _ = ray.wait([actors[1].seen.remote()], timeout=3)
        assert not ready  # this node does not advertise another node's GPU: never placed
    finally:
        for a in actors:
            ray.kill(a)


def test_the_cli_on_ray_prints_what_the_local_pool_prints(
        cluster: RayExecutor, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ("simulate", "--synthetic-pods", "300", "--synthetic-nodes", "30", "-p", "fgd",
            "-p", "best-fit", "--seeds", "2", "--json")
    code, on_ray, stderr = run(capsys, *argv, "--ray", "auto")
    assert code == 0, stderr
    assert "4 runs (2 policies x 2 seeds) on Ray (auto)" in stderr
    code, local, _ = run(capsys, *argv, "--workers", "2")
    assert code == 0
    assert json.loads(on_ray) == json.loads(local)
