"""Real processes on this host (no GPU needed): a workload's signals reach its whole process
group, so a pause stops its workers too and a kill leaves none behind holding the GPU."""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from cotenant.agent.backends.base import ProcState
from cotenant.agent.backends.local import PopenProcesses

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(),
                                reason="needs Linux /proc")

# a launcher (think torchrun or a shell) that starts one worker and waits for it
LAUNCHER = ("import subprocess, sys, time; "
            "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
            "time.sleep(60)")


def stat(pid: int) -> tuple[str, int] | None:
    """(state letter, process group) of ``pid``; None once it is gone (or a zombie)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()
    return None if fields[0] == "Z" else (fields[0], int(fields[2]))


def group_members(leader: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            info = stat(int(entry.name))
            if info is not None and info[1] == leader:
                found.append(int(entry.name))
    return found


def wait_for(check: Callable[[], bool], timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return False


def test_pause_resume_and_kill_reach_the_workers(tmp_path: Path) -> None:
    procs = PopenProcesses(tmp_path)
    pid = procs.spawn([sys.executable, "-c", LAUNCHER], {}, gpu=0)
    try:
        assert wait_for(lambda: len(group_members(pid)) == 2)
        worker = next(p for p in group_members(pid) if p != pid)
        procs.send_signal(pid, signal.SIGSTOP)
        assert wait_for(lambda: all((stat(p) or ("?",))[0] == "T" for p in (pid, worker)))
        procs.send_signal(pid, signal.SIGCONT)
        assert wait_for(lambda: all((stat(p) or ("T",))[0] != "T" for p in (pid, worker)))
        procs.send_signal(pid, signal.SIGKILL)
        assert wait_for(lambda: procs.poll(pid).state is ProcState.EXITED)
        assert wait_for(lambda: stat(worker) is None)  # the worker went with it
        assert procs.poll(pid).returncode == -signal.SIGKILL
        procs.send_signal(pid, signal.SIGTERM)  # exited: a no-op, never another process
    finally:
        for member in group_members(pid):
            os.kill(member, signal.SIGKILL)
