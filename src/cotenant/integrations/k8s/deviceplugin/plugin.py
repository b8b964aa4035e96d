"""The device plugin's gRPC side: one server per resource on a unix socket in the kubelet's
plugin directory, registered with the kubelet, and registered again when the kubelet restarts.

The kubelet serves ``Registration`` on ``<dir>/kubelet.sock``; a plugin serves
``DevicePlugin`` on ``<dir>/<endpoint>`` and calls ``Register(version, endpoint, resource,
options)``. A restarting kubelet recreates ``kubelet.sock`` and deletes the plugins' sockets,
so :class:`DevicePluginDaemon` watches the socket's identity (inode and change time) and, when
it changes or a socket of its own is gone, restarts its servers and registers again. This is
how the upstream plugins behave (the kubelet documents that plugins must re-register).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc

from cotenant.errors import CotenantError
from cotenant.integrations.k8s.deviceplugin.devices import Resource
from cotenant.integrations.k8s.deviceplugin.stubs import VERSION, load

log = logging.getLogger(__name__)
KUBELET_SOCKET = "kubelet.sock"
DEFAULT_DIR = Path("/var/lib/kubelet/device-plugins")


def endpoint_of(resource: str) -> str:
    """``cotenant.io/gpu-milli`` -> ``cotenant.io_gpu-milli.sock``."""
    return resource.replace("/", "_") + ".sock"


class _Servicer:
    """``DevicePlugin`` for one :class:`Resource` (gRPC finds the methods by name)."""

    def __init__(self, resource: Resource, stop: threading.Event, list_interval_s: float) -> None:
        self.resource = resource
        self.stop = stop
        self.interval = list_interval_s
        self.lock = threading.Lock()
        self.pb2, _ = load()

    def GetDevicePluginOptions(self, request: Any, context: Any) -> Any:  # noqa: N802
        return self.pb2.DevicePluginOptions(
            pre_start_required=self.resource.pre_start_required,
            get_preferred_allocation_available=True)

    def ListAndWatch(self, request: Any, context: Any) -> Iterator[Any]:  # noqa: N802
        last: list[tuple[str, str]] | None = None
        while context.is_active() and not self.stop.is_set():
            with self.lock:
                devices = self.resource.devices()
            if devices != last:
                last = devices
                yield self.pb2.ListAndWatchResponse(
                    devices=[self.pb2.Device(id=i, health=h) for i, h in devices])
            self.stop.wait(self.interval)

    def GetPreferredAllocation(self, request: Any, context: Any) -> Any:  # noqa: N802
        with self.lock:
            replies = [
                self.pb2.ContainerPreferredAllocationResponse(device_ids=self.resource.preferred(
                    list(c.available_device_ids), list(c.must_include_device_ids),
                    c.allocation_size))
                for c in request.container_requests
            ]
        return self.pb2.PreferredAllocationResponse(container_responses=replies)

    def Allocate(self, request: Any, context: Any) -> Any:  # noqa: N802
        pb2, replies = self.pb2, []
        try:
            with self.lock:
                for container in request.container_requests:
                    a = self.resource.allocate(list(container.device_ids))
                    replies.append(pb2.ContainerAllocateResponse(
                        envs=a.envs, annotations=a.annotations,
                        mounts=[pb2.Mount(host_path=h, container_path=c, read_only=r)
                                for h, c, r in a.mounts]))
        except CotenantError as exc:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, exc.one_line())
        return pb2.AllocateResponse(container_responses=replies)

    def PreStartContainer(self, request: Any, context: Any) -> Any:  # noqa: N802
        try:
            with self.lock:
                self.resource.pre_start(list(request.device_ids))
        except CotenantError as exc:
            context.abort(grpc.StatusCode.UNAVAILABLE, exc.one_line())
        return self.pb2.PreStartContainerResponse()


class PluginServer:
    """One resource's gRPC server on ``<plugin_dir>/<endpoint>``."""

    def __init__(self, resource: Resource, plugin_dir: Path, list_interval_s: float) -> None:
        self.resource = resource
        self.path = plugin_dir / endpoint_of(resource.name)
        self.list_interval_s = list_interval_s
        self._server: grpc.Server | None = None
        self._stop = threading.Event()

    def start(self) -> None:
        _, pb2_grpc = load()
        self.path.unlink(missing_ok=True)
        self._stop = threading.Event()
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        servicer = _Servicer(self.resource, self._stop, self.list_interval_s)
        pb2_grpc.add_DevicePluginServicer_to_server(servicer, server)
        server.add_insecure_port(f"unix://{self.path}")
        server.start()
        self._server = server

    def stop(self) -> None:
        self._stop.set()
        if self._server is not None:
            self._server.stop(grace=0.5).wait()
            self._server = None

    def register(self, kubelet: Path, timeout_s: float = 5.0) -> None:
        """``Registration.Register`` with the kubelet on ``kubelet``."""
        pb2, pb2_grpc = load()
        with grpc.insecure_channel(f"unix://{kubelet}") as channel:
            grpc.channel_ready_future(channel).result(timeout=timeout_s)
            pb2_grpc.RegistrationStub(channel).Register(pb2.RegisterRequest(
                version=VERSION, endpoint=self.path.name, resource_name=self.resource.name,
                options=pb2.DevicePluginOptions(
                    pre_start_required=self.resource.pre_start_required,
                    get_preferred_allocation_available=True)), timeout=timeout_s)


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_ino, st.st_ctime_ns


class DevicePluginDaemon:
    """Serves and registers every resource; :meth:`step` re-registers after a kubelet restart."""

    def __init__(self, resources: list[Resource], plugin_dir: Path = DEFAULT_DIR, *,
                 poll_s: float = 1.0, list_interval_s: float = 5.0) -> None:
        self.plugin_dir = plugin_dir
        self.kubelet = plugin_dir / KUBELET_SOCKET
        self.poll_s = poll_s
        self.servers = [PluginServer(r, plugin_dir, list_interval_s) for r in resources]
        self.registered_with: tuple[int, int] | None = None
        self.registrations = 0
        self.last_error = ""

    def step(self) -> bool:
        """(Re)start and register when needed; True when it registered now."""
        kubelet = _identity(self.kubelet)
        if kubelet is None:
            return False  # the kubelet is down: wait for its socket
        ours = all(s.path.exists() for s in self.servers)
        if kubelet == self.registered_with and ours:
            return False
        for server in self.servers:
            server.stop()
            server.start()
        try:
            for server in self.servers:
                server.register(self.kubelet)
        except grpc.RpcError as exc:  # also a timed-out channel_ready_future
            self.last_error = f"registering with {self.kubelet}: {exc}"
            log.warning("%s; retrying", self.last_error)
            return False
        except grpc.FutureTimeoutError:
            self.last_error = f"registering with {self.kubelet}: the kubelet does not answer"
            log.warning("%s; retrying", self.last_error)
            return False
        self.registered_with = kubelet
        self.registrations += 1
        return True

    def run(self, stop: threading.Event) -> None:
        """Until ``stop``: keep the plugins served and registered."""
        try:
            while True:
                self.step()
                if stop.wait(self.poll_s):
                    return
        finally:
            self.close()

    def close(self) -> None:
        for server in self.servers:
            server.stop()
            server.path.unlink(missing_ok=True)
