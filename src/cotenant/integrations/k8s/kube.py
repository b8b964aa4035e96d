"""The API server side of the extender: its two writes, and informer loops feeding the cache.

:class:`ClientKube` uses the official ``kubernetes`` client (the ``k8s`` extra: only this module
imports it). :class:`Informer` lists Nodes and Pods, replaces the cache with them, then
watches from that list's ``resourceVersion`` until the watch ends (``resync_s``, or an error
such as an expired resourceVersion), and lists again: the list-then-watch-then-resync loop
of client-go's informers.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes import client, config, watch

from cotenant.errors import InputError
from cotenant.integrations.k8s.cache import ClusterCache

log = logging.getLogger(__name__)


class ClientKube:
    """Writes through the official client, configured from ``kubeconfig`` or in-cluster."""

    def __init__(self, kubeconfig: Path | None = None) -> None:
        try:
            if kubeconfig is not None:
                config.load_kube_config(config_file=str(kubeconfig))
            else:
                config.load_incluster_config()
        except (config.ConfigException, OSError) as exc:
            raise InputError(str(kubeconfig or "in-cluster config"),
                             f"cannot load a Kubernetes configuration: {exc}",
                             hint="pass --kubeconfig ~/.kube/config outside a cluster") from None
        self.client = client
        self.core = client.CoreV1Api()

    def annotate_pod(self, namespace: str, name: str, annotations: dict[str, str]) -> None:
        self.core.patch_namespaced_pod(name, namespace, {"metadata": {"annotations": annotations}})

    def bind_pod(self, namespace: str, name: str, uid: str, node: str) -> None:
        c = self.client
        body = c.V1Binding(
            metadata=c.V1ObjectMeta(name=name, namespace=namespace, uid=uid),
            target=c.V1ObjectReference(api_version="v1", kind="Node", name=node),
        )
        # the reply is a Status, not the Binding the generated client would decode
        self.core.create_namespaced_binding(namespace, body, _preload_content=False)

    def to_json(self, obj: object) -> dict[str, Any]:
        data: dict[str, Any] = self.client.ApiClient().sanitize_for_serialization(obj)
        return data


@dataclass
class Informer:
    """List-then-watch of Nodes and Pods into ``cache``, relisting every ``resync_s``."""

    kube: ClientKube
    cache: ClusterCache
    resync_s: int = 300
    stop: threading.Event = field(default_factory=threading.Event)

    def sync(self) -> tuple[str, str]:
        """One full list into the cache; the lists' resourceVersions."""
        nodes = self.kube.core.list_node()
        pods = self.kube.core.list_pod_for_all_namespaces()
        self.cache.replace([self.kube.to_json(n) for n in nodes.items],
                           [self.kube.to_json(p) for p in pods.items])
        return _version(nodes), _version(pods)

    def _watch(self, list_call: Callable[..., Any], rv: str,
               on_event: Callable[[str, dict[str, Any]], None]) -> None:
        stream = watch.Watch().stream
        for event in stream(list_call, resource_version=rv, timeout_seconds=self.resync_s):
            if self.stop.is_set():
                return
            on_event(str(event["type"]), self.kube.to_json(event["object"]))

    def run(self) -> None:
        """Until :attr:`stop`: sync, watch both kinds until the watch ends, resync."""
        while not self.stop.is_set():
            try:
                node_rv, pod_rv = self.sync()
                pods = threading.Thread(target=self._watch, daemon=True, args=(
                    self.kube.core.list_pod_for_all_namespaces, pod_rv, self.cache.on_pod))
                pods.start()
                self._watch(self.kube.core.list_node, node_rv, self.cache.on_node)
                pods.join()
            except Exception as exc:  # API errors, expired resourceVersions, lost connections
                log.warning("watch ended (%s); relisting in 5 s", exc)
                self.stop.wait(5.0)


def _version(listed: Any) -> str:
    return str(getattr(listed.metadata, "resource_version", "") or "")


@dataclass
class ApiNodePods:
    """The device plugin's pod source: pods bound to ``node``, oldest first, from the API."""

    kube: ClientKube
    node: str

    def pods_on_node(self) -> list[dict[str, Any]]:
        listed = self.kube.core.list_pod_for_all_namespaces(
            field_selector=f"spec.nodeName={self.node}")
        pods = [self.kube.to_json(p) for p in listed.items]
        return sorted(pods, key=lambda p: str(p["metadata"].get("creationTimestamp", "")))
