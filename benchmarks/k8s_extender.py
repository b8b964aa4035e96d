"""Benchmark: the scheduler extender under open-loop load, over HTTP on loopback.

The extender runs in its own process (as in a cluster): ``--nodes`` nodes (8-GPU A100 and 4-GPU
H100), filled to ``--fill`` of their GPU milli through the extender's own bind. The client (this
process, asyncio, ``--connections`` keep-alive connections) sends pods at ``--rate`` / 2 per
second on a fixed schedule (open loop: a late reply does not delay the next send), each pod a
filter with every node name (``nodeCacheCapable``, ``percentageOfNodesToScore: 100``) then a
prioritize with the names the filter passed, as kube-scheduler does. Latency runs from the
scheduled send time, so queueing behind a slow call counts. Reports calls/s, p50/p99/max per
verb, errors, and the server process's CPU time per call (its cost on a dedicated core).
``--direct`` times the same calls in one process without HTTP (parse, decide, encode).

    .venv/bin/python benchmarks/k8s_extender.py [--nodes 5000] [--rate 1000] [--seconds 60]
    .venv/bin/python benchmarks/k8s_extender.py --direct
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import platform
import time
from datetime import UTC, datetime
from multiprocessing.connection import Connection
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
VARIANTS = 32  # distinct pods per shape in the request bodies


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
    """An extender over ``nodes`` nodes filled to ``fill`` of their GPU milli by its own bind."""
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
        kube.add(pod_json(f"fill-{k}", shape))
        request = cache.pending[f"uid-fill-{k}"]
        nodes_ok, score, _ = cache.placer().candidates(request.shape)
        node = names[int(nodes_ok[int(np.argmax(score))])]
        extender.bind(request.uid, "default", f"fill-{k}", node)
        used += shape.gpu_milli_total
        k += 1
    return ExtenderServer(extender, port=0), names


def serve(args: argparse.Namespace, pipe: Connection) -> None:
    """The extender process: build, serve until told to stop, send back its CPU seconds."""
    t0 = time.perf_counter()
    server, names = build(args.nodes, args.fill, 0)
    server.start()
    pipe.send((server.url, names, time.perf_counter() - t0))
    pipe.recv()  # the load starts
    cpu0 = time.process_time()
    pipe.recv()  # the load ended
    pipe.send(time.process_time() - cpu0)
    server.shutdown()


def request(verb: str, body: bytes) -> bytes:
    return (f"POST /{verb} HTTP/1.1\r\nHost: extender\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body


async def call(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
               data: bytes) -> tuple[int, bytes]:
    writer.write(data)
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    length = next(int(v) for k, _, v in (x.partition(":") for x in lines[1:])
                  if k.strip().lower() == "content-length")
    return int(lines[0].split()[1]), await reader.readexactly(length)


async def load(url: str, names: list[str], args: argparse.Namespace) -> dict[str, Any]:
    host, port = url.removeprefix("http://").split(":")
    conns = [await asyncio.open_connection(host, int(port)) for _ in range(args.connections)]
    free: asyncio.Queue[int] = asyncio.Queue()
    for c in range(len(conns)):
        free.put_nowait(c)
    # per shape: filter bodies (every node), and the prioritize list its filter passes
    bodies: list[list[tuple[bytes, bytes]]] = []
    for s, shape in enumerate(MENU):
        pods = [pod_json(f"load-{s}-{v}", shape) for v in range(VARIANTS)]
        first = json.dumps({"Pod": pods[0], "Nodes": None, "NodeNames": names}).encode()
        _, reply = await call(*conns[0], request("filter", first))
        passed = json.loads(reply)["NodeNames"]
        bodies.append([(request("filter", json.dumps(
            {"Pod": p, "Nodes": None, "NodeNames": names}).encode()), request(
            "prioritize", json.dumps({"Pod": p, "Nodes": None, "NodeNames": passed}).encode()))
            for p in pods])
    lat: dict[str, list[float]] = {"filter": [], "prioritize": []}
    errors: list[str] = []
    rng = np.random.default_rng(1)
    interval = 2.0 / args.rate  # a pod is two calls
    count = int(args.seconds * args.rate / 2)
    shapes = rng.integers(len(MENU), size=count)
    loop = asyncio.get_running_loop()

    async def pod(k: int, due: float) -> None:
        c = await free.get()
        try:
            for verb, data in zip(("filter", "prioritize"),
                                  bodies[shapes[k]][k % VARIANTS], strict=True):
                status, reply = await call(*conns[c], data)
                lat[verb].append(loop.time() - due)
                due = loop.time()
                if status != 200 or (b'"Error":"' in reply and b'"Error":""' not in reply):
                    errors.append(f"{verb}: HTTP {status} {reply[:120]!r}")
        finally:
            free.put_nowait(c)

    start = loop.time() + 0.1
    tasks = []
    for k in range(count):
        due = start + k * interval
        await asyncio.sleep(max(0.0, due - loop.time()))
        tasks.append(asyncio.create_task(pod(k, due)))
    await asyncio.gather(*tasks)
    wall = loop.time() - start
    for _, writer in conns:
        writer.close()
    return {"lat": lat, "errors": errors, "wall": wall}


def direct(args: argparse.Namespace) -> None:
    """Without HTTP: the CPU time of parsing, deciding and encoding a call, per verb."""
    from cotenant.integrations.k8s.server import respond  # noqa: PLC0415 (not in older versions)

    server, names = build(args.nodes, args.fill, 0)
    ext = server.extender
    for verb in ("filter", "prioritize"):
        bodies = []
        for k in range(300):
            pod = pod_json(f"direct-{k}", MENU[k % len(MENU)])
            body = json.dumps({"Pod": pod, "Nodes": None, "NodeNames": names}).encode()
            if verb == "prioritize":  # the names the pod's filter passed
                passed = json.loads(respond(ext, "filter", body)[1])["NodeNames"]
                body = json.dumps({"Pod": pod, "Nodes": None, "NodeNames": passed}).encode()
            bodies.append(body)
        respond(ext, verb, bodies[0])
        start = time.process_time()
        for body in bodies:
            status, _ = respond(ext, verb, body)
            assert status == 200
        cpu = (time.process_time() - start) / len(bodies)
        print(f"{verb:10s} {cpu * 1e3:.3f} ms CPU per call without HTTP ({len(bodies)} calls)")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--rate", type=float, default=1000.0, help="calls per second")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--fill", type=float, default=0.5)
    parser.add_argument("--direct", action="store_true",
                        help="time the calls in this process without HTTP instead")
    args = parser.parse_args()
    if args.direct:
        direct(args)
        return
    ours, theirs = mp.Pipe()
    server = mp.get_context("fork").Process(target=serve, args=(args, theirs), daemon=True)
    server.start()
    url, names, setup = ours.recv()
    ours.send("start")
    cpu0 = time.process_time()
    result = asyncio.run(load(url, names, args))
    client_cpu = time.process_time() - cpu0
    ours.send("stop")
    server_cpu = ours.recv()
    server.join()
    calls = sum(len(v) for v in result["lat"].values())
    print(f"# {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {platform.machine()}, {os.cpu_count()} "
          f"CPUs (load average {os.getloadavg()[0]:.1f}), Python {platform.python_version()}")
    print(f"nodes {args.nodes} filled to {args.fill:.0%} of their GPU milli in {setup:.1f} s; "
          f"asked {args.rate:g} calls/s for {args.seconds:g} s on {args.connections} connections")
    print(f"done {calls / result['wall']:.1f} calls/s in {result['wall']:.1f} s, errors "
          f"{len(result['errors'])}; CPU per call: server {server_cpu / calls * 1e3:.3f} ms, "
          f"client {client_cpu / calls * 1e3:.3f} ms; the server had "
          f"{server_cpu / result['wall']:.0%} of a core, the client "
          f"{client_cpu / result['wall']:.0%}")
    for verb, values in result["lat"].items():
        ms = np.array(values) * 1e3
        p50, p99 = np.percentile(ms, [50, 99])
        print(f"{verb:10s} {len(ms):7d} calls  p50 {p50:7.2f} ms  p99 {p99:7.2f} ms  "
              f"max {ms.max():7.2f} ms")
    for line in result["errors"][:5]:
        print(line)


if __name__ == "__main__":
    main()
