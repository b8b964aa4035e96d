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


class PopenProcesses:
    """Processes of this host, started from argv lists.

    A workload's processes are its leader's process group together with every process that
    carries its token (:mod:`.procfs`): the group reaches whatever the leader starts in it,
    even a process that has lost its environment (``setproctitle`` overwrites it), and the
    token reaches what left the group (torchrun's workers). Signals go to all of them. When
    the leader exits, the rest are drained: SIGTERM at once (unless they were just sent one),
    SIGKILL after ``drain_grace_s``,
    and only then is the workload reported exited (with the leader's status) and the leader
    reaped, so its pid, and with it its group id, cannot be reused while any of them lives.
    A pid adopted after an agent restart is signalled with its token's processes where it
    carries one, alone where it does not (a process that lost its environment, or one
    started before tokens). Without ``/proc`` only the leader's group is signalled."""

    def __init__(self, log_dir: Path, drain_grace_s: float = 10.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.log_dir = log_dir
        self.drain_grace_s = drain_grace_s
        self.clock = clock
        self.tracked = procfs.available()
        self._children: dict[int, _Child] = {}
        self._finished: dict[int, ProcessStatus] = {}  # reaped leaders: their last status
        self._adopted: dict[int, str | None] = {}  # pid -> token (None: none readable)
        self._draining: dict[int, float] = {}  # leader pid -> SIGKILL the rest at this time
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
        self._finished.pop(proc.pid, None)
        self._adopted.pop(proc.pid, None)
        return proc.pid

    def poll(self, pid: int) -> ProcessStatus:
        child = self._children.get(pid)
        if child is None:
            return self._finished.get(pid) or self._poll_adopted(pid)
        code = _peek_exit(child.popen)
        if code is None:
            return ProcessStatus(pid, ProcState.RUNNING)
        if self._drained(pid, self._members(pid, child.token, group=True)):
            child.popen.wait()  # reap: from here on the pid is free for others
            del self._children[pid]
            self._finished[pid] = ProcessStatus(pid, ProcState.EXITED, code, last_line(child.log))
            if len(self._finished) > 1024:  # the supervisor reads it once; keep a few
                del self._finished[next(iter(self._finished))]
            return self._finished[pid]
        return ProcessStatus(pid, ProcState.RUNNING)

    def _poll_adopted(self, pid: int) -> ProcessStatus:
        """A pid started by an earlier agent: running while it lives (or, where it carried a
        token, while the rest drain); its exit status is lost."""
        if procfs.alive(pid):
            if pid not in self._adopted:
                self._adopted[pid] = procfs.token_of(pid) if self.tracked else None
            return ProcessStatus(pid, ProcState.RUNNING)
        token = self._adopted.get(pid)
        if token is not None and not self._drained(pid, self._members(pid, token, group=False)):
            return ProcessStatus(pid, ProcState.RUNNING)
        return ProcessStatus(pid, ProcState.UNKNOWN)

    def _drained(self, pid: int, members: list[int]) -> bool:
        """The leader ``pid`` has exited: whether its other processes are gone, once they
        have had SIGTERM and, ``drain_grace_s`` later, SIGKILL."""
        rest = [m for m in members if m != pid]
        if not rest:
            self._draining.pop(pid, None)
            self._stopped.pop(pid, None)
            return True
        deadline = self._draining.get(pid)
        if deadline is None:
            now = self.clock()
            self._draining[pid] = now + self.drain_grace_s
            if now - self._stopped.get(pid, -math.inf) > self.drain_grace_s:
                procfs.kill(rest, signal.SIGTERM)  # not twice: a second one can cut a checkpoint
            return False
        if self.clock() < deadline:
            return False
        procfs.kill(rest, signal.SIGKILL)
        self._draining.pop(pid, None)
        self._stopped.pop(pid, None)
        return True

    def _members(self, pid: int, token: str, *, group: bool) -> list[int]:
        return procfs.members(token, pid if group else None) if self.tracked else []

    def send_signal(self, pid: int, signum: int) -> None:
        """Signal every process of the workload ``pid`` leads (see the class docstring); a
        workload with none left is a no-op. A SIGSTOP looks again for processes started
        while it was being sent, a few times."""
        if signum in (signal.SIGTERM, signal.SIGINT):
            self._stopped[pid] = self.clock()
        child = self._children.get(pid)
        if child is None:
            self._signal_adopted(pid, signum)
        elif not self.tracked:  # the group, reserved while the leader is unreaped
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signum)
        else:
            self._signal_members(lambda: self._members(pid, child.token, group=True), signum)

    def _signal_adopted(self, pid: int, signum: int) -> None:
        if pid in self._finished:
            return
        token = self._adopted.get(pid)
        if token is None:  # no token: the pid alone, while it lives
            if procfs.alive(pid):
                procfs.kill([pid], signum)
            return
        alive = procfs.alive(pid)  # a live leader reserves its group id
        self._signal_members(lambda: self._members(pid, token, group=alive), signum)

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
        return [pid for pid, child in self._children.items() if _peek_exit(child.popen) is None]


def _peek_exit(popen: subprocess.Popen[bytes]) -> int | None:
    """The child's exit status (``subprocess`` convention), without reaping it: its pid (and
    process group id) stays reserved until :meth:`subprocess.Popen.wait`."""
    if popen.returncode is not None:
        return popen.returncode
    if not hasattr(os, "waitid"):
        return popen.poll()
    try:
        info = os.waitid(os.P_PID, popen.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return popen.poll()
    if info is None or info.si_pid == 0:
        return None
    return info.si_status if info.si_code == os.CLD_EXITED else -info.si_status


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
