"""Benchmark: how long the agent's compute guard takes to see a latency rise it scrapes.

The simulator's SLO figure for MuxFlow holds only if the guard acts within 0.6 s of a p99
rise, 1% of a one-minute interval (``docs/results/colocation.md``, sensitivity). A p99 the online
service pushes is acted on as it arrives (``benchmarks/pause.py --http``: milliseconds). A
p99 the agent reads from the service's own Prometheus histogram waits for the next read
(every ``--scrape-interval-s``) and for the agent to collect it: the guard's watcher thread,
every 50 ms (``--no-watch``: the reconcile tick, every ``--interval``, as before the watcher).
This measures that path end to end in real time, with no GPU: a fake node, the agent's tick
loop and watcher as ``cotenant agent run`` runs them, and a local HTTP server whose histogram serves
``REQUESTS_PER_S`` requests a second in 5 ms until, at a random moment, they take 75 ms
(p99 over the 50 ms SLO). The figure is the time from that moment until the offline
co-runner is paused; beside it, the CPU the process used (the agent with its state store,
and the histogram server) as a share of one core.

    .venv/bin/python benchmarks/guard_reaction.py [--repeats 10] [--no-watch] \
        [--settings 5:1 0.25:1 0.1:1]   # scrape interval : tick interval, seconds
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np

from cotenant.agent.backends import FakeNode
from cotenant.agent.service import AgentService
from cotenant.policies.colocation import COLOCATION, GuardSettings

REQUESTS_PER_S = 400.0
ONLINE = {"name": "web", "argv": ["fake-workload", "--util-pct", "30"], "role": "online",
          "gpu": 0, "model": "resnet50", "slo_ms": 50}
OFFLINE = {"name": "train", "argv": ["fake-workload", "--util-pct", "60"], "role": "offline",
           "gpu": 0, "mem_limit_mib": 10000}


class Histogram(BaseHTTPRequestHandler):
    """``req_seconds``: requests served at ``REQUESTS_PER_S`` since ``start``, in the 10 ms
    bucket until ``slow_from`` and in the 50-100 ms bucket after (monotonic seconds)."""

    start = 0.0
    slow_from = math.inf

    def do_GET(self) -> None:
        now = time.monotonic()
        cls = type(self)
        fast = int(REQUESTS_PER_S * (min(now, cls.slow_from) - cls.start))
        slow = int(REQUESTS_PER_S * max(0.0, now - cls.slow_from))
        body = "\n".join([
            "# TYPE req_seconds histogram",
            f'req_seconds_bucket{{le="0.01"}} {fast}',
            f'req_seconds_bucket{{le="0.05"}} {fast}',
            f'req_seconds_bucket{{le="0.1"}} {fast + slow}',
            f'req_seconds_bucket{{le="+Inf"}} {fast + slow}',
            f"req_seconds_count {fast + slow}", "",
        ]).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_: object) -> None:
        pass


def react_once(url: str, scrape_s: float, interval_s: float, rng: np.random.Generator,
               watch: bool = True) -> float:
    """Seconds from the latency rise until the offline co-runner is paused, on a fresh agent
    whose loop has run long enough to hold a baseline read; the rise comes at a random phase
    of the scrape and tick cycles."""
    with tempfile.TemporaryDirectory() as tmp:
        node = FakeNode.build("A100-40GB", 1, time.monotonic)
        policy = COLOCATION.create("mps-fixed", share=50, guard=GuardSettings(scrape_s=scrape_s))
        service = AgentService(node, Path(tmp), policy, clock=time.monotonic)
        Histogram.start, Histogram.slow_from = time.monotonic(), math.inf
        service.submit({**ONLINE, "latency_metric": {"url": url, "histogram": "req_seconds"}})
        service.submit(OFFLINE)
        stop = threading.Event()

        def loop() -> None:  # what `cotenant agent run` does: tick, then sleep the interval
            while not stop.is_set():
                service.tick()
                stop.wait(interval_s)

        thread = threading.Thread(target=loop, daemon=True)
        thread.start()
        if watch:
            service.start_watching()
        try:
            time.sleep(2 * (scrape_s + interval_s) + rng.uniform(0.0, scrape_s + interval_s))
            train = service.store.get("train")
            if train is None or train.pid is None or node.paused(train.pid):
                raise RuntimeError("the offline co-runner is not running unpaused")
            pid = train.pid
            rise = time.monotonic()
            Histogram.slow_from = rise
            deadline = rise + 10 * (scrape_s + interval_s) + 5.0
            while not node.paused(pid):
                if time.monotonic() > deadline:
                    raise RuntimeError("the guard never paused the offline co-runner")
                time.sleep(0.001)
            return time.monotonic() - rise
        finally:
            stop.set()
            thread.join()
            service.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--settings", nargs="+", default=["5:1", "0.25:1", "0.1:1"],
                        help="scrape interval:tick interval pairs, in seconds")
    parser.add_argument("--no-watch", action="store_true",
                        help="no watcher thread: scraped reports wait for the tick")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Histogram)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/metrics"
    rows = []
    try:
        for setting in args.settings:
            scrape_s, interval_s = (float(x) for x in setting.split(":"))
            started, cpu = time.perf_counter(), time.process_time()
            times = [react_once(url, scrape_s, interval_s, rng, not args.no_watch)
                     for _ in range(args.repeats)]
            wall = time.perf_counter() - started
            rows.append({
                "scrape_interval_s": scrape_s, "tick_interval_s": interval_s,
                "repeats": args.repeats,
                **{k: round(1000 * float(v), 1) for k, v in (
                    ("median_ms", np.median(times)), ("p90_ms", np.quantile(times, 0.9)),
                    ("max_ms", max(times)))},
                "within_0.6_s": f"{sum(t < 0.6 for t in times)}/{args.repeats}",
                "wall_s": round(wall, 1),
                # agent and histogram server together, one core = 100
                "process_cpu_pct": round(100 * (time.process_time() - cpu) / wall, 1),
            })
    finally:
        server.shutdown()
        server.server_close()
    print(json.dumps({
        "machine": f"{platform.node()} {platform.machine()}, {os.cpu_count()} cores, "
                   f"Linux {platform.release()}, Python {platform.python_version()}",
        "requests_per_s": REQUESTS_PER_S, "watcher": not args.no_watch, "rows": rows,
    }, indent=2))


if __name__ == "__main__":
    main()
