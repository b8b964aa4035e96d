"""Real-GPU tests (marker ``gpu``), skipped where NVML finds no GPU.

They read the inventory, start MPS daemons under a temporary directory and run processes, but
never change a GPU's MIG mode or layout, clocks or compute mode (MIG is exercised on the fake).
"""

from __future__ import annotations

import importlib.util
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cotenant.agent.backends import open_backend
from cotenant.agent.mps import MpsManager
from cotenant.agent.service import AgentService
from cotenant.agent.state import Status
from cotenant.policies.colocation import COLOCATION

FIXED_70 = COLOCATION.create("mps-fixed", share=70)

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("needs_gpu")]

ONLINE_PY = """
import sys, time, torch
x = torch.randn(2048, 2048, device="cuda")
end = time.time() + float(sys.argv[2])
with open(sys.argv[1], "a") as beat:
    while time.time() < end:
        (x @ x).sum().item()
        beat.write(f"{time.time()}\\n"); beat.flush()
        time.sleep(0.05)
"""
OFFLINE_PY = """
import torch
torch.ones(256, 1024, 1024, device="cuda")  # 1 GiB: fits
torch.ones(768, 1024, 1024, device="cuda")  # 3 GiB more: past the 2 GiB limit
"""

TRAIN_PY = """
import torch
x = torch.randn(4096, 4096, device="cuda")
while True:
    (x @ x).sum().item()
"""


def need(tool: str) -> None:
    if shutil.which(tool) is None:
        pytest.skip(f"{tool} is not installed")


def stop_all(service: AgentService) -> None:
    """Stop the tests' workloads, wait until they have exited, stop MPS, close the agent."""
    for name in ("web", "train"):
        if service.exists(name):
            service.stop(name)
    for _ in range(40):
        service.tick()
        if all(r.status.final for r in service.store.all()):
            break
        time.sleep(0.5)
    service.mps.stop(0)
    service.close()


def test_nvml_inventory_matches_nvidia_smi(tmp_path: Path) -> None:
    need("nvidia-smi")
    out = subprocess.run(
        ["nvidia-smi", "--query-gpu=index,uuid,memory.total,mig.mode.current",
         "--format=csv,noheader,nounits"],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout
    rows = [[c.strip() for c in line.split(",")] for line in out.strip().splitlines()]
    gpus = open_backend("nvml", state_dir=tmp_path).gpus()
    assert len(gpus) == len(rows)
    for info, (index, uuid, total, mig) in zip(gpus, rows, strict=True):
        assert info.index == int(index)
        assert info.uuid == uuid
        assert abs(info.memory_total_mib - int(total)) <= 1
        assert info.mig_enabled == (mig == "Enabled")


def test_mps_daemon_starts_and_stops(tmp_path: Path) -> None:
    need("nvidia-cuda-mps-control")
    node = open_backend("nvml", state_dir=tmp_path)
    mps = MpsManager(node, tmp_path)
    try:
        assert mps.ensure(0)
        assert mps.healthy(0)
        assert (tmp_path / "mps" / "gpu0" / "pipe").is_dir()
    finally:
        mps.stop(0)
    assert not mps.healthy(0)


def test_offline_past_its_memory_limit_fails_while_online_keeps_serving(tmp_path: Path) -> None:
    need("nvidia-cuda-mps-control")
    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed")
    beats = tmp_path / "beats"
    service = AgentService(open_backend("nvml", state_dir=tmp_path), tmp_path, FIXED_70)
    try:
        service.submit({"name": "web", "role": "online", "gpu": 0, "mem_limit_mib": 4096,
                        "argv": [sys.executable, "-c", ONLINE_PY, str(beats), "60"]})
        service.submit({"name": "train", "role": "offline", "gpu": 0, "mem_limit_mib": 2048,
                        "sm_share": 30, "argv": [sys.executable, "-c", OFFLINE_PY]})
        deadline = time.time() + 120
        while time.time() < deadline:
            service.tick()
            faults = [e.fault for e in service.store.events("train") if e.kind == "exit"]
            if faults:
                break
            time.sleep(0.5)
        assert faults[0] == "oom"
        seen = beats.read_text().count("\n")
        time.sleep(3)
        service.tick()
        web = service.store.get("web")
        assert web is not None
        assert web.status is Status.RUNNING
        assert web.restarts == 0
        assert beats.read_text().count("\n") > seen  # still serving
    finally:
        stop_all(service)


def test_the_agent_measures_an_offline_start_and_share_change(tmp_path: Path) -> None:
    """The figures a co-location scenario's ``world.offlineStartS``/``shareChangeS`` assume,
    measured for a bare torch loop (a real job adds its checkpoint, data loader and warm-up)."""
    need("nvidia-cuda-mps-control")
    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed")
    service = AgentService(open_backend("nvml", state_dir=tmp_path), tmp_path, FIXED_70)
    try:
        service.submit({"name": "web", "role": "online", "gpu": 0, "mem_limit_mib": 4096,
                        "argv": [sys.executable, "-c", ONLINE_PY, str(tmp_path / "b"), "300"]})
        # the share the policy gives offline (30%), so no share change before it is busy
        service.submit({"name": "train", "role": "offline", "gpu": 0, "mem_limit_mib": 4096,
                        "sm_share": 30, "argv": [sys.executable, "-c", TRAIN_PY]})
        deadline = time.time() + 180
        kinds: dict[str, object] = {}
        while time.time() < deadline and len(kinds) < 2:
            service.tick()
            down = service.downtime()  # beside web on one MPS daemon: lower bounds
            kinds = {**down["lower_bounds"], **down["kinds"]}
            if kinds and service.colocation.policy == FIXED_70:  # offline to 10%: a restart
                service.colocation.policy = COLOCATION.create("mps-fixed", share=90)
            time.sleep(0.5)
        events = [(e.kind, e.detail) for e in service.store.events("train")]
        assert set(kinds) == {"start", "share change"}, events
        for kind, figures in kinds.items():
            assert isinstance(figures, dict)
            # a bare torch loop starts (CUDA context, MPS client attach) in well under a
            # minute and at least takes the CUDA initialisation; the median is within max
            assert 0.05 <= float(figures["median_s"]) <= float(figures["max_s"]) < 60.0, kind
            assert int(figures["count"]) >= 1
    finally:
        stop_all(service)


SERVE_PY = """
import http.server, sys, threading, time, torch
port, seconds, per_s = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
bounds = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, float("inf")]
counts = [0] * len(bounds)
lock = threading.Lock()

class Page(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        with lock:
            lines, run = ["# TYPE req_seconds histogram"], 0
            for bound, count in zip(bounds, counts):
                run += count
                le = "+Inf" if bound == float("inf") else repr(bound)
                lines.append(f'req_seconds_bucket{{le="{le}"}} {run}')
            lines.append(f"req_seconds_count {run}")
        body = ("\\n".join(lines) + "\\n").encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass

server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Page)
threading.Thread(target=server.serve_forever, daemon=True).start()
x = torch.randn(4096, 4096, device="cuda")
end = next_at = time.time()
end += seconds
while time.time() < end:
    start = time.time()
    for _ in range(4):
        y = x @ x
    torch.cuda.synchronize()
    took = time.time() - start
    with lock:
        counts[next(i for i, b in enumerate(bounds) if took <= b)] += 1
    next_at += 1.0 / per_s
    time.sleep(max(0.0, next_at - time.time()))
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_under_mps_the_agent_reads_the_services_load_from_its_request_rate(
    tmp_path: Path,
) -> None:
    """A service serving 25 requests a second (four 4096-wide fp32 matmuls each) on an MPS
    daemon, its latency histogram on a local page. Alone, the GPU's utilisation is its own and
    teaches the agent its GPU time per request; beside a training loop that keeps the GPU
    busy, NVML samples neither client, and the agent reads the service's load from its
    request rate: close to what it was alone, far below the GPU's utilisation."""
    need("nvidia-cuda-mps-control")
    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed")
    port = _free_port()
    service = AgentService(open_backend("nvml", state_dir=tmp_path), tmp_path, FIXED_70)
    figures: dict[str, float] = {}

    def settle(seconds: float) -> list[float]:
        """Tick for ``seconds``; the GPU's utilisation at each tick."""
        seen = []
        deadline = time.time() + seconds
        while time.time() < deadline:
            service.tick()
            util = service.backend.gpus()[0].utilisation_pct
            if util is not None:
                seen.append(util)
            time.sleep(0.5)
        return seen

    try:
        service.submit({"name": "web", "role": "online", "gpu": 0, "mem_limit_mib": 4096,
                        "model": "resnet50", "slo_ms": 500,
                        "latency_metric": {"url": f"http://127.0.0.1:{port}/metrics",
                                           "histogram": "req_seconds"},
                        "argv": [sys.executable, "-c", SERVE_PY, str(port), "240", "25"]})
        settle(15.0)  # torch's start, the first reads
        alone = settle(20.0)
        figures["alone_util_pct"] = sorted(alone)[len(alone) // 2]
        web = service.store.get("web")
        assert web is not None
        learned = service.observer.sampler.costs.cost(web.spec)
        assert learned is not None
        assert learned[1] == "measured while it ran alone"
        figures["learned_ms"] = learned[0]
        service.submit({"name": "train", "role": "offline", "gpu": 0, "mem_limit_mib": 4096,
                        "sm_share": 30, "argv": [sys.executable, "-c", TRAIN_PY]})
        settle(15.0)
        beside = settle(20.0)
        figures["beside_util_pct"] = sorted(beside)[len(beside) // 2]
        load, source = service.observer.sampler.latest()["web"]
        figures["read_load_pct"] = load
        print("request-rate load on the GPU:", figures)
        assert source == "requests"
        assert 0.5 * figures["alone_util_pct"] <= load <= 2.0 * figures["alone_util_pct"]
        assert figures["beside_util_pct"] >= load + 20.0  # what it read before: train's too
    finally:
        stop_all(service)
