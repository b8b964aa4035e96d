"""Benchmark: a pushed p99 report's latency while clients flood the agent's API with reads.

The compute guard needs a pushed p99 report within 0.6 s of the rise it reports (the
simulator's SLO figure assumes it, ``docs/results/colocation.md``). Reads (``GET
/v1/workloads``, ``/v1/gpus``, ``/metrics``) never take the agent's tick lock and the API
serves at most 64 connections at once, so a flood of reads should delay a report by no
more than the CPU it takes. This runs the agent as ``cotenant agent run`` does (its tick
loop every ``--interval`` seconds, its server on loopback) over a fake node with an online
service and its offline co-runner (and ``--batch`` more offline jobs on three other GPUs, for
a longer tick), floods it with ``--clients`` keep-alive clients (in
``--procs`` processes of their own) that GET as fast as they are answered, and meanwhile
POSTs a p99 report every ``--report-every-s`` seconds from another process, timing each
from the request to the reply (the guard has decided when the reply comes). It prints the
reports' latency percentiles, the reads served per second, and the same reports without
the flood.

    .venv/bin/python benchmarks/agent_api_flood.py [--clients 32] [--seconds 20]
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing as mp
import os
import platform
import tempfile
import threading
import time
from multiprocessing.synchronize import Event as EventType
from pathlib import Path

import numpy as np

from cotenant.agent.api import AgentServer
from cotenant.agent.backends import FakeNode
from cotenant.agent.service import AgentService
from cotenant.policies.colocation import COLOCATION, GuardSettings

TOKEN = "bench-token"
ONLINE = {"name": "web", "argv": ["fake-workload", "--util-pct", "30", "--model", "resnet50"],
          "role": "online", "gpu": 0, "model": "resnet50", "slo_ms": 50}
OFFLINE = {"name": "train", "argv": ["fake-workload", "--util-pct", "60"], "role": "offline",
           "gpu": 0, "mem_limit_mib": 10000}
PATHS = ("/v1/workloads", "/v1/gpus", "/metrics")
HEADERS = {"Authorization": f"Bearer {TOKEN}"}


def flood(port: int, threads: int, stop: EventType, counts: mp.Queue[int]) -> None:
    """``threads`` keep-alive clients that GET in turn until ``stop``; the reads served."""
    served = [0] * threads

    def client(i: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        while not stop.is_set():
            try:
                conn.request("GET", PATHS[served[i] % len(PATHS)], headers=HEADERS)
                conn.getresponse().read()
                served[i] += 1
            except (OSError, http.client.HTTPException):
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        conn.close()

    workers = [threading.Thread(target=client, args=(i,)) for i in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    counts.put(sum(served))


def push(port: int, seconds: float, every_s: float, out: mp.Queue[list[float]]) -> None:
    """POST a p99 report every ``every_s`` for ``seconds``; each one's latency (ms)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    body = json.dumps({"p99_ms": 20.0})
    latencies = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        start = time.perf_counter()
        conn.request("POST", "/v1/workloads/web/p99", body=body,
                     headers={**HEADERS, "Content-Type": "application/json"})
        response = conn.getresponse()
        response.read()
        latencies.append((time.perf_counter() - start) * 1000.0)
        if response.status != 200:
            raise SystemExit(f"report answered {response.status}")
        time.sleep(every_s)
    conn.close()
    out.put(latencies)


def run(args: argparse.Namespace, clients: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        node = FakeNode.build("A100-40GB", 4, time.time)
        policy = COLOCATION.create("mps-fixed", share=50, guard=GuardSettings())
        service = AgentService(node, Path(tmp), policy)
        service.submit(ONLINE)
        service.submit(OFFLINE)
        for i in range(args.batch):  # more work for each tick (and each read of the list)
            service.submit({**OFFLINE, "name": f"batch{i}", "gpu": 1 + i % 3,
                            "mem_limit_mib": 1000})
        server = AgentServer(("127.0.0.1", 0), service, TOKEN)
        port = server.server_address[1]
        threading.Thread(target=server.serve_forever, args=(0.2,), daemon=True).start()
        ticking = threading.Event()

        def tick_loop() -> None:
            while not ticking.wait(args.interval):
                service.tick()

        service.tick()
        threading.Thread(target=tick_loop, daemon=True).start()
        ctx = mp.get_context("fork")
        stop, counts, out = ctx.Event(), ctx.Queue(), ctx.Queue()
        shares = [len(part) for part in np.array_split(np.arange(clients), args.procs)]
        procs = [ctx.Process(target=flood, args=(port, n, stop, counts))
                 for n in shares if n > 0]
        for p in procs:
            p.start()
        time.sleep(1.0 if clients else 0.0)  # the flood under way
        pusher = ctx.Process(target=push, args=(port, args.seconds, args.report_every_s, out))
        started = time.monotonic()
        pusher.start()
        latencies = np.array(out.get(), dtype=np.float64)
        pusher.join()
        elapsed = time.monotonic() - started
        stop.set()
        served = sum(counts.get() for _ in procs)
        for p in procs:
            p.join()
        ticking.set()
        server.shutdown()
        server.server_close()
        service.close()
    return {"clients": clients, "reports": len(latencies),
            "p50_ms": float(np.percentile(latencies, 50)),
            "p99_ms": float(np.percentile(latencies, 99)),
            "max_ms": float(latencies.max()),
            "reads_per_s": served / (elapsed + 1.0) if clients else 0.0,
            "refused": getattr(server, "refused", 0)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--procs", type=int, default=4, help="processes the clients run in")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--report-every-s", type=float, default=0.05)
    parser.add_argument("--interval", type=float, default=1.0, help="the agent's tick")
    parser.add_argument("--batch", type=int, default=0,
                        help="offline jobs on GPUs 1-3 besides the online service and its "
                        "co-runner on GPU 0")
    args = parser.parse_args()
    print(f"# {platform.node()} {os.cpu_count()} CPUs, Python {platform.python_version()}, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    for clients in (0, args.clients):
        row = run(args, clients)
        print(json.dumps({k: round(v, 3) if isinstance(v, float) else v
                          for k, v in row.items()}))


if __name__ == "__main__":
    main()
