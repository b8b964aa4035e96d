"""Real process control and MPS daemon management for a Linux host (used by the nvml backend).

:class:`PopenProcesses` starts workloads with :class:`subprocess.Popen` from an argv *list*
(``shell=False`` always; a string is refused), each in its own session and with a token in
its environment that finds all its processes (:mod:`.procfs`), with stdout and stderr going
to a log file whose last line becomes the exit message used to classify failures.

:class:`MpsControl` drives ``nvidia-cuda-mps-control``, one daemon per GPU: the daemon is started
with ``CUDA_VISIBLE_DEVICES=<gpu>`` and its own ``CUDA_MPS_PIPE_DIRECTORY`` and
``CUDA_MPS_LOG_DIRECTORY``; defaults are set through the control interface
(``set_default_active_thread_percentage``, ``set_default_device_pinned_mem_limit``); health is
``get_server_list`` answering; stop is ``quit``. Real MPS also has
``set_active_thread_percentage <server PID> <pct>``, which changes the share of an MPS *server*
for clients that connect afterwards; running clients keep theirs, which is why the share
controller restarts an offline client to change its share.
"""

from __future__ import annotations

import contextlib
import math
import os
import secrets
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from cotenant.agent.backends import procfs
from cotenant.agent.backends.base import DaemonConfig, ProcessStatus, ProcState
from cotenant.agent.backends.leaders import LeaderBook
from cotenant.errors import InputError, PermanentError, TemporaryError

MPS_CONTROL = "nvidia-cuda-mps-control"
_TAIL_BYTES = 4096


def check_argv(argv: object, where: str = "argv") -> list[str]:
    """``argv`` as a non-empty list of strings, or an :class:`InputError`. A single string is
    refused: it would need a shell (or a split) to become a command line."""
    if not isinstance(argv, list | tuple) or not argv:
        raise InputError(where, "must be a non-empty list of strings, not a command string",
                         hint='e.g. ["python", "serve.py", "--port", "8000"]')
    if not all(isinstance(a, str) for a in argv):
        raise InputError(where, "every item must be a string")
    return list(argv)


def last_line(path: Path) -> str:
    """The last non-empty line of ``path`` (empty if unreadable)."""
    try:
        with path.open("rb") as handle:
            handle.seek(max(0, path.stat().st_size - _TAIL_BYTES))
            lines = handle.read().decode("utf-8", "replace").strip().splitlines()
    except OSError:
        return ""
    return lines[-1] if lines else ""


@dataclass
class _Child:
    popen: subprocess.Popen[bytes]
    log: Path
    token: str


_KILL_WAIT_S = 30.0  # after a drain's SIGKILL: the most it waits for the processes to go


class PopenProcesses:
    """Processes of this host, started from argv lists.

    A workload's processes are its leader's process group together with every process that
    carries its token (:mod:`.procfs`): the group reaches whatever the leader starts in it,
    even a process that has lost its environment (``setproctitle`` overwrites it), and the
    token reaches what left the group (torchrun's workers). Signals go to all of them. When
    the leader exits, the rest are drained: SIGTERM and SIGCONT at once (no SIGTERM where
    they were just sent one; SIGCONT in case they are paused), SIGKILL after
    ``drain_grace_s``, and only once they are gone (or 30 s after the SIGKILL) is the
    workload reported exited, with the leader's status, and the leader reaped, so its pid,
    and with it its group id, cannot be reused while any of them lives.

    Every leader is recorded on disk (:mod:`.leaders`), so after an agent restart a pid from
    the state is taken for its workload only while it is the very process recorded (same
    start time, same boot); when it is gone, its status is lost and the rest drain by token.
    A pid this backend never started (an NVML-reported worker the MIG drain stops, or a
    workload from before the book) is signalled alone and runs while it lives. Without
    ``/proc`` only the leader's group is signalled."""

    def __init__(self, log_dir: Path, drain_grace_s: float = 10.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.log_dir = log_dir
        self.drain_grace_s = drain_grace_s
        self.clock = clock
        self.tracked = procfs.available()
        self.leaders = LeaderBook(log_dir / "leaders.json")
        self._children: dict[int, _Child] = {}
        self._finished: dict[int, ProcessStatus] = {}  # reaped leaders: their last status
        self._draining: dict[int, tuple[float, bool]] = {}  # leader -> (deadline, killed)
        self._stopped: dict[int, float] = {}  # leader pid -> when it was last sent SIGTERM
        self._count = 0

    def spawn(self, argv: Sequence[str], env: Mapping[str, str], gpu: int) -> int:
        args = check_argv(list(argv) if isinstance(argv, tuple) else argv)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._count += 1
        log = self.log_dir / f"gpu{gpu}-{os.getpid()}-{self._count}.log"
        token = secrets.token_hex(12)
        try:
            with log.open("ab") as out:
                proc = subprocess.Popen(
                    args, env={**procfs.clean_environ(), **env, procfs.TOKEN_VAR: token},
                    stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                    start_new_session=True, shell=False,
                )
        except FileNotFoundError as exc:
            raise PermanentError(f"cannot start {args[0]!r}: not found") from exc
        except PermissionError as exc:
            raise PermanentError(f"cannot start {args[0]!r}: permission denied") from exc
        self._children[proc.pid] = _Child(proc, log, token)
        for book in (self._finished, self._draining, self._stopped):
            book.pop(proc.pid, None)  # whatever an earlier owner of the pid left
        self.leaders.add(proc.pid, token)  # unreaped, so it is still this process
        return proc.pid

    def poll(self, pid: int) -> ProcessStatus:
        child = self._children.get(pid)
        if child is None:
            return self._finished.get(pid) or self._poll_other(pid)
        exited, code = _peek_exit(child.popen)
        if not exited:
            return ProcessStatus(pid, ProcState.RUNNING)
        # a leader reaped elsewhere no longer holds its pid: its group may be someone else's
        if not self._drained(pid, self._members(pid, child.token, group=code is not None)):
            return ProcessStatus(pid, ProcState.RUNNING)
        if code is not None:
            child.popen.wait()  # reap: from here on the pid is free for others
        del self._children[pid]
        status = (ProcessStatus(pid, ProcState.EXITED, code, last_line(child.log))
                  if code is not None else ProcessStatus(pid, ProcState.UNKNOWN))
        return self._finish(pid, status)

    def _poll_other(self, pid: int) -> ProcessStatus:
        """A pid this agent did not start: a leader of an earlier agent's (see the book), or
        any other process, running while it lives."""
        entry = self.leaders.get(pid)
        if entry is None:
            alive = procfs.alive(pid)
            return ProcessStatus(pid, ProcState.RUNNING if alive else ProcState.UNKNOWN)
        if self.leaders.is_alive(pid):
            return ProcessStatus(pid, ProcState.RUNNING)
        if not self._drained(pid, self._members(pid, entry.token, group=False)):
            return ProcessStatus(pid, ProcState.RUNNING)
        return self._finish(pid, ProcessStatus(pid, ProcState.UNKNOWN))

    def _finish(self, pid: int, status: ProcessStatus) -> ProcessStatus:
        self._stopped.pop(pid, None)
        self.leaders.remove(pid)
        self._finished[pid] = status
        if len(self._finished) > 1024:  # the supervisor reads it once; keep a few
            del self._finished[next(iter(self._finished))]
        return status

    def _drained(self, pid: int, members: list[int]) -> bool:
        """The leader ``pid`` has exited: whether its other processes are gone, once they
        have had SIGTERM and, ``drain_grace_s`` later, SIGKILL."""
        rest = [m for m in members if m != pid]
        now = self.clock()
        deadline, killed = self._draining.get(pid, (None, False))
        if not rest or (killed and deadline is not None and now >= deadline):
            self._draining.pop(pid, None)
            return True
        if deadline is None:
            self._draining[pid] = (now + self.drain_grace_s, False)
            if now - self._stopped.get(pid, -math.inf) > self.drain_grace_s:
                procfs.kill(rest, signal.SIGTERM)  # not twice: a second can cut a checkpoint
            procfs.kill(rest, signal.SIGCONT)  # a paused one would hold the SIGTERM
        elif now >= deadline and not killed:
            procfs.kill(rest, signal.SIGKILL)  # gone once the driver lets them go
            self._draining[pid] = (now + _KILL_WAIT_S, True)
        return False

    def _members(self, pid: int, token: str, *, group: bool) -> list[int]:
        return procfs.members(token, pid if group else None) if self.tracked else []

    def send_signal(self, pid: int, signum: int) -> None:
        """Signal every process of the workload ``pid`` leads (see the class docstring); a
        workload with none left is a no-op. A SIGSTOP looks again for processes started
        while it was being sent, a few times."""
        child = self._children.get(pid)
        entry = self.leaders.get(pid)
        if signum in (signal.SIGTERM, signal.SIGINT) and (child or entry):
            self._stopped[pid] = self.clock()
        if child is not None and not self.tracked:  # the group, reserved while unreaped
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signum)
        elif child is not None:
            self._signal_members(lambda: self._members(pid, child.token, group=True), signum)
        elif entry is not None:  # an earlier agent's leader, or what it left behind
            group = self.leaders.is_alive(pid)  # only a live leader reserves its group id
            self._signal_members(lambda: self._members(pid, entry.token, group=group), signum)
        elif pid not in self._finished and procfs.alive(pid):
            procfs.kill([pid], signum)

    @staticmethod
    def _signal_members(find: Callable[[], list[int]], signum: int) -> None:
        done: set[int] = set()
        for _ in range(5 if signum == signal.SIGSTOP else 1):
            new = set(find()) - done
            if not new:
                break
            procfs.kill(sorted(new), signum)
            done |= new

    def pids(self) -> list[int]:
        """Every workload this backend started that has not been reported exited (one whose
        leader exited while the rest drain still runs)."""
        return list(self._children)


def _peek_exit(popen: subprocess.Popen[bytes]) -> tuple[bool, int | None]:
    """Whether the child has exited, and its status (``subprocess`` convention; None where
    something else reaped it and the status is lost), without reaping it: its pid (and
    process group id) stays reserved until :meth:`subprocess.Popen.wait`."""
    if popen.returncode is not None:
        return True, popen.returncode
    if not hasattr(os, "waitid"):
        code = popen.poll()
        return code is not None, code
    try:
        info = os.waitid(os.P_PID, popen.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:  # reaped by someone else: gone, its status with it
        return True, None
    if info is None or info.si_pid == 0:
        return False, None
    return True, info.si_status if info.si_code == os.CLD_EXITED else -info.si_status


class MpsControl:
    """``nvidia-cuda-mps-control`` daemons, one per GPU."""

    def __init__(self, executable: str = MPS_CONTROL, timeout_s: float = 10.0) -> None:
        self.executable = executable
        self.timeout_s = timeout_s

    @staticmethod
    def env(config: DaemonConfig) -> dict[str, str]:
        return {
            **procfs.clean_environ(),
            **config.extra_env,
            "CUDA_VISIBLE_DEVICES": str(config.gpu),
            "CUDA_MPS_PIPE_DIRECTORY": str(config.pipe_dir),
            "CUDA_MPS_LOG_DIRECTORY": str(config.log_dir),
        }

    def _run(self, config: DaemonConfig, args: list[str], stdin: str | None) -> str:
        try:
            done = subprocess.run(
                [self.executable, *args], input=stdin, env=self.env(config), text=True,
                capture_output=True, timeout=self.timeout_s, check=False,
            )
        except FileNotFoundError as exc:
            raise PermanentError(f"{self.executable} not found",
                                 hint="install the CUDA toolkit's MPS binaries") from exc
        except subprocess.TimeoutExpired as exc:
            raise TemporaryError(f"{self.executable} {args} timed out", delay_s=5.0) from exc
        if done.returncode != 0:
            raise TemporaryError(
                f"GPU {config.gpu}: {self.executable} {' '.join(args) or stdin!r} failed: "
                f"{(done.stderr or done.stdout).strip()[:200]}", delay_s=2.0,
            )
        return done.stdout

    def start_daemon(self, config: DaemonConfig) -> None:
        if self.daemon_healthy(config):
            return
        config.pipe_dir.mkdir(parents=True, exist_ok=True)
        config.log_dir.mkdir(parents=True, exist_ok=True)
        self._run(config, ["-d"], None)
        self._run(config, [], f"set_default_active_thread_percentage {config.default_thread_pct}\n")
        if config.default_mem_limit_mib is not None:
            cmd = f"set_default_device_pinned_mem_limit 0 {config.default_mem_limit_mib}M\n"
            self._run(config, [], cmd)

    def stop_daemon(self, config: DaemonConfig) -> None:
        if self.daemon_healthy(config):
            self._run(config, [], "quit\n")

    def daemon_healthy(self, config: DaemonConfig) -> bool:
        if not config.pipe_dir.exists():
            return False
        try:
            self._run(config, [], "get_server_list\n")
        except TemporaryError:
            return False
        return True
