"""Pods, Nodes and kube-scheduler extender request bodies as test data.

Pods and Nodes are built with the official ``kubernetes`` client's models and serialised as
the API server serves them. The extender bodies are retyped by hand from the Go types of
``k8s.io/kube-scheduler/extender/v1`` (``types.go``: ``ExtenderArgs{Pod *v1.Pod; Nodes
*v1.NodeList; NodeNames *[]string}``, ``ExtenderBindingArgs{PodName, PodNamespace string;
PodUID types.UID; Node string}``): the struct fields have no JSON tags, so the keys are the
field names, and the unused one of ``Nodes``/``NodeNames`` is encoded as ``null``.
"""

from __future__ import annotations

from typing import Any

import pytest

client = pytest.importorskip("kubernetes.client")

SERIALISE = client.ApiClient().sanitize_for_serialization


def node(name: str, gpus: int = 8, *, product: str = "NVIDIA-A100-SXM4-40GB", cpu: str = "96",
         memory: str = "512Gi", extra: dict[str, str] | None = None) -> dict[str, Any]:
    allocatable = {"cpu": cpu, "memory": memory, "pods": "110", **(extra or {})}
    labels = {"kubernetes.io/hostname": name}
    if gpus:
        allocatable["nvidia.com/gpu"] = str(gpus)
        labels["nvidia.com/gpu.product"] = product
    obj = client.V1Node(
        api_version="v1", kind="Node",
        metadata=client.V1ObjectMeta(name=name, labels=labels),
        status=client.V1NodeStatus(allocatable=allocatable, capacity=allocatable),
    )
    data: dict[str, Any] = SERIALISE(obj)
    return data


def pod(name: str, requests: dict[str, str], *, namespace: str = "default",
        annotations: dict[str, str] | None = None, node_name: str | None = None,
        uid: str | None = None) -> dict[str, Any]:
    obj = client.V1Pod(
        api_version="v1", kind="Pod",
        metadata=client.V1ObjectMeta(name=name, namespace=namespace, uid=uid or f"uid-{name}",
                                     annotations=annotations),
        spec=client.V1PodSpec(
            node_name=node_name, scheduler_name="default-scheduler",
            containers=[client.V1Container(
                name="main", image="registry.example/serve:1",
                resources=client.V1ResourceRequirements(requests=requests, limits=requests),
            )],
        ),
        status=client.V1PodStatus(phase="Pending"),
    )
    data: dict[str, Any] = SERIALISE(obj)
    return data


def args_by_name(the_pod: dict[str, Any], names: list[str]) -> dict[str, Any]:
    """ExtenderArgs as sent to a ``nodeCacheCapable: true`` extender."""
    return {"Pod": the_pod, "Nodes": None, "NodeNames": names}


def args_by_object(the_pod: dict[str, Any], nodes: list[dict[str, Any]]) -> dict[str, Any]:
    """ExtenderArgs as sent to a ``nodeCacheCapable: false`` extender: a v1.NodeList."""
    return {"Pod": the_pod, "Nodes": {"metadata": {}, "items": nodes}, "NodeNames": None}


def binding_args(name: str, node_name: str, namespace: str = "default") -> dict[str, Any]:
    return {"PodName": name, "PodNamespace": namespace, "PodUID": f"uid-{name}",
            "Node": node_name}
