"""The extender against a real API server (kind or k3s): the informer's list and watch, and a
bind that writes the annotation and the Binding through the official client.

Opt-in, because it writes to the cluster: set ``COTENANT_K8S_KUBECONFIG`` to a kubeconfig of a
throw-away cluster (docs/kubernetes.md shows how with kind). It adds ``cotenant.io/gpu-milli``
capacity to one node's status, creates a pod no scheduler claims, binds it through the
extender's HTTP API, and deletes the pod and the capacity again.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.request
import uuid
from typing import Any

import pytest

from cotenant.agent.backends import ManualClock
from cotenant.integrations.k8s.cache import ClusterCache
from cotenant.integrations.k8s.extender import Extender
from cotenant.integrations.k8s.server import ExtenderServer
from cotenant.policies.placement import PLACEMENT
from tests.unit.integrations.k8s.live import answering, kubeconfig

pytestmark = pytest.mark.k8s



@pytest.fixture
def cluster() -> Any:
    config = kubeconfig()
    kube_mod = pytest.importorskip("cotenant.integrations.k8s.kube")
    return kube_mod, answering(kube_mod.ClientKube(config))


def post(url: str, body: dict[str, Any]) -> Any:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST")
    with urllib.request.urlopen(req, timeout=10) as reply:
        return json.loads(reply.read())


def test_bind_through_a_real_api_server(cluster: Any) -> None:
    kube_mod, kube = cluster
    client = kube.client
    node = kube.core.list_node().items[0].metadata.name
    path = "/status/capacity/cotenant.io~1gpu-milli"
    kube.core.patch_node_status(node, [{"op": "add", "path": path, "value": "2000"}])
    cache = ClusterCache(PLACEMENT.create("best-fit"), ManualClock())
    informer = kube_mod.Informer(kube, cache, resync_s=30)
    threading.Thread(target=informer.run, daemon=True).start()
    server = ExtenderServer(Extender(cache, kube), port=0)
    server.start()
    name = f"cotenant-test-{uuid.uuid4().hex[:8]}"
    try:
        pod = client.V1Pod(
            metadata=client.V1ObjectMeta(name=name, namespace="default"),
            spec=client.V1PodSpec(scheduler_name="cotenant-test-nobody", containers=[
                client.V1Container(name="main", image="registry.k8s.io/pause:3.9",
                                   resources=client.V1ResourceRequirements(requests={
                                       "cpu": "10m", "cotenant.io/gpu-milli": "250"}, limits={
                                       "cotenant.io/gpu-milli": "250"}))]))
        created = kube.core.create_namespaced_pod("default", pod)
        uid = created.metadata.uid
        deadline = time.monotonic() + 30
        while uid not in cache.pending or node not in cache.nodes:
            assert time.monotonic() < deadline, "the informer never saw the pod and node"
            time.sleep(0.2)
        body = {"Pod": kube.to_json(created), "Nodes": None, "NodeNames": [node]}
        assert post(f"{server.url}/filter", body)["NodeNames"] == [node]
        assert post(f"{server.url}/prioritize", body) == [{"Host": node, "Score": 10}]
        reply = post(f"{server.url}/bind", {"PodName": name, "PodNamespace": "default",
                                            "PodUID": uid, "Node": node})
        assert reply == {"Error": ""}
        stored = kube.core.read_namespaced_pod(name, "default")
        assert stored.spec.node_name == node
        assert stored.metadata.annotations["cotenant.io/gpus"] == "0"
        assert stored.metadata.annotations["cotenant.io/gpu-milli"] == "250"
    finally:
        informer.stop.set()
        server.shutdown()
        server.server_close()
        kube.core.delete_namespaced_pod(name, "default", grace_period_seconds=0)
        kube.core.patch_node_status(node, [{"op": "remove", "path": path}])
