"""A temporary replica's pod, as the MIG controller creates it: a copy of a serving pod of the
same service, pinned to its node and asking for one MIG instance of its profile.

The copy keeps the serving pod's containers, volumes, annotations and service account, so it
serves as a replica of the same Deployment does (the scheduler extender reads its role, model
and SLO annotations). It differs in:

* **where**: a required node affinity on ``metadata.name`` (as DaemonSets pin their pods), in
  place of the original's ``nodeName`` and ``nodeSelector``, so the scheduler still checks the
  node's resources; its pod anti-affinity and topology spread constraints are dropped (the
  pod is pinned, and its own Deployment's replicas must not keep it off its node);
* **what**: every GPU resource of the original (``nvidia.com/gpu``, ``nvidia.com/mig-*``,
  ``cotenant.io/gpu-milli``) is dropped from its containers and init containers, and the first
  container that asked for one asks for ``nvidia.com/mig-<profile>: 1`` (an init container
  that asked for one asks for the same: init containers run before it, on the same
  instance); the annotations ``cotenant.io/gpus`` and ``cotenant.io/gpu-milli``, which name
  the original's GPUs, are dropped;
* **token**: the ``kube-api-access-*`` projected volumes and their mounts are dropped; the
  API server's admission adds them again for the copy;
* **labels**: ``cotenant.io/service``, ``cotenant.io/temporary: "true"`` and
  ``cotenant.io/rotation: out`` (it goes in once Ready), plus the original's labels but those
  of its controller (``pod-template-hash`` and the like), so no ReplicaSet adopts it;
* **owner**: none; the controller deletes it itself, and finds it again by its label and its
  name, which is the same on every run.

Two limits: a ``ReadWriteOnce`` volume claim of the original is copied as it is, so the copy
fails to attach it on another node (it is never Ready, and the rollout stops before the drain
it was for); and the controller creates pods in any namespace that run as the original's
service account, so its right to create pods cluster-wide is as strong as the strongest
service account of a serving pod.
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
DROPPED_SPEC = ("nodeName", "nodeSelector", "ephemeralContainers", "hostname", "subdomain",
                "topologySpreadConstraints")
DROPPED_ANNOTATIONS = ("cotenant.io/gpus", GPU_MILLI)
TOKEN_VOLUME = "kube-api-access-"


def _gpu(resource: str) -> bool:
    return resource in (NVIDIA_GPU, GPU_MILLI) or resource.startswith(MIG_PREFIX)


def _ask(containers: list[dict[str, Any]], profile: str, first_only: bool,
         asked: bool = False) -> bool:
    """Strip the GPU resources of ``containers``; the first that had one (each, unless
    ``first_only``; none where ``first_only`` and one ``asked`` already) asks for one instance
    of ``profile``; whether one did (or had)."""
    for container in containers:
        resources = container.setdefault("resources", {})
        had = False
        for kind in ("limits", "requests"):
            amounts = resources.get(kind) or {}
            had = had or any(_gpu(r) for r in amounts)
            resources[kind] = {r: v for r, v in amounts.items() if not _gpu(r)}
        if had and not (asked and first_only):
            resources["limits"][MIG_PREFIX + profile] = "1"
            asked = True
        for kind in ("limits", "requests"):
            if not resources[kind]:
                del resources[kind]
        if not resources:
            del container["resources"]
        mounts = [m for m in container.get("volumeMounts") or []
                  if not str(m.get("name", "")).startswith(TOKEN_VOLUME)]
        if "volumeMounts" in container:
            container["volumeMounts"] = mounts
    return asked


def temporary_pod(template: dict[str, Any], temp: TempReplica) -> dict[str, Any]:
    """The pod to create for ``temp`` from ``template``, a serving pod of its service as the
    API server returns it (camelCase keys, as ``sanitize_for_serialization`` writes them)."""
    meta = template.get("metadata") or {}
    spec = copy.deepcopy(template.get("spec") or {})
    for key in DROPPED_SPEC:
        spec.pop(key, None)
    affinity = {k: v for k, v in (spec.get("affinity") or {}).items() if k != "podAntiAffinity"}
    spec["affinity"] = {**affinity, "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In",
                              "values": [temp.node]}]}]}}}
    if "volumes" in spec:
        spec["volumes"] = [v for v in spec["volumes"]
                           if not str(v.get("name", "")).startswith(TOKEN_VOLUME)]
    inits = spec.get("initContainers") or []
    # an init container runs before the others and gives its instance back; a sidecar (an
    # init container restarted Always) runs beside them, so its ask adds to theirs: one asks
    _ask([c for c in inits if c.get("restartPolicy") != "Always"], temp.profile,
         first_only=False)
    sidecar = _ask([c for c in inits if c.get("restartPolicy") == "Always"], temp.profile,
                   first_only=True)
    if not _ask(spec.get("containers") or [], temp.profile, first_only=True,
                asked=sidecar) and not sidecar and spec.get("containers"):
        limits = spec["containers"][0].setdefault("resources", {}).setdefault("limits", {})
        limits[MIG_PREFIX + temp.profile] = "1"
    labels = {k: v for k, v in (meta.get("labels") or {}).items() if k not in CONTROLLER_LABELS}
    labels.update({SERVICE_LABEL: temp.service, TEMPORARY_LABEL: "true", ROTATION_LABEL: "out"})
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items()
                   if k not in DROPPED_ANNOTATIONS}
    annotations[NODE_ANNOTATION] = temp.node
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": temp.name, "namespace": meta.get("namespace", "default"),
                         "labels": labels, "annotations": annotations},
            "spec": spec}
