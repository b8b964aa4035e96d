"""One contract for every backend: the fake node always, NVML where a GPU is present.

Read-only against real hardware: MIG layouts are read and checked against the catalog but only
changed on the fake; processes started are harmless (``sleep``) on a real host.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from cotenant.agent.backends import (
    BackendFeature,
    DaemonConfig,
    FakeNode,
    ManualClock,
    NodeBackend,
    ProcState,
    open_backend,
    require,
)
from cotenant.errors import CotenantError, InputError, NotSupportedError
from cotenant.model.gpu import CATALOG

from .conftest import nvml_gpu_count

BACKENDS = [
    pytest.param("fake", id="fake"),
    pytest.param("fake-mig", id="fake-mig"),
    pytest.param("nvml", id="nvml", marks=pytest.mark.gpu),
]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> NodeBackend:
    name = str(request.param)
    if name == "nvml" and nvml_gpu_count() == 0:
        pytest.skip("no NVIDIA GPU/NVML here")
    return open_backend(name.removesuffix("-mig"), gpus="A100-40GB:2", state_dir=tmp_path,
                        clock=ManualClock(), fake_mig=name == "fake-mig")


def idle_argv(backend: NodeBackend) -> list[str]:
    return ["fake-workload"] if isinstance(backend, FakeNode) else ["sleep", "60"]


def test_inventory_lists_gpus_by_index(backend: NodeBackend) -> None:
    gpus = backend.gpus()
    assert gpus
    assert [g.index for g in gpus] == list(range(len(gpus)))
    for info in gpus:
        assert backend.gpu(info.index).uuid == info.uuid
        assert 0 <= info.memory_used_mib <= info.memory_total_mib
        if info.utilisation_pct is not None:  # NVML reports none in MIG mode
            assert 0.0 <= info.utilisation_pct <= 100.0


def test_unknown_gpu_index_is_input_error(backend: NodeBackend) -> None:
    with pytest.raises(InputError, match="no such GPU"):
        backend.gpu(len(backend.gpus()))


def test_features_are_declared(backend: NodeBackend) -> None:
    features = backend.features()
    assert BackendFeature.PROCESS_CONTROL in features
    require(features, BackendFeature.PROCESS_CONTROL, "node")


def test_mig_layout_reads_back_valid(backend: NodeBackend) -> None:
    if BackendFeature.MIG not in backend.features():
        pytest.skip("MIG mode is off on this node")
    if isinstance(backend, FakeNode):  # a layout to read back (real GPUs are only read)
        backend.create_instance(1, "3g.20gb", 4)
        backend.create_instance(1, "2g.10gb", 0)
        backend.create_instance(1, "1g.5gb", 2)
    for info in backend.gpus():
        geometry = CATALOG.get(info.model).mig
        assert geometry is not None
        layout = backend.mig_layout(info.index)
        geometry.check(layout.placements)
    if isinstance(backend, FakeNode):
        assert str(backend.mig_layout(1)) == "2g.10gb@0,1g.5gb@2,3g.20gb@4"


def test_process_spawn_poll_signal(backend: NodeBackend) -> None:
    argv = idle_argv(backend)
    pid = backend.spawn(argv, {}, 0)
    assert backend.poll(pid).state is ProcState.RUNNING
    assert pid in backend.pids()
    backend.send_signal(pid, signal.SIGTERM)
    status = backend.poll(pid)
    for _ in range(100):
        if status.state is not ProcState.RUNNING:
            break
        time.sleep(0.05)  # a real process needs a moment to die
        status = backend.poll(pid)
    assert status.state is ProcState.EXITED
    assert status.returncode == -signal.SIGTERM
    assert pid not in backend.pids()
    backend.send_signal(pid, signal.SIGTERM)  # already gone: no-op


def test_unknown_pid_is_unknown(backend: NodeBackend) -> None:
    assert backend.poll(2**22 + 12345).state is ProcState.UNKNOWN


# --- rules only the fake can show without touching real hardware ----------------------------


def test_fake_creation_order_caveat_of_the_mig_guide() -> None:
    node = FakeNode.build("A100-40GB", mig=True)
    for name in ("1g.5gb", "1g.5gb", "2g.10gb"):
        node.create_instance(0, name)
    with pytest.raises(CotenantError, match="Insufficient Resources"):
        node.create_instance(0, "3g.20gb")
    other = FakeNode.build("A100-40GB", mig=True)
    for name in ("3g.20gb", "1g.5gb", "2g.10gb", "1g.5gb"):
        other.create_instance(0, name)
    assert sorted(other.mig_layout(0).compute_slices()) == [1, 1, 2, 3]


def test_fake_refuses_overlap_and_bad_start() -> None:
    node = FakeNode.build("H100-80GB", mig=True)
    node.create_instance(0, "4g.40gb", 0)
    assert node.possible_starts(0, "3g.40gb") == (4,)
    with pytest.raises(CotenantError, match="Insufficient Resources"):
        node.create_instance(0, "2g.20gb", 2)
    with pytest.raises(CotenantError, match="Insufficient Resources"):
        node.create_instance(0, "1g.10gb", 7)


def test_fake_mig_on_non_mig_gpu_is_not_supported() -> None:
    node = FakeNode.build("T4")
    assert BackendFeature.MIG not in node.features()
    with pytest.raises(NotSupportedError):
        node.mig_layout(0)


def test_fake_refuses_destroy_while_processes_run() -> None:
    node = FakeNode.build("A100-40GB", mig=True)
    placement = node.create_instance(0, "7g.40gb")
    pid = node.spawn(["fake-workload"], {}, 0)
    with pytest.raises(CotenantError, match="In use"):
        node.destroy_instance(0, placement)
    node.send_signal(pid, signal.SIGKILL)
    node.destroy_instance(0, placement)
    assert not node.mig_layout(0).placements


def test_fake_process_past_its_pinned_limit_fails_with_oom(node: FakeNode) -> None:
    config = DaemonConfig(0, Path("/tmp/p0"), Path("/tmp/l0"))
    node.start_daemon(config)
    env = {"CUDA_MPS_PIPE_DIRECTORY": "/tmp/p0", "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": "0=2000M"}
    argv = ["fake-workload", "--mem-mib", "1500", "--grow-mib", "1000", "--grow-at-s", "5"]
    pid = node.spawn(argv, env, 0)
    assert node.gpu(0).memory_used_mib == 1500
    assert isinstance(node.clock, ManualClock)
    node.clock.advance(5)
    status = node.poll(pid)
    assert status.state is ProcState.EXITED
    assert "out of memory" in status.message
    assert node.gpu(0).memory_used_mib == 0


def test_fake_mps_fault_reaches_every_client_and_blocks_new_ones(
    node: FakeNode, clock: ManualClock
) -> None:
    node.start_daemon(DaemonConfig(0, Path("/tmp/p0"), Path("/tmp/l0")))
    env = {"CUDA_MPS_PIPE_DIRECTORY": "/tmp/p0"}
    online = node.spawn(["fake-workload"], env, 0)
    bad = node.spawn(["fake-workload", "--crash-at-s", "2"], env, 0)
    outsider = node.spawn(["fake-workload"], {}, 1)
    clock.advance(2.5)
    assert node.poll(bad).state is ProcState.EXITED
    assert node.poll(online).state is ProcState.RUNNING  # still tearing down
    with pytest.raises(CotenantError, match="refuses new clients"):
        node.spawn(["fake-workload"], env, 0)
    clock.advance(1.0)
    assert "MPS" in node.poll(online).message
    assert node.poll(outsider).state is ProcState.RUNNING
    node.spawn(["fake-workload"], env, 0)  # accepted again once the faulted clients exited
