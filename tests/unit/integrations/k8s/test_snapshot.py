"""Nodes and Pods (built with the official client's models) as openb lists that cotenant's own
openb loader reads back."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("kubernetes")

from cotenant.errors import InputError
from cotenant.integrations.k8s.snapshot import snapshot, write
from cotenant.model.workload import PodShape, Qos
from cotenant.traces.openb import load_nodes, load_pods
from tests.unit.integrations.k8s.objects import node, pod


def with_time(p: dict[str, object], stamp: str, phase: str = "Running") -> dict[str, object]:
    p["metadata"]["creationTimestamp"] = stamp  # type: ignore[index]
    p["status"]["phase"] = phase  # type: ignore[index]
    return p


def test_snapshot_reads_back_as_openb(tmp_path: Path) -> None:
    nodes = [node("b-gpu", 4, product="NVIDIA-H100-80GB-HBM3"), node("a-gpu", 8),
             node("cpu", 0)]
    nodes[0]["metadata"]["labels"]["cotenant.io/gpu-model"] = "H100-80GB"  # GFD's name: opaque
    pods = [
        with_time(pod("late", {"cpu": "2", "memory": "4Gi", "nvidia.com/gpu": "2"}),
                  "2026-01-01T00:10:00Z"),
        with_time(pod("share", {"cpu": "500m", "memory": "1Gi",
                                "cotenant.io/gpu-milli": "250"},
                      annotations={"cotenant.io/role": "offline"}), "2026-01-01T00:00:00Z"),
        with_time(pod("done", {"cpu": "1"}), "2026-01-01T00:00:00Z", "Succeeded"),
        with_time(pod("mig", {"nvidia.com/mig-1g.10gb": "1"}), "2026-01-01T00:05:00Z"),
    ]
    snap = snapshot(nodes, pods)
    assert snap.skipped == ["pod default/mig: MIG instances have no openb form"]
    node_path, pod_path = write(snap, tmp_path)
    read = load_nodes(node_path, gpu_only=False)
    assert [(n.name, n.gpu_count, n.gpu_model.name if n.gpu_model else None) for n in read] == [
        ("a-gpu", 8, "A100-40GB"), ("b-gpu", 4, "H100-80GB"), ("cpu", 0, None)]
    assert read[0].cpu_milli == 96_000
    assert read[0].memory_mib == 512 * 1024
    back = load_pods(pod_path)
    assert [(p.name, p.shape, p.qos, p.creation_time) for p in back] == [
        ("default/share", PodShape(500, 1024, 1, 250), Qos.BE, 0),
        ("default/late", PodShape(2000, 4096, 2, 1000), Qos.LS, 600),
    ]


def test_an_unknown_gpu_model_is_an_error_naming_the_node() -> None:
    with pytest.raises(InputError, match="node odd: GPU model 'Weird-GPU' is not in the catalog"):
        snapshot([node("odd", 2, product="Weird-GPU")], [])
