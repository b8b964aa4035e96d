"""Where a simulation's workload comes from."""

from __future__ import annotations

from pathlib import Path

import pytest

from cotenant.errors import InputError
from cotenant.traces.source import DEFAULT_NODE_LIST, load_workload
from cotenant.traces.synthetic import default_params

PODS = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n"
    "a,1000,2048,1,500\n"
    "b,2000,4096,2,1000\n"
    "c,3000,4096,0,0\n"
)
NODES = "sn,cpu_milli,memory_mib,gpu,model\nn0,64000,262144,2,P100\nn1,32000,131072,0,\n"


def test_default_is_the_full_synthetic_workload() -> None:
    workload = load_workload()
    assert workload.cluster.size == 1213
    assert len(workload.pods) == 8152
    assert workload.cluster.total_gpus == 6212
    assert workload.description.startswith("synthetic: 8152 pods on 1213 nodes")
    assert "seed 0" in workload.description


def test_synthetic_sizes_are_respected() -> None:
    workload = load_workload(synthetic_pods=50, synthetic_nodes=5)
    assert workload.cluster.size == 5
    assert len(workload.pods) == 50


def test_seed_changes_the_draw_and_repeats_it() -> None:
    a = load_workload(synthetic_pods=40, synthetic_nodes=4, seed=1)
    b = load_workload(synthetic_pods=40, synthetic_nodes=4, seed=1)
    c = load_workload(synthetic_pods=40, synthetic_nodes=4, seed=2)
    assert a.pods == b.pods
    assert a.pods != c.pods
    assert "seed 2" in c.description


def test_params_file_is_used(tmp_path: Path) -> None:
    params = default_params()
    path = tmp_path / "p.json"
    path.write_text(params.to_json(), encoding="utf-8")
    workload = load_workload(params=path, synthetic_pods=20, synthetic_nodes=3)
    assert len(workload.pods) == 20
    assert workload.cluster.size == 3
    assert params.source in workload.description


def test_zero_synthetic_pods_rejected() -> None:
    with pytest.raises(InputError, match="at least one pod and one node"):
        load_workload(synthetic_pods=0, synthetic_nodes=5)


def test_nodes_without_pods_is_an_error(tmp_path: Path) -> None:
    nodes = tmp_path / "nodes.csv"
    nodes.write_text(NODES, encoding="utf-8")
    with pytest.raises(InputError, match="--nodes needs --pods") as info:
        load_workload(nodes=nodes)
    assert info.value.where == str(nodes)


def test_pods_without_node_list_beside_mentions_nodes_flag(tmp_path: Path) -> None:
    pods = tmp_path / "pods.csv"
    pods.write_text(PODS, encoding="utf-8")
    with pytest.raises(InputError) as info:
        load_workload(pods)
    assert DEFAULT_NODE_LIST in info.value.rule
    assert "--nodes" in info.value.one_line()


def test_node_list_beside_pods_is_found(tmp_path: Path) -> None:
    pods = tmp_path / "pods.csv"
    pods.write_text(PODS, encoding="utf-8")
    (tmp_path / DEFAULT_NODE_LIST).write_text(NODES, encoding="utf-8")
    workload = load_workload(pods)
    assert workload.cluster.size == 1  # the CPU-only node is left out
    assert [p.name for p in workload.pods] == ["a", "b", "c"]
    assert workload.description == (
        f"openb trace pods.csv on {DEFAULT_NODE_LIST} (1 CPU-only nodes left out)"
    )


def test_explicit_node_list(tmp_path: Path) -> None:
    pods = tmp_path / "pods.csv"
    pods.write_text(PODS, encoding="utf-8")
    nodes = tmp_path / "mine.csv"
    nodes.write_text(NODES, encoding="utf-8")
    workload = load_workload(pods, nodes)
    assert workload.cluster.total_gpus == 2
    assert len(workload.pods) == 3


def test_node_list_without_gpu_nodes_is_an_error(tmp_path: Path) -> None:
    pods = tmp_path / "pods.csv"
    pods.write_text(PODS, encoding="utf-8")
    nodes = tmp_path / "cpu.csv"
    nodes.write_text("sn,cpu_milli,memory_mib,gpu,model\nn0,1000,1024,0,\n", encoding="utf-8")
    with pytest.raises(InputError, match="no GPU nodes"):
        load_workload(pods, nodes)
