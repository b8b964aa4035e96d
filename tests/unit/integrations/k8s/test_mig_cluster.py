"""The MIG controller's client against a real API server (kind or k3s), opt-in like the
extender's: set ``COTENANT_K8S_KUBECONFIG`` to a throw-away cluster's kubeconfig.

It writes ``nvidia.com/mig.config`` on one node (a cluster without NVIDIA's MIG manager leaves
it unanswered), checks that the stale state label goes with the write, moves the node's serving
pods out of and into rotation, and removes the labels again. It creates a temporary replica
from a pause pod, puts it in rotation and deletes it.
"""

from __future__ import annotations

import contextlib
from typing import Any

import pytest

from cotenant.integrations.k8s.mig.steps import CONFIG_LABEL, STATE_LABEL
from tests.unit.integrations.k8s.live import answering, kubeconfig

pytestmark = pytest.mark.k8s



@pytest.fixture
def api() -> Any:
    config = kubeconfig()
    client_mod = pytest.importorskip("cotenant.integrations.k8s.mig.client")
    return answering(client_mod.ClientMigApi(config))


def test_labels_and_rotation_through_a_real_api_server(api: Any) -> None:
    node = api.core.list_node().items[0].metadata.name
    api.core.patch_node(node, {"metadata": {"labels": {STATE_LABEL: "success"}}})
    try:
        api.set_config(node, "cotenant-test")
        labels = api.node_labels(node)
        assert labels[CONFIG_LABEL] == "cotenant-test"
        assert STATE_LABEL not in labels  # the previous config's state is not read as this one's
        assert api.set_rotation(node, False) == api.set_rotation(node, True) >= 0
        assert all(p.rotation == "in" for p in api.serving_pods(node))
    finally:
        api.core.patch_node(node, {"metadata": {"labels": {CONFIG_LABEL: None,
                                                           STATE_LABEL: None}}})


def test_a_temporary_pod_through_a_real_api_server(api: Any) -> None:
    """A copy of a serving pod, pinned to a node and asking for a MIG instance the cluster
    does not have: it stays Pending (not Ready), goes in rotation by label, and is deleted."""
    from kubernetes import client  # noqa: PLC0415

    from cotenant.integrations.k8s.mig.rollout import TempReplica, pod_name  # noqa: PLC0415

    node = api.core.list_node().items[0].metadata.name
    source = client.V1Pod(
        metadata=client.V1ObjectMeta(name="cotenant-test-serving", namespace="default",
                                     labels={"cotenant.io/service": "cotenant-test"}),
        spec=client.V1PodSpec(containers=[client.V1Container(
            name="c", image="registry.k8s.io/pause:3.9")]))
    temp = TempReplica(pod_name("cotenant-test", node, 0, "1g.5gb@0"), "cotenant-test", node,
                       "1g.5gb", 0.0)
    api.core.create_namespaced_pod("default", source)
    try:
        api.create_temporary(temp)
        seen = api.temporary_pods()[temp.name]
        assert (seen.service, seen.ready, seen.serving) == ("cotenant-test", False, False)
        api.admit_temporary(temp.name)
        assert api.temporary_pods()[temp.name].serving
        api.remove_temporary(temp.name)
        gone = api.temporary_pods().get(temp.name)
        assert gone is None or not gone.serving
    finally:
        for name in ("cotenant-test-serving", temp.name):
            with contextlib.suppress(client.exceptions.ApiException):
                api.core.delete_namespaced_pod(name, "default", grace_period_seconds=0)
