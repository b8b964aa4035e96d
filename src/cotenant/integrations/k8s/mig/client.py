"""The MIG controller's :class:`~.controller.MigApi` over the official ``kubernetes`` client.

Traffic moves by pod label: the serving pods on a node (those with ``cotenant.io/service``)
get ``cotenant.io/rotation: out`` before the node is reconfigured and ``in`` after; a Service
that selects ``cotenant.io/rotation: in`` then sends them nothing in between. The config label
is written together with the removal of the old state label, so a stale ``success`` of the
previous config is never read as this one's. Temporary replicas are pods built by
:func:`.pods.temporary_pod`, in rotation once their ``Ready`` condition is true and they are
labelled ``in``. A refused call becomes a :class:`~cotenant.errors.PermanentError` naming it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from cotenant.errors import PermanentError
from cotenant.integrations.k8s.kube import ClientKube
from cotenant.integrations.k8s.mig.pods import (
    NODE_ANNOTATION,
    ROTATION_LABEL,
    SERVICE_LABEL,
    TEMPORARY_LABEL,
    temporary_pod,
)
from cotenant.integrations.k8s.mig.rollout import TempReplica
from cotenant.integrations.k8s.mig.steps import (
    CONFIG_LABEL,
    STATE_LABEL,
    ServingPod,
    TempPod,
)


def _refused(what: str, exc: ApiException) -> PermanentError:
    return PermanentError(f"{what}: {exc.status} {exc.reason}")


def _ready(pod: Any) -> bool:
    """Whether ``pod`` is Ready and not being deleted."""
    status = pod.status
    return pod.metadata.deletion_timestamp is None and any(
        c.type == "Ready" and c.status == "True"
        for c in (status.conditions if status is not None else None) or [])


class ClientMigApi:
    """Node labels and serving pods through the API server (``kubeconfig`` or in-cluster)."""

    def __init__(self, kubeconfig: Path | None = None) -> None:
        self.kube = ClientKube(kubeconfig)
        self.core: client.CoreV1Api = self.kube.core

    def node_labels(self, node: str) -> dict[str, str]:
        try:
            meta = self.core.read_node(node).metadata
        except ApiException as exc:
            raise _refused(f"reading node {node}", exc) from None
        return dict(meta.labels or {}) if meta is not None else {}

    def set_config(self, node: str, config: str) -> None:
        try:
            self.core.patch_node(node, {"metadata": {"labels": {CONFIG_LABEL: config,
                                                                STATE_LABEL: None}}})
        except ApiException as exc:
            raise _refused(f"labelling node {node}", exc) from None

    def set_rotation(self, node: str, serving: bool) -> int:
        """The node's serving pods, temporary ones excepted (they move one by one)."""
        try:
            pods = self.core.list_pod_for_all_namespaces(
                label_selector=f"{SERVICE_LABEL},!{TEMPORARY_LABEL}",
                field_selector=f"spec.nodeName={node}").items
            value = "in" if serving else "out"
            patch = {"metadata": {"labels": {ROTATION_LABEL: value}}}
            done = 0
            for pod in pods:
                meta = pod.metadata
                if meta is not None and meta.name and meta.namespace:
                    self.core.patch_namespaced_pod(meta.name, meta.namespace, patch)
                    done += 1
        except ApiException as exc:
            raise _refused(f"moving the pods on {node}", exc) from None
        return done

    def serving_pods(self, node: str) -> tuple[ServingPod, ...]:
        try:
            pods = self.core.list_pod_for_all_namespaces(
                label_selector=f"{SERVICE_LABEL},!{TEMPORARY_LABEL}",
                field_selector=f"spec.nodeName={node}").items
        except ApiException as exc:
            raise _refused(f"listing the pods on {node}", exc) from None
        return tuple(ServingPod((pod.metadata.labels or {}).get(SERVICE_LABEL, ""), _ready(pod),
                                (pod.metadata.labels or {}).get(ROTATION_LABEL))
                     for pod in pods if pod.metadata is not None)

    def _temporary(self, name: str | None = None) -> list[Any]:
        return list(self.core.list_pod_for_all_namespaces(
            label_selector=f"{TEMPORARY_LABEL}=true",
            field_selector=f"metadata.name={name}" if name else None).items)

    def temporary_pods(self) -> dict[str, TempPod]:
        try:
            pods = self._temporary()
        except ApiException as exc:
            raise _refused("listing the temporary pods", exc) from None
        out = {}
        for pod in pods:
            meta = pod.metadata
            labels, notes = meta.labels or {}, meta.annotations or {}
            ready = _ready(pod)
            node = pod.spec.node_name or notes.get(NODE_ANNOTATION, "")
            out[meta.name] = TempPod(node, labels.get(SERVICE_LABEL, ""), ready,
                                     labels.get(ROTATION_LABEL) == "in")
        return out

    def create_temporary(self, temp: TempReplica) -> None:
        what = f"creating pod {temp.name}"
        try:
            sources = sorted((self.kube.to_json(p) for p in self.core.list_pod_for_all_namespaces(
                label_selector=f"{SERVICE_LABEL}={temp.service},!{TEMPORARY_LABEL}").items),
                key=lambda p: (p["metadata"].get("namespace", ""), p["metadata"]["name"]))
            if not sources:
                raise PermanentError(f"{what}: no pod labelled {SERVICE_LABEL}="
                                     f"{temp.service} to copy")
            body: Any = temporary_pod(sources[0], temp)  # the client sends a dict as it is
            self.core.create_namespaced_pod(body["metadata"]["namespace"], body)
        except ApiException as exc:
            raise _refused(what, exc) from None

    def _patch_or_delete(self, name: str, serving: bool | None) -> None:
        for pod in self._temporary(name):
            meta = pod.metadata
            if serving is None:
                self.core.patch_namespaced_pod(meta.name, meta.namespace, {
                    "metadata": {"labels": {ROTATION_LABEL: "out"}}})
                self.core.delete_namespaced_pod(meta.name, meta.namespace)
            else:
                self.core.patch_namespaced_pod(meta.name, meta.namespace, {
                    "metadata": {"labels": {ROTATION_LABEL: "in" if serving else "out"}}})

    def admit_temporary(self, name: str) -> None:
        try:
            self._patch_or_delete(name, True)
        except ApiException as exc:
            raise _refused(f"admitting pod {name}", exc) from None

    def remove_temporary(self, name: str) -> None:
        try:
            self._patch_or_delete(name, None)
        except ApiException as exc:
            if exc.status != 404:  # already gone
                raise _refused(f"removing pod {name}", exc) from None
