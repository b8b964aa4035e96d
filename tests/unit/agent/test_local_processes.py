"""Real processes on this host (no GPU needed): a workload is its leader's process group and
every process that carries its token, so signals reach torchrun-style workers in sessions of
their own and a leader that lost its environment; when the leader exits the rest drain
(SIGTERM, SIGKILL after the grace) before the workload counts as exited."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from cotenant.agent.backends import procfs
from cotenant.agent.backends.base import DaemonConfig, ProcState
from cotenant.agent.backends.commands import start_error
from cotenant.agent.backends.local import PopenProcesses
from cotenant.agent.backends.mpsctl import MpsControl
from cotenant.errors import InputError, PermanentError, TemporaryError

pytestmark = pytest.mark.skipif(not procfs.available(), reason="needs Linux /proc")


def launcher(worker: str, *, new_session: bool, then: str = "time.sleep(60)") -> list[str]:
    """A launcher (think torchrun, which starts each worker with start_new_session, or a
    shell) that starts one worker running ``worker``, then runs ``then``."""
    return [sys.executable, "-c",
            "import subprocess, sys, time; "
            f"subprocess.Popen([sys.executable, '-c', {worker!r}], "
            f"start_new_session={new_session}); {then}"]


SLEEPER = "import time; time.sleep(60)"
STUBBORN = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"
# a worker that checkpoints for 1 s on SIGTERM (to $CKPT), then exits; a second SIGTERM
# kills it mid-checkpoint
CHECKPOINTER = ("import os, signal, sys, time\n"
                "def stop(*a):\n"
                "    signal.signal(signal.SIGTERM, signal.SIG_DFL)\n"
                "    time.sleep(1.0)\n"
                "    open(os.environ['CKPT'], 'w').write('done')\n"
                "    sys.exit(0)\n"
                "signal.signal(signal.SIGTERM, stop)\n"
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
def procs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[PopenProcesses]:
    monkeypatch.delenv(procfs.TOKEN_VAR, raising=False)  # pytest itself run as a workload
    backend = PopenProcesses(tmp_path, drain_grace_s=1.0)
    yield backend
    for pid, child in list(backend._children.items()):  # whatever a failing test left behind
        backend.send_signal(pid, signal.SIGKILL)
        child.popen.wait(10)


def start(procs: PopenProcesses, argv: list[str],
          env: dict[str, str] | None = None) -> tuple[int, int]:
    """Spawn ``argv``; (launcher pid, worker pid) once the worker is up."""
    pid = procs.spawn(argv, env or {}, gpu=0)
    token = procs._children[pid].token
    assert wait_for(lambda: len(procfs.members(token)) == 2)
    worker = next(p for p in procfs.members(token) if p != pid)
    return pid, worker


def exited(procs: PopenProcesses, pid: int) -> bool:
    return procs.poll(pid).state is ProcState.EXITED


def test_pause_resume_and_kill_reach_workers_in_their_own_session(
        procs: PopenProcesses) -> None:
    pid, worker = start(procs, launcher(SLEEPER, new_session=True))
    assert os.getpgid(worker) != pid  # out of the launcher's group, as torchrun's are
    procs.send_signal(pid, signal.SIGSTOP)
    assert wait_for(lambda: state(pid) == "T" and state(worker) == "T")
    procs.send_signal(pid, signal.SIGCONT)
    assert wait_for(lambda: state(pid) != "T" and state(worker) != "T")
    procs.send_signal(pid, signal.SIGKILL)
    assert wait_for(lambda: exited(procs, pid))
    # a process that is exiting has dropped its memory (no environ, so no token) a
    # moment before it leaves /proc
    assert wait_for(lambda: state(worker) is None, timeout_s=2.0)
    assert procs.poll(pid).returncode == -signal.SIGKILL


def test_members_are_the_leader_and_its_workers(procs: PopenProcesses) -> None:
    pid, worker = start(procs, launcher(SLEEPER, new_session=True))
    assert procs.members(pid) == sorted([pid, worker])
    assert procs.members(999_999_999) == [999_999_999]  # not ours: itself alone
    procs.send_signal(pid, signal.SIGKILL)
    assert wait_for(lambda: exited(procs, pid))


def test_a_leader_that_lost_its_environment_is_still_reached(procs: PopenProcesses) -> None:
    """``env -i`` (or setproctitle) leaves no token to find: the leader's group still has it."""
    pid = procs.spawn(["env", "-i", sys.executable, "-c", SLEEPER], {}, gpu=0)
    assert wait_for(lambda: procfs.token_of(pid) is None and state(pid) == "S")
    procs.send_signal(pid, signal.SIGSTOP)
    assert wait_for(lambda: state(pid) == "T")
    procs.send_signal(pid, signal.SIGKILL)
    assert wait_for(lambda: exited(procs, pid))


def test_a_workload_runs_while_a_worker_still_checkpoints(
        procs: PopenProcesses, tmp_path: Path) -> None:
    """A shell dies on SIGTERM at once while its child checkpoints: the workload has not
    exited until the child has (so a restart does not start a second copy beside it), and
    the shell stays unreaped meanwhile, so its pid and group id cannot be reused."""
    procs.drain_grace_s = 4.0  # its checkpoint takes 1 s: the fixture's 1 s grace would race it
    pid, worker = start(procs, launcher(CHECKPOINTER, new_session=False),
                        {"CKPT": str(tmp_path / "ckpt")})
    assert wait_for(lambda: catches_sigterm(worker))
    procs.send_signal(pid, signal.SIGTERM)
    assert wait_for(lambda: state(pid) is None)  # dead: a zombie (state() says None)
    assert Path(f"/proc/{pid}").exists()  # ... not yet reaped
    assert state(worker) is not None
    assert procs.poll(pid).state is ProcState.RUNNING
    assert wait_for(lambda: exited(procs, pid))
    assert procs.poll(pid).returncode == -signal.SIGTERM  # the launcher's status
    assert not Path(f"/proc/{pid}").exists()  # reaped now
    assert (tmp_path / "ckpt").read_text() == "done"  # one SIGTERM: its checkpoint finished


def test_what_a_finished_leader_leaves_behind_is_drained(procs: PopenProcesses) -> None:
    """A job exits 0 and leaves a helper that ignores SIGTERM: SIGKILL after the grace
    (1 s here), then the workload has completed, not run on for ever."""
    pid = procs.spawn(launcher(STUBBORN, new_session=True, then="time.sleep(0.5)"), {}, gpu=0)
    token = procs._children[pid].token
    assert wait_for(lambda: len(procfs.members(token)) == 2)
    helper = next(p for p in procfs.members(token) if p != pid)
    assert wait_for(lambda: procs.poll(pid).state is ProcState.RUNNING and state(pid) is None)
    assert state(helper) is not None  # SIGTERM'd, ignored
    assert wait_for(lambda: exited(procs, pid), timeout_s=5.0)
    assert procs.poll(pid).returncode == 0
    assert wait_for(lambda: state(helper) is None)


def test_workers_left_paused_by_a_dead_launcher_can_be_resumed(procs: PopenProcesses) -> None:
    """The launcher alone is killed (the OOM killer) while the workload is paused: its worker
    is still the workload's, so the pause can be lifted before the drain ends it."""
    pid, worker = start(procs, launcher(SLEEPER, new_session=True))
    procs.send_signal(pid, signal.SIGSTOP)
    assert wait_for(lambda: state(worker) == "T")
    os.kill(pid, signal.SIGKILL)
    assert wait_for(lambda: state(pid) is None)
    procs.send_signal(pid, signal.SIGCONT)
    assert wait_for(lambda: state(worker) not in (None, "T"))
    assert procs.poll(pid).state is ProcState.RUNNING  # the drain has begun
    assert wait_for(lambda: exited(procs, pid))
    # a process that is exiting has dropped its memory (no environ, so no token) a
    # moment before it leaves /proc
    assert wait_for(lambda: state(worker) is None, timeout_s=2.0)


def test_an_agent_restart_adopts_its_workloads_and_signals_nothing_else(
        procs: PopenProcesses, tmp_path: Path) -> None:
    pid, worker = start(procs, launcher(SLEEPER, new_session=True))
    stranger = subprocess.Popen([sys.executable, "-c", SLEEPER], start_new_session=True)
    try:
        again = PopenProcesses(tmp_path)  # a new agent on the same state: no memory of either
        assert again.poll(pid).state is ProcState.RUNNING
        again.send_signal(pid, signal.SIGKILL)  # by its token: the worker too
        assert wait_for(lambda: state(worker) is None)
        # its leader is the old agent's child: a zombie until that one reaps it
        assert wait_for(lambda: again.poll(pid).state is ProcState.UNKNOWN)
        # a live pid without a token (a process started before tokens, or one that reused
        # the pid) is signalled alone, never its group or anyone else
        assert again.poll(stranger.pid).state is ProcState.RUNNING
        again.send_signal(stranger.pid, signal.SIGSTOP)
        assert wait_for(lambda: state(stranger.pid) == "T")
        # the book says a leader had this pid, but not this process (it started at another
        # time: the pid was reused, say after a reboot): not the workload, never signalled
        book = json.loads((tmp_path / "leaders.json").read_text())
        book[str(stranger.pid)] = {"token": "gone", "start": 1, "boot": "another boot"}
        (tmp_path / "leaders.json").write_text(json.dumps(book))
        later = PopenProcesses(tmp_path)
        assert later.poll(stranger.pid).state is ProcState.UNKNOWN
        later.send_signal(stranger.pid, signal.SIGKILL)
        assert stranger.poll() is None
    finally:
        stranger.kill()
        stranger.wait()


def test_an_inherited_token_is_never_passed_on(
        procs: PopenProcesses, monkeypatch: pytest.MonkeyPatch) -> None:
    """An agent started inside a workload does not make its workloads, or its MPS daemons,
    part of that workload."""
    monkeypatch.setenv(procfs.TOKEN_VAR, "outer")
    pid = procs.spawn([sys.executable, "-c", SLEEPER], {}, gpu=0)
    assert wait_for(lambda: procfs.token_of(pid) == procs._children[pid].token)
    assert procfs.TOKEN_VAR not in MpsControl.env(DaemonConfig(0, Path("p"), Path("l")))
    procs.send_signal(pid, signal.SIGKILL)


def test_tokens_are_whole_items_of_the_environment(procs: PopenProcesses) -> None:
    pid = procs.spawn([sys.executable, "-c", SLEEPER], {"OTHER": "x"}, gpu=0)
    token = procs._children[pid].token
    assert wait_for(lambda: procfs.token_of(pid) == token)
    assert procfs.members(token) == [pid]
    assert procfs.members(token[:-1]) == []  # a prefix is not the token
    assert os.getpid() not in procfs.members(token, os.getpgid(0))  # never the agent
    procs.send_signal(pid, signal.SIGKILL)


def test_a_process_name_that_is_not_utf8_is_no_obstacle(procs: PopenProcesses) -> None:
    """A name cut at 15 bytes inside a UTF-8 character, on any process of the host."""
    odd = subprocess.Popen([sys.executable, "-c",
                            "open('/proc/self/comm', 'wb').write(b'trainer-\\xc3\\xa9\\xc3');"
                            "import time; time.sleep(60)"])
    try:
        assert wait_for(lambda: b"\xc3" in Path(f"/proc/{odd.pid}/stat").read_bytes())
        pid = procs.spawn([sys.executable, "-c", SLEEPER], {}, gpu=0)
        procs.send_signal(pid, signal.SIGKILL)
        assert wait_for(lambda: exited(procs, pid))
    finally:
        odd.kill()
        odd.wait()


def test_a_leader_that_rewrote_its_environment_is_still_adopted(
        procs: PopenProcesses, tmp_path: Path) -> None:
    """After an agent restart the leader is known by its start time, not its environment."""
    pid = procs.spawn(["sh", "-c", "sleep 0.3; exec env -i sleep 60"], {}, gpu=0)
    assert wait_for(lambda: procfs.token_of(pid) is None and state(pid) == "S")
    again = PopenProcesses(tmp_path)
    assert again.poll(pid).state is ProcState.RUNNING
    again.send_signal(pid, signal.SIGKILL)  # by its group: it leads one
    assert wait_for(lambda: state(pid) is None)


def test_a_drain_resumes_paused_workers_so_that_they_checkpoint(
        procs: PopenProcesses, tmp_path: Path) -> None:
    """Paused, then the launcher alone is killed: the drain's SIGTERM comes with a SIGCONT,
    so the worker checkpoints instead of waiting, stopped, for the SIGKILL."""
    procs.drain_grace_s = 4.0  # its checkpoint takes 1 s: the fixture's 1 s grace would race it
    pid, worker = start(procs, launcher(CHECKPOINTER, new_session=True),
                        {"CKPT": str(tmp_path / "ckpt")})
    assert wait_for(lambda: catches_sigterm(worker))
    procs.send_signal(pid, signal.SIGSTOP)
    assert wait_for(lambda: state(worker) == "T")
    os.kill(pid, signal.SIGKILL)
    assert wait_for(lambda: state(pid) is None)
    assert wait_for(lambda: exited(procs, pid))
    assert (tmp_path / "ckpt").read_text() == "done"


def check_start_failures(procs: PopenProcesses, tmp_path: Path) -> None:
    """Every way an exec fails is the workload's fault, reported, never the agent's crash:
    each errno says why; a host short of processes would only defer the start."""
    fd_count = len(os.listdir("/proc/self/fd"))
    for argv, why in ((["no-such-command-cotenant"], "not found"),
                      (["/etc/passwd/x"], "Not a directory"),
                      (["/" + "a" * 5000], "File name too long"),
                      ([sys.executable, "x" * 300_000], "Argument list too long")):
        with pytest.raises(PermanentError, match=f"cannot start .*{why}"):
            procs.spawn(argv, {}, gpu=0)
    with pytest.raises(PermanentError, match="cannot be encoded"):
        procs.spawn(["true"], {"X": "\ud800"}, gpu=0)  # the spec refuses it; a caller may not
    with pytest.raises(InputError, match="argv"):
        procs.spawn(["true", "\ud800"], {}, gpu=0)
    assert len(os.listdir("/proc/self/fd")) == fd_count


def test_a_start_that_fails_says_why(procs: PopenProcesses, tmp_path: Path) -> None:
    check_start_failures(procs, tmp_path)
    busy = start_error("x", OSError(errno.EAGAIN, "Resource temporarily unavailable"))
    assert isinstance(busy, TemporaryError)
    assert busy.delay_s > 0


def check_interrupted_start(procs: PopenProcesses, tmp_path: Path,
                            monkeypatch: pytest.MonkeyPatch) -> None:
    """An interrupt (Ctrl-C in a program that uses the backend) between the start and the
    leader's record kills the workload, the worker it already started included: nobody
    would know of it, and the next start would run a second copy beside it."""
    out = tmp_path / "worker.pid"
    worker = f"import os, time; open({str(out)!r}, 'w').write(str(os.getpid())); time.sleep(60)"

    def add(pid: int, token: str, cgroup: Path | None = None, log: Path | None = None) -> None:
        assert wait_for(lambda: out.exists() and out.read_text() != "")
        raise KeyboardInterrupt

    monkeypatch.setattr(procs.leaders, "add", add)
    with pytest.raises(KeyboardInterrupt):
        procs.spawn(launcher(worker, new_session=False), {}, gpu=0)
    assert wait_for(lambda: state(int(out.read_text())) is None)
    assert procs._children == {}


def test_an_interrupted_start_leaves_nothing_running(
        procs: PopenProcesses, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    check_interrupted_start(procs, tmp_path, monkeypatch)


def check_drain_keeps_its_checkpoint(procs: PopenProcesses, tmp_path: Path) -> None:
    """The leader is gone and its worker checkpoints on the drain's SIGTERM: the workload
    still counts as running, so a guard may pause it or a stop send SIGTERM again; neither
    may cut the checkpoint (a frozen worker would wait for the SIGKILL)."""
    procs.drain_grace_s = 4.0
    pid, worker = start(procs, launcher(CHECKPOINTER, new_session=True),
                        {"CKPT": str(tmp_path / "ckpt")})
    assert wait_for(lambda: catches_sigterm(worker))
    os.kill(pid, signal.SIGKILL)
    assert wait_for(lambda: state(pid) is None)
    assert procs.poll(pid).state is ProcState.RUNNING  # the drain's SIGTERM goes out
    for signum in (signal.SIGSTOP, signal.SIGTERM):
        procs.send_signal(pid, signum)
    assert wait_for(lambda: exited(procs, pid), timeout_s=3.0)  # before the SIGKILL
    assert (tmp_path / "ckpt").read_text() == "done"


def test_a_drain_is_not_paused_or_signalled_twice(procs: PopenProcesses, tmp_path: Path) -> None:
    check_drain_keeps_its_checkpoint(procs, tmp_path)
