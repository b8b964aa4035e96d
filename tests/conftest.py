"""Shared fixtures: the ../shared data (skipped cleanly where absent) and small clusters."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cotenant.model.cluster import Cluster
from cotenant.model.gpu import CATALOG
from cotenant.model.workload import Node, Pod, PodShape, Qos
from cotenant.traces.synthetic import default_params, generate_nodes, generate_pods

ROOT = Path(__file__).resolve().parents[1]
OPENB = ROOT.parent / "shared" / "data" / "alibaba-gpu-v2023"
GOLDEN = Path(__file__).resolve().parent / "golden"


@pytest.fixture
def openb_dir() -> Path:
    """The openb trace directory in ../shared, or skip."""
    if not (OPENB / "openb_pod_list_default.csv").exists():
        pytest.skip("../shared/data/alibaba-gpu-v2023 is absent")
    return OPENB


@pytest.fixture
def small_cluster() -> Cluster:
    """Four nodes: two 8-GPU G2, one 2-GPU T4, one 4-GPU V100-32GB."""
    return Cluster(
        [
            Node("n0", 96_000, 393_216, 8, CATALOG.get("G2")),
            Node("n1", 96_000, 393_216, 8, CATALOG.get("G2")),
            Node("n2", 32_000, 131_072, 2, CATALOG.get("T4")),
            Node("n3", 64_000, 262_144, 4, CATALOG.get("V100M32")),
        ]
    )


@pytest.fixture
def synthetic_workload() -> tuple[Cluster, list[Pod]]:
    """60 nodes and 600 pods drawn from the embedded fitted parameters."""
    params = default_params()
    rng = np.random.default_rng(7)
    return Cluster(generate_nodes(params, 60, rng)), generate_pods(params, 600, rng)


def pod(name: str, cpu: int, mem: int, num_gpu: int, milli: int, spec: tuple[str, ...] = ()) -> Pod:
    return Pod(name, PodShape(cpu, mem, num_gpu, milli, spec), Qos.LS, 0, None)
