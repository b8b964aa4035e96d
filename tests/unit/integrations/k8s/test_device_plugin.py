"""The device plugin as real gRPC servers on unix sockets, with the test playing the kubelet:
it serves ``Registration`` on a temporary ``kubelet.sock``, calls every plugin RPC as the
kubelet does, then restarts its socket and waits for the plugin to register again."""

from __future__ import annotations

import threading
import time
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

grpc = pytest.importorskip("grpc")
pytest.importorskip("grpc_tools")

from cotenant.agent.backends import FakeNode, ManualClock  # noqa: E402
from cotenant.agent.mps import MpsManager  # noqa: E402
from cotenant.errors import InputError  # noqa: E402
from cotenant.integrations.k8s.deviceplugin.devices import Health, Resource  # noqa: E402
from cotenant.integrations.k8s.deviceplugin.plugin import DevicePluginDaemon  # noqa: E402
from cotenant.integrations.k8s.deviceplugin.stubs import load  # noqa: E402
from cotenant.integrations.k8s.memory import MemoryKube, NodePods  # noqa: E402

pb2, pb2_grpc = load()


@dataclass
class Kubelet:
    """The kubelet's side: ``Registration`` on ``<dir>/kubelet.sock``, recording requests."""

    dir: Path
    requests: list[Any] = field(default_factory=list)
    server: Any = None
    seen: threading.Event = field(default_factory=threading.Event)

    def Register(self, request: Any, context: Any) -> Any:  # noqa: N802
        self.requests.append(request)
        self.seen.set()
        return pb2.Empty()

    def start(self) -> None:
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        pb2_grpc.add_RegistrationServicer_to_server(self, self.server)
        self.server.add_insecure_port(f"unix://{self.dir / 'kubelet.sock'}")
        self.server.start()

    def stop(self) -> None:
        """A kubelet going down: its socket and every plugin socket are removed."""
        self.server.stop(grace=0).wait()
        for sock in self.dir.glob("*.sock"):
            sock.unlink()

    def plugin(self, endpoint: str) -> Any:
        channel = grpc.insecure_channel(f"unix://{self.dir / endpoint}")
        return pb2_grpc.DevicePluginStub(channel)


def pod(name: str, node: str, requests: dict[str, str], gpus: str | None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "default", "uid": f"uid-{name}"}
    if gpus is not None:
        meta["annotations"] = {"cotenant.io/gpus": gpus, "cotenant.io/gpu-milli": "250"}
    return {"metadata": meta, "spec": {"nodeName": node, "containers": [
        {"name": "main", "resources": {"requests": requests}}]}}


def wait_for(condition: Any, timeout: float = 10.0) -> None:
    end = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.02)


def test_registers_serves_every_rpc_and_reregisters(sockets: Path) -> None:
    backend = FakeNode.build("A100-40GB", 2, ManualClock())
    kube = MemoryKube()
    kube.add(pod("early", "node-1", {"cotenant.io/gpu-milli": "250"}, None))  # not ours
    running = pod("running", "node-1", {"cotenant.io/gpu-milli": "250"}, "0")
    running["status"] = {"phase": "Running"}  # allocated before a plugin restart: not again
    kube.add(running)
    kube.add(pod("a", "node-1", {"cotenant.io/gpu-milli": "250"}, "1"))
    kube.add(pod("b", "node-1", {"nvidia.com/gpu": "1"}, "1"))
    mps = MpsManager(backend, sockets / "state")
    health = Health(backend)
    resources = [Resource(name, backend, NodePods(kube, "node-1"), mps, health)
                 for name in ("cotenant.io/gpu-milli", "nvidia.com/gpu")]
    daemon = DevicePluginDaemon(resources, sockets, poll_s=0.05, list_interval_s=0.05)
    kubelet = Kubelet(sockets)
    kubelet.start()
    stop = threading.Event()
    runner = threading.Thread(target=daemon.run, args=(stop,), daemon=True)
    runner.start()
    try:
        wait_for(lambda: len(kubelet.requests) == 2)
        by_name = {r.resource_name: r for r in kubelet.requests}
        milli = by_name["cotenant.io/gpu-milli"]
        assert (milli.version, milli.endpoint) == ("v1beta1", "cotenant.io_gpu-milli.sock")
        assert milli.options.pre_start_required
        assert milli.options.get_preferred_allocation_available
        assert not by_name["nvidia.com/gpu"].options.pre_start_required

        plugin = kubelet.plugin(milli.endpoint)
        options = plugin.GetDevicePluginOptions(pb2.Empty(), timeout=5)
        assert options.pre_start_required

        stream = plugin.ListAndWatch(pb2.Empty(), timeout=10)
        first = next(stream)
        assert len(first.devices) == 2000
        assert {d.health for d in first.devices} == {"Healthy"}
        assert first.devices[0].id == "GPU-fake-0000-m0"
        backend.inject_xid(1, 79)  # GPU 1 falls off the bus
        second = next(stream)
        unhealthy = {d.id.rsplit("-m", 1)[0] for d in second.devices if d.health == "Unhealthy"}
        assert unhealthy == {"GPU-fake-0001"}
        stream.cancel()

        ids = [f"GPU-fake-0000-m{k}" for k in range(250)]  # the kubelet's pick: any 250
        reply = plugin.Allocate(pb2.AllocateRequest(container_requests=[
            pb2.ContainerAllocateRequest(device_ids=ids)]), timeout=5)
        (container,) = reply.container_responses
        pipe = str(sockets / "state" / "mps" / "gpu1" / "pipe")
        assert dict(container.envs) == {
            "NVIDIA_VISIBLE_DEVICES": "GPU-fake-0001",  # the extender's GPU, not the ids'
            "CUDA_VISIBLE_DEVICES": "GPU-fake-0001",
            "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "25",
            "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": f"0={40960 * 250 // 1000}M",
            "CUDA_MPS_PIPE_DIRECTORY": pipe,
            "CUDA_MPS_LOG_DIRECTORY": str(sockets / "state" / "mps" / "gpu1" / "log"),
        }
        assert [(m.host_path, m.container_path) for m in container.mounts] == [(pipe, pipe)]

        with pytest.raises(grpc.RpcError) as failed:  # pod "a" is served: nobody else waits
            plugin.Allocate(pb2.AllocateRequest(container_requests=[
                pb2.ContainerAllocateRequest(device_ids=ids)]), timeout=5)
        assert failed.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert "no pod on this node waits for 250" in failed.value.details()

        assert not backend.daemon_healthy(mps.config(1))
        plugin.PreStartContainer(pb2.PreStartContainerRequest(
            device_ids=["GPU-fake-0001-m3"]), timeout=5)
        assert backend.daemon_healthy(mps.config(1))

        whole = kubelet.plugin(by_name["nvidia.com/gpu"].endpoint)
        preferred = whole.GetPreferredAllocation(pb2.PreferredAllocationRequest(
            container_requests=[pb2.ContainerPreferredAllocationRequest(
                available_device_ids=["GPU-fake-0000", "GPU-fake-0001"], allocation_size=1)]),
            timeout=5)
        assert list(preferred.container_responses[0].device_ids) == ["GPU-fake-0001"]
        reply = whole.Allocate(pb2.AllocateRequest(container_requests=[
            pb2.ContainerAllocateRequest(device_ids=["GPU-fake-0001"])]), timeout=5)
        assert reply.container_responses[0].envs["NVIDIA_VISIBLE_DEVICES"] == "GPU-fake-0001"

        kubelet.stop()  # the kubelet restarts: new socket, plugin sockets gone
        kubelet.requests.clear()
        kubelet.start()
        wait_for(lambda: len(kubelet.requests) == 2)
        assert {r.resource_name for r in kubelet.requests} == set(by_name)
        again = kubelet.plugin(milli.endpoint).GetDevicePluginOptions(pb2.Empty(), timeout=5)
        assert again.pre_start_required
        wait_for(lambda: daemon.registrations == 2)
    finally:
        stop.set()
        runner.join(timeout=10)
        kubelet.server.stop(grace=0)
    assert not (sockets / milli.endpoint).exists()


def test_mig_instances_are_advertised_by_uuid(sockets: Path) -> None:
    backend = FakeNode.build("A100-40GB", 1, ManualClock(), mig=True)
    placement = backend.create_instance(0, "1g.5gb")
    backend.create_instance(0, "3g.20gb")
    (uuid,) = [d.uuid for d in backend.mig_devices(0) if d.placement == placement]
    kube = MemoryKube()
    resource = Resource("nvidia.com/mig-1g.5gb", backend, NodePods(kube, "n"),
                        MpsManager(backend, sockets), Health(backend))
    assert resource.devices() == [(uuid, "Healthy")]
    assert resource.allocate([uuid]).envs == {"NVIDIA_VISIBLE_DEVICES": uuid,
                                              "CUDA_VISIBLE_DEVICES": uuid}


def test_an_unknown_resource_name_is_refused(sockets: Path) -> None:
    backend = FakeNode.build("A100-40GB", 1, ManualClock())
    with pytest.raises(InputError, match="not a resource cotenant advertises"):
        Resource("cotenant.io/gpu", backend, NodePods(MemoryKube(), "n"),
                 MpsManager(backend, sockets), Health(backend))


def test_the_kubelet_down_means_waiting_not_failing(sockets: Path) -> None:
    backend = FakeNode.build("A100-40GB", 1, ManualClock())
    resource = Resource("nvidia.com/gpu", backend, NodePods(MemoryKube(), "n"),
                        MpsManager(backend, sockets), Health(backend))
    daemon = DevicePluginDaemon([resource], sockets, poll_s=0.05)
    assert daemon.step() is False  # no kubelet.sock yet
    kubelet = Kubelet(sockets)
    kubelet.start()
    try:
        assert daemon.step() is True
        assert daemon.step() is False  # registered and nothing changed
    finally:
        daemon.close()
        kubelet.server.stop(grace=0)


def test_whole_gpus_in_milli_get_every_annotated_gpu_and_no_mps(sockets: Path) -> None:
    backend = FakeNode.build("A100-40GB", 4, ManualClock())
    kube = MemoryKube()
    kube.add(pod("w", "n", {"cotenant.io/gpu-milli": "2000"}, "1,3"))
    resource = Resource("cotenant.io/gpu-milli", backend, NodePods(kube, "n"),
                        MpsManager(backend, sockets), Health(backend))
    answer = resource.allocate([f"GPU-fake-0000-m{k}" for k in range(2000)])
    assert answer.envs == {"NVIDIA_VISIBLE_DEVICES": "GPU-fake-0001,GPU-fake-0003",
                           "CUDA_VISIBLE_DEVICES": "GPU-fake-0001,GPU-fake-0003"}
    assert answer.mounts == ()


def test_a_gpu_the_inventory_cannot_read_is_unhealthy_for_that_poll(sockets: Path) -> None:
    clock = ManualClock()
    backend = FakeNode.build("A100-40GB", 1, clock)
    resource = Resource("nvidia.com/gpu", backend, NodePods(MemoryKube(), "n"),
                        MpsManager(backend, sockets), Health(backend))
    backend.inject_nvml_error("gpus")
    assert resource.devices() == []  # nothing readable: nothing advertised as healthy
    assert resource.devices() == [("GPU-fake-0000", "Healthy")]
    backend.inject_xid(0, 13)  # an application fault: the GPU stays healthy
    assert resource.devices() == [("GPU-fake-0000", "Healthy")]
    clock.advance(1.0)  # events are read by time, as the agent's supervisor reads them
    backend.inject_xid(0, 48)  # a double-bit ECC error
    assert resource.devices() == [("GPU-fake-0000", "Unhealthy")]
