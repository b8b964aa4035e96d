"""A temporary replica's pod, built offline from a serving pod as the API server returns it:
pinned to its node, asking for one instance of its profile instead of the original's GPU
resources, labelled so that no ReplicaSet adopts it, and still a valid Pod (it round-trips
through the official client's model unchanged)."""

from __future__ import annotations

from typing import Any

import pytest

from cotenant.integrations.k8s.mig.pods import (
    NODE_ANNOTATION,
    ROTATION_LABEL,
    SERVICE_LABEL,
    TEMPORARY_LABEL,
    temporary_pod,
)
from cotenant.integrations.k8s.mig.rollout import TempReplica, pod_name

client = pytest.importorskip("kubernetes.client")

SERVING: dict[str, Any] = {
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {"name": "image-tagger-7d9c-abcde", "namespace": "serving",
                 "labels": {"app": "image-tagger", "pod-template-hash": "7d9c",
                            SERVICE_LABEL: "image-tagger", ROTATION_LABEL: "in"},
                 "annotations": {"cotenant.io/gpus": "0"},
                 "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                      "name": "image-tagger-7d9c", "uid": "u1",
                                      "controller": True}]},
    "spec": {"nodeName": "gpu-b", "nodeSelector": {"nvidia.com/mig.config": "x"},
             "serviceAccountName": "tagger",
             "containers": [
                 {"name": "sidecar", "image": "envoy:1", "resources": {
                     "limits": {"cpu": "1"}}},
                 {"name": "model", "image": "tagger:3", "ports": [{"containerPort": 8000}],
                  "resources": {"limits": {"nvidia.com/mig-4g.20gb": "1", "memory": "8Gi"},
                                "requests": {"nvidia.com/mig-4g.20gb": "1", "cpu": "2"}}}],
             "volumes": [{"name": "models", "emptyDir": {}}]},
    "status": {"phase": "Running"},
}
TEMP = TempReplica(pod_name("image-tagger", "gpu-a", 0, "2g.10gb@0"), "image-tagger", "gpu-a",
                   "2g.10gb", 700.0)


def test_the_copy_is_pinned_and_asks_for_its_profile() -> None:
    pod = temporary_pod(SERVING, TEMP)
    assert pod["metadata"]["name"] == "cotenant-temp-image-tagger-gpu-a-0-2g.10gb-0"
    assert pod["metadata"]["namespace"] == "serving"
    assert "ownerReferences" not in pod["metadata"]
    assert pod["metadata"]["labels"] == {"app": "image-tagger", SERVICE_LABEL: "image-tagger",
                                         TEMPORARY_LABEL: "true", ROTATION_LABEL: "out"}
    assert pod["metadata"]["annotations"] == {NODE_ANNOTATION: "gpu-a"}
    spec = pod["spec"]
    assert "nodeName" not in spec
    assert "nodeSelector" not in spec
    (term,) = spec["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert term == {"matchFields": [{"key": "metadata.name", "operator": "In",
                                     "values": ["gpu-a"]}]}
    sidecar, model = spec["containers"]
    assert sidecar["resources"] == {"limits": {"cpu": "1"}}
    assert model["resources"] == {"limits": {"memory": "8Gi", "nvidia.com/mig-2g.10gb": "1"},
                                  "requests": {"cpu": "2"}}
    assert spec["serviceAccountName"] == "tagger"
    assert "status" not in pod
    assert SERVING["spec"]["nodeName"] == "gpu-b"  # the original is not changed


def test_the_copy_is_a_valid_pod() -> None:
    pod = temporary_pod(SERVING, TEMP)
    assert client.ApiClient().sanitize_for_serialization(client.V1Pod.from_dict(pod)) == pod


def test_a_pod_without_gpu_resources_gets_its_instance_on_the_first_container() -> None:
    plain = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
    pod = temporary_pod(plain, TEMP)
    assert pod["spec"]["containers"][0]["resources"] == {
        "limits": {"nvidia.com/mig-2g.10gb": "1"}}
    assert pod["metadata"]["namespace"] == "default"


def test_pod_names_are_dns_subdomains() -> None:
    assert pod_name("Image_Tagger", "Node.One", 3, "1g.5gb@6") == (
        "cotenant-temp-image-tagger-node.one-3-1g.5gb-6")


def test_the_shipped_role_grants_every_call_the_client_makes() -> None:
    import ast  # noqa: PLC0415
    from pathlib import Path  # noqa: PLC0415

    import yaml  # noqa: PLC0415

    root = Path(__file__).resolve().parents[4]
    docs = list(yaml.safe_load_all((root / "deploy/kubernetes/mig-controller.yaml").read_text()))
    (role,) = [d for d in docs if d["kind"] == "ClusterRole"]
    granted = {(r, v) for rule in role["rules"] for r in rule["resources"] for v in rule["verbs"]}
    source = (root / "src/cotenant/integrations/k8s/mig/client.py").read_text()
    calls = {n.func.attr for n in ast.walk(ast.parse(source))
             if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)}
    verbs = {"read_node": ("nodes", "get"), "patch_node": ("nodes", "patch"),
             "list_pod_for_all_namespaces": ("pods", "list"),
             "patch_namespaced_pod": ("pods", "patch"),
             "create_namespaced_pod": ("pods", "create"),
             "delete_namespaced_pod": ("pods", "delete")}
    api_calls = {c for c in calls if c.endswith(("_node", "_pod", "_namespaces"))}
    assert api_calls == set(verbs)  # every call the client makes is in the table above
    assert {verbs[c] for c in api_calls} == granted  # and the role grants exactly those


def test_init_containers_annotations_spread_and_token_volumes() -> None:
    serving = dict(SERVING, metadata=dict(SERVING["metadata"], annotations={
        "cotenant.io/gpus": "0", "cotenant.io/gpu-milli": "1000", "cotenant.io/role": "online",
        "cotenant.io/model": "tagger", "cotenant.io/slo-ms": "50"}))
    token = {"name": "kube-api-access-x7k2p", "projected": {"sources": [
        {"serviceAccountToken": {"path": "token"}}]}}
    mount = {"name": "kube-api-access-x7k2p", "mountPath": "/var/run/secrets/x"}
    model = dict(SERVING["spec"]["containers"][1], volumeMounts=[
        mount, {"name": "models", "mountPath": "/models"}])
    serving["spec"] = dict(
        SERVING["spec"], containers=[SERVING["spec"]["containers"][0], model],
        initContainers=[{"name": "warm", "image": "tagger:3", "volumeMounts": [mount],
                         "resources": {"limits": {"nvidia.com/gpu": "1", "cpu": "1"}}}],
        volumes=[*SERVING["spec"]["volumes"], token],
        affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "image-tagger"}},
             "topologyKey": "kubernetes.io/hostname"}]},
            "podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []}},
        topologySpreadConstraints=[{"maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
                                    "whenUnsatisfiable": "DoNotSchedule"}])
    pod = temporary_pod(serving, TEMP)
    assert pod["metadata"]["annotations"] == {
        "cotenant.io/role": "online", "cotenant.io/model": "tagger", "cotenant.io/slo-ms": "50",
        NODE_ANNOTATION: "gpu-a"}
    spec = pod["spec"]
    (init,) = spec["initContainers"]
    assert init["resources"] == {"limits": {"cpu": "1", "nvidia.com/mig-2g.10gb": "1"}}
    assert init["volumeMounts"] == []
    assert spec["containers"][1]["volumeMounts"] == [{"name": "models", "mountPath": "/models"}]
    assert spec["volumes"] == [{"name": "models", "emptyDir": {}}]
    assert "podAntiAffinity" not in spec["affinity"]
    assert "podAffinity" in spec["affinity"]
    assert "topologySpreadConstraints" not in spec
    assert client.ApiClient().sanitize_for_serialization(client.V1Pod.from_dict(pod)) == pod


def test_a_gpu_sidecar_and_its_main_container_ask_for_one_instance_between_them() -> None:
    """A native sidecar (an init container with restartPolicy Always) runs beside the main
    containers, so its request adds to theirs: of the two GPU users only the sidecar asks,
    and the pod needs one instance, not two that its node may not have."""
    sidecar = {"name": "proxy", "image": "proxy:1", "restartPolicy": "Always",
               "resources": {"limits": {"nvidia.com/gpu": "1"}}}
    warm = {"name": "warm", "image": "tagger:3",
            "resources": {"limits": {"nvidia.com/gpu": "1"}}}
    serving = dict(SERVING, spec=dict(SERVING["spec"], initContainers=[warm, sidecar]))
    spec = temporary_pod(serving, TEMP)["spec"]
    asks = [c.get("resources", {}).get("limits", {}).get("nvidia.com/mig-2g.10gb")
            for c in (*spec["initContainers"], *spec["containers"])]
    assert asks[:2] == ["1", "1"]  # the plain init container, then the sidecar
    assert asks[2:] == [None] * len(spec["containers"])
    assert not any(k.startswith("nvidia.com/gpu") for c in spec["containers"]
                   for k in c.get("resources", {}).get("limits", {}))
