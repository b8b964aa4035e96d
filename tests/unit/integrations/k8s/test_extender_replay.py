"""The extender places a pod sequence exactly as the simulator's Placer does with the same
policy: the proof that Kubernetes and the simulator share one placement implementation.

Each pod goes through the HTTP verbs as kube-scheduler drives them (filter, prioritize, bind to
the highest score); the simulator places the same shapes on the same nodes (read through the
extender's own node reader) with node-name order as its tie-break rank.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("kubernetes")

from cotenant.integrations.k8s.daemon import ExtenderConfig, policy_args
from cotenant.integrations.k8s.resources import node_spec
from cotenant.model.cluster import Cluster, ClusterState
from cotenant.model.workload import PodShape
from cotenant.policies.placement import PLACEMENT
from cotenant.sim.placer import Placer
from tests.unit.integrations.k8s.harness import running
from tests.unit.integrations.k8s.objects import args_by_name, binding_args, node, pod


def shapes(rng: np.random.Generator, count: int) -> list[PodShape]:
    menu = [PodShape(2000, 8192, 1, 250), PodShape(4000, 16384, 1, 500),
            PodShape(6000, 16384, 1, 700), PodShape(8000, 32768, 1, 1000),
            PodShape(16000, 65536, 2, 1000), PodShape(32000, 131072, 4, 1000),
            PodShape(1000, 2048, 0, 0)]
    weights = np.array([30, 20, 10, 20, 10, 5, 5], dtype=float)
    picks = rng.choice(len(menu), size=count, p=weights / weights.sum())
    return [menu[i] for i in picks]


def requests_of(shape: PodShape) -> dict[str, str]:
    req = {"cpu": f"{shape.cpu_milli}m", "memory": f"{shape.memory_mib}Mi"}
    if shape.fractional:
        req["cotenant.io/gpu-milli"] = str(shape.gpu_milli)
    elif shape.num_gpu:
        req["nvidia.com/gpu"] = str(shape.num_gpu)
    return req


@pytest.mark.parametrize("policy", ["fgd", "best-fit", "gpu-packing", "cotenant-pack"])
def test_extender_places_like_the_simulator(policy: str) -> None:
    rng = np.random.default_rng(7)
    nodes = [node(f"n{i:02d}", gpus=8 if i % 3 else 4, cpu="96" if i % 3 else "48")
             for i in range(9)]
    pods = shapes(rng, 120)
    models_workload = getattr(PLACEMENT.get(policy), "uses_workload", False)
    workload = {"workload": pods} if models_workload else {}
    specs = sorted((node_spec(n).node for n in nodes), key=lambda n: n.name)
    sim = Placer(PLACEMENT.create(policy, **workload), ClusterState(Cluster(specs)),
                 np.arange(len(specs), dtype=np.int64), np.random.default_rng(0))
    names = [n["metadata"]["name"] for n in nodes]
    placed = failed = 0
    with running(nodes, policy, **workload) as ext:
        for i, shape in enumerate(pods):
            expected = sim.place(shape)
            p = pod(f"p{i}", requests_of(shape))
            ext.kube.add(p)
            _, filtered = ext.post("filter", args_by_name(p, names))
            if expected is None:
                assert filtered["NodeNames"] == [], f"pod {i}: the simulator found no node"
                failed += 1
                continue
            _, scores = ext.post("prioritize", args_by_name(p, filtered["NodeNames"]))
            best = max(s["Score"] for s in scores)
            chosen = [s["Host"] for s in scores if s["Score"] == best]
            assert chosen == [specs[expected.node].name], f"pod {i} {shape}"
            assert ext.post("bind", binding_args(f"p{i}", chosen[0]))[1] == {"Error": ""}
            annotated = ext.kube.pods[f"default/p{i}"]["metadata"].get("annotations") or {}
            gpus = annotated.get("cotenant.io/gpus", "")
            assert gpus == ",".join(str(g) for g in expected.gpus), f"pod {i} {shape}"
            placed += 1
        np.testing.assert_array_equal(ext.cache.placer().state.gpu_free, sim.state.gpu_free)
    assert placed > 40
    assert failed > 0  # the cluster fills up: both paths meet full nodes


def test_the_daemon_hands_the_workload_to_the_policies_that_model_it() -> None:
    assert "workload" in policy_args(ExtenderConfig(policy="cotenant-pack"))
    assert "workload" in policy_args(ExtenderConfig(policy="fgd"))
    assert policy_args(ExtenderConfig(policy="best-fit")) == {}
