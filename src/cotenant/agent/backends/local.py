"""Real process control and MPS daemon management for a Linux host (used by the nvml backend).

:class:`PopenProcesses` starts workloads with :class:`subprocess.Popen` from an argv *list*
(``shell=False`` always; a string is refused), each in its own session (signals go to its
whole process group), with stdout and stderr going to a log file whose last line becomes the
exit message used to classify failures.

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

import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

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
    """Processes of this host, started from argv lists."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self._procs: dict[int, tuple[subprocess.Popen[bytes], Path]] = {}
        self._count = 0

    def spawn(self, argv: Sequence[str], env: Mapping[str, str], gpu: int) -> int:
        args = check_argv(list(argv) if isinstance(argv, tuple) else argv)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._count += 1
        log = self.log_dir / f"gpu{gpu}-{os.getpid()}-{self._count}.log"
        try:
            with log.open("ab") as out:
                proc = subprocess.Popen(
                    args, env={**os.environ, **env}, stdin=subprocess.DEVNULL, stdout=out,
                    stderr=subprocess.STDOUT, start_new_session=True, shell=False,
                )
        except FileNotFoundError as exc:
            raise PermanentError(f"cannot start {args[0]!r}: not found") from exc
        except PermissionError as exc:
            raise PermanentError(f"cannot start {args[0]!r}: permission denied") from exc
        self._procs[proc.pid] = (proc, log)
        return proc.pid

    def poll(self, pid: int) -> ProcessStatus:
        known = self._procs.get(pid)
        if known is not None:
            proc, log = known
            code = proc.poll()
            if code is None:
                return ProcessStatus(pid, ProcState.RUNNING)
            return ProcessStatus(pid, ProcState.EXITED, code, last_line(log))
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return ProcessStatus(pid, ProcState.UNKNOWN)
        except PermissionError:
            return ProcessStatus(pid, ProcState.RUNNING)
        return ProcessStatus(pid, ProcState.RUNNING)

    def send_signal(self, pid: int, signum: int) -> None:
        """Signal the workload's whole process group: each is started in its own session,
        so its group holds the processes that use the GPU (torchrun's workers, a shell's
        children), which a signal to ``pid`` alone could miss (a SIGKILL to torchrun leaves
        its workers holding GPU memory; a SIGSTOP to it pauses nothing on the GPU). A pid
        that leads no group of its own gets the signal alone; an exited one gets none."""
        known = self._procs.get(pid)
        if known is not None and known[0].poll() is not None:
            return  # reaped: the pid may belong to someone else now
        try:
            if os.getpgid(pid) == pid:
                os.killpg(pid, signum)
            else:
                os.kill(pid, signum)
        except ProcessLookupError:
            return

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
