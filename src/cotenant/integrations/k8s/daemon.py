"""The two Kubernetes daemons as library calls: build, run until SIGINT/SIGTERM, shut down.

:func:`run_extender` starts the informers (Nodes, Pods) and the HTTP server;
:func:`run_device_plugin` serves and registers the device plugin's resources;
:func:`take_snapshot` writes the cluster as openb lists. The CLI parses
options and calls one of these (the daemons' loops live here, not in the CLI).
"""

from __future__ import annotations

import importlib
import signal
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from cotenant.agent.backends import open_backend
from cotenant.agent.mps import MpsManager
from cotenant.integrations.k8s import snapshot
from cotenant.integrations.k8s.cache import ClusterCache
from cotenant.integrations.k8s.deviceplugin.devices import Health, Resource, check_resource
from cotenant.integrations.k8s.deviceplugin.plugin import DEFAULT_DIR, DevicePluginDaemon
from cotenant.integrations.k8s.extender import Extender
from cotenant.integrations.k8s.server import ExtenderServer
from cotenant.model.workload import PodShape
from cotenant.policies.placement import PLACEMENT
from cotenant.traces.openb import iter_pods
from cotenant.traces.synthetic import default_params, generate_pods

if TYPE_CHECKING:
    from cotenant.integrations.k8s.kube import Informer

TYPICAL_SAMPLE = 8000  # synthetic pods drawn for FGD's typical pods when no trace is given


def stop_on_signals() -> threading.Event:
    """An event set by SIGINT or SIGTERM (the kubelet's and Kubernetes' stop signal)."""
    stop = threading.Event()

    def handler(*_: object) -> None:
        stop.set()

    signal.signal(signal.SIGINT, handler)
    signal.signal(signal.SIGTERM, handler)
    return stop


def workload_shapes(path: Path | None, seed: int = 0) -> list[PodShape]:
    """The workload's shapes: of an openb pod list, else of synthetic openb-like pods."""
    if path is not None:
        return [p.shape for p in iter_pods(path)]
    pods = generate_pods(default_params(), TYPICAL_SAMPLE, np.random.default_rng(seed))
    return [p.shape for p in pods]


@dataclass(frozen=True)
class ExtenderConfig:
    """How to run the extender."""

    policy: str = "fgd"
    """A placement policy name (``cotenant policies`` lists them)."""
    workload: Path | None = None
    """An openb pod list whose shapes model the workload, for the policies that use one (FGD's
    typical pods, cotenant-pack's prices); default: synthetic openb-like."""
    host: str = "0.0.0.0"
    port: int = 8888
    kubeconfig: Path | None = None
    """None: the in-cluster service account."""
    resync_s: int = 300
    assume_ttl_s: float = 30.0


def policy_args(config: ExtenderConfig) -> dict[str, object]:
    """What the policy is built with: the workload's shapes for a policy that models the
    workload (FGD, cotenant-pack), else nothing."""
    factory = None if ":" in config.policy else PLACEMENT.get(config.policy)
    if getattr(factory, "uses_workload", False):
        return {"workload": workload_shapes(config.workload)}
    return {}


def build_extender(config: ExtenderConfig) -> tuple[ExtenderServer, Informer]:
    """The server and its informer (not started); the kubernetes client is imported here."""
    kube_mod = importlib.import_module("cotenant.integrations.k8s.kube")
    cache = ClusterCache(PLACEMENT.create(config.policy, **policy_args(config)), time.monotonic,
                         assume_ttl_s=config.assume_ttl_s)
    kube = kube_mod.ClientKube(config.kubeconfig)
    informer: Informer = kube_mod.Informer(kube, cache, config.resync_s)
    return ExtenderServer(Extender(cache, kube), config.host, config.port), informer


def run_extender(config: ExtenderConfig) -> None:
    """Serve until SIGINT/SIGTERM."""
    server, informer = build_extender(config)
    stop = stop_on_signals()
    informer.stop = stop
    threading.Thread(target=informer.run, name="informer", daemon=True).start()
    server.start()
    stop.wait()
    server.shutdown()
    server.server_close()


@dataclass(frozen=True)
class DevicePluginConfig:
    """How to run the device plugin."""

    node: str
    """This node's name (the pod's ``spec.nodeName``; in a DaemonSet, from the downward API)."""
    resources: Sequence[str] = ("cotenant.io/gpu-milli",)
    backend: str = "nvml"
    gpus: str = "A100-40GB:4"
    """The fake backend's GPUs."""
    state_dir: Path = Path("/var/lib/cotenant")
    """Where the agent's MPS daemons keep their pipe and log directories."""
    plugin_dir: Path = DEFAULT_DIR
    kubeconfig: Path | None = None


def run_device_plugin(config: DevicePluginConfig) -> None:
    """Serve and register until SIGINT/SIGTERM."""
    for name in config.resources:
        check_resource(name)
    kube_mod = importlib.import_module("cotenant.integrations.k8s.kube")
    backend = open_backend(config.backend, gpus=config.gpus, state_dir=config.state_dir)
    pods = kube_mod.ApiNodePods(kube_mod.ClientKube(config.kubeconfig), config.node)
    mps, health = MpsManager(backend, config.state_dir), Health(backend)
    resources = [Resource(name, backend, pods, mps, health) for name in config.resources]
    DevicePluginDaemon(resources, config.plugin_dir).run(stop_on_signals())


def take_snapshot(kubeconfig: Path | None, out_dir: Path) -> tuple[Path, Path, list[str]]:
    """List Nodes and Pods, write them as openb lists into ``out_dir``; the two paths and
    the pods left out (one line each)."""
    kube_mod = importlib.import_module("cotenant.integrations.k8s.kube")
    kube = kube_mod.ClientKube(kubeconfig)
    nodes = [kube.to_json(n) for n in kube.core.list_node().items]
    pods = [kube.to_json(p) for p in kube.core.list_pod_for_all_namespaces().items]
    snap = snapshot.snapshot(nodes, pods)
    node_path, pod_path = snapshot.write(snap, out_dir)
    return node_path, pod_path, snap.skipped
