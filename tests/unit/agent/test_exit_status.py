"""The wrapper's exit status where its exit file cannot be written (a full disk, the
directory removed): the wrapper still ends as its child did, leaves no temporary file, and
the agent, reaping it or reading its log after a restart, records what the job did: a job
that exited 0 is completed, never run a second time."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from cotenant.agent.backends import procfs, trampoline
from cotenant.agent.backends.local import TRAMPOLINE

from .test_laptop import SLEEPER, Laptop, wait_for

pytestmark = pytest.mark.skipif(not procfs.available(), reason="needs Linux /proc")


@pytest.fixture
def laptop(tmp_path: Path) -> Iterator[Laptop]:
    agent = Laptop(tmp_path / "state")
    try:
        yield agent
    finally:
        agent.close()


def wrapped(exit_file: Path, code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-I", str(TRAMPOLINE), str(exit_file),
                           sys.executable, "-c", code],
                          capture_output=True, text=True, timeout=30, check=False)


@pytest.mark.parametrize("code", [0, 3])
def test_the_wrapper_ends_as_its_child_when_the_exit_dir_is_gone(
        tmp_path: Path, code: int) -> None:
    done = wrapped(tmp_path / "gone" / "token", f"raise SystemExit({code})")
    assert done.returncode == code
    assert done.stderr.strip().endswith(f": exit {code}")


def test_a_failed_rename_leaves_no_temporary_file(tmp_path: Path) -> None:
    target = tmp_path / "token"
    (target / "busy").mkdir(parents=True)  # a non-empty directory: the rename fails
    done = wrapped(target, "pass")
    assert done.returncode == 0
    assert not (tmp_path / "token.tmp").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["token"]


def _exiting_job(flag: Path) -> dict[str, object]:
    return {**SLEEPER, "argv": [
        sys.executable, "-c",
        f"import os, time\nwhile not os.path.exists({str(flag)!r}): time.sleep(0.02)"]}


def test_a_job_that_exits_0_with_its_exit_dir_gone_is_completed_once(
        laptop: Laptop, tmp_path: Path) -> None:
    flag = tmp_path / "go"
    laptop.service.submit(_exiting_job(flag))
    laptop.tick()
    shutil.rmtree(laptop.state_dir / "logs" / "exits")
    flag.write_text("")
    assert laptop.settle(lambda: laptop.record()["status"] != "running")
    record = laptop.record()
    assert record["status"] == "completed", record
    assert record["restarts"] == 0


def test_after_a_restart_the_status_is_read_from_the_log_when_no_exit_file(
        laptop: Laptop, tmp_path: Path) -> None:
    flag = tmp_path / "go"
    laptop.service.submit(_exiting_job(flag))
    laptop.tick()
    pid = laptop.record()["pid"]
    assert isinstance(pid, int)
    laptop.crash()  # the agent dies; the job finishes meanwhile and its exit file fails
    shutil.rmtree(laptop.state_dir / "logs" / "exits")
    flag.write_text("")
    assert wait_for(lambda: procfs.state(pid) in (None, "Z"))
    laptop.tick(2)
    record = laptop.record()
    assert record["status"] == "completed", record
    assert record["restarts"] == 0


def test_a_stop_sent_to_the_wrapper_alone_reaches_its_program(tmp_path: Path) -> None:
    """The agent's list of a workload's processes may predate the program (a stop while
    the wrapper starts it): a SIGTERM that reaches only the wrapper still ends the program,
    and is recorded as such."""
    exit_file, running = tmp_path / "token", tmp_path / "running"
    program = f"import time; open({str(running)!r}, 'w').close(); time.sleep(60)"
    with trampoline.blocked():
        wrapper = subprocess.Popen([sys.executable, "-I", str(TRAMPOLINE), str(exit_file),
                                    sys.executable, "-c", program], start_new_session=True)
    try:
        assert wait_for(running.exists)
        os.kill(wrapper.pid, signal.SIGTERM)  # the wrapper only, its program running
        assert wrapper.wait(timeout=20) == -signal.SIGTERM
        assert exit_file.read_text() == "signal 15"
    finally:
        if wrapper.poll() is None:
            os.killpg(wrapper.pid, signal.SIGKILL)
        wrapper.wait()
