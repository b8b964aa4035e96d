"""The MIG controller's client against a real API server (kind or k3s), opt-in like the
extender's: set ``COTENANT_K8S_KUBECONFIG`` to a throw-away cluster's kubeconfig.

It writes ``nvidia.com/mig.config`` on one node (a cluster without NVIDIA's MIG manager leaves
it unanswered), checks that the stale state label goes with the write, moves the node's serving
pods out of and into rotation, and removes the labels again.
"""

from __future__ import annotations

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
    finally:
        api.core.patch_node(node, {"metadata": {"labels": {CONFIG_LABEL: None,
                                                           STATE_LABEL: None}}})
