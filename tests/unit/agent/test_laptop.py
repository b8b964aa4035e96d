"""Laptop mode: fake GPUs, real processes. The argv runs with the environment it would get on
a GPU; its exit status outlives the agent (the wrapper's file), so after an agent restart a
job that exited 0 is completed, and a stop ends it."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from cotenant.agent.backends import open_backend, procfs
from cotenant.agent.backends.fake import MPS_SERVER_MIB, ManualClock
from cotenant.agent.backends.laptop import LaptopNode
from cotenant.agent.service import AgentService

from .harness import fixed

pytestmark = pytest.mark.skipif(not procfs.available(), reason="needs Linux /proc")

SLEEPER = {"name": "job", "role": "offline", "gpu": 0, "sm_share": 40, "mem_limit_mib": 4000,
           "argv": [sys.executable, "-c", "import time; time.sleep(60)"]}


def wait_for(check: Callable[[], bool], timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.02)
    return check()


class Laptop:
    """An agent service over a laptop node on a state directory; ``crash`` drops it (no
    close: nothing is stopped or flushed) and starts another on the same directory."""

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir
        self.clock = ManualClock(1000.0)
        self.dead: list[LaptopNode] = []  # crashed agents' backends: their children reaped last
        self.service = self._open()

    def _open(self) -> AgentService:
        node = open_backend("fake", gpus="A100-40GB:1", state_dir=self.state_dir,
                            clock=self.clock, real_processes=True)
        assert isinstance(node, LaptopNode)
        self.node = node
        return AgentService(node, self.state_dir, fixed(50, guard=False), clock=self.clock)

    def crash(self) -> None:
        self.service.store._db.close()
        self.dead.append(self.node)
        self.service = self._open()

    def tick(self, n: int = 1) -> None:
        for _ in range(n):
            self.clock.advance(0.5)
            self.service.tick()

    def record(self, name: str = "job") -> dict[str, object]:
        return next(w for w in self.service.workloads() if w["name"] == name)

    def settle(self, check: Callable[[], bool], timeout_s: float = 10.0) -> bool:
        def ticked() -> bool:
            self.tick()
            return check()
        return wait_for(ticked, timeout_s)

    def close(self) -> None:
        for w in self.service.workloads():
            if w["status"] in ("running", "restarting", "stopping"):
                self.service.stop(str(w["name"]))
        self.settle(lambda: all(w["status"] not in ("running", "stopping", "restarting")
                                for w in self.service.workloads()), 15.0)
        self.service.close()
        for node in self.dead:
            for child in node.real._children.values():
                child.popen.kill()
                child.popen.wait()


@pytest.fixture
def laptop(tmp_path: Path) -> Iterator[Laptop]:
    agent = Laptop(tmp_path / "state")
    try:
        yield agent
    finally:
        agent.close()


def test_the_argv_runs_as_a_real_process_with_a_gpu_environment(laptop: Laptop) -> None:
    laptop.service.submit(SLEEPER)
    laptop.tick()
    pid = laptop.record()["pid"]
    assert isinstance(pid, int)
    assert procfs.alive(pid)
    env = procfs.environ(pid) or {}
    assert env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "40"
    assert env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] == "0=4000M"
    assert env["CUDA_MPS_PIPE_DIRECTORY"].startswith(str(laptop.state_dir))
    assert env["COTENANT_WORKLOAD"] == "job"
    laptop.service.stop("job")
    assert laptop.settle(lambda: laptop.record()["status"] == "stopped")
    assert wait_for(lambda: not procfs.alive(pid))


def test_simulated_programs_stay_available_by_name(laptop: Laptop) -> None:
    laptop.service.submit({"name": "sim", "role": "offline", "gpu": 0,
                           "argv": ["fake-workload", "--mem-mib", "2000"]})
    laptop.tick()
    assert laptop.record("sim")["status"] == "running"
    # on the fake GPU (with its MPS server's), no process here
    assert laptop.node.gpu(0).memory_used_mib == 2000 + MPS_SERVER_MIB


def test_a_job_that_exits_0_while_no_agent_runs_is_completed_not_rerun(
        laptop: Laptop, tmp_path: Path) -> None:
    flag = tmp_path / "go"
    laptop.service.submit({**SLEEPER, "argv": [
        sys.executable, "-c",
        f"import os, time\nwhile not os.path.exists({str(flag)!r}): time.sleep(0.02)"]})
    laptop.tick()
    pid = laptop.record()["pid"]
    assert isinstance(pid, int)
    laptop.crash()  # the agent dies; the job finishes meanwhile
    flag.write_text("")
    assert wait_for(lambda: procfs.state(pid) in (None, "Z"))
    laptop.tick(2)
    record = laptop.record()
    assert record["status"] == "completed", record
    assert record["restarts"] == 0


def test_a_stop_after_an_agent_restart_stops_the_adopted_job(laptop: Laptop) -> None:
    laptop.service.submit(SLEEPER)
    laptop.tick()
    pid = laptop.record()["pid"]
    laptop.crash()
    laptop.tick()
    assert laptop.record()["pid"] == pid
    laptop.service.stop("job")
    assert laptop.settle(lambda: laptop.record()["status"] == "stopped")
    assert laptop.record()["last_exit"].startswith("requested")  # type: ignore[union-attr]


def test_state_files_are_owner_only(laptop: Laptop) -> None:
    old = os.umask(0o022)
    try:
        laptop.service.submit(SLEEPER)
        laptop.tick()
    finally:
        os.umask(old)
    state = laptop.state_dir
    assert state.stat().st_mode & 0o777 == 0o700
    for path in [state / "agent.db", *(state / "logs").glob("*.log"),
                 state / "logs" / "leaders.json"]:
        assert path.stat().st_mode & 0o777 == 0o600, path


def test_an_mps_daemon_death_kills_its_real_clients_and_they_come_back(laptop: Laptop) -> None:
    laptop.service.submit({**SLEEPER, "name": "web", "role": "online", "model": "resnet50",
                           "slo_ms": 200})
    laptop.tick()
    pid = laptop.record("web")["pid"]
    laptop.node.kill_daemon(0)
    assert laptop.settle(lambda: laptop.record("web")["pid"] not in (None, pid)
                         and laptop.record("web")["status"] == "running")
    assert not procfs.alive(int(pid))  # type: ignore[arg-type]
    assert laptop.record("web")["failures"] == 0


def test_a_lost_leaders_book_and_database_still_find_the_job(laptop: Laptop) -> None:
    """Both records of a running job gone while no agent ran (the book's write failed on a
    full disk, the database deleted): the job is found by the state path and launch id in its
    environment, adopted, and a stop ends it and its wrapper."""
    laptop.service.submit(SLEEPER)
    laptop.tick()
    pid = laptop.record()["pid"]
    assert isinstance(pid, int)
    assert wait_for(lambda: len(laptop.node.real.members(pid)) == 2)  # the program runs
    laptop.service.store._db.close()
    for path in [laptop.state_dir / "logs" / "leaders.json",
                 *laptop.state_dir.glob("agent.db*")]:
        path.unlink()
    laptop.crash()
    laptop.tick()
    assert laptop.record()["pid"] == pid
    assert laptop.record()["status"] == "running"
    members = laptop.node.real.members(pid)
    assert len(members) == 2  # the wrapper and the program, found again
    laptop.service.stop("job")
    assert laptop.settle(lambda: laptop.record()["status"] == "stopped")
    assert wait_for(lambda: not any(procfs.alive(m) for m in members))
