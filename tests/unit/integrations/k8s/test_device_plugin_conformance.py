"""Conformance with the upstream kubelet-side client (optional, marked ``conformance``).

``kubelet/driver.go`` (this project's code) is compiled against the upstream package
``k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1`` and plays the kubelet: it serves
``Registration`` on a temporary ``kubelet.sock`` with the upstream server type, then drives
every RPC of our device plugin (a real gRPC server on unix sockets) with the upstream
``DevicePluginClient``, and reports what that client decoded, as the generated Go types'
JSON. Skipped cleanly unless a Go toolchain and the upstream package are found: the kubelet
source tree named by ``COTENANT_KUBELET_SRC``, or a GOPATH checkout at
``/usr/share/gocode/src/k8s.io/kubelet``. The build runs in GOPATH mode, offline
(``GOPROXY=off``), with the Go gRPC and protobuf libraries from the GOPATH (Debian's
``golang-google-grpc-dev`` and ``golang-github-gogo-protobuf-dev`` under /usr/share/gocode).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("grpc")
pytest.importorskip("grpc_tools")

from cotenant.agent.backends import FakeNode, ManualClock
from cotenant.agent.mps import MpsManager
from cotenant.integrations.k8s.deviceplugin.devices import Health, Resource
from cotenant.integrations.k8s.deviceplugin.plugin import DevicePluginDaemon
from cotenant.integrations.k8s.memory import MemoryKube, NodePods

pytestmark = pytest.mark.conformance

DRIVER = Path(__file__).with_name("kubelet") / "driver.go"
DEBIAN_GOPATH = Path("/usr/share/gocode")
PACKAGE = Path("pkg/apis/deviceplugin/v1beta1")
MILLI, WHOLE = "cotenant.io/gpu-milli", "nvidia.com/gpu"
BUILD_TIMEOUT_S = 600


def kubelet_source() -> Path:
    """The upstream k8s.io/kubelet tree, or a skip naming what is missing."""
    named = os.environ.get("COTENANT_KUBELET_SRC", "")
    root = Path(named) if named else DEBIAN_GOPATH / "src" / "k8s.io" / "kubelet"
    if not (root / PACKAGE / "api.proto").is_file():
        pytest.skip(f"no upstream k8s.io/kubelet at {root} (set COTENANT_KUBELET_SRC to a "
                    "checkout of github.com/kubernetes/kubelet)")
    return root


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The driver, built offline against the upstream package."""
    go = shutil.which("go")
    if go is None:
        pytest.skip("no Go toolchain on PATH")
    root = kubelet_source()
    gopath = tmp_path_factory.mktemp("gopath")
    (gopath / "src" / "k8s.io").mkdir(parents=True)
    (gopath / "src" / "k8s.io" / "kubelet").symlink_to(root.resolve())
    (gopath / "src" / "kubeletdriver").mkdir()
    shutil.copy(DRIVER, gopath / "src" / "kubeletdriver" / "main.go")
    own = subprocess.run([go, "env", "GOPATH"], check=False, capture_output=True,
                         text=True).stdout.strip()
    path = os.pathsep.join(p for p in (str(gopath), own, str(DEBIAN_GOPATH)) if p)
    env = {**os.environ, "GO111MODULE": "off", "GOPATH": path, "GOPROXY": "off",
           "GOFLAGS": ""}
    binary = gopath / "driver"
    try:
        built = subprocess.run([go, "build", "-o", str(binary), "kubeletdriver"], env=env,
                               check=False, capture_output=True, text=True,
                               timeout=BUILD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        built = None  # failed outside the handler, so no exception chain is printed
    if built is None:
        pytest.fail(f"go build of {DRIVER.name} against {root} took over {BUILD_TIMEOUT_S} s",
                    pytrace=False)
    if built.returncode != 0 and "cannot find package" in built.stderr:
        pytest.skip(f"the Go libraries the upstream package needs are missing: {built.stderr}")
    errors = [line for line in built.stderr.splitlines() if ".go:" in line]
    if errors and all("/k8s.io/kubelet/" in line for line in errors):  # not our driver's code
        pytest.skip(f"the upstream package does not build with the Go libraries here "
                    f"(a newer gRPC-Go?): {errors[0]}")
    assert built.returncode == 0, built.stderr
    return binary


def pod(name: str, requests: dict[str, str], gpus: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}",
                         "annotations": {"cotenant.io/gpus": gpus}},
            "spec": {"nodeName": "node-1",
                     "containers": [{"name": "main", "resources": {"requests": requests}}]}}


def drive(driver: Path, sockets: Path, calls: list[dict[str, Any]]) -> tuple[dict[str, Any],
                                                                                 Any, Any]:
    """Run our plugin (two resources on a fake 3-GPU node whose GPU 2 had a double-bit ECC
    error, XID 48, so it is unhealthy) under the upstream client."""
    backend = FakeNode.build("A100-40GB", 3, ManualClock())
    backend.inject_xid(2, 48)
    kube = MemoryKube()
    kube.add(pod("a", {MILLI: "250"}, "1"))
    kube.add(pod("b", {WHOLE: "1"}, "1"))
    mps = MpsManager(backend, sockets / "state")
    resources = [Resource(name, backend, NodePods(kube, "node-1"), mps, Health(backend))
                 for name in (MILLI, WHOLE)]
    daemon = DevicePluginDaemon(resources, sockets, poll_s=0.05, list_interval_s=0.05)
    script = sockets / "script.json"
    script.write_text(json.dumps({"dir": str(sockets), "registrations": 2, "timeout_s": 20,
                                  "calls": calls}))
    stop = threading.Event()
    runner = threading.Thread(target=daemon.run, args=(stop,), daemon=True)
    runner.start()
    try:
        done = subprocess.run([str(driver), str(script)], check=False, capture_output=True,
                              text=True, timeout=60)
    finally:
        stop.set()
        runner.join(timeout=10)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), backend, mps


def test_the_upstream_kubelet_client_drives_every_rpc(driver: Path, sockets: Path) -> None:
    ids = [f"GPU-fake-0000-m{k}" for k in range(250)]  # the kubelet's pick: any 250
    shares = [f"GPU-fake-0001-m{k}" for k in range(4)]
    calls: list[dict[str, Any]] = [
        {"resource": MILLI, "rpc": "GetDevicePluginOptions"},
        {"resource": MILLI, "rpc": "ListAndWatch"},
        {"resource": MILLI, "rpc": "Allocate",
         "request": {"container_requests": [{"devices_ids": ids}]}},
        {"resource": MILLI, "rpc": "Allocate",  # pod "a" is served: nobody else waits
         "request": {"container_requests": [{"devices_ids": ids}]}},
        {"resource": MILLI, "rpc": "PreStartContainer",
         "request": {"devices_ids": ["GPU-fake-0001-m3"]}},
        {"resource": MILLI, "rpc": "GetPreferredAllocation",  # the ids it must keep come first
         "request": {"container_requests": [{
             "available_deviceIDs": shares, "must_include_deviceIDs": [shares[2]],
             "allocation_size": 2}]}},
        {"resource": WHOLE, "rpc": "GetDevicePluginOptions"},
        {"resource": WHOLE, "rpc": "ListAndWatch"},
        {"resource": WHOLE, "rpc": "GetPreferredAllocation",
         "request": {"container_requests": [{
             "available_deviceIDs": ["GPU-fake-0000", "GPU-fake-0001"],
             "allocation_size": 1}]}},
        {"resource": WHOLE, "rpc": "Allocate",
         "request": {"container_requests": [{"devices_ids": ["GPU-fake-0001"]}]}},
    ]
    report, backend, mps = drive(driver, sockets, calls)

    assert "v1beta1" in report["supported_versions"]
    requests = {r["request"]["resource_name"]: r for r in report["registrations"]}
    assert set(requests) == {MILLI, WHOLE}
    milli = requests[MILLI]
    assert milli["version_supported"]
    assert milli["request"] == {
        "version": "v1beta1", "endpoint": "cotenant.io_gpu-milli.sock",
        "resource_name": MILLI, "options": {"pre_start_required": True,
                                            "get_preferred_allocation_available": True}}
    assert requests[WHOLE]["request"]["options"] == {"get_preferred_allocation_available": True}

    results = report["results"]
    assert [r["code"] for r in results] == ["OK", "OK", "OK", "FailedPrecondition", "OK",
                                            "OK", "OK", "OK", "OK", "OK"]
    options, listed, allocated, refused, started, kept = results[:6]
    assert options["response"] == {"pre_start_required": True,
                                   "get_preferred_allocation_available": True}
    devices = listed["response"]["devices"]
    assert len(devices) == 3000
    assert devices[0] == {"ID": "GPU-fake-0000-m0", "health": "Healthy"}
    assert {d["health"] for d in devices[:2000]} == {"Healthy"}
    assert devices[2000] == {"ID": "GPU-fake-0002-m0", "health": "Unhealthy"}
    assert {d["health"] for d in devices[2000:]} == {"Unhealthy"}

    (container,) = allocated["response"]["container_responses"]
    pipe = str(sockets / "state" / "mps" / "gpu1" / "pipe")
    assert container["envs"] == {
        "NVIDIA_VISIBLE_DEVICES": "GPU-fake-0001",  # the extender's GPU, not the ids'
        "CUDA_VISIBLE_DEVICES": "GPU-fake-0001",
        "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "25",
        "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": f"0={40960 * 250 // 1000}M",
        "CUDA_MPS_PIPE_DIRECTORY": pipe,
        "CUDA_MPS_LOG_DIRECTORY": str(sockets / "state" / "mps" / "gpu1" / "log"),
    }
    assert container["mounts"] == [{"container_path": pipe, "host_path": pipe}]  # read-write
    assert container["annotations"] == {"cotenant.io/gpus": "1"}
    assert "devices" not in container  # MPS shares need no device nodes of ours
    assert "no pod on this node waits for 250" in refused["message"]
    assert started["response"] == {}
    assert backend.daemon_healthy(mps.config(1))  # PreStartContainer started GPU 1's daemon
    # without must_include_deviceIDs the answer would be the first two available, m0 and m1
    assert kept["response"] == {"container_responses": [{"deviceIDs": [shares[2], shares[0]]}]}

    whole_options, whole_listed, preferred, whole = results[6:]
    assert whole_options["response"] == {"get_preferred_allocation_available": True}
    assert whole_listed["response"]["devices"] == [
        {"ID": "GPU-fake-0000", "health": "Healthy"}, {"ID": "GPU-fake-0001", "health": "Healthy"},
        {"ID": "GPU-fake-0002", "health": "Unhealthy"}]
    assert preferred["response"] == {"container_responses": [{"deviceIDs": ["GPU-fake-0001"]}]}
    (container,) = whole["response"]["container_responses"]
    assert container["envs"]["NVIDIA_VISIBLE_DEVICES"] == "GPU-fake-0001"
