"""Real processes on this host (no GPU needed): a workload is every process that carries its
token, so signals reach torchrun-style workers in sessions of their own, the workload runs
while any of them does, and a pid reused by another process is never taken for it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from cotenant.agent.backends import procfs
from cotenant.agent.backends.base import ProcState
from cotenant.agent.backends.local import PopenProcesses

pytestmark = pytest.mark.skipif(not procfs.available(), reason="needs Linux /proc")


def launcher(worker: str, *, new_session: bool, then: str = "time.sleep(60)") -> list[str]:
    """A launcher (think torchrun, which starts each worker with start_new_session, or a
    shell) that starts one worker running ``worker``, then runs ``then``."""
    return [sys.executable, "-c",
            "import subprocess, sys, time; "
            f"subprocess.Popen([sys.executable, '-c', {worker!r}], "
            f"start_new_session={new_session}); {then}"]


SLEEPER = "import time; time.sleep(60)"
# a worker that checkpoints for 1 s on SIGTERM, then exits
CHECKPOINTER = ("import signal, sys, time\n"
                "signal.signal(signal.SIGTERM, lambda *a: (time.sleep(1.0), sys.exit(0)))\n"
                "time.sleep(60)")


def state(pid: int) -> str | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    letter = text[text.rindex(")") + 2:].split()[0]
    return None if letter == "Z" else letter


def catches_sigterm(pid: int) -> bool:
    """Whether ``pid`` has installed its SIGTERM handler (``SigCgt`` in its status)."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    mask = next(int(line.split()[1], 16) for line in text.splitlines()
                if line.startswith("SigCgt:"))
    return bool(mask & (1 << (signal.SIGTERM - 1)))


def wait_for(check: Callable[[], bool], timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def procs(tmp_path: Path) -> Iterator[PopenProcesses]:
    backend = PopenProcesses(tmp_path)
    yield backend
    for pid, (proc, _) in backend._procs.items():  # whatever a failing test left behind
        backend.send_signal(pid, signal.SIGKILL)
        proc.wait(10)


def start(procs: PopenProcesses, argv: list[str]) -> tuple[int, int]:
    """Spawn ``argv``; (launcher pid, worker pid) once the worker is up."""
    pid = procs.spawn(argv, {}, gpu=0)
    assert wait_for(lambda: len(procs._members(pid)) == 2)
    worker = next(p for p in procs._members(pid) if p != pid)
    return pid, worker


def test_pause_resume_and_kill_reach_workers_in_their_own_session(
        procs: PopenProcesses) -> None:
    pid, worker = start(procs, launcher(SLEEPER, new_session=True))
    assert os.getpgid(worker) != pid  # out of the launcher's group, as torchrun's are
    procs.send_signal(pid, signal.SIGSTOP)
    assert wait_for(lambda: state(pid) == "T" and state(worker) == "T")
    procs.send_signal(pid, signal.SIGCONT)
    assert wait_for(lambda: state(pid) != "T" and state(worker) != "T")
    procs.send_signal(pid, signal.SIGKILL)
    assert wait_for(lambda: procs.poll(pid).state is ProcState.EXITED)
    assert state(worker) is None
    assert procs.poll(pid).returncode == -signal.SIGKILL


def test_a_workload_runs_while_a_worker_still_checkpoints(procs: PopenProcesses) -> None:
    """A shell dies on SIGTERM at once while its child checkpoints: the workload has not
    exited until the child has (so a restart does not start a second copy beside it)."""
    pid, worker = start(procs, launcher(CHECKPOINTER, new_session=False))
    assert wait_for(lambda: catches_sigterm(worker))
    procs.send_signal(pid, signal.SIGTERM)
    assert wait_for(lambda: state(pid) is None and procs._procs[pid][0].poll() is not None)
    assert state(worker) is not None
    assert procs.poll(pid).state is ProcState.RUNNING
    assert wait_for(lambda: procs.poll(pid).state is ProcState.EXITED)
    assert procs.poll(pid).returncode == -signal.SIGTERM  # the launcher's status


def test_workers_left_paused_by_a_dead_launcher_can_be_resumed_and_killed(
        procs: PopenProcesses) -> None:
    """The launcher alone is killed (the OOM killer) while the workload is paused: its worker
    is still the workload's, so the pause can be lifted and a stop reaches it."""
    pid, worker = start(procs, launcher(SLEEPER, new_session=True))
    procs.send_signal(pid, signal.SIGSTOP)
    assert wait_for(lambda: state(worker) == "T")
    os.kill(pid, signal.SIGKILL)
    assert wait_for(lambda: procs._procs[pid][0].poll() is not None)
    assert procs.poll(pid).state is ProcState.RUNNING  # its worker lives on
    procs.send_signal(pid, signal.SIGCONT)
    assert wait_for(lambda: state(worker) not in (None, "T"))
    procs.send_signal(pid, signal.SIGKILL)
    assert wait_for(lambda: procs.poll(pid).state is ProcState.EXITED)


def test_an_agent_restart_adopts_its_workloads_and_nothing_else(
        procs: PopenProcesses, tmp_path: Path) -> None:
    pid, worker = start(procs, launcher(SLEEPER, new_session=True))
    stranger = subprocess.Popen([sys.executable, "-c", SLEEPER], start_new_session=True)
    try:
        again = PopenProcesses(tmp_path / "again")  # a new agent: no memory of either
        assert again.poll(pid).state is ProcState.RUNNING
        # a pid reused by a process that is not a workload (no token): the workload is gone
        assert again.poll(stranger.pid).state is ProcState.UNKNOWN
        again.send_signal(stranger.pid, signal.SIGKILL)
        assert stranger.poll() is None
        again.send_signal(pid, signal.SIGKILL)  # reaches the worker too
        assert wait_for(lambda: state(worker) is None)
        assert wait_for(lambda: again.poll(pid).state is ProcState.UNKNOWN)  # not its child
    finally:
        stranger.kill()
        stranger.wait()


def test_tokens_are_whole_items_of_the_environment(tmp_path: Path) -> None:
    procs = PopenProcesses(tmp_path)
    pid = procs.spawn([sys.executable, "-c", SLEEPER], {"OTHER": "x"}, gpu=0)
    try:
        token = procfs.token_of(pid)
        assert token == procs._tokens[pid]
        assert procfs.members(token) == [pid]
        assert procfs.members(token[:-1]) == []  # a prefix is not the token
        assert os.getpid() not in procfs.members(token)
    finally:
        procs.send_signal(pid, signal.SIGKILL)
        procs._procs[pid][0].wait(10)
