"""The MIG controller's client against a real API server (kind or k3s), opt-in like the
extender's: set ``COTENANT_K8S_KUBECONFIG`` to a throw-away cluster's kubeconfig.

It writes ``nvidia.com/mig.config`` on one node (a cluster without NVIDIA's MIG manager leaves
it unanswered), checks that the stale state label goes with the write, moves the node's serving
pods out of and into rotation, and removes the labels again.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from cotenant.integrations.k8s.mig.steps import CONFIG_LABEL, STATE_LABEL

pytestmark = pytest.mark.k8s

KUBECONFIG = os.environ.get("COTENANT_K8S_KUBECONFIG", "")


@pytest.fixture
def api() -> Any:
    if not KUBECONFIG or not Path(KUBECONFIG).is_file():
        pytest.skip("set COTENANT_K8S_KUBECONFIG to a throw-away cluster's kubeconfig")
    client_mod = pytest.importorskip("cotenant.integrations.k8s.mig.client")
    api = client_mod.ClientMigApi(Path(KUBECONFIG))
    try:
        api.core.list_node(_request_timeout=5)
    except Exception as exc:  # any failure to reach it means: no cluster here
        pytest.skip(f"the API server in {KUBECONFIG} does not answer: {exc}")
    return api


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
