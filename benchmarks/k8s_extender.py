"""Benchmark: the scheduler extender under load, over HTTP, against a large cluster.

Builds ``--nodes`` nodes (8-GPU A100 and 4-GPU H100, as node JSON), fills them to about half
their GPUs through the extender's own bind, starts the extender's HTTP server, and runs
``--clients`` closed-loop clients for ``--seconds``. Each client posts a filter then a
prioritize for a pod drawn from a fixed shape menu, with every node name in the body, as
kube-scheduler does for a ``nodeCacheCapable`` extender. Reports calls/s and per-call latency
(p50/p90/p99) for each verb; the clients run in this process, so they share its cores.

    .venv/bin/python benchmarks/k8s_extender.py [--nodes 5000] [--seconds 60] [--clients 8]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import platform
import threading
import time
from datetime import UTC, datetime
from typing import Any

import numpy as np

from cotenant.agent.backends import ManualClock
from cotenant.integrations.k8s.cache import ClusterCache
from cotenant.integrations.k8s.extender import Extender
from cotenant.integrations.k8s.memory import MemoryKube
from cotenant.integrations.k8s.server import ExtenderServer
from cotenant.model.workload import PodShape
from cotenant.policies.placement import PLACEMENT

MENU = [PodShape(2000, 8192, 1, 250), PodShape(4000, 16384, 1, 500),
        PodShape(8000, 32768, 1, 1000), PodShape(16000, 65536, 2, 1000),
        PodShape(32000, 131072, 4, 1000)]


def node_json(i: int) -> dict[str, Any]:
    h100 = i % 4 == 0
    return {"metadata": {"name": f"node-{i:05d}", "labels": {
        "cotenant.io/gpu-model": "H100-80GB" if h100 else "A100-40GB"}},
        "status": {"allocatable": {"cpu": "128", "memory": "1Ti",
                                   "nvidia.com/gpu": "4" if h100 else "8"}}}


def pod_json(name: str, shape: PodShape) -> dict[str, Any]:
    requests = {"cpu": f"{shape.cpu_milli}m", "memory": f"{shape.memory_mib}Mi"}
    if shape.fractional:
        requests["cotenant.io/gpu-milli"] = str(shape.gpu_milli)
    else:
        requests["nvidia.com/gpu"] = str(shape.num_gpu)
    return {"metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
            "spec": {"containers": [{"name": "main", "resources": {"requests": requests}}]}}


def build(nodes: int, fill: float, seed: int) -> tuple[ExtenderServer, list[str]]:
    rng = np.random.default_rng(seed)
    cache = ClusterCache(PLACEMENT.create("fgd", workload=MENU * 10), ManualClock(),
                         assume_ttl_s=1e12)
    kube = MemoryKube(on_pod=cache.on_pod)
    for i in range(nodes):
        cache.on_node("ADDED", node_json(i))
    extender = Extender(cache, kube)
    names = sorted(cache.nodes)
    total = sum(s.node.gpu_count for s in cache.nodes.values()) * 1000
    used, k = 0, 0
    while used < fill * total:
        shape = MENU[int(rng.integers(len(MENU)))]
        pod = pod_json(f"fill-{k}", shape)
        kube.add(pod)
        request = cache.pending[f"uid-fill-{k}"]
        nodes_ok, score, _ = cache.placer().candidates(request.shape)
        node = names[int(nodes_ok[int(np.argmax(score))])]
        extender.bind(request.uid, "default", f"fill-{k}", node)
        used += shape.gpu_milli_total
        k += 1
    return ExtenderServer(extender, port=0), names


def client(url: str, names: list[str], until: float, seed: int,
           out: dict[str, list[float]]) -> None:
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    rng = np.random.default_rng(seed)
    k = 0
    while time.perf_counter() < until:
        shape = MENU[int(rng.integers(len(MENU)))]
        body = json.dumps({"Pod": pod_json(f"load-{seed}-{k}", shape), "Nodes": None,
                           "NodeNames": names}).encode()
        for verb in ("filter", "prioritize"):
            start = time.perf_counter()
            conn.request("POST", f"/{verb}", body, {"Content-Type": "application/json"})
            reply = conn.getresponse()
            reply.read()
            if reply.status != 200:
                raise SystemExit(f"{verb}: HTTP {reply.status}")
            out[verb].append(time.perf_counter() - start)
        k += 1
    conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--fill", type=float, default=0.5)
    args = parser.parse_args()
    t0 = time.perf_counter()
    server, names = build(args.nodes, args.fill, 0)
    setup = time.perf_counter() - t0
    server.start()
    results: list[dict[str, list[float]]] = [
        {"filter": [], "prioritize": []} for _ in range(args.clients)]
    until = time.perf_counter() + args.seconds
    threads = [threading.Thread(target=client, args=(server.url, names, until, i, results[i]))
               for i in range(args.clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    server.shutdown()
    print(f"# {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {platform.processor() or platform.machine()}"
          f", {os.cpu_count()} CPUs, Python {platform.python_version()}")
    print(f"nodes {args.nodes}, clients {args.clients}, {args.seconds:g} s, cluster filled to "
          f"{args.fill:.0%} of its GPU milli in {setup:.1f} s")
    for verb in ("filter", "prioritize"):
        lat = np.array([x for r in results for x in r[verb]]) * 1000
        p50, p90, p99 = np.percentile(lat, [50, 90, 99])
        print(f"{verb:10s} {len(lat) / args.seconds:8.1f} calls/s  p50 {p50:7.1f} ms  "
              f"p90 {p90:7.1f} ms  p99 {p99:7.1f} ms")


if __name__ == "__main__":
    main()
