"""Benchmark: how fast the node agent pauses an offline workload (no GPU needed).

The compute guard's first action pauses the offline co-runner; the simulator's SLO figure
holds if the guard acts within 0.6 s (docs/results/colocation.md). This measures the agent's part of
that time on this host; the GPU's part (the kernels already queued finishing) needs a GPU.

* ``signal``: real processes. A launcher with ``--workers`` workers, each in a session of
  its own (as torchrun starts them), on a host with ``--crowd`` extra idle processes: the
  time from ``send_signal(SIGSTOP)`` until every process of the workload is stopped, for a
  cgroup v2 freeze (where this host has a writable cgroup v2) and for the token scan with a
  SIGSTOP to each process (the fallback).
* ``spawn``: what the cgroup costs a start: ``spawn`` until it returns (the workload's
  program runs), through the cgroup trampoline and straight.
* ``http``: a p99 report over the SLO POSTed to the agent's API (fake backend): the time
  until the reply, which is sent after the guard has paused the co-runner.

    .venv/bin/python benchmarks/pause.py [--workers 8] [--crowd 0 1000] [--repeats 30]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import numpy as np

from cotenant.agent.api import AgentServer
from cotenant.agent.backends import FakeNode, ManualClock, cgroup_start, cgroups, procfs
from cotenant.agent.backends.local import PopenProcesses
from cotenant.agent.service import AgentService
from cotenant.agent.spec import WorkloadSpec
from cotenant.policies.colocation import COLOCATION

WORKERS = ("import subprocess, sys, time\n"
           "for _ in range({n}):\n"
           "    subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'],\n"
           "                     start_new_session=True)\n"
           "time.sleep(600)")


def spin(check: Callable[[], bool], timeout_s: float = 10.0) -> float:
    """Seconds until ``check`` holds (polled without sleeping)."""
    start = time.perf_counter()
    while not check():
        if time.perf_counter() - start > timeout_s:
            raise TimeoutError("not reached")
    return time.perf_counter() - start


def stopped(pid: int) -> bool:
    return procfs.state(pid) == "T"


def summary(seconds: list[float]) -> dict[str, float]:
    ms = np.asarray(seconds) * 1000.0
    return {"median_ms": round(float(np.median(ms)), 3),
            "p90_ms": round(float(np.percentile(ms, 90)), 3),
            "max_ms": round(float(ms.max()), 3)}


def pause_once(procs: PopenProcesses, pid: int, members: list[int],
               cgroup: Path | None) -> float:
    """Seconds from SIGSTOP to all of ``members`` stopped (or the cgroup frozen)."""
    start = time.perf_counter()
    procs.send_signal(pid, signal.SIGSTOP)
    if cgroup is not None:
        events = cgroup / "cgroup.events"
        spin(lambda: "frozen 1" in events.read_text())
    else:
        spin(lambda: all(stopped(m) for m in members))
    took = time.perf_counter() - start
    procs.send_signal(pid, signal.SIGCONT)
    if cgroup is not None:
        spin(lambda: "frozen 0" in (cgroup / "cgroup.events").read_text())
    spin(lambda: not any(stopped(m) for m in members))
    return took


def pauses(workers: int, repeats: int, root: Path | None) -> list[float]:
    """``repeats`` pause times of one workload, in a cgroup below ``root`` or by token."""
    with tempfile.TemporaryDirectory() as tmp:
        procs = PopenProcesses(Path(tmp), cgroup_root=root)
        pid = procs.spawn([sys.executable, "-c", WORKERS.format(n=workers)], {}, gpu=0)
        child = procs._children[pid]
        spin(lambda: len(procfs.members(child.token, pid)) == workers + 1, 30.0)
        members = procfs.members(child.token, pid)
        try:
            return [pause_once(procs, pid, members, child.cgroup) for _ in range(repeats)]
        finally:
            procs.send_signal(pid, signal.SIGKILL)
            spin(lambda: procs.poll(pid).state.name != "RUNNING", 60.0)


def bench_signal(workers: int, crowd: int, repeats: int, root: Path | None) -> dict[str, object]:
    extra = [subprocess.Popen(["sleep", "600"]) for _ in range(crowd)]
    out: dict[str, object] = {"workers": workers, "crowd": crowd,
                              "host_processes": sum(1 for p in Path("/proc").iterdir()
                                                    if p.name.isdigit())}
    try:
        out["cgroup"] = (summary(pauses(workers, repeats, root)) if root is not None
                         else "no writable cgroup v2 here")
        out["token"] = summary(pauses(workers, repeats, None))
    finally:
        for proc in extra:
            proc.kill()
            proc.wait()
    return out


def bench_spawn(repeats: int, root: Path | None) -> dict[str, object]:
    out: dict[str, object] = {}
    for mode, where in (("cgroup", root), ("plain", None)):
        if mode == "cgroup" and where is None:
            out[mode] = "no writable cgroup v2 here"
            continue
        with tempfile.TemporaryDirectory() as tmp:
            procs = PopenProcesses(Path(tmp), cgroup_root=where)
            times = []
            for _ in range(repeats):
                start = time.perf_counter()
                pid = procs.spawn(["sleep", "600"], {}, gpu=0)
                times.append(time.perf_counter() - start)
                procs.send_signal(pid, signal.SIGKILL)
                spin(lambda: procs.poll(pid).state.name != "RUNNING", 60.0)  # noqa: B023
        out[mode] = summary(times)
    return out


def bench_http(repeats: int) -> dict[str, object]:
    clock = ManualClock(1000.0)
    node = FakeNode.build("A100-40GB", 1, clock)
    token = secrets.token_urlsafe(16)
    with tempfile.TemporaryDirectory() as tmp:
        policy = COLOCATION.create("mps-fixed", share=70, guard=True)
        guard = policy.guard
        assert guard is not None
        service = AgentService(node, Path(tmp), policy, clock=clock)
        server = AgentServer(("127.0.0.1", 0), service, token)
        thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
        thread.start()
        try:
            for spec in ({"name": "web", "argv": ["fake-workload", "--util-pct", "30"],
                          "role": "online", "gpu": 0, "model": "resnet50", "slo_ms": 50},
                         {"name": "train", "argv": ["fake-workload", "--util-pct", "60"],
                          "role": "offline", "gpu": 0, "mem_limit_mib": 10000}):
                service.submit(WorkloadSpec.from_dict(spec).to_dict())
            service.tick()
            service.tick()
            url = f"http://127.0.0.1:{server.server_address[1]}/v1/workloads/web/p99"
            times = []
            for _ in range(repeats):
                request = urllib.request.Request(url, data=b'{"p99_ms": 49}', method="POST")
                request.add_header("Authorization", f"Bearer {token}")
                start = time.perf_counter()
                with urllib.request.urlopen(request, timeout=10) as response:
                    response.read()
                times.append(time.perf_counter() - start)
                record = service.store.get("train")
                if record is None or record.pid is None or not node.paused(record.pid):
                    raise RuntimeError("the report did not pause the offline co-runner")
                clock.advance(guard.pause_s + guard.hold_s + 1)
                service.tick()  # resumed; the next report pauses again
        finally:
            server.shutdown()
            server.server_close()
            thread.join()
            service.close()
    return {"repeats": repeats, **summary(times)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--crowd", type=int, nargs="+", default=[0, 1000])
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    os.environ.pop(procfs.TOKEN_VAR, None)
    own = cgroups.own_dir()
    root = own / f"cotenant-bench-{secrets.token_hex(4)}" if own is not None else None
    if root is not None and not cgroup_start.usable(root):
        root = None
    try:
        result = {
            "machine": f"{platform.node()} {platform.machine()}, {os.cpu_count()} cores, "
                       f"Linux {platform.release()}, Python {platform.python_version()}",
            "signal": [bench_signal(args.workers, crowd, args.repeats, root)
                       for crowd in args.crowd],
            "spawn": bench_spawn(args.repeats, root),
            "http": bench_http(args.repeats),
        }
    finally:
        if root is not None:
            cgroups.remove(root)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
