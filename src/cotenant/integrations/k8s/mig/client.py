"""The MIG controller's :class:`~.controller.MigApi` over the official ``kubernetes`` client.

Traffic moves by pod label: the serving pods on a node (those with ``cotenant.io/service``)
get ``cotenant.io/rotation: out`` before the node is reconfigured and ``in`` after; a Service
that selects ``cotenant.io/rotation: in`` then sends them nothing in between. The config label
is written together with the removal of the old state label, so a stale ``success`` of the
previous config is never read as this one's.
"""

from __future__ import annotations

from pathlib import Path

from kubernetes import client

from cotenant.integrations.k8s.kube import ClientKube
from cotenant.integrations.k8s.mig.steps import CONFIG_LABEL, STATE_LABEL

SERVICE_LABEL = "cotenant.io/service"
ROTATION_LABEL = "cotenant.io/rotation"


class ClientMigApi:
    """Node labels and serving pods through the API server (``kubeconfig`` or in-cluster)."""

    def __init__(self, kubeconfig: Path | None = None) -> None:
        self.core: client.CoreV1Api = ClientKube(kubeconfig).core

    def node_labels(self, node: str) -> dict[str, str]:
        meta = self.core.read_node(node).metadata
        return dict(meta.labels or {}) if meta is not None else {}

    def set_config(self, node: str, config: str) -> None:
        self.core.patch_node(node, {"metadata": {"labels": {CONFIG_LABEL: config,
                                                            STATE_LABEL: None}}})

    def set_rotation(self, node: str, serving: bool) -> int:
        pods = self.core.list_pod_for_all_namespaces(
            label_selector=SERVICE_LABEL, field_selector=f"spec.nodeName={node}").items
        value = "in" if serving else "out"
        patch = {"metadata": {"labels": {ROTATION_LABEL: value}}}
        done = 0
        for pod in pods:
            meta = pod.metadata
            if meta is not None and meta.name and meta.namespace:
                self.core.patch_namespaced_pod(meta.name, meta.namespace, patch)
                done += 1
        return done
