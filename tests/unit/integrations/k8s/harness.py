"""A running extender over an in-memory API server and a manual clock (needs the k8s extra)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from cotenant.agent.backends import ManualClock
from cotenant.integrations.k8s.cache import ClusterCache
from cotenant.integrations.k8s.extender import Extender
from cotenant.integrations.k8s.memory import MemoryKube
from cotenant.integrations.k8s.server import ExtenderServer
from cotenant.model.workload import PodShape
from cotenant.policies.placement import PLACEMENT
from tests.unit.integrations.k8s.objects import node

WORKLOAD = [PodShape(4000, 16384, 1, 250), PodShape(4000, 16384, 1, 500),
            PodShape(8000, 32768, 1, 1000), PodShape(16000, 65536, 2, 1000)]
"""FGD's typical pods in these tests: quarter and half GPUs, one and two whole GPUs."""


@dataclass
class Running:
    server: ExtenderServer
    cache: ClusterCache
    kube: MemoryKube
    clock: ManualClock

    def post(self, verb: str, body: object) -> tuple[int, Any]:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        req = urllib.request.Request(f"{self.server.url}/{verb}", data=data, method="POST",
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=10) as reply:
                return reply.status, json.loads(reply.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())


@contextmanager
def running(nodes: list[dict[str, Any]] | None = None, policy: str = "fgd",
            **policy_args: Any) -> Iterator[Running]:
    """An extender on a free port, its cache holding ``nodes`` (two A100 nodes and a CPU-only
    one by default)."""
    clock = ManualClock()
    if policy == "fgd":
        policy_args.setdefault("workload", WORKLOAD)
    cache = ClusterCache(PLACEMENT.create(policy, **policy_args), clock, assume_ttl_s=30.0)
    kube = MemoryKube(on_pod=cache.on_pod)
    for n in nodes if nodes is not None else (node("gpu-a"), node("gpu-b"),
                                              node("cpu-only", gpus=0)):
        cache.on_node("ADDED", n)
    server = ExtenderServer(Extender(cache, kube), port=0)
    server.start()
    try:
        yield Running(server, cache, kube, clock)
    finally:
        server.shutdown()
        server.server_close()
