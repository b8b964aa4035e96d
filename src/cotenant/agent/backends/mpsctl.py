"""The MPS control daemons of a Linux host, one per GPU (used by the nvml backend).

:class:`MpsControl` drives ``nvidia-cuda-mps-control``: the daemon is started with
``CUDA_VISIBLE_DEVICES=<gpu>`` and its own ``CUDA_MPS_PIPE_DIRECTORY`` and
``CUDA_MPS_LOG_DIRECTORY``; defaults are set through the control interface
(``set_default_active_thread_percentage``, ``set_default_device_pinned_mem_limit``); health is
``get_server_list`` answering; stop is ``quit``. Real MPS also has
``set_active_thread_percentage <server PID> <pct>``, which changes the share of an MPS *server*
for clients that connect afterwards; running clients keep theirs, which is why the share
controller restarts an offline client to change its share.
"""

from __future__ import annotations

import subprocess

from cotenant.agent.backends import procfs
from cotenant.agent.backends.base import DaemonConfig
from cotenant.errors import PermanentError, TemporaryError

MPS_CONTROL = "nvidia-cuda-mps-control"


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
