"""Ray resource requests: the agent's MPS environment, the fractions, bad decisions (no Ray
needed: the requests are plain dictionaries)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cotenant.agent.backends.fake import FakeNode, ManualClock
from cotenant.agent.mps import MpsManager
from cotenant.errors import InputError, NotSupportedError
from cotenant.integrations.ray.resources import (
    NOSET_VISIBLE,
    RayPlacer,
    RayRequest,
    node_resources,
)
from cotenant.policies.colocation import Actions, milli_limits, offline_thread_pct

GPU_MIB = 81_920


def test_a_colocation_pair_carries_the_env_the_agent_gives_the_same_clients(
        tmp_path: Path) -> None:
    online, offline = RayPlacer(GPU_MIB, tmp_path).colocation(1, 75, online_memory_mib=20_000)
    agent = MpsManager(FakeNode([], ManualClock()), tmp_path)
    assert offline.env == {**agent.client_env(1, 25, GPU_MIB - 20_000), NOSET_VISIBLE: "1"}
    # uncapped, as under the agent, but said explicitly: nothing left to inherit from a job
    assert online.env == {**agent.client_env(1, 100, GPU_MIB), NOSET_VISIBLE: "1"}
    assert offline.env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "25"
    assert offline.env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] == "0=61920M"
    assert offline.env["CUDA_MPS_PIPE_DIRECTORY"] == str(tmp_path / "mps" / "gpu1" / "pipe")
    assert online.env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "100"  # the service: uncapped
    assert (online.fraction, offline.fraction) == (0.75, 0.25)
    assert offline.actor_options() == {
        "num_gpus": 0.25, "resources": {"cotenant_gpu_1": 0.25},
        "runtime_env": {"env_vars": dict(offline.env)}}
    assert offline.train_resources() == {"GPU": 0.25, "cotenant_gpu_1": 0.25}


def test_a_pods_gpu_milli_is_limited_as_the_device_plugin_limits_it(tmp_path: Path) -> None:
    placer = RayPlacer(GPU_MIB, tmp_path)
    half = placer.placement(0, 500)
    assert half.fraction == 0.5
    assert half.env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "50"
    assert half.env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] == f"0={GPU_MIB // 2}M"
    assert placer.placement(0, 5).env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "1"
    whole = placer.placement(0, 1000)
    assert whole.fraction == 1.0
    assert whole.env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "100"
    assert whole.env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] == f"0={GPU_MIB}M"


FULL_ENV = {"CUDA_MPS_PIPE_DIRECTORY", "CUDA_MPS_LOG_DIRECTORY",
            "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT",
            NOSET_VISIBLE}


@pytest.mark.parametrize("online_memory_mib", [None, 20_000])
def test_every_request_sets_every_key_so_a_job_runtime_env_cannot_leak_into_it(
        tmp_path: Path, online_memory_mib: int | None) -> None:
    placer = RayPlacer(GPU_MIB, tmp_path)
    online, offline = placer.colocation(0, 75, online_memory_mib=online_memory_mib)
    for request in (online, offline, placer.placement(0, 250), placer.placement(0, 1000)):
        assert set(request.env) == FULL_ENV
        assert set(request.actor_options()["runtime_env"]["env_vars"]) == FULL_ENV
    # a job-level runtime_env (Ray merges it under each actor's) set to the co-runner's caps
    # leaves the service's own values in force
    merged = {**offline.env, **online.env}
    assert merged["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "100"
    assert merged["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] == f"0={GPU_MIB}M"


def test_the_shared_formulas_are_the_agents_and_the_device_plugins() -> None:
    share = 70
    assert offline_thread_pct(share) == 30 == int(
        RayPlacer(GPU_MIB).colocation(0, share)[1].env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"])
    assert offline_thread_pct(100) == 1  # MPS's minimum
    assert milli_limits(250, GPU_MIB) == (25, GPU_MIB // 4)
    assert milli_limits(5, GPU_MIB) == (1, GPU_MIB * 5 // 1000)
    assert milli_limits(1, 100) == (1, None)  # no memory at all: no limit rather than 0


def test_a_named_node_gets_its_own_resource_names(tmp_path: Path) -> None:
    placer = RayPlacer(GPU_MIB, tmp_path, node="gpu-node-3")
    online, offline = placer.colocation(1, 60)
    assert online.resources == {"cotenant_gpu-node-3_gpu_1": 0.6}
    assert offline.train_resources() == {"GPU": 0.4, "cotenant_gpu-node-3_gpu_1": 0.4}
    assert node_resources([0, 1], node="gpu-node-3") == {
        "cotenant_gpu-node-3_gpu_0": 1.0, "cotenant_gpu-node-3_gpu_1": 1.0}
    with pytest.raises(InputError, match="node: 'a b' must be letters, digits"):
        RayPlacer(GPU_MIB, tmp_path, node="a b")


def test_the_cores_actions_become_one_pair_per_gpu_at_its_largest_share(
        tmp_path: Path) -> None:
    n = 3
    actions = Actions(share=np.array([40, 60, 100]), restart=np.zeros(n, dtype=np.bool_),
                      pause_until=np.full(n, np.nan), evict=np.zeros(n, dtype=np.bool_),
                      hold_until=np.zeros(n), why=np.zeros(n, dtype=np.int64))
    pairs = RayPlacer(GPU_MIB, tmp_path).from_actions([0, 0, 1], actions)
    assert list(pairs) == [0]  # GPU 1 keeps everything: no co-runner to book
    assert pairs[0][0].fraction == 0.6
    assert pairs[0][1].env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "40"


def test_the_node_advertises_one_unit_per_gpu() -> None:
    assert node_resources(range(2)) == {"cotenant_gpu_0": 1.0, "cotenant_gpu_1": 1.0}


@pytest.mark.parametrize(("call", "message"), [
    (lambda p: p.colocation(0, 100), "GPU 0 share: 100 leaves the offline co-runner nothing"),
    (lambda p: p.colocation(0, 0), "GPU 0 share: SM share 0 is outside 1-100"),
    (lambda p: p.colocation(0, 50, online_memory_mib=GPU_MIB), "leaves no memory"),
    (lambda p: p.placement(0, 1500), "gpu-milli: 1500 must be in 1..1000"),
    (lambda p: p.placement(-1, 500), "gpu: must be a GPU index >= 0"),
])
def test_decisions_ray_cannot_book_are_refused_with_the_rule(call: object,
                                                             message: str) -> None:
    with pytest.raises(InputError, match=message):
        call(RayPlacer(GPU_MIB))  # type: ignore[operator]


def test_bad_fractions_and_memory_are_refused_and_no_daemon_is_started(
        tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"a fraction of 1.5 must be in \(0, 1\]"):
        RayRequest(0, 1.5)
    with pytest.raises(InputError, match="gpu_memory_mib: must be a positive integer"):
        RayPlacer(0)
    with pytest.raises(NotSupportedError, match="the node agent does"):
        RayPlacer(GPU_MIB, tmp_path).mps.start(0)
