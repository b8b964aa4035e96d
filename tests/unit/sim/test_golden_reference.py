"""The golden figures (tests/golden/expected.json) derived a second way: a plain reference of
the fragmentation protocol written from its description (the ATC'23 artifact's: shuffle,
inflate to the target demand, one node permutation for ties, try each pod once), with best fit
and dot product as the FGD paper defines them, one pod and one node at a time. Nothing from
cotenant produces these figures; only the pinned file is compared."""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

GOLDEN = Path(__file__).resolve().parents[2] / "golden"


@dataclass(frozen=True)
class Pod:
    name: str
    cpu: int
    mem: int
    gpus: int
    milli: int

    @property
    def demand(self) -> int:
        return self.gpus * (self.milli if self.gpus == 1 else 1000)


@dataclass
class Node:
    cpu: int
    mem: int
    free: list[int]


def read_csv(name: str) -> list[dict[str, str]]:
    with (GOLDEN / name).open() as f:
        return list(csv.DictReader(f))


def arrival_order(pods: list[Pod], capacity: int, rng: np.random.Generator) -> list[Pod]:
    by_name = sorted(pods, key=lambda p: p.name)
    order = [by_name[int(i)] for i in rng.permutation(len(by_name))]
    target, total = 1.3 * capacity, sum(p.demand for p in order)
    while total < target:  # inflate by sampling with replacement
        extra = by_name[int(rng.integers(len(by_name)))]
        if total + extra.demand > target:
            break
        order.append(extra)
        total += extra.demand
    while total > target:
        total -= order.pop(int(rng.integers(len(order)))).demand
    return order


def fits(node: Node, pod: Pod) -> bool:
    if node.cpu < pod.cpu or node.mem < pod.mem:
        return False
    if pod.gpus == 1 and pod.milli < 1000:
        return max(node.free) >= pod.milli
    return sum(1 for f in node.free if f == 1000) >= pod.gpus


def score(policy: str, node: Node, pod: Pod) -> int:
    idle = sum(node.free)
    if policy == "best-fit":  # least leftover CPU and GPU
        left = 0.5 * (node.cpu - pod.cpu) / 128_000 + 0.5 * (idle - pod.demand) / 8000
        return math.trunc(100 * (1 - left))
    dot = (node.cpu / 128_000) * (pod.cpu / 128_000) + (idle / 8000) * (pod.demand / 8000)
    return math.trunc(100 * (1 - dot / 2))  # dot product: the smallest wins


def place(node: Node, pod: Pod) -> int:
    """Take the pod's resources; the GPU milli it took."""
    node.cpu -= pod.cpu
    node.mem -= pod.mem
    if pod.gpus == 1 and pod.milli < 1000:  # the tightest GPU, the lowest index on ties
        g = min((f, g) for g, f in enumerate(node.free) if f >= pod.milli)[1]
        node.free[g] -= pod.milli
        return pod.milli
    whole = [g for g, f in enumerate(node.free) if f == 1000][:pod.gpus]
    for g in whole:
        node.free[g] = 0
    return 1000 * len(whole)


def reference_run(policy: str, seed: int) -> dict[str, float]:
    nodes = [Node(int(r["cpu_milli"]), int(r["memory_mib"]), [1000] * int(r["gpu"]))
             for r in read_csv("nodes.csv")]
    pods = [Pod(r["name"], int(r["cpu_milli"]), int(r["memory_mib"]), int(r["num_gpu"]),
                int(r["gpu_milli"])) for r in read_csv("pods.csv")]
    capacity = 1000 * sum(len(n.free) for n in nodes)
    rng = np.random.default_rng(seed)
    order = arrival_order(pods, capacity, rng)
    rank = [int(r) for r in rng.permutation(len(nodes))]
    arrived = used = failed = 0
    at_100: list[float] = []
    for pod in order:
        arrived += pod.demand
        options = [(score(policy, n, pod), -rank[i], i) for i, n in enumerate(nodes)
                   if fits(n, pod)]
        if options:
            used += place(nodes[max(options)[2]], pod)
        else:
            failed += 1
        if round(100 * arrived / capacity) == 100:
            at_100.append(100 * used / capacity)
    return {"arrivals": len(order), "failed": failed, "used_milli_final": used,
            "alloc_at_100": round(sum(at_100) / len(at_100), 6)}


@pytest.mark.parametrize("policy", ["best-fit", "dot-product"])
def test_the_golden_figures_agree_with_a_plain_reference(policy: str) -> None:
    assert all(not r["gpu_spec"] for r in read_csv("pods.csv"))  # no model constraints
    expected = json.loads((GOLDEN / "expected.json").read_text())
    assert reference_run(policy, 42) == expected[policy]


def test_every_golden_row_has_the_references_arrivals() -> None:
    """The arrivals depend only on the trace and the seed, not on the policy."""
    expected = json.loads((GOLDEN / "expected.json").read_text())
    arrivals = reference_run("best-fit", 42)["arrivals"]
    assert {row["arrivals"] for row in expected.values()} == {arrivals}
