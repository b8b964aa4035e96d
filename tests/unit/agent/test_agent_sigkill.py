"""The agent as an operator runs it (``cotenant agent run --backend fake``: fake GPUs, real
processes), killed with SIGKILL and started again, then killed and started without its
database: its workloads are found and adopted, never run twice."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from cotenant.agent.backends import procfs

pytestmark = pytest.mark.skipif(not procfs.available(), reason="needs Linux /proc")

WEB = {"name": "web", "role": "online", "gpu": 0, "model": "resnet50", "slo_ms": 200,
       "argv": ["sleep", "120"]}
TRAIN = {"name": "train", "role": "offline", "gpu": 0, "sm_share": 50, "argv": ["sleep", "120"]}


class Agent:
    def __init__(self, state: Path, *extra: str) -> None:
        self.state = state
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "from cotenant.cli.main import main; main()", "agent", "run",
             "--backend", "fake", "--gpus", "A100-40GB:1", "--state-dir", str(state),
             "--listen", "127.0.0.1:0", "--interval", "0.1", *extra],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        banner = self.proc.stdout.readline()
        found = re.search(r"http://127\.0\.0\.1:(\d+)", banner)
        assert found, banner
        self.url = f"http://127.0.0.1:{found.group(1)}"
        self.token = (state / "token").read_text().strip()

    def call(self, method: str, path: str, body: object = None) -> object:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method,
                                         headers={"Authorization": f"Bearer {self.token}"})
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())

    def workloads(self) -> dict[str, dict[str, object]]:
        listed = self.call("GET", "/v1/workloads")
        assert isinstance(listed, list)
        return {str(w["name"]): w for w in listed}

    def wait_running(self, *names: str) -> dict[str, dict[str, object]]:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            found = self.workloads()
            if all(found.get(n, {}).get("status") == "running" for n in names):
                return found
            time.sleep(0.1)
        raise AssertionError(self.workloads())

    def kill(self) -> None:
        self.proc.kill()  # SIGKILL: nothing flushed, nothing stopped
        self.proc.wait()
        for pipe in (self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                pipe.close()


def copies(name: str, state: Path) -> int:
    """Live launches of workload ``name`` started from ``state`` (by their environment)."""
    launches = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and procfs.state(int(entry.name)) not in (None, "Z"):
            env = procfs.environ(int(entry.name)) or {}
            if (env.get("COTENANT_WORKLOAD") == name
                    and str(state) in env.get("CUDA_MPS_PIPE_DIRECTORY", "")):
                launches.add(env.get("COTENANT_LAUNCH"))
    return len(launches)


@pytest.fixture
def state(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "state"
    yield path
    for entry in Path("/proc").iterdir():  # whatever a failed test left running
        if entry.name.isdigit():
            env = procfs.environ(int(entry.name)) or {}
            if str(path) in env.get("CUDA_MPS_PIPE_DIRECTORY", ""):
                procfs.kill([int(entry.name)], signal.SIGKILL)


@pytest.mark.slow
def test_sigkill_and_a_deleted_database_adopt_never_duplicate(state: Path) -> None:
    agent = Agent(state)
    try:
        agent.call("POST", "/v1/workloads", WEB)
        agent.call("POST", "/v1/workloads", TRAIN)
        pids = {n: w["pid"] for n, w in agent.wait_running("web", "train").items()}
    finally:
        agent.kill()
    agent = Agent(state)  # after a SIGKILL
    try:
        found = agent.wait_running("web", "train")
        assert {n: w["pid"] for n, w in found.items()} == pids
    finally:
        agent.kill()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{state / 'agent.db'}{suffix}").unlink(missing_ok=True)
    agent = Agent(state)  # no database at all
    try:
        found = agent.wait_running("web", "train")
        assert {n: w["pid"] for n, w in found.items()} == pids
        time.sleep(0.5)
        assert copies("web", state) == 1
        assert copies("train", state) == 1
        for name in pids:
            agent.call("DELETE", f"/v1/workloads/{name}")
        deadline = time.monotonic() + 20
        while any(w["status"] != "stopped" for w in agent.workloads().values()):
            assert time.monotonic() < deadline
            time.sleep(0.1)
        assert copies("web", state) == 0
        assert copies("train", state) == 0
    finally:
        agent.proc.send_signal(signal.SIGTERM)
        agent.proc.communicate(timeout=30)


def test_a_listen_address_beyond_this_host_is_warned_of(state: Path) -> None:
    agent = subprocess.run(
        [sys.executable, "-c", "from cotenant.cli.main import main; main()", "agent", "run",
         "--backend", "fake", "--state-dir", str(state), "--listen", "0.0.0.0:0",
         "--ticks", "1", "--interval", "0.01"],
        capture_output=True, text=True, timeout=60, check=False,
        env={**os.environ, "COLUMNS": "200"})
    assert agent.returncode == 0, agent.stderr
    assert "warning: the API listens on 0.0.0.0" in agent.stderr
    assert state.stat().st_mode & 0o777 == 0o700
    assert (state / "agent.db").stat().st_mode & 0o777 == 0o600
