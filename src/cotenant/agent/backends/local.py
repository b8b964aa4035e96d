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
import os
import secrets
import signal
import subprocess
from collections.abc import Mapping, Sequence
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


class PopenProcesses:
    """Processes of this host, started from argv lists.

    Each workload gets a token in its environment (:mod:`.procfs`); where ``/proc`` exists,
    its processes are all those that carry it. A workload runs while any of them does (a
    shell's child still checkpointing, torchrun's workers after torchrun died), signals go to
    every one of them, and a pid adopted after an agent restart is the workload's only if it
    carries a token (else it is another process that reused the pid: the workload is gone).
    Without ``/proc`` the signals go to the workload's process group instead."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self._procs: dict[int, tuple[subprocess.Popen[bytes], Path]] = {}
        self._tokens: dict[int, str] = {}  # leader pid -> its workload's token
        self._count = 0
        self.tracked = procfs.available()

    def spawn(self, argv: Sequence[str], env: Mapping[str, str], gpu: int) -> int:
        args = check_argv(list(argv) if isinstance(argv, tuple) else argv)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._count += 1
        log = self.log_dir / f"gpu{gpu}-{os.getpid()}-{self._count}.log"
        token = secrets.token_hex(12)
        try:
            with log.open("ab") as out:
                proc = subprocess.Popen(
                    args, env={**os.environ, **env, procfs.TOKEN_VAR: token},
                    stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                    start_new_session=True, shell=False,
                )
        except FileNotFoundError as exc:
            raise PermanentError(f"cannot start {args[0]!r}: not found") from exc
        except PermissionError as exc:
            raise PermanentError(f"cannot start {args[0]!r}: permission denied") from exc
        self._procs[proc.pid] = (proc, log)
        self._tokens[proc.pid] = token
        return proc.pid

    def _members(self, pid: int) -> list[int]:
        """The live processes of the workload ``pid`` leads (by its token)."""
        token = self._tokens.get(pid)
        if token is None and pid not in self._procs:  # adopted: its own environment says
            token = procfs.token_of(pid)
            if token is not None:
                self._tokens[pid] = token
        return procfs.members(token) if token is not None else []

    def poll(self, pid: int) -> ProcessStatus:
        known = self._procs.get(pid)
        if known is not None:
            proc, log = known
            code = proc.poll()
            if code is None or (self.tracked and self._members(pid)):
                return ProcessStatus(pid, ProcState.RUNNING)
            return ProcessStatus(pid, ProcState.EXITED, code, last_line(log))
        if self.tracked:  # started by an earlier agent: ours while its processes live
            leader = procfs.token_of(pid)
            if leader is not None and leader == self._tokens.get(pid, leader):
                self._tokens[pid] = leader
                return ProcessStatus(pid, ProcState.RUNNING)
            alive = pid in self._tokens and self._members(pid)
            return ProcessStatus(pid, ProcState.RUNNING if alive else ProcState.UNKNOWN)
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return ProcessStatus(pid, ProcState.UNKNOWN)
        except PermissionError:
            return ProcessStatus(pid, ProcState.RUNNING)
        return ProcessStatus(pid, ProcState.RUNNING)

    def send_signal(self, pid: int, signum: int) -> None:
        """Signal every process of the workload ``pid`` leads; a workload with none left is a
        no-op. A SIGSTOP looks twice, for children started while it was being sent."""
        if not self.tracked:
            self._signal_group(pid, signum)
            return
        done: set[int] = set()
        for _ in range(2 if signum == signal.SIGSTOP else 1):
            for member in set(self._members(pid)) - done:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(member, signum)
                done.add(member)

    def _signal_group(self, pid: int, signum: int) -> None:
        known = self._procs.get(pid)
        if known is not None and known[0].poll() is not None:
            return  # reaped: the pid may belong to someone else now
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if os.getpgid(pid) == pid and pid != os.getpgid(0):
                os.killpg(pid, signum)
            else:
                os.kill(pid, signum)

    def pids(self) -> list[int]:
        return [pid for pid, (proc, _) in self._procs.items() if proc.poll() is None]


class MpsControl:
    """``nvidia-cuda-mps-control`` daemons, one per GPU."""

    def __init__(self, executable: str = MPS_CONTROL, timeout_s: float = 10.0) -> None:
        self.executable = executable
        self.timeout_s = timeout_s

    @staticmethod
    def env(config: DaemonConfig) -> dict[str, str]:
        return {
            **os.environ,
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
