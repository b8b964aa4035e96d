"""An in-memory API server for the extender's writes, for tests and dry runs.

It keeps pods as the API server serves them (JSON), applies what bind writes (the annotation,
then ``spec.nodeName``) with the API server's checks (a missing pod is a 404, a wrong uid or a
bound pod a 409), and tells ``on_pod`` as a watch would.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from cotenant.errors import InputError


@dataclass
class MemoryKube:
    """An in-memory API server for the extender: pods by ``namespace/name``; bind writes the
    annotation and ``spec.nodeName`` and tells ``on_pod`` as a watch would."""

    pods: dict[str, dict[str, Any]] = field(default_factory=dict)
    on_pod: Callable[[str, dict[str, Any]], None] | None = None
    bindings: list[tuple[str, str, str]] = field(default_factory=list)

    def add(self, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        self.pods[f"{meta.get('namespace', 'default')}/{meta['name']}"] = pod
        if self.on_pod is not None:
            self.on_pod("ADDED", pod)

    def _pod(self, namespace: str, name: str) -> dict[str, Any]:
        pod = self.pods.get(f"{namespace}/{name}")
        if pod is None:
            raise InputError(f"pod {namespace}/{name}", "not found (404)")
        return pod

    def annotate_pod(self, namespace: str, name: str, annotations: dict[str, str]) -> None:
        pod = self._pod(namespace, name)
        pod["metadata"].setdefault("annotations", {}).update(annotations)

    def bind_pod(self, namespace: str, name: str, uid: str, node: str) -> None:
        pod = self._pod(namespace, name)
        if pod["metadata"].get("uid", uid) != uid:
            raise InputError(f"pod {namespace}/{name}", f"uid {uid} does not match (409)")
        if pod.setdefault("spec", {}).get("nodeName"):
            raise InputError(f"pod {namespace}/{name}", "is already bound (409)")
        pod["spec"]["nodeName"] = node
        self.bindings.append((f"{namespace}/{name}", uid, node))
        if self.on_pod is not None:
            self.on_pod("MODIFIED", pod)

    def pods_on(self, node: str) -> list[dict[str, Any]]:
        """Pods bound to ``node``, in creation (insertion) order."""
        return [p for p in self.pods.values() if p.get("spec", {}).get("nodeName") == node]


@dataclass
class NodePods:
    """The device plugin's :class:`~.deviceplugin.devices.PodSource` over a :class:`MemoryKube`."""

    kube: MemoryKube
    node: str

    def pods_on_node(self) -> list[dict[str, Any]]:
        return self.kube.pods_on(self.node)
