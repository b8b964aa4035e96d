"""A cluster's Nodes and Pods (API JSON) as openb node and pod lists, for the simulator.

``cotenant k8s snapshot`` lists both kinds through a kubeconfig and writes
``openb_node_list_gpu_node.csv`` (``sn, cpu_milli, memory_mib, gpu, model``) and
``openb_pod_list_default.csv`` (``name, cpu_milli, memory_mib, num_gpu, gpu_milli, gpu_spec,
qos, pod_phase, creation_time, deletion_time, scheduled_time``), which ``cotenant simulate
--pods`` reads back. Nodes are read as the extender reads them; a GPU node whose model is not
in the catalog is an error (label it ``cotenant.io/gpu-model``), never a silent guess. Pods
are the unfinished ones, read as the extender reads them, with times in seconds from the
oldest pod's creation; ``offline`` pods are openb's ``BE``, the others ``LS``. MIG pods have
no openb form: they are counted in :attr:`Snapshot.skipped`, and the CLI reports them.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from cotenant.errors import InputError
from cotenant.integrations.k8s.resources import field as get_field
from cotenant.integrations.k8s.resources import node_spec, pod_request
from cotenant.model.gpu import CATALOG
from cotenant.traces.openb import NODE_REQUIRED

NODE_FILE = "openb_node_list_gpu_node.csv"
POD_FILE = "openb_pod_list_default.csv"
POD_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec", "qos",
               "pod_phase", "creation_time", "deletion_time", "scheduled_time")
FINISHED = ("Succeeded", "Failed")


@dataclass
class Snapshot:
    nodes: list[dict[str, object]] = field(default_factory=list)
    pods: list[dict[str, object]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    """Pods left out, one line each with the reason."""


def _time(text: object) -> float | None:
    if not isinstance(text, str) or not text:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def snapshot(nodes: list[dict[str, Any]], pods: list[dict[str, Any]]) -> Snapshot:
    out = Snapshot()
    for obj in sorted(nodes, key=lambda n: str(get_field(n, "metadata", "name"))):
        spec = node_spec(obj).node
        model = spec.gpu_model
        if model is not None and model.name not in CATALOG:
            raise InputError(f"node {spec.name}", f"GPU model {model.name!r} is not in the "
                             "catalog", hint="label the node cotenant.io/gpu-model=<catalog name>")
        out.nodes.append({"sn": spec.name, "cpu_milli": spec.cpu_milli,
                          "memory_mib": spec.memory_mib, "gpu": spec.gpu_count,
                          "model": model.name if model is not None else ""})
    live = [p for p in pods if get_field(p, "status", "phase") not in FINISHED]
    created = [_time(get_field(p, "metadata", "creationTimestamp")) for p in live]
    start = min((t for t in created if t is not None), default=0.0)
    for obj, t in sorted(zip(live, created, strict=True), key=lambda pt: (pt[1] or start)):
        request = pod_request(obj)
        if request.mig:
            out.skipped.append(f"pod {request.key}: MIG instances have no openb form")
            continue
        shape = request.shape
        out.pods.append({
            "name": request.key, "cpu_milli": shape.cpu_milli, "memory_mib": shape.memory_mib,
            "num_gpu": shape.num_gpu, "gpu_milli": shape.gpu_milli, "gpu_spec": "",
            "qos": "BE" if request.role == "offline" else "LS",
            "pod_phase": get_field(obj, "status", "phase") or "Pending",
            "creation_time": round((t if t is not None else start) - start),
            "deletion_time": "", "scheduled_time": "",
        })
    return out


def write(snap: Snapshot, out_dir: Path) -> tuple[Path, Path]:
    """Write both lists into ``out_dir`` (created); their paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = (out_dir / NODE_FILE, out_dir / POD_FILE)
    for path, columns, rows in ((paths[0], NODE_REQUIRED, snap.nodes),
                                (paths[1], POD_COLUMNS, snap.pods)):
        with path.open("w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fieldnames=columns)
            writer.writeheader()
            writer.writerows(rows)
    return paths
