"""A temporary replica's pod, as the MIG controller creates it: a copy of a serving pod of the
same service, pinned to its node and asking for one MIG instance of its profile.

The copy keeps the serving pod's containers, volumes and service account, so it serves as a
replica of the same Deployment does. It differs in:

* **where**: a required node affinity on ``metadata.name`` (as DaemonSets pin their pods), in
  place of the original's ``nodeName`` and ``nodeSelector``, so the scheduler still checks the
  node's resources;
* **what**: every GPU resource of the original (``nvidia.com/gpu``, ``nvidia.com/mig-*``,
  ``cotenant.io/gpu-milli``) is dropped, and the first container that asked for one asks for
  ``nvidia.com/mig-<profile>: 1``;
* **labels**: ``cotenant.io/service``, ``cotenant.io/temporary: "true"`` and
  ``cotenant.io/rotation: out`` (it goes in once Ready), plus the original's labels but those
  of its controller (``pod-template-hash`` and the like), so no ReplicaSet adopts it;
* **owner**: none; the controller deletes it itself, and finds it again by its label and its
  name, which is the same on every run.
"""

from __future__ import annotations

import copy
from typing import Any

from cotenant.integrations.k8s.mig.rollout import TempReplica
from cotenant.integrations.k8s.resources import GPU_MILLI, MIG_PREFIX, NVIDIA_GPU

SERVICE_LABEL = "cotenant.io/service"
ROTATION_LABEL = "cotenant.io/rotation"
TEMPORARY_LABEL = "cotenant.io/temporary"
NODE_ANNOTATION = "cotenant.io/node"
CONTROLLER_LABELS = ("pod-template-hash", "controller-revision-hash",
                     "statefulset.kubernetes.io/pod-name", "apps.kubernetes.io/pod-index")
DROPPED_SPEC = ("nodeName", "nodeSelector", "ephemeralContainers", "hostname", "subdomain")


def _gpu(resource: str) -> bool:
    return resource in (NVIDIA_GPU, GPU_MILLI) or resource.startswith(MIG_PREFIX)


def temporary_pod(template: dict[str, Any], temp: TempReplica) -> dict[str, Any]:
    """The pod to create for ``temp`` from ``template``, a serving pod of its service as the
    API server returns it (camelCase keys, as ``sanitize_for_serialization`` writes them)."""
    meta = template.get("metadata") or {}
    spec = copy.deepcopy(template.get("spec") or {})
    for key in DROPPED_SPEC:
        spec.pop(key, None)
    spec["affinity"] = {**(spec.get("affinity") or {}), "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In",
                              "values": [temp.node]}]}]}}}
    asked = False
    for container in spec.get("containers") or []:
        resources = container.setdefault("resources", {})
        had = False
        for kind in ("limits", "requests"):
            amounts = resources.get(kind) or {}
            had = had or any(_gpu(r) for r in amounts)
            resources[kind] = {r: v for r, v in amounts.items() if not _gpu(r)}
        if had and not asked:
            resources["limits"][MIG_PREFIX + temp.profile] = "1"
            asked = True
        for kind in ("limits", "requests"):
            if not resources[kind]:
                del resources[kind]
    if not asked and spec.get("containers"):
        limits = spec["containers"][0].setdefault("resources", {}).setdefault("limits", {})
        limits[MIG_PREFIX + temp.profile] = "1"
    labels = {k: v for k, v in (meta.get("labels") or {}).items() if k not in CONTROLLER_LABELS}
    labels.update({SERVICE_LABEL: temp.service, TEMPORARY_LABEL: "true", ROTATION_LABEL: "out"})
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": temp.name, "namespace": meta.get("namespace", "default"),
                         "labels": labels, "annotations": {NODE_ANNOTATION: temp.node}},
            "spec": spec}
